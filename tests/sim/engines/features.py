"""One tiny scenario per feature of the engine catalogue (:data:`sim.catalog.engines.FEATURES`),
for the matrix test (``test_matrix.py``) and the catalogue's refusal test
(``test_catalog.py``): ``scenarios/engines-small.yaml`` cut to 12 queries on 5 ms links and
fixed processing times, with the feature switched on."""

from __future__ import annotations

from typing import Any

from sim.catalog.engines import Feature
from sim.scenario import Scenario
from tests.factories import scenario

QUERIES = 12
SHARDED_COLUMN = "sharded"  # the catalogue's SHARDED: a simpy run over 2 Ray workers


def base(**overrides: Any) -> Scenario:
    """engines-small on a 3-node star: one closed-loop agent, no loss, 5 ms links, resolver
    timeouts of 5 s for every scheme that does not set its own (a reply held up by a
    loaded machine is not retried: every engine exchanges the same messages; the drafts and
    registries cells, which list their schemes, had 0.5 s until a live run on a loaded CI
    machine retried one), fixed processing (no calibration), one scheme."""
    sc = scenario("engines-small", **{
        "network.link.delay.mean": 0.005, "network.processing.model": "fixed",
        "network.nodes": 3,  # few sites: few Mininet host processes to start per scheme
        "workload.queries": QUERIES, "workload.pool": 8})
    listed = overrides.get("schemes") or []  # schemes given whole: keep the timeouts they set
    own = {i for i, given in enumerate(listed) if "timeout" in given}
    sc = sc.model_copy(update={"schemes": sc.schemes[:1]}).with_overrides(overrides)
    return sc.with_overrides({f"schemes.{i}.timeout": 5.0 for i in range(len(sc.schemes))
                              if i not in own})


def feature_scenario(feature: Feature) -> Scenario:
    """A scenario that uses ``feature`` (``capture``: any scenario; the run is asked for it)."""
    return BUILDERS[feature]()


def cell_scenario(feature: Feature, column: str) -> Scenario:
    """The scenario of a cell of the catalogue: ``column`` an engine or
    :data:`SHARDED_COLUMN` (the feature's scenario over 2 workers, with two resolvers and an
    agent each, as ``shard_by: resolver`` needs one per shard)."""
    sc = feature_scenario(feature)
    if column == SHARDED_COLUMN and feature != "shards":
        sc = sc.with_overrides({"network.resolvers": 2, "network.agents": 2,
                                "engine_options.shards.workers": 2})
    return sc


#: the issue's comparison: two ToolDNS schemes, AgentDNS and ANS (plain HTTP on connections
#: kept open, with the DNS lookup of the endpoint; HTTPS)
COMPARISON = [{"name": "tooldns", "k": 3}, {"name": "global2", "k": 3, "beam": 2,
                                             "search": "global"},
              {"name": "agentdns", "kind": "agentdns", "k": 3, "keepalive": True,
               "resolve": True},
              {"name": "ans", "kind": "ans-v0", "k": 3, "tls": True}]


def _registries() -> Scenario:
    # the comparison and the MCP Registry (its name searches on one kept connection)
    return base(schemes=[*COMPARISON, {"name": "mcp", "kind": "mcp-registry", "k": 3,
                                       "keepalive": True}])


def _faults() -> Scenario:
    # the comparison's schemes, Poisson arrivals over ~2.4 s of workload time; replica 0 of
    # every zone and the registry down from 0.4 s to 1.4 s: registry queries then fail,
    # ToolDNS walks time out on replica 0 (0.5 s) and fail over to replica 1. The timeout
    # leaves a loaded machine's real-time engines room (0.2 s did not, at load 8 on Ray)
    dns = {"timeout": 0.5, "max_attempts": 2, "cache": False}
    return base(**{
        "schemes": [{**COMPARISON[0], **dns}, {**COMPARISON[1], **dns},
                    {**COMPARISON[2], "timeout": 0.5, "max_attempts": 2},
                    {**COMPARISON[3], "timeout": 0.5, "max_attempts": 2}],
        "workload.queries": 24, "workload.arrival": {"process": "poisson", "rate": 10.0},
        "faults": {"events": [{"kind": "down", "target": "replica:0", "at": 0.4,
                               "duration": 1.0},
                              {"kind": "down", "target": "registry", "at": 0.4,
                               "duration": 1.0}],
                   "bin": 0.5, "baseline": False}})  # no fault-free second run


def _capture() -> Scenario:
    # UDP (a DNS scheme) and TCP (a registry over HTTP)
    return base(schemes=[COMPARISON[0], COMPARISON[2]])


def _dot() -> Scenario:
    # a pure ACK follows a response unless the next query on the connection leaves within
    # the delayed-ACK timeout (40 ms; sim.accounting.dot_acks): think 0.1 s keeps every gap
    # far from it (within a walk a few ms, between walks over 100 ms) on every engine
    return base(**{"schemes.0.upstream": "tls", "workload.arrival.think": 0.1})


def _sessions() -> Scenario:
    return base(**{"schemes.0.name": "session",
                   "agents.session": {"schemes": ["session"], "capacity": 8}})


def _churn() -> Scenario:
    # Poisson arrivals over ~2 s; at 1 s a tool is added, one changed and one removed; one
    # probe per changed tool every 0.25 s from 0.5 s before to 1.5 s after; answers
    # cached 1 s
    return base(**{
        "workload.arrival": {"process": "poisson", "rate": 6.0},
        "caches.srv_ttl": 1, "caches.a_ttl": 1,
        "workload.churn": {
            "events": [{"at": 1.0, "action": "add", "count": 1},
                       {"at": 1.0, "action": "change", "count": 1},
                       {"at": 1.0, "action": "remove", "count": 1}],
            "probes": {"interval": 0.25, "before": 0.5, "duration": 1.5}}})


def _dense() -> Scenario:
    return base(**{"namespace.scorer": "dense"})


def _shards() -> Scenario:
    # two resolvers, an agent each: shard_by resolver gives each shard one
    return base(**{"network.resolvers": 2, "network.agents": 2,
                   "engine_options.shards.workers": 2})


def _drafts() -> Scenario:
    # every DNS-native draft: search the mirror, then the draft's questions. A round's
    # questions walk the cold tree side by side; a walk that a loaded host delays by a
    # round trip finds its sibling's referral cached and asks one query less (a Mininet
    # cell did once at 5 ms links), so the links here are 20 ms: four times the margin
    return base(schemes=[{"name": kind, "kind": kind, "k": 2}
                         for kind in ("dns-aid", "ans-v2", "dn-anr", "aid", "dns-sd")],
                **{"network.link.delay.mean": 0.02})


def _stock() -> Scenario:
    # deployable ToolDNS through Unbound itself (the simulation's run: its model), two
    # phases (cold, then the same queries warm); the aware walk beside it
    # (Mininet: user-space links, as every cell on this host; the VM test runs netem)
    return base(**{"schemes": [{"name": "tooldns", "k": 3},
                               {"name": "qname-unbound", "k": 3, "mode": "qname",
                                "resolver": "unbound"}],
                   "workload.phases": 2, "workload.gap": 0.5,
                   "engine_options.mininet.netem": "off"})


BUILDERS = {"registries": _registries, "faults": _faults, "capture": _capture, "dot": _dot,
            "sessions": _sessions, "churn": _churn, "dense": _dense, "shards": _shards,
            "drafts": _drafts, "stock": _stock}
