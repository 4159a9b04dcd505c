"""QNAME minimisation (RFC 9156) as four stock recursors do it: the profiles the resolver's
plain iteration follows with ``resolver_model`` (:mod:`nodes.resolver.iterate`), and the
next name a minimising resolver asks.

Each profile was read off the names the binary asked the servers in ``tooldns recursors``
(a packet capture, per probe; docs/recursors.md) and is checked against them there
(``sim.interop.model``): Unbound 1.17.1, BIND 9.18.49, Knot Resolver 5.6.0, PowerDNS
Recursor 4.8.8 (Debian 12's), each with its default settings (minimisation on, relaxed).
"""

from __future__ import annotations

from dataclasses import dataclass

from nodes.dns.message import TYPE_A, TYPE_NS

PROJECT = "project"  # the project's own iteration: the full name at every server


@dataclass(frozen=True, slots=True)
class Profile:
    """How one recursor minimises and what else shows in its queries."""

    name: str
    qtype: int  # the QTYPE of a minimised query (A: Unbound, PowerDNS; NS: BIND, Knot)
    full_as_a: bool  # the full name too is asked with A first, its own type after NODATA
    underscores: bool  # labels starting with "_" are added with the label before them
    # (RFC 9156 §2.3: they mark no administrative boundary)
    stops_on_nodata: bool  # after one NODATA the full name is asked (Knot Resolver)
    keeps_nodata: bool  # a minimised name's NODATA is cached (by the SOA's TTL) and skipped
    beside_cname: bool  # the delegation sent beside a CNAME is used (else asked for)
    primes: bool  # the root's NS set is asked first (RFC 8109), again when it expires
    # the addresses of an SRV, SVCB or HTTPS answer's targets that came with it are kept
    # and sent with the answer in the additional section (BIND: its clients need no A
    # queries)
    additional: bool = False


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("unbound", TYPE_A, full_as_a=True, underscores=False, stops_on_nodata=False,
            keeps_nodata=False, beside_cname=False, primes=True),
    Profile("bind", TYPE_NS, full_as_a=False, underscores=False, stops_on_nodata=False,
            keeps_nodata=True, beside_cname=False, primes=True, additional=True),
    Profile("knot-resolver", TYPE_NS, full_as_a=False, underscores=False,
            stops_on_nodata=True, keeps_nodata=False, beside_cname=False, primes=False),
    Profile("pdns-recursor", TYPE_A, full_as_a=False, underscores=True,
            stops_on_nodata=False, keeps_nodata=True, beside_cname=True, primes=False),
)}
MODELS = (PROJECT, *PROFILES)


def minimised(qname: str, zone: str, labels: int, profile: Profile) -> tuple[str, int]:
    """The name a minimising resolver asks the servers of ``zone`` about ``qname`` when
    ``labels`` labels below the zone are to be shown (1 at a zone cut), and how many it
    shows: those labels, with the underscore labels right after them when the profile
    groups them; ``qname`` itself once nothing is left to hide."""
    below = qname[:len(qname) - len(zone)] if zone != "." else qname
    parts = below.rstrip(".").split(".") if below.rstrip(".") else []
    shown = labels
    if profile.underscores:
        while shown < len(parts) and parts[-shown - 1].startswith("_"):
            shown += 1
    if shown >= len(parts):
        return qname, len(parts)
    tail = ".".join(parts[-shown:])
    return (f"{tail}.{zone}" if zone != "." else f"{tail}."), shown
