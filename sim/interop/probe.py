"""Probing one resolver: stub queries, their time windows, and what each cost upstream.

* Stub side: :func:`ask` sends one query with dnspython (UDP, TCP after TC) and returns an
  :class:`Answer`; a :class:`Prober` sends the probes of one resolver (or of our aware
  baseline) and notes each probe's :class:`Window`.
* Probes (rows of the matrix): ``option forwarded`` (does a query the resolver sends
  upstream carry the intent option 65432?), ``cursor walk`` (``_mcp._tcp._tools.`` SRV with
  the option returns the aware resolver's targets), ``qname walk`` (the intent in the QNAME,
  :func:`nodes.dns.wire.intent_qname`, no option: CNAMEs down the tree to the leaf's top-K
  SRV), ``expanded SRV`` (``_mcp._tcp.<leaf>.``: the leaf's whole RRset), ``A`` (a tool
  target's address), ``DNSSEC`` (AD on a DO query for a target and for the qname walk),
  ``DNSSEC denial`` (:func:`denial_body`: NXDOMAIN and NODATA proven, DS and DNSKEY
  answered, each with AD) and ``rank order`` (:func:`rank_body`: ten qname walks with
  K = 5; does the leaf's ranking survive, read from SRV priority, and did the RRset
  order?). The bodies (``cursor_body`` …) group them; :func:`session` runs one group
  through a freshly started resolver (cold cache). :func:`leaf_ranking` asks the servers
  themselves for an intent name's answer, the ranking the resolvers are checked against.
* Cost (:func:`upstream_cost`): each probe's upstream queries, bytes (IP, both directions)
  and packets, from the capture, by the resolver's source address and the probe's window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.interop.process import Running
from sim.interop.resolvers import AWARE, PORT, Setup, Spec

if TYPE_CHECKING:
    from sim.build.hierarchy import Hierarchy
    from sim.run.capture import Packet
    from sim.sockets.hierarchy import LiveHierarchy

STUB = "127.0.0.1"  # where the stub queries leave from
K = 3
SERVICE = "mcp"
RANK_K = 5  # the rank probes' K: 5! orders, so an order kept by chance is rare
RANK_INTENTS = 10
QUERY_TIMEOUT = 6.0  # one stub query (recursors retry and fail over inside this)
START_TIMEOUT = 20.0  # a resolver answers its first query within this
SETTLE = 0.1  # after an answer, before the next probe: late packets stay in its window


@dataclass
class Answer:
    """What one stub query got back (or why not)."""

    qname: str
    qtype: str
    rcode: str = ""
    ad: bool = False
    tc_retry: bool = False  # answered over TCP after a truncated UDP reply
    cnames: list[str] = field(default_factory=list)  # CNAME targets, in order
    srv: list[str] = field(default_factory=list)  # SRV targets (lower case, absolute)
    priority: list[int] = field(default_factory=list)  # their SRV priorities, same order
    a: list[str] = field(default_factory=list)  # A rdata in the answer section
    types: list[str] = field(default_factory=list)  # types in the answer section, in order
    additional_a: dict[str, str] = field(default_factory=dict)  # target -> address
    error: str = ""
    seconds: float = 0.0

    def summary(self) -> str:
        if self.error:
            return self.error
        bits = [self.rcode]
        if self.cnames:
            bits.append(f"{len(self.cnames)} CNAME")
        if self.srv:
            bits.append(f"{len(self.srv)} SRV")
        if self.a:
            bits.append(f"A {','.join(self.a)}")
        if self.ad:
            bits.append("AD")
        return " ".join(bits)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in ("", [], {}, False)} | {
            "rcode": self.rcode}


async def ask(server: str, qname: str, qtype: str, option: tuple[int, bytes] | None = None,
              do: bool = False, timeout: float = QUERY_TIMEOUT, port: int = PORT,
              rd: bool = True, rdclass: str = "IN") -> Answer:
    """One stub query with dnspython (UDP, TCP after TC); never raises."""
    import dns.asyncquery
    import dns.edns
    import dns.exception
    import dns.flags
    import dns.message
    import dns.rcode
    import dns.rdatatype

    options: list[dns.edns.Option] = [dns.edns.GenericOption(
        dns.edns.OptionType.make(option[0]), option[1])] if option else []
    query = dns.message.make_query(qname, qtype, rdclass, use_edns=0, payload=1232,
                                   options=options, want_dnssec=do)
    if not rd:
        query.flags &= ~dns.flags.RD
    out = Answer(qname, qtype)
    start = time.monotonic()
    try:
        reply, out.tc_retry = await dns.asyncquery.udp_with_fallback(
            query, server, timeout=timeout, port=port, source=STUB)
    except dns.exception.Timeout:
        out.error = f"timeout ({timeout:g} s)"
        return out
    except (OSError, dns.exception.DNSException) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    finally:
        out.seconds = round(time.monotonic() - start, 4)
    out.rcode = dns.rcode.to_text(reply.rcode())
    out.ad = bool(reply.flags & dns.flags.AD)
    for rrset in reply.answer:
        kind = dns.rdatatype.to_text(rrset.rdtype)
        if kind not in out.types:
            out.types.append(kind)
        for rd_ in rrset:
            if rrset.rdtype == dns.rdatatype.CNAME:
                out.cnames.append(rd_.target.to_text().lower())
            elif rrset.rdtype == dns.rdatatype.SRV:
                out.srv.append(rd_.target.to_text().lower())
                out.priority.append(rd_.priority)
            elif rrset.rdtype == dns.rdatatype.A:
                out.a.append(rd_.address)
    for rrset in reply.additional:
        if rrset.rdtype == dns.rdatatype.A:
            for rd_ in rrset:
                out.additional_a[rrset.name.to_text().lower()] = rd_.address
    return out


def by_priority(srv: Sequence[str], priority: Sequence[int]) -> list[str]:
    """SRV targets ranked as an agent reads them: by priority, lowest first (RFC 2782),
    equal priorities in the order received (what ``nodes.agent.stub`` does)."""
    order = sorted(range(len(srv)), key=lambda i: priority[i] if i < len(priority) else 0)
    return [srv[i] for i in order]


async def leaf_ranking(servers: dict[str, str], qname: str, limit: int = 12) -> Answer:
    """The answer to an intent name straight from the servers, no resolver between: ask the
    server of the zone the name is in (``servers``: zone -> address) without recursion and
    follow each CNAME to the server of the zone it points into, up to the leaf's ranked SRV
    RRset (in the order the leaf sent it; ``cnames`` collects the chain)."""
    chain: list[str] = []
    name = qname.lower()
    for _ in range(limit):
        zone = max((z for z in servers if z == "." or name.endswith("." + z) or name == z),
                   key=len, default=None)
        if zone is None:
            return Answer(qname, "SRV", error=f"no server for {name}")
        answer = await ask(servers[zone], name, "SRV", rd=False)
        if answer.error or answer.srv or not answer.cnames:
            answer.qname, answer.cnames = qname, chain + answer.cnames
            return answer
        chain += answer.cnames
        name = answer.cnames[-1]
    return Answer(qname, "SRV", error=f"over {limit} CNAMEs")


# ------------------------------------------------------------------ capture and cost


@dataclass
class Window:
    """A probe's time window and the addresses whose upstream traffic it is charged."""

    name: str
    start: float
    end: float = 0.0
    clients: frozenset[str] = frozenset()  # who sends upstream (the resolver's address)
    upstreams: frozenset[str] = frozenset()  # who it sends to
    cost: dict = field(default_factory=dict)  # upstream_cost(), once the capture is read
    behind: dict | None = None  # a proxy's: what reached the servers behind it


