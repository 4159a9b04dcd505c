"""The run loop (one scheme at a time), records, summaries, outputs, capture and sweeps."""
