"""Run a scenario: build the namespace and the jobs once, then run each scheme's plan on
an engine (:func:`run_scheme`) and turn what happened into records, a summary and the
output folder.

Each scheme's plan is built complete (:func:`sim.build.plan.make_plan`, with what the run
measured or decided: calibrated processing, churn, capture) and never changed; the engine
returns everything it observed in one :class:`sim.engines.base.EngineOutput`, and the
records, node table and reports are made from that output alone.

Records are made as discoveries finish (:class:`sim.run.recorder.Recorder`, the sink the
engine is given with the plan) and spooled to disk (:class:`sim.run.spool.RecordSpool`, a
hidden folder in the output folder, or a temporary one without ``write``); the summary is
counted as they come (:class:`sim.run.summary.Tally`). Only what needs every record at once
(churn, faults, trust, sessions, packet capture) reads them back as one frame.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import shutil
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

import pandas as pd

from analysis.files import OutputLock, Staging, check_output, output_dir
from sim.accounting import dot_port
from sim.build.churn import ChurnSchedule
from sim.build.faults import DOWN_TARGETS, FaultState
from sim.build.hierarchy import Hierarchy
from sim.build.namespace import build_namespace, start_zone
from sim.build.plan import PlanOptions, make_plan, scenario_hierarchy
from sim.build.registries import REGISTRY_PORT
from sim.build.runplan import CaptureRequest, RunPlan
from sim.build.sessions import check_session_tools
from sim.build.trust import trust_report
from sim.build.workload import Job, build_jobs
from sim.catalog.engines import EngineInfo, Feature, engine_info, refusal
from sim.catalog.strategies import STRATEGIES
from sim.engines.base import Engine, EngineOutput
from sim.errors import ScenarioError
from sim.provenance import KEY as PROVENANCE
from sim.provenance import provenance, utc_now
from sim.run.calibrate import calibrate
from sim.run.capture import Capture, Window, compare_capture, merge_pcaps
from sim.run.faultreport import fault_report
from sim.run.mirror import mirror_refresh
from sim.run.outputs import keep_finished, write_outputs
from sim.run.recorder import Recorder
from sim.run.records import Lookups, load_records, stub_walks
from sim.run.spool import RecordSpool
from sim.run.summary import Tally, replay_summary, session_summary, summarise
from sim.scenario import Scenario
from sim.schemes import DnsScheme, SchemeSpec
from topologies.gcpause import gc_paused
from topologies.namespace import Namespace

log = logging.getLogger("tooldns.run")  # -v: what was built and how long each scheme took


class RunResult:
    """A finished run: per-discovery ``records`` (read from the written results, or the
    run's spool, on first access), per-node ``load``, the ``summary`` and the folder."""

    def __init__(self, records: pd.DataFrame | Callable[[], pd.DataFrame], load: pd.DataFrame,
                 summary: dict, out_dir: Path | None) -> None:
        self._records = records
        self.load, self.summary, self.out_dir = load, summary, out_dir

    @property
    def records(self) -> pd.DataFrame:
        if not isinstance(self._records, pd.DataFrame):
            self._records = self._records()
        return self._records


@dataclass
class Run:
    """What every scheme of one run shares: scenario, engine, namespace, jobs, servers."""

    sc: Scenario
    engine: str
    info: EngineInfo
    execute: Engine
    ns: Namespace
    jobs: Sequence[Job]
    lookups: Lookups
    live_port: int
    churn: ChurnSchedule | None = None  # tools changed during the run (sim.build.churn)
    # servers built once and reset per scheme (dense ones are built per scheme: see
    # Hierarchy.shareable)
    shared: Hierarchy | None = None
    sniffer: Capture | None = None
    tick: Callable[[str, int, int], None] | None = None
    progress: Callable[[str], None] | None = None

    @property
    def sharded(self) -> bool:
        """Whether each scheme runs split over Ray workers (``engine_options.shards``)."""
        return self.sc.engine_options.shards.workers > 1


@dataclass
class Collected:
    """What the schemes run so far produced."""

    spool: RecordSpool  # the records, on disk
    tally: Tally = field(default_factory=Tally)  # the summary's per-scheme figures
    load: list[dict] = field(default_factory=list)
    replay: dict[str, dict] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)  # seconds per scheme (console only)
    windows: list[Window] = field(default_factory=list)  # for the capture's attribution
    # per scheme: what its faults did (the plan's schedule with what the engine reported)
    fault_plans: dict[str, FaultState | None] = field(default_factory=dict)
    churn_rows: list[dict] = field(default_factory=list)
    churn_states: dict[tuple[str, int], str] = field(default_factory=dict)  # (scheme, job)
    processing: dict[str, dict[str, float]] = field(default_factory=dict)  # calibrated
    finished: list[str] = field(default_factory=list)  # schemes whose records are complete