def _dns_messages(p: Packet) -> list[bytes]:
    """The DNS messages in a packet's payload (TCP: length-prefixed; partial ones dropped)."""
    if p.proto == "udp":
        return [p.payload] if p.payload else []
    out, data = [], p.payload
    while len(data) >= 2:
        n = int.from_bytes(data[:2], "big")
        if n == 0 or len(data) < 2 + n:
            break
        out.append(data[2:2 + n])
        data = data[2 + n:]
    return out


def upstream_cost(packets: Sequence[Packet], w: Window, zone_of: dict[str, str]) -> dict:
    """Queries, bytes and packets the window's clients exchanged with its upstreams."""
    import dns.exception
    import dns.flags
    import dns.message
    import dns.rdatatype

    up = down = n_up = n_down = 0
    queries: list[str] = []
    options: set[int] = set()
    do = edns = tcp = False
    carried = 0
    for p in packets:
        if not w.start <= p.ts < w.end:
            continue
        if p.src in w.clients and p.dst in w.upstreams and p.dport == PORT:
            up += p.size
            n_up += 1
            tcp |= p.proto == "tcp"
            for wire in _dns_messages(p):
                try:
                    msg = dns.message.from_wire(wire)
                except (dns.exception.DNSException, ValueError):
                    try:  # an odd record further on: the question at least
                        msg = dns.message.from_wire(wire, question_only=True)
                    except (dns.exception.DNSException, ValueError):
                        continue
                if msg.flags & dns.flags.QR or not msg.question:
                    continue
                q = msg.question[0]
                where = zone_of.get(p.dst, p.dst)
                queries.append(f"{q.name.to_text().lower()} "
                               f"{dns.rdatatype.to_text(q.rdtype)} @{where}")
                if msg.edns >= 0:
                    edns = True
                    codes = {int(o.otype) for o in msg.options}
                    options |= codes
                    carried += 65432 in codes
                do |= bool(msg.ednsflags & dns.flags.DO)
        elif p.src in w.upstreams and p.dst in w.clients and p.sport == PORT:
            down += p.size
            n_down += 1
    return {"queries": len(queries), "bytes": up + down, "bytes_up": up, "bytes_down": down,
            "packets": n_up + n_down, "tcp": tcp, "edns": edns, "do": do,
            "option_codes": sorted(options), "intent_option_queries": carried,
            "asked": queries}


