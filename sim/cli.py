"""The ``tooldns`` command: serve a live hierarchy, query it, run the quickstart comparison.

Subcommands are small functions registered in :data:`COMMANDS`; each builds what it
needs from the lower layers and prints with rich.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nodes.cache import DEFAULT_MAX_BYTES
from nodes.resolver import Discovery, DiscoveryResult, RecursiveResolver, ResolverConfig
from nodes.wire import DEFAULT_OPTION_CODE, Intent, cursor_name, opt_record
from topologies.namespace import Namespace, from_catalog, synthetic

if TYPE_CHECKING:
    from sim.scenario import Scenario

console = Console() if sys.stdout.isatty() else Console(width=160)

SHARED_CATALOG = Path(__file__).resolve().parents[2] / "shared" / "data" / "tools"


def _namespace(args: argparse.Namespace) -> Namespace:
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
    g.add_argument("--seed", type=int, default=0)
    p.add_argument("--replicas", type=int, default=1, help="NS replicas per zone")
    p.add_argument("--scorer", default="bm25", help="bm25 | tfidf | oracle")


# ------------------------------------------------------------------------ serve


def cmd_serve(args: argparse.Namespace) -> int:
    from sim.hierarchy import build_hierarchy
    from sim.live import LiveHierarchy, TcpLimits

    ns = _namespace(args)
    hierarchy = build_hierarchy(ns, replicas=args.replicas, scorer=args.scorer,
                                option_code=args.option_code,
                                packet_cache_bytes=args.packet_cache_bytes)
    live = LiveHierarchy(hierarchy, port=args.port, resolver_address=args.resolver,
                         cache_max_bytes=args.cache_max_bytes, max_clients=args.max_clients,
                         tcp_limits=TcpLimits(per_listener=args.tcp_clients))

    async def main() -> None:
        await live.start()
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

    asyncio.run(main())
    return 0


# ------------------------------------------------------------------------ query


def _load_manifest(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(
            f"{path}: no such manifest (start `tooldns serve --manifest {path}`)") from None


def cmd_query(args: argparse.Namespace) -> int:
    manifest = _load_manifest(args.manifest)
    port = manifest["port"]
    code = manifest.get("option_code", DEFAULT_OPTION_CODE)
    if args.via_resolver:
        return _query_via_resolver(args, manifest["resolver"]["address"], port, code)
    from sim.live import ResolverEndpoint

    zone_of = {m["address"]: m["zone"] for m in manifest["servers"]}
    config = ResolverConfig(dns_port=port, option_code=code, beam=args.beam,
                            search=args.search, merge=args.merge)
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


def print_walk(result: DiscoveryResult, zone_of: dict[str, str] | None = None) -> None:
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
    """A plain stub query with the intent option, as any DNS client would send it."""
    query = DNSRecord(DNSHeader(id=random.Random(args.seed).randrange(1, 65536), rd=1))
    query.add_question(DNSQuestion(cursor_name(args.service, args.start), QTYPE.SRV))
    query.add_ar(opt_record(Intent(args.intent, k=args.k), code))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(args.timeout)
        sock.sendto(query.pack(), (address, port))
        data, _ = sock.recvfrom(65535)
    reply = DNSRecord.parse(data)
    console.print(str(reply))
    return 0 if reply.rr else 1


# ------------------------------------------------------------------------ run


def _stderr(message: str) -> None:
    """One line to stderr (no wrapping, no markup): errors and interruptions."""
    print(" ".join(message.split()), file=sys.stderr, flush=True)


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


def cmd_run(args: argparse.Namespace) -> int:
    from sim.atomic import OutputError, check_output
    from sim.scenario import ScenarioError, load_scenario

    with _interruptible() as stopped:
        try:
            scenario = load_scenario(args.file)
            # the output folder is tried before anything is imported, built or started
            if warning := check_output(scenario, args.out, args.capture):
                _stderr(warning)
            scenario = _with_shards(scenario, args)
            from analysis.report import print_capture, print_summary
            from sim.runner import run_scenario
            from sim.shards import start as start_shards

            start_shards(scenario)  # the workers build the run while this process builds
            result = run_scenario(scenario, engine=args.engine, out_dir=args.out,
                                  progress=lambda m: console.print(m, style="dim"),
                                  capture=args.capture, check=False)
        except ScenarioError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            return 2
        except OutputError as exc:
            _stderr(f"tooldns run: error: {exc}")
            return 1
        except KeyboardInterrupt as exc:  # sim.runner.RunInterrupted says what was kept
            _stderr(f"tooldns run: {exc}" if hasattr(exc, "finished") else
                    "tooldns run: interrupted; no results written")
            return stopped.code
    print_summary(result.summary, console)
    if (workers := scenario.engine_options.shards.workers) > 1 or args.shards:
        if workers > 1:
            console.print(f"sharded over {workers} Ray workers (sim.shards): walks as in one "
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
    console.print(f"results written to {result.out_dir}/ (results.parquet, results.csv, "
                  f"nodes.csv, summary.json, scenario.yaml, plots)")
    return 0


def _with_shards(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``--shards``/``--ray-address`` over the file's ``engine_options.shards``; a sharded
    run on another engine than simpy is refused here, before anything is built."""
    from sim.scenario import ScenarioError
    from sim.shards import check_shardable

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
    from sim.atomic import OutputError
    from sim.scenario import ScenarioError, load_scenario
    from sim.sweep import run_sweep, sweep_points

    out = None
    with _interruptible() as stopped:
        try:
            scenario = load_scenario(args.file)
            if scenario.sweep is None:
                raise ScenarioError(f"{args.file}: sweep: the scenario has no sweep section "
                                    f"(sweep: {{grid: {{<dotted field>: [values]}}}})")
            try:
                sweep_points(scenario)  # every point valid before anything runs
            except ScenarioError as exc:
                raise ScenarioError(f"{args.file}: {exc}") from None
            out = args.out or scenario.outputs.dir or Path("results") / scenario.name
            result = run_sweep(scenario, out, args.workers, console=console,
                               use_ray=args.ray or args.ray_address is not None,
                               ray_address=args.ray_address)
        except ScenarioError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            return 2
        except OutputError as exc:
            _stderr(f"tooldns sweep: error: {exc}")
            return 1
        except KeyboardInterrupt:
            if out is None:
                _stderr("tooldns sweep: interrupted; nothing written")
            else:
                _stderr(f"tooldns sweep: interrupted; finished points are kept in {out}/points/"
                        f", run the same command again to resume")
            return stopped.code
    console.print(f"{len(result.ran)} points run, {len(result.skipped)} already done; "
                  f"{result.out_dir}/sweep.csv, sweep.parquet, points/<id>/", markup=False)
    if result.failed:
        console.print(f"[red]{len(result.failed)} points failed:[/red] "
                      f"{', '.join(result.failed)}", highlight=False)
        return 1
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_eval(args: argparse.Namespace) -> int:
    from sim.evaluate import DEFAULT_METHODS, EvalScenario, load_eval, run_eval

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
            console.print("[red]give an eval FILE or --catalog CATALOG.jsonl[/red]")
            return 2
        result = run_eval(spec, Path(args.out) if args.out else None,
                          progress=lambda m: console.print(f"[dim]method {escape(m)}[/dim]"))
    except ValueError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
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
    console.print(table)
    console.print(f"results in {result['out']}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": cmd_serve,
    "query": cmd_query,
    "run": cmd_run,
    "sweep": cmd_sweep,
    "eval": cmd_eval,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tooldns", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="start a whole hierarchy and a resolver on 127.0.0.0/8")
    _add_namespace_args(p)
    p.add_argument("--port", type=int, default=15353, help="DNS port of every server")
    p.add_argument("--resolver", default="127.0.53.1", help="resolver listening address")
    p.add_argument("--option-code", type=int, default=DEFAULT_OPTION_CODE)
    p.add_argument("--manifest", help="write role/zone/address/port of every server as JSON")
    p.add_argument("--show", type=int, default=25, help="servers to list on start")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--cache-max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                   help="bound on the resolver's cache, bytes (estimated; LRU eviction)")
    p.add_argument("--max-clients", type=int, default=10_000,
                   help="stub queries the resolver works on at once (more are dropped)")
    p.add_argument("--packet-cache-bytes", type=int, default=16 * 2**20,
                   help="bound on each server's packet cache, bytes")
    p.add_argument("--tcp-clients", type=int, default=256,
                   help="TCP connections each server and the resolver keep (the idle "
                   "longest is closed to admit a new one)")

    p = sub.add_parser("query", help="discover tools through a served hierarchy")
    p.add_argument("intent")
    p.add_argument("--service", default="mcp", help="mcp | a2a | rest | skill")
    p.add_argument("-k", type=int, default=3, help="top-K per pruning step (0 = all)")
    p.add_argument("--beam", type=int, default=1, help="branches explored per level")
    p.add_argument("--search", choices=["split", "global"], default="split",
                   help="global: keep the best B children of each level by the servers' "
                   "scores (scores option)")
    p.add_argument("--merge", choices=["round-robin", "score"], default="round-robin",
                   help="order the leaves' tools round-robin or by the servers' scores")
    p.add_argument("--start", default="tools.", help="zone to start at (trust: an org zone)")
    p.add_argument("--manifest", default="tooldns-manifest.json")
    p.add_argument("--via-resolver", action="store_true",
                   help="send one stub query to the served resolver instead of walking here")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("run", help="run a scenario file and compare its schemes")
    p.add_argument("file", help="scenario YAML (see scenarios/)")
    p.add_argument("--engine", choices=["simpy", "live", "ray", "mininet"],
                   help="override the file's engine")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    p.add_argument("--capture", action="store_true",
                   help="live engine: record loopback traffic to capture.pcap (tcpdump, or "
                        "scapy) and check the byte/packet accounting against it (needs root)")
    p.add_argument("--shards", type=_positive_int, metavar="N",
                   help="simpy: split the run over N Ray workers (engine_options.shards)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="--shards: the Ray cluster to run them on (default: a local Ray)")

    p = sub.add_parser("sweep", help="run a scenario's sweep grid, one run per point "
                                     "(resumes: finished points are skipped)")
    p.add_argument("file", help="scenario YAML with a sweep: section")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    p.add_argument("--workers", type=_positive_int,
                   help="worker processes (default: the file's sweep.workers)")
    p.add_argument("--ray", action="store_true",
                   help="run the points as Ray tasks (a local Ray instance with --workers CPUs)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="run the points as Ray tasks on this Ray cluster (implies --ray)")
    p = sub.add_parser("eval", help="compare discovery methods on retrieval quality "
                       "(a scenarios/eval/*.yaml file, or --catalog/--queries)")
    p.add_argument("file", nargs="?", help="evaluation file (see sim/evaluate.py EvalScenario)")
    p.add_argument("--catalog", help="catalogue JSONL (format of shared/data/tools)")
    p.add_argument("--queries", help="queries JSONL (default: beside the catalogue)")
    p.add_argument("--methods", help="comma-separated: flat:S, context, "
                   "tooldns:S[:B[:score|global]], a2x:S:get_one|get_important|get_all, "
                   "grail (S: bm25 tfidf dense maxsim llm)")
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--llm-url", help="OpenAI-compatible endpoint for the llm scorer/context")
    p.add_argument("--llm-model", default="default")
    p.add_argument("--cache-dir", help="keep sentence embeddings on disk here")

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:  # commands that keep nothing: no traceback either
        _stderr(f"tooldns {args.command}: interrupted")
        return 128 + signal.SIGINT


if __name__ == "__main__":
    raise SystemExit(main())
