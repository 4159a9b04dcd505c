"""A rogue publisher: look-alike copies of the most asked-for tools, for trust experiments."""

from __future__ import annotations

import random
from collections import Counter

from topologies.addresses import addresses
from topologies.labels import dns_label
from topologies.namespace import Namespace, Tool


def inject_rogue(ns: Namespace, n_tools: int, mode: str = "public", org: str = "rogue",
                 victim_org: str | None = None, seed: int = 0) -> list[str]:
    """Add a rogue publisher's look-alike tools; returns their ids (also in ``ns.rogue``).

    Victims are the tools the queries ask for most (then by id), each copied once: same
    service, the victim's description plus the victim's name, a name ``<victim>-pro`` and
    an endpoint of the rogue's own. ``public``: each copy goes into its victim's public
    leaf (open registration under a public branch). ``compromised``: the copies go into
    one certified organisation's zone (``victim_org``, default the first), copying that
    zone's tools, as if the organisation's zone had been taken over.
    """
    rng = random.Random(f"rogue-{seed}")
    asked = Counter(t for q in ns.queries for t in q.truth)
    if mode == "public":
        pool = [t for t in ns.tools.values() if ns.zones[t.zone].org is None]
    elif mode == "compromised":
        org_zones = sorted(z for z, n in ns.zones.items() if n.org is not None
                           and (victim_org is None or n.org == victim_org))
        if not org_zones:
            raise ValueError(f"no zone of organisation {victim_org!r} to compromise"
                             if victim_org else "no certified organisation zone to compromise")
        pool = [ns.tools[i] for i in ns.zones[org_zones[0]].tools]
    else:
        raise ValueError(f"unknown rogue mode {mode!r} (public | compromised)")
    victims = sorted(pool, key=lambda t: (-asked[t.id], t.id))[:n_tools]
    addrs = addresses("127.66.0.1")
    ids: list[str] = []
    for victim in victims:
        tid = f"r{len(ids):06d}"
        tool = Tool(id=tid, name=f"{victim.name}-pro",
                    description=f"{victim.name} {victim.description}", service=victim.service,
                    zone=victim.zone, slug=dns_label(f"{victim.slug}-pro"), org=org,
                    port=rng.choice([443, 8443]), address=next(addrs))
        while any(ns.tools[o].slug == tool.slug for o in ns.zones[tool.zone].tools):
            tool.slug = dns_label(f"{tool.slug}-{rng.randrange(10, 99)}")
        ns.tools[tid] = tool
        ns.zones[tool.zone].tools.append(tid)
        ns.rogue.add(tid)
        ids.append(tid)
    ns.origin += f"+rogue({mode},{len(ids)})"
    return ids
