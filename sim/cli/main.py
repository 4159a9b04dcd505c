"""The ``tooldns`` command: serve a hierarchy, query it, run and sweep scenarios, evaluate
retrieval, validate files and print their schema.

Subcommands are small functions registered in :data:`COMMANDS`; each builds what it needs
from the lower layers (imported inside the function, so ``--help`` stays fast) and prints
with rich: results on stdout, progress, warnings and errors on stderr (``-q`` hides
progress, ``-v`` adds log lines). Exit status: 0 done, 1 failed (or nothing found), 2 bad
usage or a bad file, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from sim.scenario import Scenario

SHARED_CATALOG = Path(__file__).resolve().parents[2] / "shared" / "data" / "tools"
DEFAULT_OPTION_CODE = 65432  # nodes.dns.wire.DEFAULT_OPTION_CODE (tests check they agree)
DEFAULT_CACHE_BYTES = 512 * 2**20  # nodes.dns.cache.DEFAULT_MAX_BYTES (likewise)
SCORERS = ("bm25", "tfidf", "oracle", "dense")


class _Consoles:
    """rich consoles made on first use: ``out`` (results) and ``err`` (progress, warnings,
    errors); ``quiet`` hides progress."""

    quiet = False
    _out: Console | None = None
    _err: Console | None = None

    @property
    def out(self) -> Console:
        if self._out is None:
            from rich.console import Console
            self._out = Console() if sys.stdout.isatty() else Console(width=160)
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            from rich.console import Console
            self._err = Console(stderr=True) if sys.stderr.isatty() else Console(
                stderr=True, width=160)
        return self._err


consoles = _Consoles()


def _progress(message: str) -> None:
    if not consoles.quiet:
        consoles.err.print(message, style="dim", markup=False, highlight=False)


def _say(message: str) -> None:
    """A plain line of results on stdout (no markup, never wrapped)."""
    consoles.out.print(message, markup=False, highlight=False, soft_wrap=True)


def _warn(message: str) -> None:
    consoles.err.print(f"warning: {message}", style="yellow", markup=False, highlight=False,
                       soft_wrap=True)


def _stderr(message: str) -> None:
    """One line to stderr (no wrapping, no markup): errors and interruptions."""
    print(" ".join(message.split()), file=sys.stderr, flush=True)


def _error(command: str, message: str) -> None:
    """One problem per line on stderr, each prefixed like argparse does."""
    for line in str(message).splitlines() or [""]:
        _stderr(f"tooldns {command}: error: {line}")


def _namespace(args: argparse.Namespace) -> Any:
    from topologies.namespace import from_catalog, synthetic

    if args.catalog:
        queries = args.queries or (Path(args.catalog).parent / "queries.jsonl")
        return from_catalog(args.catalog, queries if Path(queries).exists() else None,
                            limit=args.limit)
    return synthetic(n_tools=args.tools, branching=args.branching, depth=args.depth,
                     seed=args.seed, n_orgs=args.orgs)


def _add_namespace_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("namespace (synthetic unless --catalog is given)")
    g.add_argument("--catalog", help="catalogue JSONL (format of shared/data/tools/catalog.jsonl)")
    g.add_argument("--queries", help="queries JSONL with tool_ids (default: beside the catalogue)")
    g.add_argument("--limit", type=int, help="load at most this many catalogue rows")
    g.add_argument("--tools", type=int, default=2000, help="synthetic: number of tools")
    g.add_argument("--branching", type=int, default=6, help="synthetic: branching factor")
    g.add_argument("--depth", type=int, default=2, help="synthetic: depth below tools.")
    g.add_argument("--orgs", type=int, default=3, help="synthetic: certified organisations")
    g.add_argument("--seed", type=int, default=0, help="synthetic tree and IDs")
    p.add_argument("--replicas", type=int, default=1, help="NS replicas per zone")
    p.add_argument("--scorer", default="bm25", choices=SCORERS,
                   help="how servers rank children and tools")


# ------------------------------------------------------------------------ serve


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from rich.table import Table

    from sim.build.hierarchy import build_hierarchy
    from sim.sockets.endpoints import LiveHierarchy, TcpLimits

    ns = _namespace(args)
    hierarchy = build_hierarchy(ns, replicas=args.replicas, scorer=args.scorer,
                                option_code=args.option_code,
                                packet_cache_bytes=args.packet_cache_bytes, aaaa=args.aaaa)
    live = LiveHierarchy(hierarchy, port=args.port, resolver_address=args.resolver,
                         cache_max_bytes=args.cache_max_bytes, max_clients=args.max_clients,
                         tcp_limits=TcpLimits(per_listener=args.tcp_clients),
                         allow_transfer=args.allow_transfer)
    console = consoles.out

    async def main() -> None:
        try:
            await live.start()
        except OSError:
            live.close()
            raise
        table = Table(title=f"ToolDNS hierarchy on port {args.port}: {ns.origin}")
        for col in ("role", "zone", "address", "org"):
            table.add_column(col)
        shown = live.manifest()["servers"]
        for m in shown[: args.show]:
            table.add_row(m["role"], m["zone"], m["address"], m["org"] or "")
        console.print(table)
        if len(shown) > args.show:
            console.print(f"… and {len(shown) - args.show} more servers (see --manifest)")
        console.print(f"resolver {args.resolver}:{args.port} (stub clients: UDP and TCP)")
        if args.manifest:
            live.write_manifest(args.manifest)
            console.print(f"manifest written to {args.manifest}")
        console.print("[bold]ready[/bold]", highlight=False)
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.duration:
            loop.call_later(args.duration, stop.set)
        await stop.wait()
        live.close()
        await asyncio.sleep(0.1)  # aborted connections' handlers end before the loop does

    try:
        asyncio.run(main())
    except OSError as exc:  # a busy or foreign address: say which, no traceback
        _error("serve", f"{exc.strerror or exc}; is another `tooldns serve` running? "
                        f"(--port, --resolver; addresses other than 127.0.0.1 need Linux's "
                        f"127.0.0.0/8 loopback)")
        return 1
    return 0


# ------------------------------------------------------------------------ query


def _load_manifest(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(
            f"tooldns query: error: {path}: no such manifest (start `tooldns serve "
            f"--manifest {path}`)") from None


def cmd_query(args: argparse.Namespace) -> int:
    import asyncio
    import random

    from nodes.resolver.core import Discovery, DiscoveryResult, RecursiveResolver, ResolverConfig
    from sim.sockets.endpoints import ResolverEndpoint

    manifest = _load_manifest(args.manifest)
    port = manifest["port"]
    code = manifest.get("option_code", DEFAULT_OPTION_CODE)
    if args.via_resolver:
        return _query_via_resolver(args, manifest["resolver"]["address"], port, code)
    zone_of = {m["address"]: m["zone"] for m in manifest["servers"]}
    config = ResolverConfig(dns_port=port, option_code=code, beam=args.beam,
                            search=args.search, merge=args.merge, mode=args.mode)
    resolver = RecursiveResolver(manifest["root_hints"], random.Random(args.seed), config)
    request = Discovery(args.intent, service=args.service, k=args.k, start=args.start,
                        beam=args.beam)

    async def main() -> DiscoveryResult:
        endpoint = ResolverEndpoint(resolver)
        await endpoint.start()
        try:
            return await endpoint.discover(request)
        finally:
            endpoint.close()

    result = asyncio.run(main())
    print_walk(result, zone_of)
    return 0 if result.endpoints else 1


def print_walk(result: Any, zone_of: dict[str, str] | None = None) -> None:
    """The steps of one discovery (nodes.resolver.core.DiscoveryResult) and what it found."""
    from rich.table import Table

    console = consoles.out
    zone_of = zone_of or {}
    table = Table(title=f"walk for {result.request.intent!r} ({result.rounds} rounds, "
                        f"{result.latency * 1000:.2f} ms)")
    for col in ("#", "name", "type", "server", "zone", "via", "rtt ms", "bytes out", "bytes in",
                "outcome"):
        table.add_column(col)
    for i, s in enumerate(result.steps, 1):
        rtt = f"{s.rtt * 1000:.2f}" if s.rtt is not None else "-"
        table.add_row(str(i), s.qname, s.qtype, f"{s.server[0]}:{s.server[1]}",
                      zone_of.get(s.server[0], ""), s.transport, rtt, str(s.bytes_out),
                      str(s.bytes_in), s.outcome)
    console.print(table)
    if result.endpoints:
        found = Table(title="endpoints")
        for col in ("target", "address", "port", "leaf zone"):
            found.add_column(col)
        for e in result.endpoints:
            found.add_row(e.target, e.address or "", str(e.port), e.zone)
        console.print(found)
    else:
        console.print(f"[red]no endpoints[/red] ({result.rcode}; {result.error})")


def _query_via_resolver(args: argparse.Namespace, address: str, port: int, code: int) -> int:
    """A plain stub query with the intent option (or, ``--mode qname``, in the name), as any
    DNS client would send it."""
    import random
    import socket

    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    from nodes.dns.wire import Intent, cursor_name, intent_qname, opt_record

    query = DNSRecord(DNSHeader(id=random.Random(args.seed).randrange(1, 65536), rd=1))
    if args.mode == "qname":
        query.add_question(DNSQuestion(intent_qname(args.intent, args.k, args.service,
                                                    args.start), QTYPE.SRV))
        query.add_ar(opt_record(None, code))
    else:
        query.add_question(DNSQuestion(cursor_name(args.service, args.start), QTYPE.SRV))
        query.add_ar(opt_record(Intent(args.intent, k=args.k), code))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(args.timeout)
        sock.sendto(query.pack(), (address, port))
        try:
            data, _ = sock.recvfrom(65535)
        except TimeoutError:
            _error("query", f"no answer from {address}:{port} within {args.timeout:g} s")
            return 1
    reply = DNSRecord.parse(data)
    consoles.out.print(str(reply), markup=False, highlight=False)
    return 0 if reply.rr else 1


# ------------------------------------------------------------------------ run


class _Stopped:
    """The exit status of an interrupted command: 130 (SIGINT) or 143 (SIGTERM)."""

    code = 128 + signal.SIGINT


@contextlib.contextmanager
def _interruptible() -> Iterator[_Stopped]:
    """SIGTERM stops a command the way Ctrl-C does (``KeyboardInterrupt``, via the SIGINT
    handler, so asyncio's own handling applies), remembering which signal it was."""
    stopped = _Stopped()

    def on_term(signum: int, _frame: object) -> None:
        stopped.code = 128 + signum
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            raise KeyboardInterrupt
        signal.raise_signal(signal.SIGINT)

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (tests calling main() from a thread)
        yield stopped
        return
    try:
        yield stopped
    finally:
        signal.signal(signal.SIGTERM, previous)


def _scenario(args: argparse.Namespace) -> Scenario:
    """The scenario file with ``--seed`` and ``--set`` applied and validated again; its
    warnings (suspicious units) printed. Raises ScenarioError naming file and field."""
    import yaml

    from sim.scenario import ScenarioError, load_scenario, sanity_warnings

    scenario = load_scenario(args.file)
    overrides: dict[str, Any] = {}
    for item in args.set or ():
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set {item}: expected FIELD=VALUE, e.g. "
                                f"--set namespace.tools=5000 or --set schemes.tooldns.k=1")
        try:
            overrides[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ScenarioError(f"--set {item}: the value is not valid YAML") from None
    if args.seed is not None:
        overrides["seed"] = args.seed
    if overrides:
        scenario = _overridden(scenario, overrides, args.file)
    for warning in sanity_warnings(scenario):
        _warn(f"{args.file}: {warning}")
    return scenario


def _overridden(scenario: Scenario, overrides: dict[str, Any], file: str) -> Scenario:
    from pydantic import ValidationError

    from sim.scenario import ScenarioError, format_errors

    for key, value in overrides.items():  # one at a time: errors name the --set given
        try:
            scenario = scenario.with_overrides({key: value})
        except ValidationError as exc:
            raise ScenarioError(format_errors(f"{file} (--set {key}={value})", exc)
                                ) from None
        except ValueError as exc:
            raise ScenarioError(f"{file}: --set {key}: {exc}") from None
    return scenario


@contextlib.contextmanager
def _query_progress() -> Iterator[Callable[[str, int, int], None] | None]:
    """Per-query progress bars with ETA on a terminal (one per scheme), else nothing."""
    if consoles.quiet or not consoles.err.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    console=consoles.err, transient=True)
    tasks: dict[str, Any] = {}

    def tick(label: str, done: int, total: int) -> None:
        if label not in tasks:
            tasks[label] = bars.add_task(label, total=total)
        bars.update(tasks[label], completed=done)

    with bars:
        yield tick


