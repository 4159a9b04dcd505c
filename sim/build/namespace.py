"""The scenario's namespace: the ``tools.`` zone tree, its shared encoder, the walk's
start zone, and the catalogue mirror the DNS-native schemes search."""

from __future__ import annotations

from pathlib import Path

from nodes.agent.mirror import Candidate, Mirror
from nodes.scoring import CachedEncoder, Scorer, default_encoder
from nodes.searchcost import SearchCost
from sim.errors import ScenarioError
from sim.scenario import Scenario
from topologies import orgzones
from topologies.catalog import from_catalog
from topologies.datasets import load_catalog, load_queries
from topologies.encoders import disk_cached_encoder
from topologies.learned import log_split
from topologies.namespace import Namespace
from topologies.rogue import inject_rogue
from topologies.synthetic import synthetic
from topologies.taxonomy_namespace import taxonomy_namespace

_ENCODERS: dict[str, CachedEncoder] = {}  # one model (and cache) per process and folder


def namespace_encoder(sc: Scenario) -> CachedEncoder | None:
    """The dense scenario's shared sentence encoder (disk-cached with ``cache_dir``)."""
    if sc.namespace.scorer != "dense" and not (sc.namespace.taxonomy and (
            sc.namespace.taxonomy.vectors == "dense" or sc.namespace.taxonomy.centroids)):
        return None
    key = sc.namespace.cache_dir or ""
    if key not in _ENCODERS:
        _ENCODERS[key] = disk_cached_encoder(key) if key else default_encoder()
    return _ENCODERS[key]


def build_namespace(sc: Scenario) -> Namespace:
    """The zone tree of ``sc``: synthetic, a catalogue's own categories or a taxonomy over
    it; a rogue publisher's tools injected when the scenario has one."""
    spec = sc.namespace
    if spec.source == "catalog":
        assert spec.catalog is not None
        queries = spec.queries
        if queries is None and (Path(spec.catalog).parent / "queries.jsonl").exists():
            queries = str(Path(spec.catalog).parent / "queries.jsonl")
        if spec.taxonomy is None:  # the catalogue's own categories
            ns = from_catalog(spec.catalog, queries, limit=spec.limit, protocols=spec.protocols)
        else:
            rows = load_catalog(spec.catalog, spec.limit, spec.protocols)
            qrows = load_queries(queries, [r["id"] for r in rows]) if queries else []
            log: list[dict] = []
            if spec.taxonomy.routing_log is not None:  # learned routing: replay the test part
                log, qrows = log_split(rows, qrows, spec.taxonomy.routing_log.test_fraction,
                                       sc.seed)
            ns = taxonomy_namespace(spec.taxonomy, rows, qrows, sc.seed,
                                    f"{sc.name}:{spec.taxonomy.kind}", namespace_encoder(sc),
                                    log)
    else:
        n_queries = max(sc.workload.pool or 0, sc.workload.queries, 200)
        ns = synthetic(n_tools=spec.tools, branching=spec.branching, depth=spec.depth,
                       seed=sc.seed, n_orgs=spec.orgs, org_tools=spec.org_tools,
                       n_queries=n_queries, vocabulary=spec.vocabulary)
    if spec.rogue is not None:  # a rogue publisher's look-alike tools (sim.build.trust)
        r = spec.rogue
        try:
            inject_rogue(ns, r.tools, r.mode, r.org, r.victim_org, sc.seed)
        except ValueError as exc:
            raise ScenarioError(f"namespace.rogue: {exc}") from None
    return ns


def start_zone(sc: Scenario, ns: Namespace) -> str:
    """Where walks start: ``tools.``, or the trusted organisation's first zone (trust org)."""
    if sc.trust.policy != "org":
        return "tools."
    zones = sorted(z for z, node in ns.zones.items() if node.org == sc.trust.org)
    if not zones:
        raise ScenarioError(f"trust.org: no zone of organisation {sc.trust.org!r} in the "
                            f"namespace")
    return zones[0]


def catalogue_mirror(ns: Namespace, scorer: Scorer, cost: SearchCost) -> Mirror:
    """The local mirror a DNS-native scheme's agents search: every tool with its text and
    where its organisation publishes it (:mod:`topologies.orgzones`)."""
    pubs = orgzones.publications(ns).values()
    return Mirror([Candidate(p.tool_id, p.domain, p.label, p.service) for p in pubs],
                  [p.description for p in pubs], scorer, cost)
