"""The SVCB record (RFC 9460, type 64) for dnslib, which knows its type code and reads the
HTTPS record (type 65, the same RDATA) but has no SVCB class: without one a reply's SVCB
records come back as opaque bytes. Importing this module registers :class:`SVCB` (once),
so ``DNSRecord.parse`` reads SvcPriority, TargetName and SvcParams (``alpn``, ``port``,
``ipv4hint``, private ``keyNNNNN`` …) as it does for HTTPS; the wire form is unchanged
(tests/nodes/dns/test_svcb.py checks it against dnspython's parser both ways).

:func:`params` gives a record's SvcParams by name, the way the discovery drafts' clients
read them (DNS-AID's ``alpn``/``port``, DN-ANR's private keys for version and protocols).
"""

from __future__ import annotations

import dnslib.dns as _dns
from dnslib import QTYPE, RR

TYPE_SVCB = 64
TYPE_HTTPS = 65


class SVCB(_dns.HTTPS):
    """An SVCB RDATA: dnslib's HTTPS reader and writer under the SVCB type."""


if "SVCB" not in _dns.RDMAP:
    _dns.RDMAP["SVCB"] = SVCB
assert QTYPE.SVCB == TYPE_SVCB and QTYPE.HTTPS == TYPE_HTTPS  # dnslib's own type table


def params(rr: RR) -> dict[str, str]:
    """The SvcParams of an SVCB or HTTPS record by presentation name (``port`` -> "443",
    ``alpn`` -> "a2a,h2", ``key65480`` -> "v1"); {} for any other record."""
    rd = rr.rdata
    if not isinstance(rd, _dns.HTTPS):
        return {}
    out: dict[str, str] = {}
    for key, value in rd.params:  # (SvcParamKey, wire value) pairs, in key order
        text = rd.zf_format_param(key, value)  # "key=value" in presentation form
        name, _, shown = text.partition("=")
        out[name] = shown
    return out


def target(rr: RR, owner: str) -> str:
    """An SVCB/HTTPS record's TargetName, "." meaning the owner itself (RFC 9460 §2.5)."""
    name = ".".join(label.decode("ascii", "replace") for label in rr.rdata.target) + "."
    return owner if name == "." else name