def minimised(asked: Sequence[str], qname: str) -> bool:
    """Whether qname minimisation shows: a name asked that is a proper ancestor of
    ``qname`` (BIND's and Unbound's ``_.`` probes included), other than the root; DNSKEY and
    DS questions (a validator's, at zone apexes and cuts) do not count."""
    qname = qname.lower()
    for line in asked:
        name, qtype = line.split()[:2]
        if qtype in ("DNSKEY", "DS"):
            continue
        name = name[2:] if name.startswith("_.") and name != "_." else name
        if name not in (".", qname) and qname.endswith("." + name):
            return True
    return False


@dataclass
class Context:
    """Everything the probes of one variant share."""

    live: LiveHierarchy
    hierarchy: Hierarchy
    workdir: Path
    intents: list[str]
    leaf: str  # a leaf with several tools of SERVICE (expanded SRV probe)
    expected_srv: list[str]  # that leaf's whole SRV RRset (targets), from its own server
    target: str  # a tool target in another leaf (A probe)
    expected_a: str
    trust_anchor: str | None = None
    verbose_logs: bool = False
    windows: list[Window] = field(default_factory=list)
    reference: dict[str, list[str]] = field(default_factory=dict)  # intent -> aware targets
    # the rank probes' intents and each one's ranking as the leaf itself answers it: the
    # targets in the order sent, and their SRV priorities
    rank_intents: list[str] = field(default_factory=list)
    ranking: dict[str, tuple[list[str], list[int]]] = field(default_factory=dict)
    # the DNS-native drafts' questions about one tool (key, name, type) and its host's
    # address (the organisations' zones, topologies.orgzones)
    drafts: list[tuple[str, str, str]] = field(default_factory=list)
    draft_host: tuple[str, str] = ("", "")

    @property
    def servers(self) -> frozenset[str]:
        return frozenset(self.hierarchy.servers)


async def restart_aware(ctx: Context) -> None:
    """A fresh aware resolver on 127.0.53.1 (cold cache; validating in the DNSSEC variant)."""
    import asyncio

    from nodes.resolver.config import ResolverConfig
    from sim.sockets.node import NodeEndpoint

    live = ctx.live
    if live.resolver is not None:
        live.resolver.close()
        await asyncio.sleep(0.05)
    config = ResolverConfig(dns_port=PORT, dnssec=ctx.trust_anchor is not None,
                            trust_anchor=ctx.trust_anchor or "")
    node = ctx.hierarchy.resolver(seed=0, config=config)
    live.resolver = NodeEndpoint(node, (AWARE, PORT), source_ip=AWARE,
                                 tcp_limits=live.tcp_limits)
    await live.resolver.start()


