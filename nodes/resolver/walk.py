"""Algorithm 1 (seed 000) as the resolver walks it: the beam walk down the semantic
delegations (split or global beam, or A2X's progressive search of seed 001; caches, query
mock, serve-stale, trust policy), K = 0
cache warming, and the A lookups of the chosen targets. In the stock modes (``strip``,
``pass-through``, ``qname``) a discovery is a name resolved by :mod:`nodes.resolver.iterate`.
State machines the core drives (:data:`nodes.resolver.types.Rounds`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import attrgetter

from dnslib import DNSRecord
from mypy_extensions import mypyc_attr

from nodes.dns.message import RC_NXDOMAIN, TYPE_A, TYPE_NS, TYPE_SRV, derive
from nodes.dns.wire import (
    Intent,
    IntentError,
    below,
    cursor_name,
    get_scores,
    intent_qname,
    normalise,
)
from nodes.resolver.caches import Known
from nodes.resolver.context import Context
from nodes.resolver.iterate import iterate
from nodes.resolver.merge import Descent, narrow
from nodes.resolver.types import Answer, Ask, Discovery, DiscoveryResult, Endpoint, Reply, Rounds
from nodes.resolver.validate import fetch_keys, validated

_TARGET = attrgetter("target")  # endpoints are one tool per target
_NO_SCORE = float("-inf")


def discover(ctx: Context, req: Discovery, result: DiscoveryResult) -> Rounds[DiscoveryResult]:
    """A discovery: Algorithm 1 (``aware``), else the cursor or intent name resolved."""
    mode = ctx.config.mode
    if mode == "qname":  # the intent in the name, the tree's CNAME chain
        qname = intent_qname(req.intent, req.k, req.service, req.start, req.proto)
        msg, error = yield from iterate(ctx, qname, TYPE_SRV, None, result)
        result.error = error
        if msg is not None:
            found = [replace(e, zone=e.target.split(".", 1)[1])
                     for e in endpoints_of(msg, req.start)]
            result.leaves = sorted({e.zone for e in found})
            result.endpoints = yield from resolve_targets(ctx, found, result, {})
    elif mode != "aware":
        qname = cursor_name(req.service, req.start, req.proto)
        intent = Intent(req.intent, k=req.k) if mode == "pass-through" else None
        msg, error = yield from iterate(ctx, qname, TYPE_SRV, intent, result)
        if msg is not None:
            result.endpoints = endpoints_of(msg, req.start)
        result.error = error
    else:
        yield from _aware(ctx, req, result)
    result.finished = ctx.now
    return result


def _aware(ctx: Context, req: Discovery, result: DiscoveryResult) -> Rounds[None]:
    """Algorithm 1 with beam, caches and failover, within the trust policy."""
    known: Known = {}  # delegations learned during this walk
    walk = _Walk(ctx, req, result, known)
    start = normalise(req.start)
    policy = ctx.config.trust
    trusted = [(z, walk.width) for z in policy.zones] if policy is not None else []
    if policy is not None and policy.restricts_start and not policy.accepts(start):
        branches = trusted  # walk only the trusted zones, from the first round
    else:
        branches = [(start, walk.width)]  # (zone, share of the beam width it may still use)
    yield from walk.rounds(branches)
    if policy is not None and policy.filters:
        merged = walk.merged(0)
        endpoints = [e for e in merged if policy.accepts(e.target)]
        if not endpoints and policy.kind == "public-then-certified":
            result.rejected += len(merged)
            walk.restart()
            result.error = None
            yield from walk.rounds(trusted)
            merged = walk.merged(0)
            endpoints = [e for e in merged if policy.accepts(e.target)]
        result.rejected += len(merged) - len(endpoints)
        endpoints = endpoints if req.k == 0 else endpoints[:req.k]
    else:
        endpoints = walk.merged(req.k)
    start_ok = [e for e in endpoints if below(e.target, start)]
    if len(start_ok) != len(endpoints):
        ctx.stats["outside_start_zone"] += len(endpoints) - len(start_ok)
    result.leaves = walk.order
    result.endpoints = yield from resolve_targets(ctx, start_ok, result, known)
    if result.endpoints:
        result.error = None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class _Level:
    """One round of the walk: the asks, and the branches (or global pool) found."""

    asks: list[Ask] = field(default_factory=list)
    asked: list[tuple[str, str, int]] = field(default_factory=list)  # zone, bailiwick, width
    next: list[tuple[str, int]] = field(default_factory=list)
    pool: list[tuple[str, float]] = field(default_factory=list)  # global: scored children

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, asks: list[Ask] | None = None,
                 asked: list[tuple[str, str, int]] | None = None,
                 next: list[tuple[str, int]] | None = None,
                 pool: list[tuple[str, float]] | None = None) -> None:
        self.asks = [] if asks is None else asks
        self.asked = [] if asked is None else asked
        self.next = [] if next is None else next
        self.pool = [] if pool is None else pool


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Walk:
    """Rounds of the beam walk from branches down to leaves, collecting the leaves' lists.

    With ``search="global"`` every round is one level: the children referred (or cached)
    for all zones of the level are pooled with their scores and the best B go on; the
    referral cache then holds (child, score) pairs and the query mock is not used (its
    local scores are not comparable with the servers').

    With an ``a2x-POLICY`` search the servers' scores are asked for as well and, at every
    zone, each child A2X's policy selects from the referred (top-K) children's scores is
    descended into (:func:`nodes.resolver.merge.select`; one round per level); referrals
    are cached with their scores and the query mock is not used either."""

    def __init__(self, ctx: Context, req: Discovery, result: DiscoveryResult, known: Known
                 ) -> None:
        self.ctx, self.req, self.result, self.known = ctx, req, result, known
        self.intent = Intent(req.intent, k=req.k)
        self.key = (req.service, req.proto, req.intent, req.k)
        # how each level narrows (the beam, the global pool, A2X's selection): the one
        # policy the evaluator's in-process walk runs too
        self.descent = descent = Descent(ctx.config.search, req.beam or ctx.config.beam)
        self.pooled = descent.pooled
        self.scored = descent.scored  # referrals kept with scores
        self.width = descent.width
        self.results: dict[str, list[Endpoint]] = {}
        self.order: list[str] = []  # leaves in the order reached

    def restart(self) -> None:
        """Forget the leaves reached (a second walk from other zones)."""
        self.results, self.order = {}, []

    def merged(self, k: int) -> list[Endpoint]:
        """The leaves' lists merged by the configured policy (``ResolverConfig.merge``), with
        their scores when the servers were asked for them, cut to K."""
        config = self.ctx.config
        lists = [self.results[z] for z in self.order]
        scores = ([[_NO_SCORE if e.score is None else e.score for e in lst] for lst in lists]
                  if config.merges_by_score else None)
        return config.merge_policy(lists, scores, k, _TARGET)

    def rounds(self, branches: list[tuple[str, int]]) -> Rounds[None]:
        ctx, result = self.ctx, self.result
        dnssec = ctx.config.dnssec
        for _ in range(ctx.config.max_rounds):
            level = _Level()
            self._local(branches, level)
            if not level.asks and not level.pool:
                break
            replies: list[Reply] = []
            if level.asks and dnssec:  # each asked zone's DNSKEY, checked against its DS
                yield from fetch_keys(ctx, {b: a.servers for (_, b, _), a in
                                            zip(level.asked, level.asks, strict=True)}, result)
            if level.asks:
                replies = yield level.asks
            for (zone, bailiwick, width), reply in zip(level.asked, replies, strict=True):
                if dnssec and reply.msg is not None:
                    reply = validated(ctx, reply, bailiwick, result)
                if reply.msg is None:
                    self._failed(zone, width, reply, level)
                else:
                    self._answered(zone, bailiwick, width, reply.msg, level)
            level.next += self.descent.end(level.pool)  # global: the best B of the level
            branches = level.next

    def _leaf(self, zone: str, endpoints: list[Endpoint]) -> None:
        self.results[zone] = endpoints
        self.order.append(zone)

    def _local(self, branches: list[tuple[str, int]], level: _Level) -> None:
        """Local steps first (SRV and referral caches, query mock), else an ask."""
        caches, result, req = self.ctx.caches, self.result, self.req
        key = self.key
        cached = caches.config.cache  # without a cache every lookup below finds nothing
        while branches:
            zone, width = branches.pop(0)
            if cached:
                cached_srv = caches.get(caches.srv, (zone, *key))
                if cached_srv is not None:
                    result.cache["srv_hit"] += 1
                    self._leaf(zone, list(cached_srv))
                    continue
                ranked = caches.get(caches.referrals, (zone, *key))
                if ranked is not None:
                    result.cache["referral_hit"] += 1
                    branches = self.descent.step(ranked, width, level.pool) + branches
                    continue
                if not self.scored and not caches.is_leaf(zone, req.service):
                    mocked = caches.mock(zone, req.service, self.intent)
                    if mocked is not None:
                        result.cache["mock_hit"] += 1
                        branches = narrow(mocked, width) + branches
                        continue
            bailiwick, servers = caches.servers_for(zone, self.known)
            if bailiwick == zone and zone not in self.known:
                result.cache["ns_hit"] += 1
            level.asks.append(Ask(cursor_name(req.service, zone, req.proto), TYPE_SRV,
                                  servers, self.intent))
            level.asked.append((zone, bailiwick, width))

    def _failed(self, zone: str, width: int, reply: Reply, level: _Level) -> None:
        """No answer from ``zone``: serve its expired data if allowed (RFC 8767)."""
        caches, result = self.ctx.caches, self.result
        result.error = f"{zone}: {reply.error}"
        stale = caches.get_stale(caches.srv, (zone, *self.key))
        if stale is not None:  # the leaf's expired answer
            result.cache["stale_srv"] += 1
            self._leaf(zone, list(stale))
            return
        stale = caches.get_stale(caches.referrals, (zone, *self.key))
        if stale is not None:
            result.cache["stale_referral"] += 1
            level.next.extend(self.descent.step(stale, width, level.pool))

    def _answered(self, zone: str, bailiwick: str, width: int, msg: Answer, level: _Level
                  ) -> None:
        """A leaf's tools, a semantic referral (the zone's top-K children), or a step
        towards the zone."""
        ctx, caches, result, req = self.ctx, self.ctx.caches, self.result, self.req
        tools = derive(msg, ("tools", zone), lambda: _tools_of(msg, zone))
        if tools is not None:
            found, ttl = tools
            endpoints = _scored(ctx, list(found), msg)
            caches.put(caches.srv, (zone, *self.key), endpoints, ttl)
            self._leaf(zone, endpoints)
            return
        children = caches.learn_referral(msg, bailiwick, self.known)
        if not children:
            if msg.header.rcode == RC_NXDOMAIN:
                result.rcode = "NXDOMAIN"
            return
        port = ctx.config.dns_port  # children: a function of msg, bailiwick and port
        below_zone, ns_ttl, towards = derive(
            msg, ("children", zone, bailiwick, port),
            lambda: _children_of(msg, zone, bailiwick, children))
        if ns_ttl is not None:  # semantic referral: the zone's top-K children
            under, ttl = list(below_zone), ns_ttl
            if self.scored:
                scored = _scored_children(ctx, under, msg)
                caches.put(caches.referrals, (zone, *self.key), scored, ttl)
                level.next.extend(self.descent.step(scored, width, level.pool))
                return
            caches.put(caches.referrals, (zone, *self.key), under, ttl)
            if req.k == 0:
                caches.learn_hints(msg, req.service, zone, ttl)
            level.next.extend(self.descent.step(under, width, level.pool))
        elif towards:  # a step towards the zone
            level.next.append((zone, width))
        else:
            ctx.stats["bogus_referral"] += 1
            result.error = f"{zone}: referral to {children} is out of the walk"


def warm(ctx: Context, req: Discovery, result: DiscoveryResult) -> Rounds[DiscoveryResult]:
    """K = 0 cache warming: a breadth-first walk over non-leaf zones, one round per level,
    caching every delegation and child list below ``req.start``."""
    caches = ctx.caches
    intent = Intent("", k=0)
    known: Known = {}
    level = [normalise(req.start)]
    while level:
        asks, asked = [], []
        for zone in level:
            bailiwick, servers = caches.servers_for(zone, known)
            asks.append(Ask(cursor_name(req.service, zone, req.proto), TYPE_SRV, servers,
                            intent))
            asked.append((zone, bailiwick))
        replies = yield asks
        level = []
        for (zone, bailiwick), reply in zip(asked, replies, strict=True):
            if reply.msg is None:
                result.error = f"{zone}: {reply.error}"
                continue
            children = caches.learn_referral(reply.msg, bailiwick, known)
            if bailiwick != zone:
                level.extend(c for c in children if below(zone, c))
                continue
            ttl = min((rr.ttl for rr in reply.msg.auth if rr.rtype == TYPE_NS), default=0)
            caches.learn_hints(reply.msg, req.service, zone, ttl)
            infos = caches.get(caches.children, (zone, req.service)) or []
            level.extend(c.zone for c in infos if not c.leaf)
        result.leaves = caches.zones_with_children(req.service)
    result.finished = ctx.now
    return result


def resolve_targets(ctx: Context, endpoints: list[Endpoint], result: DiscoveryResult,
                    known: Known) -> Rounds[list[Endpoint]]:
    """A lookups for SRV targets (one parallel round), unless cached."""
    caches, dnssec = ctx.caches, ctx.config.dnssec
    addresses: dict[str, str] = {}
    need: list[Endpoint] = []
    for ep in endpoints:
        addr = caches.get(caches.addr, ep.target)
        if addr is None and ctx.config.a_from_additional and ep.address:
            addr = ep.address
        if addr is not None:
            result.cache["a_hit"] += 1
            addresses[ep.target] = addr
        elif ep.target not in {n.target for n in need}:
            need.append(ep)
    where = [caches.servers_for(ep.zone, known) for ep in need]
    asks = [Ask(ep.target, TYPE_A, servers, None) for ep, (_, servers) in
            zip(need, where, strict=True)]
    if asks and dnssec:
        yield from fetch_keys(ctx, dict(where), result)
    replies = (yield asks) if asks else []
    if dnssec:
        replies = [validated(ctx, r, b, result) if r.msg is not None else r
                   for r, (b, _) in zip(replies, where, strict=True)]
    for ep, reply in zip(need, replies, strict=True):
        a = [rr for rr in (reply.msg.rr if reply.msg else []) if rr.rtype == TYPE_A
             and normalise(rr.rname) == ep.target]
        if a:
            addresses[ep.target] = str(a[0].rdata)
            caches.put(caches.addr, ep.target, addresses[ep.target], a[0].ttl)
        elif reply.msg is None:
            stale = caches.get_stale(caches.addr, ep.target)
            if stale is not None:
                result.cache["stale_a"] += 1
                addresses[ep.target] = stale
    # replace(ep, address=…) without its overhead: every field of Endpoint, in order (a
    # field added to Endpoint must be added here too)
    return [Endpoint(ep.target, addresses[ep.target], ep.port, ep.priority, ep.weight, ep.zone,
                     ep.score, ep.address6)
            for ep in endpoints if ep.target in addresses]


def endpoints_of(msg: DNSRecord, zone: str) -> list[Endpoint]:
    """The SRV answers of a reply (dnslib's, or a ``nodes.dns.message.Message`` of the same
    shape), with the A glue of their targets."""
    glue = {normalise(rr.rname): str(rr.rdata) for rr in msg.ar if rr.rtype == TYPE_A}
    out = []
    for rr in msg.rr:
        if rr.rtype != TYPE_SRV:
            continue
        target = normalise(rr.rdata.target)
        out.append(Endpoint(target, glue.get(target), rr.rdata.port, rr.rdata.priority,
                            rr.rdata.weight, normalise(zone)))
    return out


def _children_of(msg: Answer, zone: str, bailiwick: str, children: list[str]
                 ) -> tuple[tuple[str, ...], int | None, bool]:
    """How a referral's ``children`` (learnt with ``bailiwick``) stand to ``zone``: those
    below it, the NS records' lowest TTL when it is a semantic referral (children below
    ``zone`` referred by ``zone`` itself; else None), and whether a child encloses
    ``zone`` (a step towards it)."""
    under = tuple(c for c in children if c != zone and below(c, zone))
    if under and bailiwick == zone:
        return under, min(rr.ttl for rr in msg.auth if rr.rtype == TYPE_NS), False
    return under, None, any(below(zone, c) for c in children)


def _tools_of(msg: Answer, zone: str) -> tuple[tuple[Endpoint, ...], int] | None:
    """A leaf's answer: its endpoints and their SRV records' lowest TTL (None: no SRV)."""
    ttls = [rr.ttl for rr in msg.rr if rr.rtype == TYPE_SRV]
    if not ttls:
        return None
    return tuple(endpoints_of(msg, zone)), min(ttls)


def _scores_of(ctx: Context, msg: Answer, n: int) -> list[float]:
    """The reply's scores option (one per choice), or -inf for each if it sent none."""
    try:
        scores = get_scores(msg, ctx.config.scores_code)
    except IntentError:
        scores = None
    if scores is None or len(scores) != n:
        ctx.stats["missing_scores"] += 1
        return [_NO_SCORE] * n
    return scores


def _scored(ctx: Context, endpoints: list[Endpoint], msg: Answer) -> list[Endpoint]:
    if not ctx.config.wants_scores:
        return endpoints
    scores = _scores_of(ctx, msg, len(endpoints))
    return [replace(e, score=s) for e, s in zip(endpoints, scores, strict=True)]


def _scored_children(ctx: Context, under: list[str], msg: Answer) -> list[tuple[str, float]]:
    """Referred children with their scores; the option lists one per NS owner name."""
    owners = list(dict.fromkeys(normalise(rr.rname) for rr in msg.auth
                                if rr.rtype == TYPE_NS))
    scores = dict(zip(owners, _scores_of(ctx, msg, len(owners)), strict=True))
    return [(c, scores.get(c, _NO_SCORE)) for c in under]
