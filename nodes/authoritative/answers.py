"""Building answers from a zone's state: referrals, SRV + A answers, CNAME chains, negatives.

Each function takes a :class:`~nodes.authoritative.zonestate.ZoneState` and returns a
:class:`~nodes.authoritative.reply.Reply` (with the kind of answer, a counter key, where
the caller counts it): the top-K children as a referral with glue (K = 0: all, with their
summaries), a leaf's top-K SRV records with their targets' addresses, an intent carried in
the name answered with a CNAME one level down, plain records, and NODATA/NXDOMAIN with the
zone's SOA.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodes.authoritative.reply import NOERROR, NXDOMAIN, Reply
from nodes.authoritative.zonefile import WALK_TYPE
from nodes.authoritative.zonestate import Child, ZoneState, child_index
from nodes.dns.codec import AAAA, ANY, CNAME, NS, SRV, A, Rec
from nodes.dns.wire import (
    PROTOCOLS,
    SERVICES,
    IntentName,
    encode_scores,
    parse_intent_labels,
    retarget,
)
from nodes.scoring import Ranker, ScoreIndex, Scorer, ranker, scored_top_k

_PROTO_LABELS = frozenset("_" + p for p in PROTOCOLS)  # the last label of an intent name
_WALK_SERVICES = frozenset("_" + s for s in SERVICES)  # services with walk records


def choose(index: ScoreIndex, rank: Ranker, text: str, k: int,
           candidates: Sequence[int] | None, want_scores: bool
           ) -> tuple[list[int], bytes | None]:
    """The top-K choices, and the scores option data for them when the query asked."""
    if not want_scores:
        return rank(text, k, candidates), None
    chosen, scores = scored_top_k(index, text, k, candidates)
    return chosen, encode_scores(scores)


def referral(children: Sequence[Child], hints: bool) -> Reply:
    """NS records of ``children`` with their glue (and, for K = 0, their summaries)."""
    authority: list[Rec] = []
    additional: list[Rec] = []
    for child in children:
        authority += child.ns
    for child in children:
        additional += child.glue
    if hints:  # K = 0 asks for the summaries: they are not optional here
        additional += [child.hint for child in children]
    return Reply(NOERROR, False, (), authority, additional, 0, len(additional))


def semantic(state: ZoneState, scorer: Scorer, service: str, proto: str, text: str, k: int,
             want_scores: bool = False) -> Reply:
    """An intent at a zone's cursor: a leaf's top-K tools, else a referral to its top-K
    children offering ``service`` (NODATA when none does)."""
    if state.leaf:
        return tools_answer(state, scorer, service, proto, text, k, want_scores)
    chosen, scores = top_children(state, scorer, service, text, k, want_scores)
    if not chosen:
        return state.negative[NOERROR]
    children = state.children
    reply = referral([children[i] for i in chosen], k == 0)
    reply.scores = scores
    return reply


def top_children(state: ZoneState, scorer: Scorer, service: str, text: str, k: int,
                 want_scores: bool = False) -> tuple[list[int], bytes | None]:
    """Indices of the zone's top-K children offering ``service`` (K = 0: all)."""
    kids = state.data.children
    if state.by_centroid:  # routing vectors differ per service
        entry = state.service_index.get(service)
        if entry is None:
            index = child_index(scorer, kids, service)
            entry = state.service_index[service] = (index, ranker(index))
        index, rank = entry
    else:
        entry = state.child_ranking
        if entry is None:
            index = child_index(scorer, kids)
            entry = state.child_ranking = (index, ranker(index))
        index, rank = entry
    eligible = state.eligible.get(service)
    if eligible is None:
        eligible = [i for i, c in enumerate(kids) if service in c.services]
        state.eligible[service] = eligible
    return choose(index, rank, text, k, eligible, want_scores)


def tools_answer(state: ZoneState, scorer: Scorer, service: str, proto: str, text: str,
                 k: int, want_scores: bool = False) -> Reply:
    """A leaf's top-K SRV records (owned by the query name, each with its rank as its
    priority: ``Reply.ranked``) with the targets' A (then AAAA) records; NODATA when the
    leaf has no tool of the service."""
    tools = state.tools.get((service, proto))
    if tools is None:
        tools = state.tools_of(service, proto, scorer)
    if not tools.tools:
        return state.negative[NOERROR]
    chosen, scores = choose(tools.index, tools.rank, text, k, None, want_scores)
    records = tools.records
    picked = [records[i] or tools.prepare(i) for i in chosen]
    additional = [recs[1] for recs in picked]
    if tools.aaaa:  # every A first: under the size limit IPv4 addresses go first
        additional += [recs[2] for recs in picked if recs[2] is not None]
    return Reply(NOERROR, True, [recs[0] for recs in picked], (), additional, scores=scores,
                 ranked=True)