class Prober:
    """Sends the probes of one resolver (or of the aware baseline) and notes their windows."""

    def __init__(self, ctx: Context, name: str, server: str, clients: frozenset[str],
                 upstreams: frozenset[str]) -> None:
        self.ctx, self.name, self.server = ctx, name, server
        self.clients, self.upstreams = clients, upstreams
        self.probes: dict[str, dict] = {}

    async def probe(self, key: str, qname: str, qtype: str, intent: str | None = None,
                    do: bool = False) -> Answer:
        import asyncio

        from nodes.dns.wire import Intent

        w = Window(f"{self.name}:{key}", time.time(), clients=self.clients,
                   upstreams=self.upstreams)
        option = (self.ctx.hierarchy.option_code, Intent(intent, k=K).encode()) if (
            intent is not None) else None
        answer = await ask(self.server, qname, qtype, option=option, do=do)
        await asyncio.sleep(SETTLE)
        w.end = time.time()
        self.ctx.windows.append(w)
        self.probes[key] = {"answer": answer, "window": w, "qname": qname, "intent": intent}
        return answer


async def _ready(server: str, running: Running | None) -> str | None:
    """Wait until ``server`` answers ``version.bind. CH TXT`` (any answer, an error too: it
    is listening; the class keeps recursors from asking the hierarchy); else the error."""
    import asyncio

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if running is not None and running.proc.poll() is not None:
            return (f"{running.spec.binary} exited with status {running.proc.returncode}; "
                    f"log {running.log}:\n{running.tail()}")
        a = await ask(server, "version.bind.", "TXT", timeout=0.5, rdclass="CH")
        if not a.error:
            return None
        await asyncio.sleep(0.1)
    tail = running.tail() if running is not None else ""
    return f"no answer on {server}:{PORT} within {START_TIMEOUT:g} s; log:\n{tail}"


async def session(ctx: Context, spec: Spec, variant: str, label: str,
                  body: Callable[[Prober], Any], result: dict) -> bool:
    """Start ``spec`` fresh (cold cache), run ``body(prober)``, stop it; False on failure."""
    import asyncio

    workdir = ctx.workdir / f"{spec.name}-{variant}-{label}"
    setup = Setup(workdir, spec.address, _root_hints(ctx.hierarchy),
                  ctx.trust_anchor, AWARE, verbose=ctx.verbose_logs)
    log = ctx.workdir / f"{spec.name}-{variant}.log"
    try:
        running = Running(spec, setup, log)
    except FileNotFoundError:
        result["status"] = "not installed"
        result["error"] = f"{spec.binary} is not installed (bash .ci/setup installs it)"
        return False
    except OSError as exc:
        result["status"] = "failed"
        result["error"] = f"{spec.binary} could not be started: {exc}"
        return False
    try:
        error = await _ready(spec.address, running)
        if error is not None:
            result["status"] = "failed"
            result["error"] = f"{spec.name} did not start: {error}"
            return False
        await asyncio.sleep(SETTLE)
        await restart_aware(ctx)  # cold for dnsdist's backend too
        upstreams = frozenset({AWARE}) if spec.kind == "proxy" else ctx.servers
        prober = Prober(ctx, spec.name, spec.address, frozenset({spec.address}), upstreams)
        await body(prober)
        result.setdefault("sessions", {})[label] = prober.probes
        if running.proc.poll() is not None:
            result["status"] = "failed"
            result["error"] = (f"{spec.name} exited during the probes (status "
                               f"{running.proc.returncode}):\n{running.tail()}")
            return False
        return True
    finally:
        running.stop()
        result.setdefault("logs", {})[f"{variant}:{label}"] = str(log)


def _root_hints(h: Hierarchy) -> list[tuple[str, str]]:
    return [(m["host"], m["address"]) for m in h.manifest if m["zone"] == "."]


def cursor_body(ctx: Context) -> Callable[[Prober], Any]:
    from nodes.dns.wire import cursor_name

    qname = cursor_name(SERVICE, "tools.")

    async def body(p: Prober) -> None:
        i1, i2 = ctx.intents
        await p.probe("cursor cold", qname, "SRV", intent=i1)
        await p.probe("cursor warm", qname, "SRV", intent=i2)
        await p.probe("cursor repeat", qname, "SRV", intent=i1)
    return body


