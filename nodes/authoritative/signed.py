"""A zone's records signed as a whole: what a signed server transfers and exports.

:func:`signed_records` takes the records a transfer sends (``ZoneState.contents()`` plus
the walk records) and returns them with the apex DNSKEY, the DS of each delegated child,
an NSEC chain and an RRSIG over every authoritative RRset added
(:meth:`nodes.dns.dnssec.ZoneSigner.sign_zone`): a secondary or a static server loaded
with them serves the zone signed, and its answers validate in the same chain as the
primary's online signatures (same keys, same signatures for the same RRsets). Each
owner's new records follow its own, SOA first; the result is kept by the signer per zone
until the zone's state changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from nodes.dns.codec import Rec, name_wire
from nodes.dns.dnssec import ZoneSigner

_IN = dns.rdataclass.IN


def rdata_wire(rec: Rec) -> bytes:
    """A record's RDATA in uncompressed wire form."""
    return b"".join(p if isinstance(p, bytes) else name_wire(p) for p in rec.rdata)


def _rrsets(records: Sequence[Rec]) -> list[dns.rrset.RRset]:
    """Records grouped into dnspython RRsets (by owner and type, first seen first)."""
    sets: dict[tuple[str, int], dns.rrset.RRset] = {}
    for rec in records:
        rrset = sets.get((rec.owner, rec.rtype))
        wire = rdata_wire(rec)
        rd = dns.rdata.from_wire(_IN, dns.rdatatype.RdataType.make(rec.rtype), wire, 0,
                                 len(wire))
        if rrset is None:
            rrset = sets[rec.owner, rec.rtype] = dns.rrset.from_rdata(rec.owner, rec.ttl, rd)
        else:
            rrset.add(rd)
    return list(sets.values())


def _recs(rrset: dns.rrset.RRset) -> list[Rec]:
    owner = rrset.name.to_text()
    return [Rec(owner, rrset.rdtype, rrset.ttl, (rd.to_digestable(),)) for rd in rrset]


def signed_records(records: Sequence[Rec], zone: str, signer: ZoneSigner, nsec_ttl: int,
                   source: object = None) -> list[Rec]:
    """``records`` (SOA first) with the zone's DNSSEC records added after each owner's own.
    ``source``: what the records were built from; while the signer's last result for
    ``zone`` came from the same object, it is returned again."""
    cached = signer.signed_zones.get(zone)
    if source is not None and cached is not None and cached[0] is source:
        return list(cached[1])
    by_owner: dict[str, list[Rec]] = {}
    for rec in records:  # owners in first-seen order (the SOA's, the apex, first)
        by_owner.setdefault(rec.owner, []).append(rec)
    for rrset in signer.sign_zone(zone, _rrsets(records), nsec_ttl):
        by_owner.setdefault(rrset.name.to_text(), []).extend(_recs(rrset))
    out = [rec for recs in by_owner.values() for rec in recs]
    if source is not None:
        signer.signed_zones[zone] = (source, out)
    return list(out)
