"""The sentence vectors a dense run plan's nodes will look up, embedded in the driver and
shipped inside the plan, so that no host process of the Ray or Mininet engine loads the
model (:func:`ship_intent_vectors`; ``nodes.scoring.model_loads`` counts the loads).

With ``namespace.scorer: dense`` every node embeds texts through its own cache
(:func:`nodes.scoring.node_encoder`: a :class:`~nodes.scoring.LayeredStore`, local
writes in front of the plan's shared store of tool texts). What a node would embed during
the run, and where the driver puts each vector before the parts are pickled:

* texts a node embeds one at a time — every job's intent (and the words of its
  intent-in-the-name form when a resolver runs ``mode: qname``), the empty intent of the
  K = 0 warm walk, ``"dimension"`` (:attr:`~nodes.scoring.DenseScorer.dim`, asked when a
  query carries the intent's embedding), a tool churn adds: embedded alone, as the node
  does, into the shared store every node reads through;
* a server's child index (summaries or representatives; centroids need none) and a leaf's
  tools per service: the batch the server itself embeds on its first query, into that
  server's own layer;
* a resolver's query mock (K = 0 referrals' child summaries, as parsed from the hints) and
  an ANS agent's capability and agent lists: the same, into that node's own layer.

Why batches and not one big one: a transformer's output for a text depends (in the last
bits, ~1e-7) on the batch it is padded into, so each vector is embedded in the very batch
the node would embed it in and results are unchanged bit for bit. Two kinds of batch
depend on what the node met first (a resolver's child lists of two services of one zone,
an ANS agent's capability lists of two services): those follow the order of the jobs.
Anything not foreseen here is still computed by the node (its model loaded: the count
says so), never answered differently.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from nodes.authoritative.zonestate import child_hint, child_index
from nodes.dns.wire import intent_qname, parse_intent_qname
from nodes.dns.zone import Delegation, ZoneData
from nodes.registry.ans import ANSRegistry
from nodes.registry.client import RegistryAgent
from nodes.resolver.caches import _parse_hint
from nodes.scoring import (
    DIMENSION_PROBE,
    CachedEncoder,
    DenseScorer,
    LayeredStore,
    ScoreIndex,
)
from sim.build.runplan import RunPlan


class _NoIndex:
    def scores(self, intent: str) -> np.ndarray:
        return np.zeros(0)


class _Batches:
    """A stand-in scorer recording the texts an index build would embed (a dense
    scorer's ``index`` embeds exactly its ``texts``, in one call)."""

    name = "dense"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        self.batches.append(list(texts))
        return _NoIndex()

    def vector_index(self, keys: Sequence[str], matrix: np.ndarray) -> ScoreIndex:
        return _NoIndex()


class _Shipper:
    """Embeds batches as nodes would, each distinct batch once (replicas share it)."""

    def __init__(self) -> None:
        self._done: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}
        self.embedded = 0

    def fill(self, encoder: CachedEncoder, texts: Sequence[str]) -> None:
        """What ``encoder(texts)`` leaves in ``encoder.store``: the texts it lacks,
        embedded in one batch (:meth:`nodes.scoring.CachedEncoder.__call__`)."""
        store = encoder.store
        missing = list(dict.fromkeys(t for t in texts if t not in store))
        if not missing:
            return
        key = (id(encoder._encode), tuple(missing))
        vectors = self._done.get(key)
        if vectors is None:
            vectors = self._done[key] = encoder._encode(missing)
            self.embedded += len(missing)
        for text, vec in zip(missing, vectors, strict=True):
            store[text] = vec


def _encoder(scorer: object) -> CachedEncoder | None:
    """The cached encoder of a dense scorer (None for any other scorer)."""
    if isinstance(scorer, DenseScorer) and isinstance(scorer.encoder, CachedEncoder):
        return scorer.encoder
    return None


def _shared(encoder: CachedEncoder) -> CachedEncoder:
    """An encoder over the store every node reads through (a node's own layer's
    ``shared``; the encoder itself when it is not layered)."""
    store = encoder.store
    if isinstance(store, LayeredStore):
        return CachedEncoder(encoder._encode, store.shared)
    return encoder


def _zone_batches(data: ZoneData) -> list[list[str]]:
    """What a server of ``data`` embeds to build its indexes
    (``nodes.authoritative.answers.top_children``, ``ZoneState.tools_of``)."""
    rec = _Batches()
    kids = data.children
    if kids and not any(c.centroids for c in kids):  # centroids: vectors, no text
        child_index(rec, kids)
    by_kind: dict[tuple[str, str], list[str]] = {}
    for t in data.tools:
        by_kind.setdefault((t.service, t.proto), []).append(f"{t.name} {t.description}")
    return rec.batches + list(by_kind.values())


def _hint_summary(child: Delegation) -> str:
    """A child's summary as a resolver reads it back from the K = 0 referral's hint."""
    return _parse_hint(child_hint(child)).get("summary", "")