def check_engine(sc: Scenario, engine: str, info: EngineInfo, capture: bool) -> None:
    """A ScenarioError, naming the field that asks for it, for the first feature the
    scenario uses that ``engine`` (sharded or not) cannot run: the reason is the note of
    its cell in the catalogue (:mod:`sim.catalog.engines`), so every refusal happens here,
    before anything is built or run."""
    sharded = sc.engine_options.shards.workers > 1
    asked: list[tuple[Feature, str]] = []  # (feature, the field that asks for it)
    if sharded:
        asked.append(("shards", "engine_options.shards.workers"))
    asked += [("registries", f"schemes.{s.name}: an HTTP-registry scheme (kind {s.kind})")
              for s in sc.registry_schemes()]
    asked += [("dot", f"schemes.{s.name}.upstream") for s in sc.dns_schemes()
              if s.upstream != "udp"]
    if sc.faults is not None:
        asked.append(("faults", "faults"))
    if sc.agents.session is not None:
        asked.append(("sessions", "agents.session"))
    if sc.workload.churn is not None:
        asked.append(("churn", "workload.churn"))
    if sc.namespace.scorer == "dense":
        asked.append(("dense", "namespace.scorer"))
    asked += [("drafts", f"schemes.{s.name}: a DNS-native draft (kind {s.kind})")
              for s in sc.dns_schemes() if "orgzones" in STRATEGIES[s.kind].publishes]
    asked += [("stock", f"schemes.{s.name}.resolver") for s in sc.dns_schemes()
              if s.resolver != "project"]
    _check_resolver_crashes(sc)
    if capture:
        asked.append(("capture", "--capture"))
    for feature, where in asked:
        reason = refusal(info, feature, sharded)
        if reason is not None:
            raise ScenarioError(f"{where}: {reason}")
    for s in sc.dns_schemes():  # the DNS client strategies' own engines
        strategy = STRATEGIES[s.kind]
        if not strategy.runs_on(engine):
            able = " or ".join(strategy.engines or ())
            raise ScenarioError(f"schemes.{s.name}.kind: the {s.kind} strategy runs on "
                                f"{able}, not on {engine}")


def _check_resolver_crashes(sc: Scenario) -> None:
    """A ``down`` fault on resolvers needs every scheme's resolver to be a stock binary
    (its process crashes); refused before any scheme runs (a run refuses it per scheme,
    and could otherwise stop after the first)."""
    if sc.faults is None:
        return
    project = [s.name for s in sc.schemes
               if not isinstance(s, DnsScheme) or s.resolver == "project"]
    for i, f in enumerate(sc.faults.events):
        if f.kind == "down" and f.target.startswith("resolver") and project:
            raise ScenarioError(f"faults.events.{i}.target: {DOWN_TARGETS}; scheme "
                                f"{project[0]} has none")


def _start_capture(sc: Scenario, out: Path, live_port: int) -> Capture:
    """tcpdump (or scapy) on loopback for the run's DNS, registry and DNS-over-TLS ports."""
    dot = any(s.upstream != "udp" for s in sc.dns_schemes())  # + the DNS-over-TLS port
    sniffer = Capture(out / "capture.pcap",
                      f"net 127.0.0.0/8 and (port {live_port} or tcp port {REGISTRY_PORT}"
                      + (f" or tcp port {dot_port(live_port)})" if dot else ")"))
    try:
        sniffer.start()
    except (OSError, RuntimeError) as exc:  # no tcpdump rights, no interface …
        raise ScenarioError(f"--capture: cannot capture on lo ({exc}); run as root") from None
    return sniffer


def prepare(sc: Scenario, engine: str, out: Path, live_port: int = 15353,
            capture: bool = False) -> Run:
    """Everything the schemes share, built and checked before any scheme runs: what the
    engine cannot run is refused before anything is built."""
    info = engine_info(engine)
    check_engine(sc, engine, info, capture)
    execute = info.load()
    built = time.perf_counter()
    ns = build_namespace(sc)
    log.info("namespace %s: %d tools, %d zones in %.2f s", ns.origin, len(ns.tools),
             len(ns.zones), time.perf_counter() - built)
    jobs: Sequence[Job] = build_jobs(sc, ns, sc.network.agents)
    churn = None  # sim.build.churn: tools changed during the run, probes appended to the jobs
    if sc.workload.churn is not None:
        from sim.build.churn import plan_churn

        churn, jobs = plan_churn(sc, ns, jobs)
    start_zone(sc, ns)  # fail before running anything
    check_session_tools(sc, ns)
    run = Run(sc, engine, info, execute, ns, jobs, Lookups.of(sc, ns), live_port, churn)
    run.shared = None if sc.namespace.scorer == "dense" else scenario_hierarchy(sc, ns)
    if info.loopback and run.shared is not None:  # a port in use: one line, before any scheme
        from sim.sockets.udp import check_ports

        check_ports(run.shared.servers, live_port)
    if capture:
        run.sniffer = _start_capture(sc, out, live_port)
    return run


