"""The probes of ``benchmarks/bench_robustness.py``: one module per attack, the served
hierarchy they attack (:mod:`.serving`) and their tables (:mod:`.table`)."""