def _services(plan: RunPlan, agent: str | None = None) -> list[str]:
    """Services of the plan's jobs (of one agent's), in the order they are first asked."""
    order = plan.agent_order
    return list(dict.fromkeys(plan.requests[j.index].service for j in plan.jobs
                              if agent is None or order[j.agent] == agent))


def _ans_agents(plan: RunPlan) -> Iterator[tuple[str, RegistryAgent, CachedEncoder]]:
    for ip, agent in plan.agents.items():
        if isinstance(agent, RegistryAgent) and agent.config.kind == "ans-v0":
            encoder = _encoder(agent.scorer)
            if encoder is not None:
                yield ip, agent, encoder


def _singles(plan: RunPlan) -> list[str]:
    """The texts nodes embed alone: intents (and their forms), probes, churned tools."""
    requests = [plan.requests[j.index] for j in plan.jobs]
    texts = [r.intent for r in requests]
    if any(r.config.mode == "qname" for r in plan.resolvers.values()):
        for r in requests:  # what a server reads back from the name's labels
            try:
                named = parse_intent_qname(intent_qname(r.intent, 1, zone="tools."), "tools.")
            except ValueError:  # no letter or digit: the agent cannot ask it in a name
                continue
            if named is not None:
                texts.append(named.text)
    if plan.warm_services:
        texts.append("")  # the warm walk's K = 0 intent
    if any(r.config.send_embedding for r in plan.resolvers.values()):
        texts.append(DIMENSION_PROBE)
    if plan.churn is not None:
        ans = any(True for _ in _ans_agents(plan))
        for ch in plan.churn.changes:
            if ch.new is not None:
                texts.append(f"{ch.new.name} {ch.new.description}")
                if ans:
                    texts.append(ch.new.description)
    return list(dict.fromkeys(texts))


def _registry(plan: RunPlan) -> tuple[CachedEncoder, list[str]] | None:
    """The registry's encoder and the texts its catalogue index embeds."""
    app = plan.registry.server.app if plan.registry is not None else None
    catalogue = getattr(app, "catalogue", None)
    encoder = None if catalogue is None else _encoder(catalogue.scorer)
    if catalogue is None or encoder is None:
        return None
    return encoder, [f"{t.name} {t.description}" for t in catalogue.tools]


def ship_intent_vectors(plan: RunPlan) -> int:
    """Embed, in this process, every text the plan's dense nodes would embed during the
    run, and store each vector where the node's encoder finds it (see the module
    docstring); call it before the plan's nodes are pickled. Returns the number of texts
    embedded (0, and nothing touched, for a plan without dense nodes)."""
    servers = [(s, e) for s in plan.hierarchy.servers.values()
               if (e := _encoder(s.scorer)) is not None]
    resolvers = [(r, e) for r in plan.resolvers.values()
                 if (e := _encoder(r.scorer)) is not None]
    agents = list(_ans_agents(plan))
    registry = _registry(plan)
    nodes = [e for _, e in servers] + [e for _, e in resolvers] + [e for *_, e in agents]
    if registry is not None:
        nodes.append(registry[0])
    if not nodes:
        return 0
    shipper = _Shipper()
    for server, encoder in servers:  # first: a server indexes its zone before any intent
        for zone in server.zones:
            for batch in _zone_batches(server.zone_data(zone)):
                shipper.fill(encoder, batch)
    # K = 0 referrals carry the children's summaries, which a resolver then ranks itself
    hinted = {*plan.warm_services,
              *(r.service for r in (plan.requests[j.index] for j in plan.jobs) if r.k == 0)}
    services = [s for s in dict.fromkeys([*_services(plan), *sorted(hinted)]) if s in hinted]
    parents: dict[str, tuple[Delegation, ...]] = {}  # zone -> its children
    for server in plan.hierarchy.servers.values():
        for zone in server.zones:
            data = server.zone_data(zone)
            if data.children:
                parents.setdefault(zone, data.children)
    for resolver, encoder in resolvers:
        if resolver.config.query_mock:
            for service in services:
                for zone in sorted(parents):
                    shipper.fill(encoder, [_hint_summary(c) for c in parents[zone]
                                           if service in c.services])
    app = plan.registry.server.app if plan.registry is not None else None
    for ip, _agent, encoder in agents:
        if isinstance(app, ANSRegistry):  # intent -> capability -> agent, on the client
            for service in _services(plan, ip):
                caps = app.capabilities(service)
                shipper.fill(encoder, [c["description"] for c in caps])
                for cap in caps:
                    shipper.fill(encoder, [t.description for t in app.catalogue.tools
                                           if t.capability == cap["name"]
                                           and t.service == service])
    if registry is not None:
        shipper.fill(*registry)
    shared = {id(e.store): e for e in map(_shared, nodes)}
    for text in _singles(plan):
        for encoder in shared.values():
            shipper.fill(encoder, [text])
    return shipper.embedded
