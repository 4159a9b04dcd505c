"""Results, once written: loading them back, the metric table, console tables, reports
and figures."""