def cmd_run(args: argparse.Namespace) -> int:
    from analysis.files import OutputError, check_output
    from sim.scenario import ScenarioError, resolved_yaml

    with _interruptible() as stopped:
        try:
            scenario = _scenario(args)
            if args.show_config:
                sys.stdout.write(resolved_yaml(scenario))
                return 0
            # the output folder is tried before anything is imported, built or started
            if warning := check_output(scenario, args.out, args.capture):
                _warn(warning)
            scenario = _with_shards(scenario, args)
            from analysis.report import print_capture, print_summary
            from sim.engines.shards import start as start_shards
            from sim.run.runner import run_scenario

            start_shards(scenario)  # the workers build the run while this process builds
            with _query_progress() as tick:
                result = run_scenario(scenario, engine=args.engine, out_dir=args.out,
                                      progress=_progress, capture=args.capture, check=False,
                                      tick=tick)
        except ScenarioError as exc:
            _error("run", str(exc))
            return 2
        except OutputError as exc:
            _error("run", str(exc))
            return 1
        except KeyboardInterrupt as exc:  # sim.run.runner.RunInterrupted says what was kept
            _stderr(f"tooldns run: {exc}" if hasattr(exc, "finished") else
                    "tooldns run: interrupted; no results written")
            return stopped.code
    console = consoles.out
    print_summary(result.summary, console, result.records)
    if (workers := scenario.engine_options.shards.workers) > 1 or args.shards:
        if workers > 1:
            console.print(f"sharded over {workers} Ray workers (sim.engines.shards): walks as in one "
                          f"process; link-delay draws, server queueing and packet caches per "
                          f"shard", style="dim")
        console.print("engine wall time: " + ", ".join(
            f"{name} {s:.1f} s" for name, s in result.summary["wall_s"].items()), style="dim")
    if result.summary["engine"] == "live":
        console.print("live engine: link delay and loss emulated in user space by the socket "
                      "adapters (no netem qdisc on this machine)", style="dim")
        for scheme, replay in result.summary["replay"].items():
            err = replay["schedule_error_ms"]
            if err:
                console.print(f"  {scheme}: replay timing error vs schedule: median "
                              f"{err['median']:.3f} ms, p99 {err['p99']:.3f} ms, max "
                              f"{err['max']:.3f} ms", style="dim")
    if "capture" in result.summary:
        print_capture(result.summary["capture"], console)
    expected_to_fail = {s.name for s in scenario.schemes if s.mode == "strip"}  # by design
    for name, s in result.summary["schemes"].items():
        if s.get("queries") and not s.get("success") and name not in expected_to_fail:
            _warn(f"scheme {name}: no query succeeded (timeouts, delays and loss are worth "
                  f"a look: tooldns validate {args.file})")
    files = sorted(p.name for p in Path(result.out_dir).iterdir() if not p.name.startswith("."))
    _say(f"results written to {result.out_dir}/ ({', '.join(files)})")
    return 0


