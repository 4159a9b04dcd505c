"""One self-contained ``report.html`` / ``report.md`` of a run, sweep or evaluation folder
(``tooldns report``); the console tables of ``tooldns run`` are ``analysis.console``'s.

* :func:`write_report` — provenance, scenario, tables, figures (embedded in the HTML as
  base64 PNG; PNG files beside the Markdown) and the scenario YAML;
* :func:`add_arguments` / :func:`run` — the ``tooldns report DIR`` subcommand (``sim.cli.report``).

    python3 -m analysis.report DIR [--out OUT] [--format html,md]

Only the standard library and analysis.metrics are imported at module level (``tooldns
--help`` stays fast); pandas and matplotlib are imported where they are used.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.conditions import conditions
from analysis.metrics import (
    EVAL_TABLE,
    FAULT_TABLE,
    METRICS,
    NOTE,
    PHASE_TABLE,
    SCHEME_TABLE,
    TRUST_TABLE,
    format_value,
    metrics,
)
from analysis.pivot import (
    by_spread,
    legend_of,
    metric_pivot,
    point_names,
    recorded,
    split_columns,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: a table column: key, label, format (the metrics' own, or local to one table)
Column = tuple[str, str, str]

#: the capture and replay tables (engine accounting, not metrics): key, label, format
CAPTURE_COLUMNS: tuple[Column, ...] = (
    ("exact", "queries exact", "{}"), ("accounted_bytes", "bytes acct", "{}"),
    ("captured_bytes", "bytes captured", "{}"), ("bytes_diff_pct", "Δ bytes %", "{:+.2f}"),
    ("accounted_packets", "packets acct", "{}"), ("captured_packets", "packets captured", "{}"),
    ("packets_diff_pct", "Δ packets %", "{:+.2f}"),
    ("unattributed_packets", "unattributed", "{}"))
REPLAY_COLUMNS: tuple[Column, ...] = (
    ("completed", "completed", "{}"), ("warm_time_s", "warm-up s", "{:.3f}"),
    ("end_time_s", "end s", "{:.3f}"), ("lost_packets", "lost packets", "{}"))
FIDELITY_COLUMNS: tuple[Column, ...] = (
    ("hops", "hops timed", "{}"), ("modelled_mean_ms", "modelled ms", "{:.2f}"),
    ("excess_median_ms", "excess median ms", "{:+.2f}"),
    ("excess_p95_ms", "excess p95 ms", "{:+.2f}"), ("cpu_busiest", "busiest CPU", "{:.0%}"),
    ("verdict", "latency as modelled", "{}"))
PROVENANCE_KEYS = ("tooldns", "git_commit", "git_dirty", "python", "platform", "cpus",
                   "hostname", "started_utc", "finished_utc", "wall_s", "argv")
FORMATS = ("html", "md")


# ---------------------------------------------------------------------------- report model


@dataclass
class Text:
    text: str
    note: bool = False  # small print


@dataclass
class Table:
    frame: pd.DataFrame  # values already formatted as text
    caption: str = ""
    index: bool = False


@dataclass
class Picture:
    name: str  # file name beside report.md
    png: bytes
    caption: str = ""


@dataclass
class Code:
    text: str
    lang: str = ""


Block = Text | Table | Picture | Code


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """As GitHub makes heading anchors: lower case, punctuation dropped, spaces → -."""
        return re.sub(r"[^\w\- ]", "", self.title.lower()).replace(" ", "-")


@dataclass
class Report:
    title: str
    kind: str  # run | sweep | eval
    sections: list[Section] = field(default_factory=list)
    banner: str = ""  # e.g. an interrupted run

    def figures(self) -> list[Picture]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Picture)]


def _columns(keys: Sequence[str], present: Sequence[str] | None = None) -> list[Column]:
    """The table columns of metric ``keys`` (those in ``present``, when given)."""
    return [(m.key, m.label, m.fmt) for m in metrics(keys)
            if present is None or m.key in present]


def _replay_section(report: Report, replay: dict[str, dict]) -> Section:
    """The engine's replay table and, for a real-time engine, its fidelity to the model
    (sim.engines.fidelity); a run whose latencies are not within the tolerance is marked
    in the report's banner."""
    blocks: list[Block] = [Table(_formatted(replay, REPLAY_COLUMNS))]
    fid = {name: {**r["fidelity"], "verdict": "within tolerance" if r["fidelity"]["within"]
                  else "NO: " + "; ".join(r["fidelity"]["why"])}
           for name, r in replay.items() if "fidelity" in r}
    if fid:
        tol = next(iter(fid.values()))["tolerance"]
        blocks += [Table(_formatted(fid, FIDELITY_COLUMNS), "real-time fidelity"),
                   Text(f"Each resolver→server exchange and registry call timed on the wall "
                        f"clock against the model's time for it (path round trip plus the "
                        f"simulation's processing). Tolerance: |median excess| ≤ "
                        f"{tol['excess_median_ms']:g} ms or "
                        f"{tol['excess_median_share']:.0%} of the modelled hop (the larger), "
                        f"busiest host process < {tol['cpu']:.0%} of a core, p99 schedule "
                        f"error ≤ {tol['schedule_p99_ms']:g} ms; the p95 excess includes "
                        f"link jitter and is shown, not judged.", note=True)]
        off = [name for name, f in fid.items() if not f["within"]]
        if off:
            mark = (f"Real-time fidelity: the latencies of {', '.join(off)} are not within "
                    f"the model's tolerance (see Engine replay); read them as this "
                    f"machine's, not the model's.")
            report.banner = f"{report.banner} {mark}" if report.banner else mark
    return Section("Engine replay", blocks)


