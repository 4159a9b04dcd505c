"""The Mininet engine on netem links in the VM (``tooldns run --vm``) against simpy and live.

What it measures
    One scenario (default ``scenarios/engines-mininet.yaml``) on simpy, on live (user-space
    link delays), on Mininet on this machine (user-space: no netem here) and on Mininet in
    the qemu guest (netem); per scheme the median and p95 latency, whether round trips,
    bytes and packets are identical query by query to simpy's, and the ratios of the
    medians to simpy's, and each engine's latency distribution against simpy's (deciles and
    a two-sample Kolmogorov-Smirnov test; meaningful with jitter and loss, ``--set``); for
    the VM its accelerator, boot seconds and whole-run seconds (from ``vm.json``) and this
    command's wall time for it. ``--probe`` boots the guest once more to measure its own
    cost per exchange (ping and a Python UDP echo over a 25 ms netem link,
    ``benchmarks/vm_probe.py``).

Run (root; qemu, a kernel with netem and busybox-static, as .ci/setup installs)
    python3 benchmarks/bench_vm.py
    python3 benchmarks/bench_vm.py --scenario scenarios/engines-vm.yaml --skip live
    python3 benchmarks/bench_vm.py --scenario scenarios/engines-vm.yaml --skip live mininet \
      --set network.link.delay.dist=normal --set network.link.delay.std=0.01 \
      --set network.link.loss=0.01 --set workload.queries=60 --set workload.pool=40
    python3 benchmarks/bench_vm.py --probe --skip simpy live mininet mininet-vm
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SAME = ["round_trips", "bytes_up", "bytes_down", "packets_up", "packets_down"]
RUNS = {"simpy": ["--engine", "simpy"], "live": ["--engine", "live"],
        "mininet": ["--engine", "mininet"], "mininet-vm": ["--engine", "mininet", "--vm"]}


def run(name: str, scenario: Path, out: Path,
        sets: list[str]) -> tuple[pd.DataFrame, dict, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sim.cli", "-q", "run", str(scenario),
                           *RUNS[name], "--out", str(out),
                           *[a for s in sets for a in ("--set", s)]],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{name}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    if (out / "vm.json").exists():
        summary["vm"] = json.loads((out / "vm.json").read_text())
    return pd.read_csv(out / "results.csv").sort_values(["scheme", "job"]), summary, wall


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "engines-mininet.yaml")
    p.add_argument("--skip", nargs="*", default=[], choices=list(RUNS))
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="a scenario override for every run (repeatable)")
    p.add_argument("--probe", action="store_true",
                   help="also measure the guest's own cost per exchange (vm_probe.py)")
    args = p.parse_args()
    print(f"machine: {platform.node()} {os.cpu_count()} cores, {platform.platform()}, load "
          f"{os.getloadavg()[0]:.1f}; scenario {args.scenario.name}")
    if args.probe:
        probe()
    with tempfile.TemporaryDirectory(prefix="bench-vm-") as tmp:
        got = {name: run(name, args.scenario.resolve(), Path(tmp, name), args.set)
               for name in RUNS if name not in args.skip}
    if "simpy" not in got:
        return 0
    base = got["simpy"][0]
    rows = []
    for name, (df, summary, wall) in got.items():
        emulation = {r.get("link_emulation", "model") for r in summary["replay"].values()}
        for scheme, part in df.groupby("scheme", sort=False):
            ref = base[base.scheme == scheme]
            same = all(part[c].tolist() == ref[c].tolist() for c in SAME)
            rows.append({"engine": name, "links": ",".join(sorted(emulation)),
                         "scheme": scheme, "median ms": round(part.latency_ms.median(), 1),
                         "p95 ms": round(part.latency_ms.quantile(0.95), 1),
                         "median / simpy": round(part.latency_ms.median()
                                                 / ref.latency_ms.median(), 3),
                         "counts = simpy": same, "command s": round(wall, 1)})
    print(pd.DataFrame(rows).to_string(index=False))
    distributions(got, base)
    if "mininet-vm" in got:
        vm = got["mininet-vm"][1]["vm"]
        print(f"vm: kernel {vm['kernel']}, {vm['accel']} ({vm['accel_reason']}); boot "
              f"{vm['boot_s']:.1f} s; qemu ran {vm['wall_s']:.1f} s")
    return 0


def distributions(got: dict, base: pd.DataFrame) -> None:
    """Per engine, its latency deciles against simpy's and a two-sample KS test."""
    from scipy.stats import ks_2samp

    qs = [0.1, 0.25, 0.5, 0.75, 0.9]
    print(f"latency quantiles {qs} (ms), two-sample Kolmogorov-Smirnov against simpy:")
    for name, (df, _, _) in got.items():
        test = ks_2samp(df.latency_ms, base.latency_ms)
        print(f"  {name:11s} {[round(v, 1) for v in df.latency_ms.quantile(qs)]} n={len(df)} "
              f"D={test.statistic:.3f} p={test.pvalue:.3f}; upstream queries "
              f"{df.exchanges.sum()}, timeouts {df.timeouts.sum()}, success "
              f"{df.success.mean():.1%}")


def probe() -> None:
    """The guest's own cost per exchange (benchmarks/vm_probe.py in a booted guest)."""
    sys.path.insert(0, str(ROOT))
    from sim.vm.job import VMOptions, run_in_vm

    with tempfile.TemporaryDirectory(prefix="bench-vm-probe-") as tmp:
        got = run_in_vm([sys.executable, str(ROOT / "benchmarks" / "vm_probe.py")],
                        Path(tmp), VMOptions(timeout_s=300), console=lambda _line: None,
                        progress=print)
    print(f"probe (status {got.status}, {got.accel}): 25 ms netem link, 50 ms round trip")
    print("  " + got.stdout.strip().replace("\n", "\n  "))


if __name__ == "__main__":
    sys.exit(main())