def _execute(run: Run, plan: RunPlan, sink: Recorder | None) -> EngineOutput:
    """The plan run on the engine (or sharded over Ray workers), each discovery told to
    ``sink`` as it ends; no capture left running."""
    try:
        if run.sharded:  # one run over Ray workers
            from sim.engines.shardpool import run_sharded

            return run_sharded(run.sc, run.engine, plan, sink)
        return run.execute(plan, sink)
    except BaseException:
        if run.sniffer is not None:  # never leave a tcpdump running behind a failed run
            run.sniffer.stop()
        raise


@contextlib.contextmanager
def _kept_frozen(run: Run) -> Iterator[None]:
    """A scheme in virtual time, in this process: what it leaves behind (servers' zone
    states, indexes and reply memos built on first use, resolvers' parsed records) joins
    the frozen build (:func:`_run`) instead of being walked by the first collection after
    it (about a million objects, 0.4-0.5 s on the rate yardstick). The engine runs without
    the collector anyway (:func:`sim.engines.simpy.run_simpy` says why); the scheme's few
    cyclic leftovers are collectable again once :func:`_run` thaws them. Engines on real
    sockets and sharded runs keep the collector."""
    if not run.info.virtual_time or run.sharded:
        yield
        return
    with gc_paused():
        yield
        gc.freeze()


def run_scheme(run: Run, scheme: SchemeSpec, got: Collected) -> None:
    """Run one scheme: its plan on the engine, then its records added to ``got``."""
    sc, engine, jobs = run.sc, run.engine, run.jobs
    if run.progress:
        run.progress(f"{sc.name}: scheme {scheme.name} on {engine} ({len(jobs)} queries)")
    if sc.network.processing.model == "calibrated":  # each scheme's own node costs
        got.processing[scheme.name] = calibrate(sc, run.ns, jobs, scheme, hierarchy=run.shared)
    port = 53 if run.info.virtual_time else run.live_port
    capture = None
    if run.sniffer is not None:  # engines whose nodes are in namespaces capture there
        capture = CaptureRequest(
            str(run.sniffer.path.parent / ".namespaces" / scheme.name), run.sniffer.bpf)
    options = PlanOptions(calibrated=got.processing.get(scheme.name, {}), churn=run.churn,
                          capture=capture)
    plan, network = make_plan(sc, scheme, run.ns, jobs, dns_port=port, hierarchy=run.shared,
                              options=options)
    got.tally.drop(scheme.name)
    recorder = Recorder(sc, engine, scheme, plan, run.lookups, got.spool, got.tally,
                        stream=not Recorder.keeps(sc, scheme, plan, run.sniffer is not None),
                        tick=None if run.tick is None else
                        partial(_tick, run.tick, scheme.name, len(jobs)))
    # engines in this process, and the shards' merge in the driver, make records as
    # discoveries end (else: at drain)
    sink = recorder if run.info.progress else None
    t = time.perf_counter()
    window = time.time()
    with _kept_frozen(run):
        output = _execute(run, plan, sink)
    got.wall[scheme.name] = round(time.perf_counter() - t, 3)
    log.info("scheme %s on %s: %d of %d discoveries completed, %.2f s wall, %.3f s "
             "of workload time", scheme.name, engine, output.completed(), len(jobs),
             got.wall[scheme.name], output.end_time)
    got.fault_plans[scheme.name] = (plan.faults.begin(output.faults)
                                    if plan.faults is not None else None)
    if run.churn is not None:  # what each change looked like
        got.churn_rows += run.churn.measure(engine, scheme, plan.agent_order, output,
                                            stub_walks, got.churn_states)
    if run.sniffer is not None:
        got.windows.append((scheme, plan, output, window, time.time()))
    got.replay[scheme.name] = replay_summary(output, plan.dot is not None)
    recorder.drain(output)
    got.load.extend(load_records(sc, engine, scheme, plan, output, network))
    got.finished.append(scheme.name)