def _formatted(rows: dict[Any, dict[Any, Any]] | list[dict[Any, Any]],
               columns: Sequence[Column], first: str = "scheme", keys: Sequence[str] = ()
               ) -> pd.DataFrame:
    """Metrics as a text frame with (key, label, format) ``columns``: ``rows`` maps a name
    (put in column ``first``) to its metrics, or is a list of records whose ``keys``
    columns are kept as text."""
    import pandas as pd

    if isinstance(rows, dict):
        rows, keys = [{first: name, **r} for name, r in rows.items()], [first]
    data = [{**{k: str(r.get(k)) for k in keys},
             **{label: format_value(fmt, r.get(key)) for key, label, fmt in columns}} for r in rows]
    return pd.DataFrame(data, columns=[*keys, *(label for _, label, _ in columns)])


def _key_values(items: dict[str, Any], key: str = "field", value: str = "value"
                ) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({key: list(items), value: [_value(v) for v in items.values()]})


def _value(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return shlex.join(str(x) for x in v) if all(isinstance(x, str) for x in v) else \
            json.dumps(v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def provenance_section(prov: dict | None) -> Section:
    """Where the result came from; 'unknown' for what an older run did not record."""
    prov = prov or {}
    items = {k: prov.get(k) for k in PROVENANCE_KEYS}
    items.update({k: v for k, v in prov.items() if k not in items})
    blocks: list[Block] = [Table(_key_values(items))]
    if not prov:
        blocks.insert(0, Text("This output has no provenance block (written before "
                              "provenance was recorded).", note=True))
    return Section("Provenance", blocks)


def _picture(name: str, fig: Figure, caption: str = "") -> Picture:
    from analysis.plots.style import png_bytes

    return Picture(name, png_bytes(fig), caption)


def _read_text(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


# ---------------------------------------------------------------------------- run report


def run_report(path: Path) -> Report:
    """Everything about one run folder (a ``tooldns run`` output or a sweep point)."""
    from analysis.plots import run as plots
    from analysis.results import load_run, per_phase, phases

    run = load_run(path, partial=True)
    s, df = run.summary, run.records
    description = run.scenario.get("description") or ""
    report = Report(f"{s.get('scenario', path.name)}: run report", "run")
    if not run.complete:
        report.banner = (f"Interrupted run ({s.get('reason', 'unknown reason')}): only the "
                         f"finished schemes are here; missing: "
                         f"{', '.join(s.get('unfinished_schemes', [])) or 'none'}.")
    stats = s.get("namespace_stats", {})
    overview = {"scenario": s.get("scenario"), "description": description or None,
                "seed": s.get("seed"), "engine": s.get("engine"),
                "namespace": s.get("namespace"), "schemes": len(s.get("schemes", {})),
                "queries per scheme": int(df.groupby("scheme").size().max()) if len(df) else 0,
                "workload phases": phases(df)}
    report.sections.append(Section("Run", [Table(_key_values(overview)),
                                           Table(_key_values(stats, "namespace", "count"),
                                                 "namespace statistics")]))
    report.sections.append(provenance_section(s.get("provenance")))
    report.sections.append(Section("Comparison per scheme", [
        Table(_formatted(s.get("schemes", {}), _columns(SCHEME_TABLE))), Text(NOTE, note=True),
        *(Text(line, note=True) for line in conditions(run.scenario, s))]))
    title = run.title
    if phases(df) > 1:
        records = per_phase(df).reset_index().to_dict("records")
        frame = _formatted(records, _columns(PHASE_TABLE), keys=["scheme", "phase"])
        report.sections.append(Section("Per workload phase", [
            Text("The same workload replayed in phases: what changes once the caches are "
                 "warm (latency of successful queries; no upstream = share of "
                 "queries answered from the resolver's caches alone)."),
            Table(frame),
            _picture("per_phase.png", plots.phase_bars(df, title=title))]))
    if "trust" in s:
        trust = s["trust"]
        report.sections.append(Section("Trust", [
            Text(f"{trust.get('rogue_tools', '?')} rogue look-alike tools in the namespace; "
                 f"per scheme, rogue tools returned and what each trust policy costs "
                 f"against the open one."),
            Table(_formatted(trust.get("schemes", {}), _columns(TRUST_TABLE)))]))
    if "faults" in s:
        report.sections.append(_faults_section(s, title))
    if "capture" in s:
        cap = s["capture"]
        rows = {sc: {**c, "exact": f"{c['queries_exact']}/{c['queries']}"}
                for sc, c in cap.get("schemes", {}).items()}
        report.sections.append(Section("Packet capture", [
            Text(f"{cap.get('packets', '?')} packets captured with {cap.get('tool', '?')} "
                 f"into {cap.get('pcap', '?')}, attributed to queries and compared with the "
                 f"engine's accounting."),
            Table(_formatted(rows, CAPTURE_COLUMNS))]))
    if s.get("replay"):
        report.sections.append(_replay_section(report, s["replay"]))
    if not run.nodes.empty and {"role", "scheme", "rx_packets"} <= set(run.nodes.columns):
        load = (run.nodes.groupby(["role", "scheme"], sort=False).rx_packets.sum()
                .unstack("scheme").fillna(0).astype(int))
        report.sections.append(Section("Load by role", [
            Table(load.reset_index().astype(str), "packets received per node role")]))
    figures: list[Block] = [_picture(name, fig(df, None, title)) for name, fig in (
        ("latency_cdf.png", plots.latency_cdf), ("bytes_per_query.png", plots.bytes_per_query),
        ("cache_hits_over_time.png", lambda d, p, t: plots.cache_hits_over_time(
            d, p, title=t, ttls=plots.ttl_marks(run.scenario))))
    ] if len(df) else []
    report.sections.append(Section("Figures", figures or [Text("No records.")]))
    if (yml := _read_text(path / "scenario.yaml")) is not None:
        report.sections.append(Section("Scenario", [Code(yml, "yaml")]))
    return report


def _faults_section(s: dict[str, Any], title: str) -> Section:
    """What the faults cost per scheme, recovery after each restart, errors, the figure."""
    import pandas as pd

    from analysis.plots.faults import success_figure
    from analysis.results import fault_rows

    faults = s["faults"]
    blocks: list[Block] = [Table(_formatted(fault_rows(faults), _columns(FAULT_TABLE)))]
    recovery = [{"scheme": sc, **r} for sc, e in faults.get("schemes", {}).items()
                for r in e.get("recovery", [])]
    if recovery:
        blocks.append(Table(pd.DataFrame(recovery).astype(str).replace(
            {"None": "-"}), "recovery after each restart (slowest node of the fault)"))
    errors = {sc: e.get("errors") for sc, e in faults.get("schemes", {}).items()
              if e.get("errors")}
    if errors:
        blocks.append(Table(_key_values(errors, "scheme", "errors of failed queries")))
    blocks.append(_picture("success_over_time.png", success_figure(s, title)))
    return Section("Faults", blocks)



# ---------------------------------------------------------------------------- sweep report


def sweep_report(path: Path) -> Report:
    from analysis.plots import sweep as sweep_plots
    from analysis.results import load_sweep
    from analysis.titles import sweep_title

    sw = load_sweep(path)
    meta, table = sw.meta, sw.table
    name = meta.get("scenario") or sw.scenario.get("name") or path.name
    report = Report(f"{name}: sweep report", "sweep")
    if meta.get("failed"):
        report.banner = f"{len(meta['failed'])} points failed (see Failed points)."
    overview = {"scenario": name, "description": sw.scenario.get("description") or None,
                "seed": meta.get("seed", sw.scenario.get("seed")),
                "engine": sw.scenario.get("engine"),
                "points": len(meta.get("points", [])) or table["point"].nunique(),
                "schemes": table["scheme"].nunique() if len(table) else 0,
                "ran": len(meta.get("ran", [])), "already done": len(meta.get("skipped", [])),
                "failed": len(meta.get("failed", {}))}
    grid = _key_values({k: ", ".join(map(str, v)) for k, v in sw.grid.items()},
                       "grid axis", "values")
    report.sections.append(Section("Sweep", [Table(_key_values(overview)),
                                             Table(grid, "grid (cartesian product)")]))
    report.sections.append(provenance_section(meta.get("provenance")))
    if "seed" in sw.axes and len(table):  # replications (analysis.intervals.SEED) lead
        report.sections.insert(0, _intervals_section(table, sw.axes, name, sw.scenario))
    report.sections.append(_pivot_section(table, sw.axes))
    report.sections.append(_points_section(table, sw.axes))
    if meta.get("failed"):
        report.sections.append(Section("Failed points", [
            Table(_key_values(meta["failed"], "failed point", "error"))]))
    title = sweep_title({**meta, "scenario": name})
    figures: list[Block] = [_picture(n, fig) for n, fig in sweep_plots.figures(table, sw.grid,
                                                                      title).items()]
    report.sections.append(Section("Figures", figures or [Text("No finished points.")]))
    report.sections.append(_all_values_section(table, sw.axes))
    if (yml := _read_text(path / "scenario.yaml")) is not None:
        report.sections.append(Section("Scenario (base, with its sweep grid)", [
            Code(yml, "yaml")]))
    return report


def _intervals_section(table: pd.DataFrame, axes: Sequence[str], title: str,
                       scenario: dict) -> Section:
    """Replications: mean ± 95 % CI per scheme, the paired differences from the first
    scheme and the figure (:mod:`analysis.intervals`)."""
    import pandas as pd

    from analysis.console import interval_grids
    from analysis.intervals import METHOD
    from analysis.plots.intervals import FILE, interval_figure

    blocks: list[Block] = [Text(
        f"Each seed is an independent run (namespace, workload and network drawn again). "
        f"Intervals: {METHOD}. A paired difference compares two schemes within each seed, "
        f"so what the seeds share cancels; * marks an interval that excludes 0.")]
    for grid in interval_grids(table, list(axes), title, conditions(scenario)):
        frame = pd.DataFrame(grid.rows, columns=grid.header)
        blocks += _split(frame, grid.keys, grid.title)
        blocks.append(Text(grid.note, note=True))
    blocks.append(_picture(FILE, interval_figure(table, axes, title=title)))
    return Section("Replications: means and 95 % intervals", blocks)


def _split(frame: pd.DataFrame, keys: int, caption: str = "") -> list[Block]:
    """``frame`` as tables that each fit the page (the key columns repeated in each)."""
    parts = split_columns(frame, keys)
    return [Table(part, caption if i == 0 else f"{caption} (continued)" if caption else "")
            for i, part in enumerate(parts)]


def _pivot_section(table: pd.DataFrame, axes: Sequence[str]) -> Section:
    """One pivot per metric the points recorded: grid axes x schemes."""
    if table.empty or not [a for a in axes if a in table.columns]:
        return Section("Metrics by grid axis", [Text("No finished points.")])
    legend = legend_of(axes)
    blocks: list[Block] = [Text(
        "How each metric scales over the grid, the metrics the grid changes most first: "
        "a table per metric, a row per scheme"
        + (" and value of the leading axes" if len(axes) > 1 else "")
        + ", a column per value of the last axis" + (f" ({legend})." if legend else "."))]
    varying = by_spread(table)  # what the grid changes most first, then the constant ones
    for key in [*varying, *(k for k in recorded(table) if k not in varying)]:
        m = METRICS[key]
        frame = metric_pivot(table, key, axes)
        keys = len(frame.columns) - table[axes[-1]].nunique() if axes[-1] in table else 1
        unit = f" ({m.unit})" if m.unit else ""
        blocks += _split(frame, keys, f"{m.label}{unit}: {m.meaning}")
    blocks.append(Text(NOTE, note=True))
    return Section("Metrics by grid axis", blocks)


def _points_section(table: pd.DataFrame, axes: Sequence[str]) -> Section:
    """Which folder under points/ holds which point."""
    import pandas as pd

    if table.empty:
        return Section("Points", [Text("No finished points.")])
    names = point_names(table, axes)
    frame = pd.DataFrame({"point": names, "folder": "points/" + table["point"].astype(str)}
                         ).drop_duplicates()
    return Section("Points", [Table(frame, "each point's run folder (summary.json, "
                                           "records, report)")])


def _all_values_section(table: pd.DataFrame, axes: Sequence[str]) -> Section:
    """sweep.csv as read: a row per (point, scheme), split into tables that fit."""
    if table.empty:
        return Section("All values", [Text("No finished points.")])
    records = table.assign(point=point_names(table, axes)).to_dict("records")
    cols = _columns(recorded(table), list(table.columns))
    frame = _formatted(records, cols, keys=["point", "scheme"])
    return Section("All values", _split(frame, 2, "sweep.csv: every metric of each "
                                                  "point's summary.json"))


# ---------------------------------------------------------------------------- eval report


def eval_report(path: Path) -> Report:
    import yaml

    from analysis.plots.retrieval import figures as retrieval_figures
    from analysis.results import load_eval
    from analysis.titles import eval_title

    ev = load_eval(path)
    meta = ev.meta
    name = meta.get("name") or path.name
    report = Report(f"{name}: retrieval evaluation report", "eval")
    spec = meta.get("spec") or {}
    overview = {"evaluation": name, "description": spec.get("description") or None,
                "seed": spec.get("seed"), "tools": meta.get("tools"),
                "queries evaluated": meta.get("queries_evaluated"),
                "queries available": meta.get("queries_available"),
                "namespace": meta.get("namespace"), "K": meta.get("k")}
    blocks: list[Block] = [Table(_key_values(overview))]
    if meta.get("balance"):
        blocks.append(Table(_key_values(meta["balance"], "tree", "value"),
                            "balance of the tree"))
    report.sections.append(Section("Evaluation", blocks))
    report.sections.append(provenance_section(meta.get("provenance")))
    if not ev.summary.empty:
        summary = ev.summary.set_index("method")
        cols = _columns(EVAL_TABLE, list(summary.columns))
        report.sections.append(Section("Results per method", [
            Table(_formatted(summary.to_dict("index"), cols, first="method")),
            Text("hit@1/hit@K by category: the top answer (any of the top K) is in the "
                 "query's category; by tool: it is a ground-truth tool; C(q) = items scored "
                 "per query.", note=True)]))
    title = eval_title(meta)
    figures: list[Block] = [_picture(n, fig)
                            for n, fig in retrieval_figures(ev.per_query, title).items()]
    report.sections.append(Section("Figures", figures or [Text("No figures.")]))
    if spec:
        report.sections.append(Section("Evaluation file (resolved)", [
            Code(yaml.safe_dump(spec, sort_keys=False), "yaml")]))
    return report


# ---------------------------------------------------------------------------- rendering

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;
border-bottom:1px solid #ddd;padding-bottom:.2em}
nav{font-size:.9em;color:#555}nav a{margin-right:.8em;color:#2463b0;text-decoration:none}
table{border-collapse:collapse;margin:.6em 0;font-size:.86em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right;white-space:nowrap}
th{background:#f3f5f8;white-space:normal}td:first-child,th:first-child{text-align:left}
caption{caption-side:top;text-align:left;color:#555;font-size:.95em;padding:.2em 0}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}
pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:.82em;border-radius:4px}
.note{color:#666;font-size:.85em}.banner{background:#fff4d6;border:1px solid #e6c463;
padding:.5em .8em;border-radius:4px}
""" + "".join(f".l{i} td:nth-child({i}){{text-align:left;white-space:normal}}"
             for i in range(2, 40))  # table classes l<i>: column i holds text


def render_html(report: Report) -> str:
    """One self-contained HTML page: inline CSS, figures as data: URIs, no external links."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(report.title)}</title>", f"<style>{CSS}</style>",
           "</head><body>", f"<h1>{html.escape(report.title)}</h1>"]
    if report.banner:
        out.append(f'<p class="banner">{html.escape(report.banner)}</p>')
    out.append("<nav>" + "".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>'
                                 for s in report.sections) + "</nav>")
    for section in report.sections:
        out.append(f'<h2 id="{section.anchor}">{html.escape(section.title)}</h2>')
        for b in section.blocks:
            if isinstance(b, Text):
                out.append(f'<p{" class=note" if b.note else ""}>{html.escape(b.text)}</p>')
            elif isinstance(b, Table):
                # text columns (and field/value tables) read better left-aligned
                text_cols = [i + 1 for i, c in enumerate(b.frame.columns)
                             if i > 0 and not b.frame[c].map(_numeric).all()]
                table = b.frame.to_html(index=b.index, border=0, escape=True, na_rep="-",
                                        classes=" ".join(f"l{i}" for i in text_cols) or None)
                if b.caption:
                    table = table.replace(">", f"><caption>{html.escape(b.caption)}</caption>",
                                          1)
                out.append(table)
            elif isinstance(b, Picture):
                data = base64.b64encode(b.png).decode("ascii")
                alt = html.escape(b.caption or b.name)
                out.append(f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
                           + (f"<figcaption>{html.escape(b.caption)}</figcaption>"
                              if b.caption else "") + "</figure>")
            elif isinstance(b, Code):
                out.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
    out.append('<p class="note">Written by tooldns report (analysis/report.py).</p>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def render_markdown(report: Report) -> str:
    """Markdown with the figures as relative links (the PNGs are written beside it)."""
    out = [f"# {report.title}", ""]
    if report.banner:
        out += [f"> **{report.banner}**", ""]
    out += [" · ".join(f"[{s.title}](#{s.anchor})" for s in report.sections), ""]
    for section in report.sections:
        out += [f"## {section.title}", ""]
        for b in section.blocks:
            if isinstance(b, Text):
                out += [f"*{b.text}*" if b.note else b.text, ""]
            elif isinstance(b, Table):
                if b.caption:
                    out += [f"**{b.caption}**", ""]
                frame = b.frame.reset_index() if b.index else b.frame
                align = ["left" if i == 0 or not frame[c].map(_numeric).all() else "right"
                         for i, c in enumerate(frame.columns)]
                out += [frame.to_markdown(index=False, disable_numparse=True,
                                          colalign=align), ""]
            elif isinstance(b, Picture):
                out += [f"![{b.caption or b.name}]({b.name})", ""]
            elif isinstance(b, Code):
                out += [f"```{b.lang}", b.text.rstrip("\n"), "```", ""]
    return "\n".join(out)


def _numeric(text: object) -> bool:
    """Whether a formatted cell reads as a number (right-aligned in Markdown tables)."""
    t = str(text).strip().rstrip("%")
    if t in ("-", ""):
        return True
    try:
        float(t)
    except ValueError:
        return False
    return True


def build_report(path: Path) -> Report:
    """The report of a run, sweep or evaluation folder (detected from its files)."""
    from analysis.results import kind_of

    kind = kind_of(path)
    if kind is None:
        raise FileNotFoundError(f"{path}: not a run, sweep or evaluation folder (no "
                                f"summary.json, partial.json, sweep.csv or per_query.csv)")
    builders: dict[str, Callable[[Path], Report]] = {
        "run": run_report, "sweep": sweep_report, "eval": eval_report}
    return builders[kind](path)


def _bytes_writer(data: bytes) -> Callable[[str], object]:
    return lambda tmp: Path(tmp).write_bytes(data)


def write_report(path: Path, out: Path | None = None,
                 formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``report.html`` and/or ``report.md`` (with its PNG figures beside it) for the
    run, sweep or evaluation folder ``path`` into ``out`` (default: ``path``); returns the
    files written. Each file is written atomically."""
    from analysis.files import atomic_write, make_dirs

    path = Path(path)
    out = Path(out) if out is not None else path
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown report format(s) {', '.join(sorted(unknown))} "
                         f"(html, md)")
    report = build_report(path)
    make_dirs(out)
    written: list[Path] = []
    if "md" in formats:
        for pic in report.figures():
            atomic_write(out / pic.name, _bytes_writer(pic.png))
            written.append(out / pic.name)
        text = render_markdown(report)
        atomic_write(out / "report.md", lambda tmp: Path(tmp).write_text(text, "utf-8"))
        written.append(out / "report.md")
    if "html" in formats:
        page = render_html(report)
        atomic_write(out / "report.html", lambda tmp: Path(tmp).write_text(page, "utf-8"))
        written.append(out / "report.html")
    return written


# ---------------------------------------------------------------------------- command line


def _formats(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if p not in FORMATS]
    if bad or not parts:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of html, md")
    return parts


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("dir", metavar="DIR", type=Path,
                   help="output folder of tooldns run (or a sweep point), sweep or eval")
    p.add_argument("--out", type=Path, help="folder to write the report into (default: DIR)")
    # a string default goes through type= too (argparse): a list in args.format
    p.add_argument("--format", type=_formats, default=",".join(FORMATS), metavar="html,md",
                   help="report.html (self-contained), report.md (+ PNG figures beside it) "
                        "or both (default: %(default)s)")
    return p


DESCRIPTION = ("Write a report of a tooldns output folder (a run, a sweep or an evaluation, "
               "detected from its files): report.html, self-contained (figures embedded, "
               "no external assets), and report.md with its figures as PNG files beside "
               "it. Provenance, scenario, the comparison per scheme, per-phase, trust, "
               "fault and capture sections when the run has them, figures and the "
               "scenario YAML.")


def run(args: argparse.Namespace) -> int:
    """``tooldns report``: write the report, print the files written. Exit 0, 1 (disk
    error), 2 (not an output folder)."""
    from analysis.files import OutputError

    try:
        paths = write_report(args.dir, args.out, args.format)
    except FileNotFoundError as exc:
        print(f"tooldns report: error: {exc}", file=sys.stderr)
        return 2
    except OutputError as exc:
        print(f"tooldns report: error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(prog="python3 -m analysis.report",
                                                description=DESCRIPTION))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    from analysis.pipes import guarded

    raise SystemExit(guarded(main))