def standard(state: ZoneState, scorer: Scorer, qname: str, qtype: int,
             cname_referral: bool) -> tuple[str, Reply]:
    """A question without an intent option: the zone's records at ``qname`` (with the
    addresses of SRV/NS targets), an intent carried in the name, or a negative answer."""
    node = state.node(qname)
    if node is None:
        if qname not in state.names:
            return named_intent(state, scorer, qname, qtype, cname_referral)
        return "nodata", state.negative[NOERROR]
    rrs = [r for rs in node.values() for r in rs] if qtype == ANY else node.get(qtype)
    if not rrs:
        return "nodata", state.negative[NOERROR]
    additional: list[Rec] = []
    if qtype in _TARGETED:  # additional-section processing (RFC 1034 §4.3.2, RFC 9460 §4.1)
        targets = _targets(rrs, qtype, qname)
        for target in targets:
            additional.extend((state.node(target) or {}).get(A, ()))
        if state.data.aaaa:  # then the targets' AAAA (A first, as above)
            for target in targets:
                additional.extend((state.node(target) or {}).get(AAAA, ()))
    return "standard", Reply(NOERROR, True, rrs, (), additional)


SVCB, HTTPS = 64, 65
_TARGETED = frozenset((SRV, NS, SVCB, HTTPS))  # types whose targets' addresses ride along


def _targets(rrs: Sequence[Rec], qtype: int, qname: str) -> list[str]:
    """The names whose addresses go in the additional section: the last name in SRV and NS
    RDATA, the TargetName of SVCB and HTTPS ("." being the owner)."""
    if qtype in (SRV, NS):
        return [t for rec in rrs if isinstance(t := rec.rdata[-1], str)]
    names = [t for rec in rrs if len(rec.rdata) > 1 and isinstance(t := rec.rdata[1], str)]
    return [qname if t == "." else t for t in names]


def _relative(state: ZoneState, qname: str) -> list[str]:
    """The labels of ``qname`` below the zone's apex."""
    relative = qname[: len(qname) - len(state.name)] if state.name != "." else qname
    return relative.rstrip(".").split(".")


def _denied(labels: list[str]) -> bool:
    """Whether a name the zone does not hold, of these labels below the apex, does not
    exist: anything but ``_proto.<zone>`` and the names below ``_svc._proto.<zone>``."""
    return labels[-1] not in _PROTO_LABELS or (len(labels) > 1
                                               and not labels[-2].startswith("_"))


def _walked(labels: list[str], intent: IntentName | None, leaf: bool) -> bool:
    """Whether a name the zone does not hold has the record of
    :func:`nodes.authoritative.zonefile.walk_records` (TYPE65280, empty): below
    ``_svc._proto.<zone>`` for a ToolDNS service and protocol, where copies of the zone
    expand its wildcard, except at intent names of a non-leaf zone (CNAMEs)."""
    return (len(labels) > 2 and labels[-2] in _WALK_SERVICES and labels[-1] in _PROTO_LABELS
            and (intent is None or leaf))


def name_exists(state: ZoneState, name: str) -> bool:
    """Whether ``name`` (in the zone, not below a cut) exists: held, an empty non-terminal
    or one of the names ToolDNS answers as existing below ``_proto.<zone>``."""
    return name == state.name or name in state.names or not _denied(_relative(state, name))


def walk_types(state: ZoneState, name: str) -> tuple[int, ...]:
    """(TYPE65280,) at the names a zone not holding ``name`` answers it (:func:`_walked`),
    else ()."""
    if name == state.name or name in state.names:
        return ()
    labels = _relative(state, name)
    walked = not _denied(labels) and _walked(labels, parse_intent_labels(labels), state.leaf)
    return (WALK_TYPE,) if walked else ()


def named_intent(state: ZoneState, scorer: Scorer, qname: str, qtype: int,
                 cname_referral: bool) -> tuple[str, Reply]:
    """A name the zone does not hold: an intent carried in the name (CNAME one level
    down, or the leaf's top-K SRV), an empty non-terminal above one, or NXDOMAIN. Below
    ``_svc._proto.<zone>``, TYPE65280 (and ANY, but at a leaf's intent names) gets the walk
    record its copies expand from their wildcard."""
    labels = _relative(state, qname)
    if _denied(labels):
        return "nxdomain", state.negative[NXDOMAIN]
    intent = parse_intent_labels(labels)
    if (qtype == WALK_TYPE or (qtype == ANY and intent is None)) and _walked(
            labels, intent, state.leaf):
        return "walk", Reply(NOERROR, True, [Rec("", WALK_TYPE, state.data.ttls.ns, (b"",))])
    if intent is None:
        return "intent_ent", state.negative[NOERROR]
    if state.leaf:
        if qtype != SRV and qtype != ANY:
            return "intent_nodata", state.negative[NOERROR]
        return "intent_srv", tools_answer(state, scorer, intent.service, intent.proto,
                                          intent.text, intent.k)
    return intent_cname(state, scorer, intent, cname_referral)


def intent_cname(state: ZoneState, scorer: Scorer, intent: IntentName,
                 cname_referral: bool) -> tuple[str, Reply]:
    """A CNAME to the same intent labels under the zone's best child, with that child's NS
    and glue when ``cname_referral``."""
    chosen = top_children(state, scorer, intent.service, intent.text, 1)[0]
    if not chosen:
        return "intent_nodata", state.negative[NOERROR]
    child = state.children[chosen[0]]
    target = retarget(intent, child.data.zone)
    if len(target) > 254:  # would not fit in a name: no answer rather than a bad one
        return "intent_too_long", state.negative[NOERROR]
    cname = Rec("", CNAME, state.data.ttls.ns, (target,))
    if not cname_referral:
        return "intent_cname", Reply(NOERROR, True, [cname])
    return "intent_cname", Reply(NOERROR, True, [cname], child.ns, child.glue,
                                 required=len(child.glue))