def _needs_frame(run: Run) -> bool:
    """Whether the run's reports read all its records at once (else: the tally)."""
    sc, ns = run.sc, run.ns
    return (run.churn is not None or sc.agents.session is not None or run.sniffer is not None
            or sc.faults is not None or bool(ns.rogue)
            or any(s.trust for s in sc.dns_schemes()) or sc.trust.policy != "open")


def _finish(run: Run, got: Collected, started: datetime
            ) -> tuple[pd.DataFrame | None, pd.DataFrame, dict, dict[str, pd.DataFrame]]:
    """Records (None: only in the spool), node load, summary and extra tables of a run
    whose schemes all finished."""
    sc, engine, ns = run.sc, run.engine, run.ns
    load_df = pd.DataFrame(got.load)
    tables: dict[str, pd.DataFrame] = {}
    if not _needs_frame(run):
        summary = {**summarise(sc, engine, got.tally if got.tally.exact else
                               got.spool.frame(), ns), "replay": got.replay}
        if got.processing:
            summary["calibrated_processing_s"] = _calibrated(got)
        summary.update(_mirror(sc, ns))
        summary[PROVENANCE] = provenance(started)  # last: all above is deterministic
        return None, load_df, summary, tables
    df = got.spool.frame()
    if run.churn is not None:  # probes are in the records, not in the scheme summary
        df = run.churn.annotate(df, got.churn_states)
        summary = {**summarise(sc, engine, run.churn.workload_rows(df), ns),
                   "replay": got.replay, "churn": run.churn.summary(got.churn_rows)}
        tables["churn.csv"] = pd.DataFrame(got.churn_rows)
    else:
        summary = {**summarise(sc, engine, df, ns), "replay": got.replay}
    if sc.agents.session is not None:
        summary["session"] = session_summary(sc, df, ns)
    if run.sniffer is not None:
        pcap = merge_pcaps(run.sniffer.stop(), [p for w in got.windows for p in w[2].pcaps])
        df, summary["capture"] = compare_capture(
            df, pcap, got.windows, run.sniffer.tool,
            {run.live_port, REGISTRY_PORT, dot_port(run.live_port)}, run.sniffer.dropped)
    if got.processing:
        summary["calibrated_processing_s"] = _calibrated(got)
    if sc.faults is not None:  # sim.build.faults: success over time, extra latency, recovery
        base = (run_scenario(sc.model_copy(update={"faults": None}), engine, write=False,
                             live_port=run.live_port).records if sc.faults.baseline else None)
        df, summary["faults"] = fault_report(sc, df, load_df, base, got.fault_plans)
    summary.update(_mirror(sc, ns))
    if ns.rogue or any(s.trust for s in sc.dns_schemes()) or sc.trust.policy != "open":
        summary["trust"] = trust_report(df, ns, {
            s.name: (s.trust or sc.trust).policy if isinstance(s, DnsScheme) else "registry"
            for s in sc.schemes})
    summary[PROVENANCE] = provenance(started)  # last: all above is deterministic
    return df, load_df, summary, tables


def _mirror(sc: Scenario, ns: Namespace) -> dict:
    """``{"mirror": …}``: what one refresh of the catalogue mirror costs, when a scheme's
    agents search one (sim.run.mirror); else nothing."""
    mirrored = [s.name for s in sc.dns_schemes() if STRATEGIES[s.kind].modes[s.mode].mirror]
    if not mirrored:
        return {}
    return {"mirror": {**mirror_refresh(ns, sc.seed, sc.network.mtu), "schemes": mirrored}}


def _calibrated(got: Collected) -> dict:
    return {name: {k: round(v, 9) for k, v in costs.items()}
            for name, costs in got.processing.items()}


