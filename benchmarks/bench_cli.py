"""How long the command line takes before it does anything: ``--help``, ``validate``,
``schema``, ``run --show-config``, each as a fresh process (median of N), against the cost of
importing what a run needs (``sim.run.runner``: the scorers, pandas, simpy, the engines) — the
baseline ``--help`` paid before the CLI imported lazily.

    python3 benchmarks/bench_cli.py            # 7 runs each
    python3 benchmarks/bench_cli.py --runs 15
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "import sim.run.runner (baseline)": [sys.executable, "-c", "import sim.run.runner"],
    "tooldns --help": [sys.executable, "-m", "sim.cli", "--help"],
    "tooldns run --help": [sys.executable, "-m", "sim.cli", "run", "--help"],
    "tooldns validate scenarios/*.yaml": [sys.executable, "-m", "sim.cli", "validate",
                                          *map(str, sorted((ROOT / "scenarios").glob("*.yaml")))],
    "tooldns schema": [sys.executable, "-m", "sim.cli", "schema"],
    "tooldns run quickstart --show-config": [sys.executable, "-m", "sim.cli", "run",
                                             "scenarios/quickstart.yaml", "--show-config"],
}


def timed(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    base = None
    print(f"{'command':40s} {'median s':>9s} {'min s':>7s} {'vs baseline':>12s}")
    for name, argv in CASES.items():
        timed(argv)  # warm the page cache
        times = [timed(argv) for _ in range(args.runs)]
        median = statistics.median(times)
        base = base or median
        print(f"{name:40s} {median:9.3f} {min(times):7.3f} {median / base:11.2f}×")


if __name__ == "__main__":
    main()
