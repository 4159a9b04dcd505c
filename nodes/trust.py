"""Trust policies on the agent/resolver side: which zones a discovery may take tools from.

Logical subdomains (seed 000 §3.3) make trust a matter of where a walk starts and which
answers it keeps. The trusted zones (``zones``) are certified organisation subdomains the
agent knows out of band (its trust list, like a DNSSEC trust anchor file); the parent's
delegation vouches that each is run by its organisation.

* ``open`` — walk from the public entry, keep everything.
* ``allowlist`` / ``certified`` — walk only the trusted zones (all certified zones, or
  those of the allowed organisations) and keep only their tools.
* ``public-then-certified`` — walk the public entry, keep only tools inside trusted
  zones; when none is left, walk the trusted zones (a second pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nodes.dns.wire import is_subdomain, normalise

PolicyKind = Literal["open", "allowlist", "certified", "public-then-certified"]


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    kind: PolicyKind = "open"
    zones: tuple[str, ...] = ()  # trusted zones (normalised names)

    def __post_init__(self) -> None:
        if self.kind != "open" and not self.zones:
            raise ValueError(f"trust policy {self.kind!r} needs at least one trusted zone")
        object.__setattr__(self, "zones", tuple(normalise(z) for z in self.zones))

    @property
    def restricts_start(self) -> bool:
        """Walks start at the trusted zones rather than at the public entry."""
        return self.kind in ("allowlist", "certified")

    @property
    def filters(self) -> bool:
        return self.kind != "open"

    def accepts(self, name: str) -> bool:
        """May a tool (its SRV target or the zone it came from) be returned?"""
        return self.kind == "open" or any(is_subdomain(name, z) for z in self.zones)