def run_scenario(sc: Scenario, engine: str | None = None, out_dir: str | Path | None = None,
                 progress: Callable[[str], None] | None = None, write: bool = True,
                 live_port: int = 15353, capture: bool = False,
                 check: bool = True,
                 tick: Callable[[str, int, int], None] | None = None) -> RunResult:
    """Run every scheme of ``sc``; with ``capture`` (live engine), also record
    ``capture.pcap`` in the output directory and compare it with the accounting.
    ``tick(scheme, done, total)`` is told of every finished discovery (simpy and live
    engines, not sharded: progress bars). The summary ends with a ``provenance`` block.

    With ``write``, the output folder is checked first (``check``: writable, free space;
    :class:`analysis.files.OutputError` otherwise) and the files appear together at the end. If
    the run is interrupted (``KeyboardInterrupt``: :class:`sim.run.outputs.RunInterrupted` is
    raised) or fails after some schemes finished, those schemes are written with
    ``partial.json`` instead of ``summary.json``. Records are spooled in a hidden folder
    inside the output folder while the run lasts (without ``write``: a temporary folder,
    removed with the result). The output folder is locked for the run
    (:class:`analysis.files.OutputLock`): a second run into it is refused with an
    :class:`analysis.files.OutputError` before anything is built.
    """
    if sc.seeds > 1:  # replications are runs of their own (sim.run.sweep.run_sweep)
        raise ScenarioError(f"seeds: {sc.seeds} replications are separate runs: `tooldns run` "
                            f"runs them (sim.run.sweep.run_sweep); run_scenario runs one")
    if engine is not None and engine != sc.engine:  # the run's engine is the scenario's
        sc = sc.with_overrides({"engine": engine})
    engine = sc.engine
    started = utc_now()
    out = output_dir(sc, out_dir)
    if write and check:
        warning = check_output(sc, out_dir, capture)
        if warning:
            (progress or _warn)(f"warning: {warning}")
    written: list[str] = []  # files of the complete run moved into place
    with contextlib.ExitStack() as stack:
        if write:  # the folder is this run's before anything is built (another's: refused)
            stack.enter_context(OutputLock(out))
        if _ready_for_recursors(sc, engine, stack):  # recursors ask the servers on port 53
            live_port = 53
        run = prepare(sc, engine, out, live_port, capture)
        run.tick, run.progress = tick, progress
        if write:  # the spool beside the results (stale ones are removed like staging)
            folder = stack.enter_context(Staging(out)).dir / "records"
        else:
            folder = Path(tempfile.mkdtemp(prefix="tooldns-records-"))
            stack.callback(shutil.rmtree, folder, True)
        got = Collected(RecordSpool(folder))
        df, load_df, summary = _run(run, got, started, out, write, written)
        records: pd.DataFrame | Callable[[], pd.DataFrame]
        if df is not None:
            records = df
        elif write:  # read back from the results on first access
            records = partial(pd.read_parquet, out / "results.parquet")
        else:  # from the spool on first access; it goes with the result
            stack.pop_all()
            records = got.spool.frame
    # wall-clock figures vary run to run; they go to the console, not the result files
    result = RunResult(records, load_df, {**summary, "wall_s": got.wall},
                       out if write else None)
    if df is None and not write:
        weakref.finalize(result, got.spool.close)
    return result


def _ready_for_recursors(sc: Scenario, engine: str, stack: contextlib.ExitStack) -> bool:
    """Whether the run has stock recursors (``schemes[].resolver``) on an engine that runs
    them: then the servers listen on port 53 (where the recursors ask them), and on a
    loopback engine the rest of the run is in a network namespace of its own
    (:func:`sim.sockets.netns.private_network`)."""
    stock = [s.name for s in sc.dns_schemes() if s.resolver != "project"]
    info = engine_info(engine)
    if not stock or not info.can("stock"):
        return False  # refused by check_engine
    if not info.loopback:
        return True  # Mininet: every host has a namespace of its own already
    from sim.sockets.netns import NamespaceError, private_network

    try:
        stack.enter_context(private_network())
    except NamespaceError as exc:
        raise ScenarioError(f"schemes.{stock[0]}.resolver: the recursor runs in a network "
                            f"namespace of the run's own: {exc}") from None
    return True


def _run(run: Run, got: Collected, started: datetime, out: Path, write: bool,
         written: list[str]) -> tuple[pd.DataFrame | None, pd.DataFrame, dict]:
    """Every scheme, the reports and (``write``) the output folder; on a stop or failure,
    the finished schemes are kept (:func:`sim.run.outputs.keep_finished`)."""
    sc = run.sc
    # what was built lives to the end of the run: keep it out of the collector's full
    # passes (they would walk every tool's objects again and again); thawed below
    gc.collect()
    gc.freeze()
    try:
        for scheme in sc.schemes:
            run_scheme(run, scheme, got)
        gc.unfreeze()
        df, load_df, summary, tables = _finish(run, got, started)
        if write:
            write_outputs(out, sc, got.spool if df is None else df, load_df, summary,
                          plots=sc.outputs.plots, committed=written, tables=tables)
    except BaseException as exc:
        gc.unfreeze()
        if run.sniffer is not None:  # never leave a tcpdump running behind a stopped run
            with contextlib.suppress(Exception):
                run.sniffer.stop()
        keep_finished(exc, write, out, sc, run.engine, run.ns, got.spool, got.load,
                      got.replay, got.finished, written)
        raise
    return df, load_df, summary


def _tick(tick: Callable[[str, int, int], None], scheme: str, total: int, done: int) -> None:
    tick(scheme, done, total)


def _warn(message: str) -> None:
    print(message, file=sys.stderr)
