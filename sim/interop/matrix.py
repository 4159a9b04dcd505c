"""Running the compatibility matrix: outside as root, inside a fresh network namespace.

:func:`run_matrix` re-executes this module as root under ``unshare --net`` (a fresh network
namespace that has only loopback; port 53 is free there and nothing leaves the machine)
and reads back the JSON the child writes. Inside (:func:`inside_main`, then
:func:`measure`): a small namespace (synthetic, or a catalogue), the hierarchy on
127.1.0.x:53 with our aware resolver on 127.0.53.1:53, a packet capture on ``lo``
(:class:`sim.run.capture.Capture`: tcpdump, else scapy's ``AsyncSniffer``), then per
resolver a few sessions (a freshly started resolver, so its cache is cold) of stub queries
(:mod:`sim.interop.probe`); cold (first intent, fresh resolver), warm (a second intent of
the same service) and repeated (the first intent again), against our aware resolver on the
same probes; ten intents whose top K, as each recursor relays it, is checked against the
ranking the leaf itself answered; and, signed, the recursors' proofs of NXDOMAIN and NODATA
and their DS and DNSKEY answers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.interop.probe import (
    RANK_INTENTS,
    RANK_K,
    SERVICE,
    Context,
    K,
    Prober,
    Window,
    ask,
    cursor_body,
    denial_body,
    draft_questions,
    drafts_body,
    leaf_ranking,
    plain_body,
    qname_body,
    rank_body,
    restart_aware,
    session,
    upstream_cost,
)
from sim.interop.process import raise_interrupt, term_with_parent
from sim.interop.resolvers import AWARE, PORT, RESOLVERS, SPECS, VARIANTS, Spec
from sim.interop.rows import ROWS, finalise

if TYPE_CHECKING:
    from sim.build.hierarchy import Hierarchy
    from sim.run.capture import Packet
    from sim.sockets.hierarchy import LiveHierarchy
    from topologies.namespace import Namespace

ROOT_DIR = Path(__file__).resolve().parents[2]  # the repository: ``-m sim.interop.matrix``


class RecursorError(Exception):
    """The matrix could not run (not root, no unshare, the namespace child failed)."""


# ------------------------------------------------------------------ inside the namespace


def _pick(ns: Any) -> tuple[list[str], str, str]:
    """Two intents of SERVICE, a leaf with several SERVICE tools, a target in another leaf."""
    intents = [q.text for q in ns.queries if q.service == SERVICE and q.text.strip()]
    if len(intents) < 2:  # a catalogue without its queries: the tools' own words
        intents = [" ".join(t.description.split()[:6]) for t in ns.tools.values()
                   if t.service == SERVICE and t.description.strip()]
    intents = list(dict.fromkeys(intents))
    if len(intents) < 2:
        raise RecursorError(f"the namespace has fewer than two {SERVICE} intents")
    leaves = sorted(ns.leaves(), key=lambda z: (-sum(
        ns.tools[t].service == SERVICE for t in ns.zones[z].tools), z))
    leaf = leaves[0]
    other = next((z for z in leaves[1:] if any(ns.tools[t].service == SERVICE
                                                for t in ns.zones[z].tools)), leaf)
    return intents[:2], leaf, other


def _namespace(catalog: str | None, limit: int, tools: int, branching: int, depth: int,
               seed: int) -> Namespace:
    """A catalogue's first ``limit`` tools (with its queries when beside it), else a
    synthetic tree."""
    from topologies.catalog import from_catalog
    from topologies.synthetic import synthetic

    if catalog:
        queries = Path(catalog).parent / "queries.jsonl"
        return from_catalog(catalog, queries if queries.exists() else None, limit=limit)
    return synthetic(n_tools=tools, branching=branching, depth=depth, seed=seed)


def _candidates(ns: Any) -> list[str]:
    """Distinct intents of SERVICE for the rank probes (the namespace's queries, else the
    tools' own words)."""
    intents = [q.text for q in ns.queries if q.service == SERVICE and q.text.strip()]
    intents += [" ".join(t.description.split()[:6]) for t in ns.tools.values()
                if t.service == SERVICE and t.description.strip()]
    return list(dict.fromkeys(intents))


async def _rankings(hierarchy: Hierarchy, candidates: list[str]
                    ) -> tuple[list[str], dict[str, tuple[list[str], list[int]]]]:
    """Up to RANK_INTENTS intents whose leaf answers at least two SRV records (an order to
    keep), with that ranking (targets as the leaf sent them, and their priorities), asked
    of the servers themselves."""
    from nodes.dns.wire import intent_qname

    servers: dict[str, str] = {}
    for address, zone in sorted(hierarchy.zone_of.items()):
        servers.setdefault(zone, address)
    chosen: list[str] = []
    ranking: dict[str, tuple[list[str], list[int]]] = {}
    for intent in candidates:
        try:
            qname = intent_qname(intent, RANK_K, service=SERVICE)
        except ValueError:
            continue
        answer = await leaf_ranking(servers, qname)
        if len(answer.srv) >= 2:
            chosen.append(intent)
            ranking[intent] = (answer.srv, answer.priority)
            if len(chosen) == RANK_INTENTS:
                break
    return chosen, ranking


async def _context(live: LiveHierarchy, hierarchy: Hierarchy, workdir: Path,
                   intents: list[str], leaf: str, other: str, verbose_logs: bool,
                   candidates: list[str]) -> Context:
    """The probes' shared state, with the expected answers asked of the leaves' own
    servers (the whole SRV RRset of ``leaf``, a target's A in ``other``, the rank probes'
    rankings)."""
    from nodes.dns.wire import expanded_name

    leaf_server = next(a for a, z in hierarchy.zone_of.items() if z == leaf)
    srv = await ask(leaf_server, expanded_name(SERVICE, leaf), "SRV", rd=False)
    other_server = next(a for a, z in hierarchy.zone_of.items() if z == other)
    other_srv = await ask(other_server, expanded_name(SERVICE, other), "SRV", rd=False)
    if not srv.srv or not other_srv.srv:
        raise RecursorError(f"the leaf servers did not answer their SRV RRsets: "
                            f"{srv.summary()}; {other_srv.summary()}")
    target = sorted(other_srv.srv)[0]
    a = await ask(other_server, target, "A", rd=False)
    rank_intents, ranking = await _rankings(hierarchy, candidates)
    return Context(live, hierarchy, workdir, intents, leaf, sorted(srv.srv), target,
                   a.a[0] if a.a else "", verbose_logs=verbose_logs,
                   rank_intents=rank_intents, ranking=ranking)


async def measure(resolvers: Sequence[str], variants: Sequence[str], catalog: str | None,
                  limit: int, tools: int, branching: int, depth: int, seed: int,
                  workdir: Path, verbose_logs: bool = False) -> dict:
    """Inside a fresh network namespace: serve a hierarchy on port 53, run every probe
    through each resolver and our aware resolver, and return the results (JSON-able)."""
    import asyncio

    from sim.build.hierarchy import build_hierarchy
    from sim.interop.model import compare
    from sim.run.capture import Capture, read_packets
    from sim.sockets.hierarchy import LiveHierarchy
    from topologies.orgzones import publications

    started = time.time()
    ns = _namespace(catalog, limit, tools, branching, depth, seed)
    hierarchy = build_hierarchy(ns, org_zones=True)  # the drafts' records under example.
    intents, leaf, other = _pick(ns)
    live = LiveHierarchy(hierarchy, port=PORT, resolver_address=AWARE)
    capture = Capture(workdir / "lo.pcap", f"udp port {PORT} or tcp port {PORT}",
                      snaplen=4096).start()
    out: dict[str, Any] = {"resolvers": {}, "aware": {}}
    try:
        await live.start()
        ctx = await _context(live, hierarchy, workdir, intents, leaf, other, verbose_logs,
                             _candidates(ns))
        pub = next(p for p in publications(ns).values() if p.service == SERVICE)
        ctx.drafts = draft_questions(pub.host, pub.domain, pub.service, pub.dnssd_instance,
                                     pub.port)
        ctx.draft_host = (pub.host, pub.address)
        variants = [v for v in VARIANTS if v in variants]
        if "plain" not in variants:  # the reference answers come from the plain baseline
            await _aware_baseline(ctx, "plain", {})
        for variant in variants:
            await _variant(ctx, variant, resolvers, seed, out)
        await restart_aware(ctx)
    finally:
        live.close()
        await asyncio.sleep(0.1)
        capture.stop()
    packets = read_packets(capture.path)
    _charge(ctx.windows, packets, hierarchy)
    meta = {
        "namespace": ns.origin, "tools": len(ns.tools), "zones": len(ns.zones),
        "servers": len(hierarchy.servers), "intents": intents, "k": K, "service": SERVICE,
        "leaf": leaf, "expected_srv": ctx.expected_srv, "target": ctx.target,
        "expected_a": ctx.expected_a, "reference": ctx.reference,
        "rank_k": RANK_K, "rank_intents": ctx.rank_intents, "ranking": ctx.ranking,
        "capture": capture.tool, "packets": len(packets),
        "seconds": round(time.time() - started, 2), "variants": list(variants),
        "versions": {n: SPECS[n].version() for n in resolvers},
        "option_code": hierarchy.option_code,
        "drafts": ctx.drafts, "draft_host": list(ctx.draft_host),
    }
    result = finalise(out, meta)
    if "plain" in variants:  # the resolver model with each recursor's profile, beside it
        result["model"] = compare(hierarchy, meta, result["resolvers"])
    return result


async def _variant(ctx: Context, variant: str, resolvers: Sequence[str], seed: int,
                   out: dict[str, Any]) -> None:
    """One variant (plain: unsigned; dnssec: signed, validating): the aware baseline,
    then every resolver."""
    from sim.build.trust import sign_hierarchy

    if variant == "dnssec":
        ctx.trust_anchor = sign_hierarchy(ctx.hierarchy, seed)
    else:
        ctx.hierarchy.reset()  # unsigned
        ctx.trust_anchor = None
    await _aware_baseline(ctx, variant, out["aware"])
    for name in resolvers:
        await _resolver(ctx, SPECS[name], variant, out["resolvers"])


async def _resolver(ctx: Context, spec: Spec, variant: str, results: dict[str, Any]) -> None:
    """One resolver's sessions of one variant, into ``results[spec.name]``."""
    res = results.setdefault(spec.name, {"status": "ok", "variants": {}})
    res.setdefault("kind", spec.kind)
    res.setdefault("address", spec.address)
    res.setdefault("notes", spec.notes)
    if res["status"] == "not installed":
        return
    vres: dict[str, Any] = {"status": "ok"}
    res["variants"][variant] = vres
    bodies: list[tuple[str, Callable[[Prober], Any]]]
    if variant == "plain":
        bodies = [("cursor", cursor_body(ctx)), ("qname", qname_body(ctx)),
                  ("plain", plain_body(ctx)), ("rank", rank_body(ctx)),
                  ("drafts", drafts_body(ctx))]
    else:
        bodies = [("dnssec", plain_body(ctx, do=True)),
                  ("dnssec-qname", qname_body(ctx, do=True, follow=False))]
        if spec.kind == "recursor":  # a proxy's backend is our resolver: no denial checks
            bodies.append(("dnssec-denial", denial_body(ctx)))
    for label, body in bodies:
        if not await session(ctx, spec, variant, label, body, vres):
            break
    if vres["status"] == "not installed":
        res["status"] = "not installed"
        res["error"] = vres["error"]


def _charge(windows: Sequence[Window], packets: Sequence[Packet], hierarchy: Hierarchy
            ) -> None:
    """Each probe window's upstream cost from the capture (behind a proxy: also what
    reached the servers)."""
    zone_of = dict(hierarchy.zone_of) | {AWARE: "aware resolver"}
    servers = frozenset(hierarchy.servers)
    for w in windows:
        w.cost = upstream_cost(packets, w, zone_of)
        if w.upstreams == {AWARE}:  # a proxy: what reached the servers behind it
            behind = Window(w.name, w.start, w.end, frozenset({AWARE}), servers)
            w.behind = upstream_cost(packets, behind, zone_of)


async def _aware_baseline(ctx: Context, variant: str, out: dict) -> None:
    """Our aware resolver on the same probes (fresh for each group: cold caches)."""
    probes: dict[str, dict] = {}
    # in the DNSSEC variant our resolver validates (DO upstream whatever the stub asks)
    groups = [cursor_body(ctx), plain_body(ctx, do=variant == "dnssec")]
    for body in groups:
        await restart_aware(ctx)
        p = Prober(ctx, "aware", AWARE, frozenset({AWARE}), ctx.servers)
        await body(p)
        probes.update(p.probes)
    if variant == "plain":
        for key, intent in (("cursor cold", ctx.intents[0]), ("cursor warm", ctx.intents[1])):
            ctx.reference[intent] = sorted(probes[key]["answer"].srv)
    out[variant] = probes


def inside_main(argv: Sequence[str]) -> int:
    """The namespace child: loopback up, check isolation, measure, JSON to a file."""
    import asyncio
    import socket

    ap = argparse.ArgumentParser(prog="python3 -m sim.interop.matrix")
    ap.add_argument("--inside", required=True, help="write the JSON here")
    ap.add_argument("--resolver", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--catalog")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--tools", type=int, default=120)
    ap.add_argument("--branching", type=int, default=3)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--verbose-logs", action="store_true")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, raise_interrupt)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for spec in SPECS.values():  # BIND listens only on addresses an interface has
        subprocess.run(["ip", "addr", "add", f"{spec.address}/32", "dev", "lo"], check=True)
    names = sorted(n for _, n in socket.if_nameindex())
    if names != ["lo"]:
        print(f"sim.interop.matrix: error: the namespace has interfaces {names}, not only lo; "
              "refusing to run resolvers there", file=sys.stderr)
        return 1
    result = asyncio.run(measure(args.resolver, args.variant, args.catalog, args.limit,
                                 args.tools, args.branching, args.depth, args.seed,
                                 Path(args.workdir), args.verbose_logs))
    Path(args.inside).write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    return 0


# ------------------------------------------------------------------ outside, as root


def run_matrix(resolvers: Sequence[str] = RESOLVERS, variants: Sequence[str] = VARIANTS,
               catalog: str | None = None, limit: int = 200, tools: int = 120,
               branching: int = 3, depth: int = 2, seed: int = 7, keep: bool = False,
               verbose_logs: bool = False, timeout: float = 600.0) -> dict:
    """Run the matrix in a fresh network namespace (root only) and return its results.

    Resolvers whose binary is missing come back as ``status: not installed`` without being
    run. Raises :class:`RecursorError` with one clear message when the matrix cannot run.
    """
    for name in resolvers:
        if name not in SPECS:
            raise RecursorError(f"unknown resolver {name!r} (choose from {', '.join(SPECS)})")
    for variant in variants:
        if variant not in VARIANTS:
            raise RecursorError(f"unknown variant {variant!r} (plain or dnssec)")
    if os.geteuid() != 0:
        raise RecursorError("must run as root: the matrix needs a network namespace "
                            "(unshare --net) and port 53 inside it (sudo python3 -m "
                            "sim.interop.recursors)")
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RecursorError("unshare (util-linux) is not installed")
    installed = [n for n in resolvers if SPECS[n].executable() is not None]
    missing = [n for n in resolvers if n not in installed]
    workdir = Path(tempfile.mkdtemp(prefix="tooldns-recursors-"))
    out_json = workdir / "result.json"
    result: dict[str, Any] = {"meta": {}, "aware": {}, "resolvers": {}}
    ok = False
    try:
        if installed:
            argv = [unshare, "--net", "--", sys.executable, "-m", "sim.interop.matrix",
                    "--inside", str(out_json), "--workdir", str(workdir),
                    "--tools", str(tools), "--branching", str(branching),
                    "--depth", str(depth), "--seed", str(seed), "--limit", str(limit)]
            argv += [a for n in installed for a in ("--resolver", n)]
            argv += [a for v in variants for a in ("--variant", v)]
            if catalog:
                argv += ["--catalog", str(catalog)]
            if verbose_logs:
                argv.append("--verbose-logs")
            result = _run_child(argv, workdir, out_json, timeout)
        for name in missing:
            result["resolvers"][name] = _not_installed(SPECS[name])
        result["resolvers"] = {n: result["resolvers"][n] for n in resolvers
                               if n in result["resolvers"]}
        failed = any(v.get("status") == "failed" for r in result["resolvers"].values()
                     for v in r.get("variants", {}).values())
        result["meta"]["workdir"] = str(workdir) if (keep or failed) else None
        ok = not failed
        return result
    finally:
        if ok and not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_child(argv: list[str], workdir: Path, out_json: Path, timeout: float) -> dict:
    """Run the namespace child and read its JSON; on a timeout or an interrupt its whole
    process group goes (the child, its resolvers and its tcpdump), nothing else."""
    proc = subprocess.Popen(argv, cwd=ROOT_DIR, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=term_with_parent)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise RecursorError(f"the namespace run took over {timeout:g} s "
                                f"(logs kept in {workdir})") from None
        raise
    if proc.returncode != 0 or not out_json.exists():
        tail = "\n".join((stderr or stdout).strip().splitlines()[-25:])
        raise RecursorError(f"the namespace run failed (status {proc.returncode}; "
                            f"logs kept in {workdir}):\n{tail}")
    result: dict = json.loads(out_json.read_text(encoding="utf-8"))
    return result


def _not_installed(spec: Spec) -> dict:
    """The matrix entry of a resolver whose binary is missing."""
    error = f"{spec.binary} is not installed (bash .ci/setup installs it)"
    return {"status": "not installed", "error": error, "kind": spec.kind,
            "address": spec.address, "notes": spec.notes, "variants": {},
            "rows": {r: {"cell": "not installed", "detail": error} for r in ROWS}}


if __name__ == "__main__":  # the namespace child (run_matrix starts it)
    sys.exit(inside_main(sys.argv[1:]))