def qname_body(ctx: Context, do: bool = False, follow: bool = True
                ) -> Callable[[Prober], Any]:
    from nodes.dns.wire import intent_qname  # late: ``--help`` stays light

    async def body(p: Prober) -> None:
        i1, i2 = ctx.intents
        first = await p.probe("qname cold", intent_qname(i1, K, service=SERVICE), "SRV",
                              do=do)
        await p.probe("qname warm", intent_qname(i2, K, service=SERVICE), "SRV", do=do)
        await p.probe("qname repeat", intent_qname(i1, K, service=SERVICE), "SRV", do=do)
        if follow:
            for n, target in enumerate(first.srv):
                await p.probe(f"qname follow-up A {n}", target, "A")
    return body


def plain_body(ctx: Context, do: bool = False) -> Callable[[Prober], Any]:
    from nodes.dns.wire import expanded_name

    async def body(p: Prober) -> None:
        await p.probe("A", ctx.target, "A", do=do)
        await p.probe("expanded SRV", expanded_name(SERVICE, ctx.leaf), "SRV", do=do)
    return body


def drafts_body(ctx: Context) -> Callable[[Prober], Any]:
    """Every DNS-native draft's questions about one tool (DNS-AID, ANS v2, DN-ANR, AID,
    DNS-SD), then its host's A: what a draft's client asks an unmodified resolver."""

    async def body(p: Prober) -> None:
        for key, qname, qtype in ctx.drafts:
            await p.probe(key, qname, qtype)
        await p.probe("draft host A", ctx.draft_host[0], "A")
    return body


def draft_questions(host: str, domain: str, service: str, instance: str, port: int
                    ) -> list[tuple[str, str, str]]:
    """The drafts' questions about the tool at ``host`` (probe key, name, type)."""
    return [("DNS-AID index", f"_index._agents.{domain}", "TXT"),
            ("DNS-AID SVCB", host, "SVCB"),
            ("ANS _ans", f"_ans.{host}", "TXT"), ("ANS HTTPS", host, "HTTPS"),
            ("ANS TLSA", f"_{port}._tcp.{host}", "TLSA"),
            ("ANS badge", f"_ans-badge.{host}", "TXT"),
            ("DN-ANR SVCB", f"_agent.{host}", "SVCB"), ("DN-ANR TXT", f"_agent.{host}", "TXT"),
            ("AID TXT", f"_agent._{service}.{host}", "TXT"),
            ("DNS-SD PTR", f"_{service}._tcp.{domain}", "PTR"),
            ("DNS-SD SRV", instance, "SRV"), ("DNS-SD TXT", instance, "TXT")]


#: a label no zone holds: the NXDOMAIN probes' names start with it
NX_LABEL = "no-such-tool"


def denial_probes(ctx: Context) -> list[tuple[str, str, str]]:
    """(probe, name, type) of the denial probes: a name missing from a leaf and one below
    the empty non-terminal ``_tcp.tools.`` (NXDOMAIN), a type missing at a tool target
    (NODATA), the leaf's DS (from its parent) and its DNSKEY."""
    return [("NXDOMAIN", f"{NX_LABEL}.{ctx.leaf}", "A"),
            ("NXDOMAIN below an empty non-terminal", f"{NX_LABEL}._tcp.tools.", "A"),
            ("NODATA", ctx.target, "AAAA"),
            ("DS", ctx.leaf, "DS"),
            ("DNSKEY", ctx.leaf, "DNSKEY")]


def denial_body(ctx: Context) -> Callable[[Prober], Any]:
    """The DNSSEC denial probes (:func:`denial_probes`), each with DO."""
    async def body(p: Prober) -> None:
        for key, name, qtype in denial_probes(ctx):
            await p.probe(key, name, qtype, do=True)
    return body


def rank_body(ctx: Context) -> Callable[[Prober], Any]:
    """The rank probes: each of ``ctx.rank_intents`` as a qname walk with K = RANK_K (the
    leaf's ranking is in ``ctx.ranking``)."""
    from nodes.dns.wire import intent_qname

    async def body(p: Prober) -> None:
        for n, intent in enumerate(ctx.rank_intents):
            await p.probe(f"rank {n}", intent_qname(intent, RANK_K, service=SERVICE), "SRV")
    return body
