"""Governance and trust in scenario runs: the resolver's trust policy per scheme, and what
each policy let through when a rogue publisher is present (``namespace.rogue``).

The trust list of a policy is built from the namespace as a certification authority would
publish it: the certified organisation zones (``ZoneNode.org``), all of them for
``certified`` and ``public-then-certified``, those of ``orgs`` for ``allowlist``. A
compromised organisation stays on the list (its certification was not revoked), which is
exactly the case a trust list cannot catch.
"""

from __future__ import annotations

import pandas as pd

from nodes.dns.dnssec import ZoneSigner, trust_anchor
from nodes.trust import TrustPolicy
from sim.build.hierarchy import Hierarchy
from sim.errors import ScenarioError
from sim.schemes import TrustSpec
from topologies.namespace import Namespace


def trust_policy(spec: TrustSpec, ns: Namespace, field: str = "trust") -> TrustPolicy | None:
    """The resolver-side policy for a scenario/scheme trust spec (None: no filtering)."""
    if spec.policy == "open" or spec.policy == "org":
        return None  # org: the walk starts at its zone (sim.build.namespace.start_zone)
    certified = {z: n.org for z, n in ns.zones.items() if n.org is not None}
    if spec.policy == "allowlist":
        missing = sorted(set(spec.orgs) - set(certified.values()))
        if missing:
            raise ScenarioError(f"{field}.orgs: no zone of organisation(s) "
                                f"{', '.join(missing)} in the namespace")
        zones = sorted(z for z, org in certified.items() if org in spec.orgs)
    else:
        zones = sorted(certified)
        if not zones:
            raise ScenarioError(f"{field}.policy: '{spec.policy}' needs certified "
                                f"organisation zones (namespace.orgs > 0)")
    return TrustPolicy(spec.policy, tuple(zones))


def trust_report(df: pd.DataFrame, ns: Namespace, policies: dict[str, str]) -> dict:
    """Per scheme: rogue tools returned, queries that got one, recall and latency."""
    rogue = ns.rogue
    out: dict[str, dict] = {}
    for scheme, g in df.groupby("scheme", sort=False):
        returned = [r.split() for r in g.returned.fillna("")]
        n_rogue = [sum(t in rogue for t in r) for r in returned]
        ok = g[g.success]
        out[str(scheme)] = {
            "policy": policies.get(str(scheme), "open"),
            "queries": len(g),
            "rogue_returned": int(sum(n_rogue)),
            "queries_with_rogue": int(sum(n > 0 for n in n_rogue)),
            "rogue_at_1": int(sum(bool(r) and r[0] in rogue for r in returned)),
            "recall_at_k": round(float(g.hit_at_k.mean()), 6),
            "hit_at_1": round(float(g.hit_at_1.mean()), 6),
            "success": round(float(g.success.mean()), 6),
            "median_latency_ms": round(float(ok.latency_ms.median()), 6) if len(ok) else None,
            "mean_round_trips": round(float(g.round_trips.mean()), 6),
            "mean_bytes": round(float((g.bytes_up + g.bytes_down).mean()), 3),
        }
    base = next((v for v in out.values() if v["policy"] == "open"), None)
    if base is not None:
        for v in out.values():
            v["recall_cost"] = round(base["recall_at_k"] - v["recall_at_k"], 6)
            if v["median_latency_ms"] is not None and base["median_latency_ms"] is not None:
                v["latency_cost_ms"] = round(v["median_latency_ms"]
                                             - base["median_latency_ms"], 6)
    return {"rogue_tools": len(rogue), "schemes": out}


def sign_hierarchy(hierarchy: Hierarchy, seed: int | str) -> str:
    """Sign every zone of a hierarchy (``namespace.dnssec``, ``tooldns serve --dnssec``,
    ``tooldns export-zones --sign``): each server gets a :class:`nodes.dns.dnssec.ZoneSigner`
    for the zones it holds, with keys derived from ``seed`` (online signatures and denial proofs,
    DNSKEY and DS answers, signed transfers); returns the trust anchor (root DS)."""
    for server in hierarchy.servers.values():  # every zone it holds (a hosting server of
        server.signer = ZoneSigner(str(seed), server.zones)  # the organisations' holds many)
        server._cache.clear()  # replies cached before signing was switched on
    return trust_anchor(str(seed))