def _with_shards(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``--shards``/``--ray-address`` over the file's ``engine_options.shards``; a sharded
    run on another engine than simpy is refused here, before anything is built."""
    from sim.engines.shards import check_shardable
    from sim.scenario import ScenarioError

    shards = scenario.engine_options.shards
    update = {"workers": args.shards or shards.workers,
              "address": args.ray_address or shards.address}
    scenario = scenario.model_copy(update={"engine_options": scenario.engine_options.model_copy(
        update={"shards": shards.model_copy(update=update)})})
    if update["workers"] > 1:
        try:
            check_shardable(scenario, args.engine or scenario.engine, scenario.network.resolvers)
        except ScenarioError as exc:
            raise ScenarioError(f"{args.file}: {exc}") from None
    return scenario


def cmd_sweep(args: argparse.Namespace) -> int:
    from analysis.files import OutputError
    from sim.run.sweep import run_sweep, sweep_points
    from sim.scenario import ScenarioError

    out = None
    with _interruptible() as stopped:
        try:
            scenario = _scenario(args)
            if scenario.sweep is None:
                raise ScenarioError(f"{args.file}: sweep: the scenario has no sweep section "
                                    f"(sweep: {{grid: {{<dotted field>: [values]}}}})")
            try:
                sweep_points(scenario)  # every point valid before anything runs
            except ScenarioError as exc:
                raise ScenarioError(f"{args.file}: {exc}") from None
            out = args.out or scenario.outputs.dir or Path("results") / scenario.name
            result = run_sweep(scenario, out, args.workers, console=consoles.out,
                               use_ray=args.ray or args.ray_address is not None,
                               ray_address=args.ray_address)
        except ScenarioError as exc:
            _error("sweep", str(exc))
            return 2
        except OutputError as exc:
            _error("sweep", str(exc))
            return 1
        except KeyboardInterrupt:
            if out is None:
                _stderr("tooldns sweep: interrupted; nothing written")
            else:
                _stderr(f"tooldns sweep: interrupted; finished points are kept in {out}/points/"
                        f", run the same command again to resume")
            return stopped.code
    _say(f"{len(result.ran)} points run, {len(result.skipped)} already done; "
         f"{result.out_dir}/sweep.csv, sweep.parquet, sweep.json, sweep_<axis>.png, "
         f"points/<id>/")
    if result.failed:
        _error("sweep", f"{len(result.failed)} points failed: {', '.join(result.failed)}")
        return 1
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_eval(args: argparse.Namespace) -> int:
    from rich.table import Table

    from sim.evalspec import DEFAULT_METHODS, EvalScenario, load_eval
    from sim.retrieval.evaluator import run_eval

    try:
        if args.file:
            spec = load_eval(args.file)
        elif args.catalog:
            spec = EvalScenario.model_validate({
                "name": Path(args.out).name if args.out else "eval", "seed": args.seed,
                "dataset": {"source": "catalog", "catalog": args.catalog,
                            "queries": args.queries, "sample": args.sample,
                            "test_fraction": args.test_fraction},
                "taxonomy": {"kind": args.taxonomy, "branching": args.branching,
                             "depth": args.depth, "leaf_size": args.leaf_size,
                             "representatives": args.representatives,
                             "vectors": args.vectors, "centroids": args.centroids},
                "methods": args.methods.split(",") if args.methods else DEFAULT_METHODS,
                "k": args.k, "llm": {"url": args.llm_url, "model": args.llm_model},
                "cache_dir": args.cache_dir})
        else:
            _error("eval", "give an eval FILE or --catalog CATALOG.jsonl")
            return 2
        with _query_progress() as tick:
            result = run_eval(spec, Path(args.out) if args.out else None,
                              progress=lambda m: _progress(f"method {m}"), tick=tick)
    except ValueError as exc:
        _error("eval", str(exc))
        return 2
    table = Table(title=f"retrieval: {spec.name} (K = {spec.k})")
    for col in ("method", "queries", "hit@1 cat", "hit@K cat", "hit@1 tool", "recall@K", "MRR",
                "C(q)", "% pool", "% all", "tokens", "ms"):
        table.add_column(col)
    for _, r in result["summary"].iterrows():
        table.add_row(r["method"], str(int(r["queries"])), *(
            "—" if v != v else f"{100 * v:.1f}" for v in (r.hit1_cat, r.hitk_cat, r.hit1_tool,
                                                           r.recall_k)),
            "—" if r.rr != r.rr else f"{r.rr:.3f}", f"{r.examined:.0f}",
            f"{100 * r.examined_frac:.2f}", f"{100 * r.examined_frac_all:.2f}",
            f"{r.tokens:.0f}", f"{r.time_ms:.2f}")
    consoles.out.print(table)
    _say(f"results in {result['out']}")
    return 0


# ------------------------------------------------------------------------ validate, schema


def _is_eval_file(data: object) -> bool:
    return isinstance(data, dict) and "schemes" not in data and bool(
        {"dataset", "methods", "taxonomy"} & set(data))


def cmd_validate(args: argparse.Namespace) -> int:
    """Check files as a run would, without running: errors (exit 2) and warnings."""
    import yaml

    from sim.evalspec import load_eval
    from sim.run.sweep import sweep_points
    from sim.scenario import ScenarioError, load_scenario, sanity_warnings

    status = 0
    for file in args.files:
        try:
            try:
                data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError):
                data = None  # load_scenario says what is wrong
            if _is_eval_file(data):
                spec = load_eval(file)
                _say(f"{file}: ok (evaluation {spec.name}: {len(spec.methods)} methods, "
                     f"dataset {spec.dataset.source})")
                continue
            sc = load_scenario(file)
            points = ""
            if sc.sweep is not None:
                try:
                    points = f", sweep of {len(sweep_points(sc))} points"
                except ScenarioError as exc:
                    raise ScenarioError(f"{file}: {exc}") from None
            schemes = ", ".join(s.name for s in sc.schemes)
            _say(f"{file}: ok (scenario {sc.name}, engine {sc.engine}, seed {sc.seed}, "
                 f"schemes {schemes}{points})")
            for warning in sanity_warnings(sc):
                _warn(f"{file}: {warning}")
                if args.strict:
                    status = max(status, 1)
        except (ScenarioError, ValueError) as exc:
            _error("validate", str(exc))
            status = 2
    return status


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.report import run

    return run(args)


def cmd_export_zones(args: argparse.Namespace) -> int:
    from sim.interop.export import run

    return run(args)


def cmd_recursors(args: argparse.Namespace) -> int:
    from sim.interop.recursors import run

    return run(args)


def cmd_schema(args: argparse.Namespace) -> int:
    from sim.schema import json_schema, markdown_reference

    kind = "eval" if args.eval else "scenario"
    text = markdown_reference(kind) if args.markdown else json.dumps(json_schema(kind),
                                                                      indent=2)
    sys.stdout.write(text + "\n")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": cmd_serve,
    "query": cmd_query,
    "run": cmd_run,
    "sweep": cmd_sweep,
    "eval": cmd_eval,
    "validate": cmd_validate,
    "schema": cmd_schema,
    "export-zones": cmd_export_zones,
    "report": cmd_report,
    "recursors": cmd_recursors,
}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option's default shown when it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("%(default)" not in text and action.default not in (None, False, [])
                and action.default is not argparse.SUPPRESS and action.option_strings
                and action.nargs != 0):
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    from analysis.report import DESCRIPTION as report_description
    from analysis.report import add_arguments as add_report_arguments
    from sim.interop import export, recursors  # light (like analysis.report): work imports later
    from sim.provenance import version

    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    # SUPPRESS: given before or after the command, a flag is not reset by the other parser
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress lines or bars (results and errors only)")
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log what happens (-vv: debug)")
    parser = argparse.ArgumentParser(
        prog="tooldns", allow_abbrev=False, parents=[common],
        description="A testbed for DNS-based AI tool discovery (ToolDNS) and its HTTP-registry "
                    "baselines.\nResults go to stdout; progress, warnings and errors to stderr. "
                    "Exit status: 0 done, 1 failed\n(or nothing found), 2 bad usage or a bad "
                    "file, 130/143 interrupted.",
        formatter_class=_HelpFormatter,
        epilog="tooldns COMMAND --help describes each command; docs/scenario-reference.md "
               "every scenario field.")
    parser.add_argument("--version", action="version", version=f"tooldns {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str | None = None
                ) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description or help,
                              parents=[common], allow_abbrev=False,
                              formatter_class=_HelpFormatter)

    p = command("serve", "start a whole hierarchy and a resolver on 127.0.0.0/8",
                "Start every authoritative server of a namespace and a recursive resolver on "
                "loopback addresses (real UDP and TCP sockets), until Ctrl-C or --duration.\n"
                "Ask it with `tooldns query`, dig or any stub resolver.")
    _add_namespace_args(p)
    p.add_argument("--port", type=int, default=15353, help="DNS port of every server")
    p.add_argument("--resolver", default="127.0.53.1", help="resolver listening address")
    p.add_argument("--option-code", type=int, default=DEFAULT_OPTION_CODE,
                   help="EDNS0 option code carrying the intent")
    p.add_argument("--manifest", help="write role/zone/address/port of every server as JSON")
    p.add_argument("--show", type=int, default=25, help="servers to list on start")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--cache-max-bytes", type=int, default=DEFAULT_CACHE_BYTES,
                   help="bound on the resolver's cache, bytes (estimated; LRU eviction)")
    p.add_argument("--max-clients", type=int, default=10_000,
                   help="stub queries the resolver works on at once (more are dropped)")
    p.add_argument("--packet-cache-bytes", type=int, default=16 * 2**20,
                   help="bound on each server's packet cache, bytes")
    p.add_argument("--tcp-clients", type=int, default=256,
                   help="TCP connections each server and the resolver keep (the idle "
                   "longest is closed to admit a new one)")
    p.add_argument("--allow-transfer", action="append", type=export.transfer_network,
                   metavar="CIDR", help="networks allowed to transfer zones by AXFR "
                   "(repeatable; replaces the default: loopback and the hierarchy's own "
                   "servers)")
    p.add_argument("--aaaa", action="store_true",
                   help="tool targets also get AAAA records (fd74:6f6f:6c73::<IPv4>, a ULA) "
                   "beside A; glue stays IPv4")

    p = command("export-zones", export.HELP, export.DESCRIPTION)
    export.add_arguments(p)

    p = command("recursors", recursors.HELP, recursors.DESCRIPTION)
    recursors.add_arguments(p)

    p = command("query", "discover tools through a served hierarchy",
                "Walk a hierarchy started by `tooldns serve` for one intent and print every "
                "step (like dig +trace), or send one stub query to its resolver.")
    p.add_argument("intent", help="what the agent wants, in words")
    p.add_argument("--service", default="mcp", choices=["mcp", "a2a", "rest", "skill"])
    p.add_argument("-k", type=int, default=3, help="top-K per pruning step (0 = all)")
    p.add_argument("--beam", type=int, default=1, help="branches explored per level")
    p.add_argument("--search", choices=["split", "global"], default="split",
                   help="global: keep the best B children of each level by the servers' "
                   "scores (scores option)")
    p.add_argument("--merge", choices=["round-robin", "score"], default="round-robin",
                   help="order the leaves' tools round-robin or by the servers' scores")
    p.add_argument("--start", default="tools.", help="zone to start at (trust: an org zone)")
    p.add_argument("--manifest", default="tooldns-manifest.json",
                   help="written by `tooldns serve --manifest`")
    p.add_argument("--via-resolver", action="store_true",
                   help="send one stub query to the served resolver instead of walking here")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds (--via-resolver)")
    p.add_argument("--seed", type=int, default=0, help="query IDs of the walk")
    p.add_argument("--mode", choices=["aware", "qname"], default="aware",
                   help="aware: cursor names with the intent option; qname: the intent in "
                   "the query name (k3.<words>._mcp._tcp.tools.), CNAMEs followed, as a "
                   "stock resolver does it")

    def scenario_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seed", type=int, help="override the file's seed")
        p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                       help="override a field (repeatable; dotted, YAML value), e.g. "
                       "--set namespace.tools=5000 --set schemes.tooldns.k=1 "
                       "--set network.link.delay.mean=0.02")

    p = command("run", "run a scenario file and compare its schemes",
                "Run every scheme of a scenario on one engine, print a comparison table and "
                "write results (results.parquet/csv, nodes.csv, summary.json, scenario.yaml, "
                "figures).")
    p.add_argument("file", help="scenario YAML (see scenarios/, docs/scenario-reference.md)")
    p.add_argument("--engine", choices=["simpy", "live", "ray", "mininet"],
                   help="override the file's engine")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    scenario_args(p)
    p.add_argument("--show-config", action="store_true",
                   help="print the fully defaulted scenario (after --seed/--set) and exit")
    p.add_argument("--capture", action="store_true",
                   help="live engine: record loopback traffic to capture.pcap (tcpdump, or "
                        "scapy) and check the byte/packet accounting against it (needs root)")
    p.add_argument("--shards", type=_positive_int, metavar="N",
                   help="simpy: split the run over N Ray workers (engine_options.shards)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="--shards: the Ray cluster to run them on (default: a local Ray)")

    p = command("sweep", "run a scenario's sweep grid, one run per point "
                         "(resumes: finished points are skipped)")
    p.add_argument("file", help="scenario YAML with a sweep: section")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    scenario_args(p)
    p.add_argument("--workers", type=_positive_int,
                   help="worker processes (default: the file's sweep.workers)")
    p.add_argument("--ray", action="store_true",
                   help="run the points as Ray tasks (a local Ray instance with --workers CPUs)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="run the points as Ray tasks on this Ray cluster (implies --ray)")

    p = command("eval", "compare discovery methods on retrieval quality "
                "(a scenarios/eval/*.yaml file, or --catalog/--queries)")
    p.add_argument("file", nargs="?", help="evaluation file (docs/eval-reference.md)")
    p.add_argument("--catalog", help="catalogue JSONL (format of shared/data/tools)")
    p.add_argument("--queries", help="queries JSONL (default: beside the catalogue)")
    p.add_argument("--methods", help="comma-separated: flat:S, context, "
                   "tooldns:S[:B[:score|global]], a2x:S:get_one|get_important|get_all, "
                   "grail[:no-maxsim|no-tags|no-pseudo|no-synonyms|intersect|alpha=X|"
                   "pseudo=N…], grail-intersect (S: bm25 tfidf dense maxsim llm); "
                   "GRAIL's pseudo-documents need --test-fraction (docs/grail.md)")
    p.add_argument("--out", help="output directory (default results/<name>)")
    p.add_argument("-k", "--k", type=int, default=10, help="K of hit@K and recall@K")
    p.add_argument("--sample", type=int, help="evaluate a seeded sample of this many queries")
    p.add_argument("--test-fraction", type=float, help="stratified test split, e.g. 0.4")
    p.add_argument("--taxonomy", choices=["categories", "cluster"], default="categories")
    p.add_argument("--branching", type=int, default=16, help="cluster: branching factor")
    p.add_argument("--depth", type=int, default=2, help="cluster: depth")
    p.add_argument("--leaf-size", type=int, default=40, help="cluster: A2X leaf cap")
    p.add_argument("--representatives", type=int, default=0,
                   help="route by each zone's N representative tools (MaxSim) instead of "
                   "its summary; each one scored counts as an item examined")
    p.add_argument("--vectors", choices=["tfidf", "dense"], default="tfidf",
                   help="cluster: the vectors the tree is clustered with")
    p.add_argument("--centroids", action="store_true",
                   help="route by each child's mean tool embedding for the query's service "
                   "(dense scorer; the servers do the same with Delegation.centroids)")
    p.add_argument("--seed", type=int, default=0, help="sampling, split and clustering")
    p.add_argument("--llm-url", help="OpenAI-compatible endpoint for the llm scorer/context")
    p.add_argument("--llm-model", default="default")
    p.add_argument("--cache-dir", help="keep sentence embeddings on disk here")

    p = command("report", "write report.html and report.md of a run, sweep or evaluation "
                "folder", report_description)
    add_report_arguments(p)

    p = command("validate", "check scenario or evaluation files without running them",
                "Load each file as `tooldns run` (or `eval`) would: every problem with file, "
                "field and a suggestion, then warnings about suspicious values (units).\n"
                "Exit 0 valid, 2 invalid (1 with --strict and warnings).")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--strict", action="store_true", help="warnings make the exit status 1")

    p = command("schema", "print the JSON Schema (or a Markdown reference) of scenario files",
                "JSON Schema for editors and tools (e.g. yaml-language-server), or with "
                "--markdown the field reference in docs/.")
    p.add_argument("--markdown", action="store_true", help="the Markdown field reference")
    p.add_argument("--eval", action="store_true", help="evaluation files instead of scenarios")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    consoles.quiet = getattr(args, "quiet", False)
    if verbose := getattr(args, "verbose", 0):
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s",
                            stream=sys.stderr)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:  # commands that keep nothing: no traceback either
        _stderr(f"tooldns {args.command}: interrupted")
        return 128 + signal.SIGINT
    except BrokenPipeError:  # `tooldns schema | head`
        sys.stderr.close()
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
