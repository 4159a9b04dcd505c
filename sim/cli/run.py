"""``tooldns run``: every scheme of a scenario file on one engine, a comparison table on
stdout and the results written to a folder."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sim.catalog.engines import ENGINES
from sim.cli.common import (
    add_format_arg,
    add_scenario_args,
    check_out,
    consoles,
    error,
    interruptible,
    port_number,
    positive_int,
    progress,
    query_progress,
    scenario_from_args,
    stderr,
    warn,
)

if TYPE_CHECKING:
    from sim.run.runner import RunResult
    from sim.scenario import Scenario

HELP = "run a scenario file and compare its schemes"
DESCRIPTION = (
    "Run every scheme of a scenario on one engine, print a comparison table and "
    "write results (results.parquet/csv, nodes.csv, summary.json, scenario.yaml, "
    "figures).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="scenario YAML (see scenarios/, docs/scenario-reference.md)")
    p.add_argument("--engine", choices=list(ENGINES),
                   help="override the file's engine")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    add_scenario_args(p)
    add_format_arg(p, "the comparison per scheme")
    p.add_argument("--show-config", action="store_true",
                   help="print the fully defaulted scenario (after --seed/--set) and exit")
    p.add_argument("--capture", action="store_true",
                   help="live engine: record loopback traffic to capture.pcap (tcpdump, or "
                        "scapy) and check the byte/packet accounting against it (needs root)")
    p.add_argument("--port", type=port_number, default=15353,
                   help="real-time engines: the DNS port every node listens on (DNS over "
                        "TLS: PORT + 800); another when this one is in use")
    p.add_argument("--shards", type=positive_int, metavar="N",
                   help="simpy: split the run over N Ray workers (engine_options.shards)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="--shards: the Ray cluster to run them on (default: a local Ray)")
    vm = p.add_argument_group("a guest kernel for netem links (docs/engines.md#the-vm)")
    vm.add_argument("--vm", action="store_true",
                    help="run inside a qemu guest booted from this machine's root and a "
                         "kernel with the netem qdisc; the Mininet engine's links are then "
                         "netem's (needs root, qemu-system-x86, linux-image-amd64, "
                         "busybox-static: .ci/setup)")
    vm.add_argument("--vm-accel", choices=("auto", "kvm", "tcg"), default="auto",
                    help="--vm: KVM where a hardware KVM module is loaded, else TCG emulation")
    vm.add_argument("--vm-memory", type=positive_int, default=3072, metavar="MIB",
                    help="--vm: guest memory (default 3072)")
    vm.add_argument("--vm-timeout", type=positive_int, default=1800, metavar="SECONDS",
                    help="--vm: stop the guest after this long (default 1800)")


def run(args: argparse.Namespace) -> int:
    from analysis.files import OutputError, check_output
    from sim.errors import ScenarioError, in_file
    from sim.loading import resolved_yaml

    with interruptible() as stopped:
        try:
            check_out(args.out)
            scenario = scenario_from_args(args)
            if args.show_config:
                sys.stdout.write(resolved_yaml(scenario))
                return 0
            # the output folder is tried before anything is imported, built or started
            if warning := check_output(scenario, args.out, args.capture):
                warn(warning)
            if scenario.seeds > 1:
                return run_seeds(args, scenario)
            if args.vm:
                return run_vm(args, scenario)
            scenario = with_shards(scenario, args)
            from sim.engines.shardpool import start as start_shards
            from sim.run.runner import run_scenario

            start_shards(scenario)  # the workers start while this process builds
            with query_progress() as tick:
                result = run_scenario(scenario, out_dir=args.out, live_port=args.port,
                                      progress=progress, capture=args.capture, check=False,
                                      tick=tick)
        except ScenarioError as exc:  # build-time errors name the field, not the file
            error("run", in_file(args.file, str(exc)))
            return 2
        except OutputError as exc:
            error("run", str(exc))
            return 1
        except OSError as exc:  # sim.sockets.udp.PortInUse: which address, what to do
            if exc.errno != errno.EADDRINUSE:
                raise
            error("run", f"{exc.strerror}; another `tooldns run` or `tooldns serve` may be "
                         f"using port {args.port}: stop it, or pass --port with another")
            return 1
        except KeyboardInterrupt as exc:  # sim.run.outputs.RunInterrupted says what was kept
            stderr(f"tooldns run: {exc}" if hasattr(exc, "finished") else
                   "tooldns run: interrupted; no results written")
            return stopped.code
    _print_result(result, scenario, args)
    return 0


def run_seeds(args: argparse.Namespace, scenario: Scenario) -> int:
    """``seeds: N``: the scenario once per seed (``seed`` … ``seed+N-1``), each a run of its
    own in ``points/<id>/`` (resumable, as sweep points are), then mean ± 95 % CI per
    scheme and the paired differences from the first scheme (``intervals.csv``,
    ``paired.csv``, ``sweep.json``)."""
    from analysis.conditions import conditions
    from analysis.console import interval_grids, interval_text
    from analysis.tables import print_grid
    from sim.catalog.engines import engine_info
    from sim.errors import ScenarioError
    from sim.run.sweep import grid_of, run_sweep

    for flag, given in (("--vm", args.vm), ("--capture", args.capture),
                        ("--shards", args.shards)):
        if given:
            raise ScenarioError(f"seeds: {scenario.seeds} replications run as separate runs; "
                                f"{flag} runs one (use seeds: 1)")
    if scenario.engine_options.shards.workers > 1:
        raise ScenarioError("seeds: replications and engine_options.shards do not combine "
                            "(use seeds: 1)")
    # real-time engines share their ports: one replication at a time
    workers = 2 if engine_info(scenario.engine).virtual_time else 1
    out = args.out or scenario.outputs.dir or f"results/{scenario.name}"
    status = consoles.err
    result = run_sweep(scenario, out, workers, console=status)
    axes = list(grid_of(scenario))
    title = f"{scenario.name} on {scenario.engine}"
    footer = conditions(scenario.model_dump(mode="json"))
    if args.format == "table":
        for grid in interval_grids(result.table, axes, title, footer):
            print_grid(grid, consoles.out)
    else:
        sys.stdout.write(interval_text(result.table, axes, title, args.format, footer))
    progress(f"{len(result.ran)} replications run, {len(result.skipped)} already done; "
             f"{result.out_dir}/intervals.csv, paired.csv, sweep.csv, sweep.json, points/<id>/")
    if result.failed:
        error("run", f"{len(result.failed)} replications failed: "
                     f"{', '.join(result.failed)}")
        return 1
    return 0


def _print_result(result: RunResult, scenario: Scenario, args: argparse.Namespace) -> None:
    """The comparison table (or the summary as ``--format`` says), notes on the engine,
    warnings and where the files are; with a machine format only the summary on stdout."""
    from analysis.conditions import conditions
    from analysis.console import capture_grid, print_summary, summary_text
    from analysis.tables import print_grid
    from sim.engines.fidelity import fidelity_line
    from sim.spec import printable

    footer = conditions(scenario.model_dump(mode="json"), result.summary)
    if args.format == "table":
        console = consoles.out
        print_summary(result.summary, console, result.records, footer)
    else:
        sys.stdout.write(summary_text(result.summary, args.format, result.records, footer))
        console = consoles.err
    if (workers := scenario.engine_options.shards.workers) > 1 or args.shards:
        if workers > 1:
            console.print(f"sharded over {workers} Ray workers (sim.engines.shards): walks as "
                          f"in one process; link-delay draws, server queueing and packet caches "
                          f"per shard", style="dim")
        console.print("engine wall time: " + ", ".join(
            f"{name} {s:.1f} s" for name, s in result.summary["wall_s"].items()), style="dim")
    engine = result.summary["engine"]
    emulation = {r.get("link_emulation") for r in result.summary["replay"].values()}
    if "netem" in emulation:
        console.print(f"{engine} engine: link delay, jitter and loss by the kernel's netem "
                      "qdisc (TCLink)", style="dim")
    if "user-space" in emulation:
        console.print(f"{engine} engine: link delay and loss emulated in user space by the "
                      "socket adapters (no netem qdisc on this machine)", style="dim")
        for scheme, replay in result.summary["replay"].items():
            err = replay["schedule_error_ms"]
            if err:
                console.print(f"  {scheme}: replay timing error vs schedule: median "
                              f"{err['median']:.3f} ms, p99 {err['p99']:.3f} ms, max "
                              f"{err['max']:.3f} ms", style="dim")
    for scheme, replay in result.summary["replay"].items():  # real-time engines only
        if (block := replay.get("fidelity")) is not None:
            console.print(fidelity_line(scheme, block), markup=False, highlight=False,
                          style=None if block["within"] else "yellow")
    if "capture" in result.summary:
        print_grid(capture_grid(result.summary["capture"]), console)
    expected_to_fail = {s.name for s in scenario.dns_schemes() if s.mode == "strip"}  # by design
    for name, s in result.summary["schemes"].items():
        if s.get("queries") and not s.get("success") and name not in expected_to_fail:
            warn(f"scheme {name}: no query succeeded (timeouts, delays and loss are worth "
                 f"a look: tooldns validate {args.file})")
    assert result.out_dir is not None  # run_scenario writes unless told not to
    files = sorted(p.name for p in Path(result.out_dir).iterdir() if not p.name.startswith("."))
    console.print(f"results written to {printable(str(result.out_dir))}/ ({', '.join(files)})",
                  markup=False, highlight=False, soft_wrap=True)


def run_vm(args: argparse.Namespace, scenario: Scenario) -> int:
    """``--vm``: the same command inside a guest (:mod:`sim.vm`), on the Mininet engine with
    netem links required (any other engine runs there as it would here: simpy with
    ``processing: calibrated`` then models the guest's own CPU); its stdout printed here,
    its console (progress, warnings) on stderr; the exit status is the guest command's. The
    scenario was read and checked here first, so a bad file fails before anything boots."""
    from analysis.files import output_dir
    from sim.errors import ScenarioError
    from sim.vm.job import VMOptions, run_in_vm
    from sim.vm.machine import VMError

    engine = scenario.engine  # --engine is in it (sim.cli.common.scenario_from_args)
    if args.capture or args.shards or args.show_config:
        raise ScenarioError("--vm: --capture, --shards and --show-config are not available "
                            "with --vm")
    out = output_dir(scenario, args.out).resolve()
    argv = [sys.executable, "-m", "sim.cli", "run", str(Path(args.file).resolve()),
            "--engine", engine, "--out", str(out), "--format", args.format]
    if engine == "mininet":
        argv += ["--set", "engine_options.mininet.netem=require"]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    for item in args.set or ():
        argv += ["--set", item]
    if args.allow_units:
        argv.append("--allow-units")
    options = VMOptions(accel=args.vm_accel, memory_mib=args.vm_memory,
                        timeout_s=float(args.vm_timeout))
    try:
        got = run_in_vm(argv, out, options, console=lambda line: stderr(f"  vm| {line}"),
                        progress=progress)
    except VMError as exc:
        error("run", f"--vm: {exc}")
        return 1
    sys.stdout.write(got.stdout)
    sys.stdout.flush()
    boot = f"booted in {got.boot_s:.1f} s, " if got.boot_s is not None else ""
    progress(f"vm: kernel {got.kernel} on {got.accel}; {boot}{got.wall_s:.1f} s in all; "
             f"guest exit status {got.status}")
    return got.status


def with_shards(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``--shards``/``--ray-address`` over the file's ``engine_options.shards``; a sharded
    run on another engine than simpy is refused here, before anything is built."""
    from sim.engines.shards import check_shardable
    from sim.errors import ScenarioError

    shards = scenario.engine_options.shards
    workers: int = args.shards or shards.workers
    update = {"workers": workers, "address": args.ray_address or shards.address}
    scenario = scenario.model_copy(update={"engine_options": scenario.engine_options.model_copy(
        update={"shards": shards.model_copy(update=update)})})
    if workers > 1:
        try:
            check_shardable(scenario, scenario.engine, scenario.network.resolvers)
        except ScenarioError as exc:
            raise ScenarioError(f"{args.file}: {exc}") from None
    return scenario
