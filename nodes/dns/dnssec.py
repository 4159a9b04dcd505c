"""DNSSEC for ToolDNS zones (opt-in): deterministic zone keys, online signing, validation.

* Keys: one Ed25519 key per zone (algorithm 15, flags 257: a combined signing key),
  derived from the run seed and the zone name by hashing, so simulated runs stay
  byte-identical (Ed25519 signatures are deterministic) and any parent can publish its
  children's DS records without a key exchange.
* :class:`ZoneSigner` signs a reply the authoritative server has already built, when the
  query set the DO bit: an RRSIG over every answer RRset and over the SOA of negative
  answers; a DS RRset (and its RRSIG) beside every delegation in a referral; the DNSKEY
  RRset when asked for it at the apex. Semantic answers are subsets chosen per query (the
  top-K children or tools), so signing is online, as with PowerDNS live-signing. Unsigned
  replies (no DO) are never touched.
* Cursor names (``_mcp._tcp._weather.tools.``) are owned by the zone they point at: that
  zone's servers answer for them and sign with its key. Standard DNSSEC would want the
  signer to be the zone containing the owner name; validation here checks the signer is
  the zone that was asked (the walk's bailiwick), the ToolDNS reading of that rule.
* NODATA replies (empty non-terminals included) carry an NSEC record owned by the
  question's name that covers nothing else (RFC 4470 style), listing the types the name has,
  so stock validators accept the denial; NXDOMAIN has no proof (no NSEC chain).
* Validation helpers (:func:`check_dnskey`, :func:`check_answer`) are what the resolver
  runs: DNSKEY against the DS from the parent (or the trust anchor), RRSIGs with the
  zone's validated key, DS of every child a referral names. Our resolver does not check
  denial of existence: a delegation without a signed DS is refused, every zone being signed.

Signature validity is fixed (2026-01-01 for ten years) and validation uses a fixed clock
inside it: node time in a run is virtual and starts at zero. Signing and verification
call ``cryptography`` directly over the RFC 4034 §3.1.8.1 signature data (dnspython's own
``dns.dnssec.sign``/``validate`` need a newer ``cryptography`` than the project pins);
dnspython parses, renders and computes key tags and DS digests.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

import dns.dnssec
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdataset
import dns.rdatatype
import dns.rrset
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from dns.rdtypes.ANY.DNSKEY import DNSKEY as DnskeyRdata
from dns.rdtypes.ANY.RRSIG import RRSIG as RrsigRdata

from nodes.dns.wire import normalise, parse_tool_name

INCEPTION = 1_767_225_600  # 2026-01-01T00:00:00Z
EXPIRATION = INCEPTION + 10 * 365 * 86_400
VALIDATION_TIME = INCEPTION + 86_400.0
KEY_TTL = 86_400
DNSKEY, DS, RRSIG, NS, SOA, NSEC = (dns.rdatatype.DNSKEY, dns.rdatatype.DS,
                                    dns.rdatatype.RRSIG, dns.rdatatype.NS, dns.rdatatype.SOA,
                                    dns.rdatatype.NSEC)
ED25519 = 15
IN = dns.rdataclass.IN


class BogusError(ValueError):
    """An answer that fails DNSSEC validation (the message says why)."""


def zone_key(seed: str, zone: str) -> Ed25519PrivateKey:
    """The zone's signing key, derived from the run seed (deterministic)."""
    digest = hashlib.sha256(f"tooldns-dnssec|{seed}|{normalise(zone)}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(digest)


def dnskey_of(key: Ed25519PrivateKey) -> DnskeyRdata:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return DnskeyRdata(IN, DNSKEY, 257, 3, ED25519, raw)


def _signed_data(rrset: dns.rrset.RRset, sig: RrsigRdata) -> bytes:
    """RFC 4034 §3.1.8.1: RRSIG RDATA without the signature, then the RRset in canonical
    form (lower-case owner, original TTL, RDATA in canonical order)."""
    head = sig.replace(signature=b"").to_digestable()
    owner = rrset.name.canonicalize().to_digestable()
    fixed = struct.pack("!HHI", rrset.rdtype, rrset.rdclass, sig.original_ttl)
    body = b"".join(owner + fixed + struct.pack("!H", len(rd)) + rd
                    for rd in sorted(r.to_digestable() for r in rrset))
    return head + body


def sign_rrset(rrset: dns.rrset.RRset, key: Ed25519PrivateKey, signer: str,
               key_tag: int | None = None) -> RrsigRdata:
    """An RRSIG over ``rrset`` by ``signer``'s key (deterministic: Ed25519)."""
    tag = key_tag if key_tag is not None else dns.dnssec.key_id(dnskey_of(key))
    fields = (IN, RRSIG, rrset.rdtype, ED25519, len(rrset.name) - 1, rrset.ttl, EXPIRATION,
              INCEPTION, tag, dns.name.from_text(signer))
    signature = key.sign(_signed_data(rrset, RrsigRdata(*fields, b"")))
    return RrsigRdata(*fields, signature)


def verify_rrset(rrset: dns.rrset.RRset, sigs: dns.rrset.RRset, signer: dns.name.Name,
                 keys: dns.rdataset.Rdataset) -> None:
    """Raise BogusError unless one RRSIG in ``sigs`` by ``signer`` verifies with a key."""
    for sig in sigs:
        if sig.signer != signer or sig.type_covered != rrset.rdtype:
            continue
        if not sig.inception <= VALIDATION_TIME <= sig.expiration:
            continue
        for key in keys:
            if key.algorithm != ED25519 or dns.dnssec.key_id(key) != sig.key_tag:
                continue
            try:
                Ed25519PublicKey.from_public_bytes(key.key).verify(
                    sig.signature, _signed_data(rrset, sig))
                return
            except (InvalidSignature, ValueError):
                continue
    raise BogusError("no RRSIG verifies with the zone's key")


def _nsec(name: dns.name.Name, types: Sequence[int], ttl: int) -> dns.rrset.RRset:
    """NSEC at ``name`` listing ``types`` (plus RRSIG and NSEC), next name ``\\000.name``:
    it covers no other name."""
    listed = sorted({*types, RRSIG, NSEC})
    text = "\\000." + name.to_text() + " " + " ".join(
        dns.rdatatype.to_text(dns.rdatatype.RdataType.make(t)) for t in listed)
    return dns.rrset.from_rdata(name, ttl, dns.rdata.from_text(IN, NSEC, text))


def ds_of(zone: str, seed: str):  # -> dns.rdtypes.ANY.DS.DS
    """The DS record a parent publishes for ``zone`` (SHA-256 digest of its DNSKEY)."""
    return dns.dnssec.make_ds(normalise(zone), dnskey_of(zone_key(seed, zone)), "SHA256")


def trust_anchor(seed: str) -> str:
    """The root zone's DS as text: what a validating resolver is configured with."""
    return ds_of(".", seed).to_text()


class ZoneSigner:
    """Signs the replies of one server's zones (online signing, only when DO is set)."""

    def __init__(self, seed: str, zones: list[str]) -> None:
        self.seed = seed
        self.zones = sorted((normalise(z) for z in zones), key=len, reverse=True)
        self.keys = {z: zone_key(seed, z) for z in self.zones}
        self.dnskeys = {z: dnskey_of(k) for z, k in self.keys.items()}
        self.tags = {z: dns.dnssec.key_id(k) for z, k in self.dnskeys.items()}
        self._ds: dict[str, object] = {}
        self.signatures = 0

    def _zone_for(self, qname: str) -> str | None:
        tq = parse_tool_name(qname) if qname.startswith("_") else None
        if tq is not None and tq.cursor and tq.zone in self.keys:
            return tq.zone
        return next((z for z in self.zones if z == "." or qname == z
                     or qname.endswith("." + z)), None)

    def _rrsig(self, rrset: dns.rrset.RRset, zone: str) -> dns.rrset.RRset:
        self.signatures += 1
        return dns.rrset.from_rdata(rrset.name, rrset.ttl,
                                    sign_rrset(rrset, self.keys[zone], zone, self.tags[zone]))

    def _ds_rrset(self, child: dns.name.Name, ttl: int) -> dns.rrset.RRset:
        text = child.to_text()
        if text not in self._ds:
            self._ds[text] = ds_of(text, self.seed)
        return dns.rrset.from_rdata(child, ttl, self._ds[text])

    def sign_reply(self, wire: bytes, limit: int,
                   nodata_types: Sequence[int] | None = None) -> bytes:
        """The reply with RRSIG/DS/DNSKEY added; TC when it no longer fits ``limit``.

        ``nodata_types``: the reply is NODATA and these types exist at the name (none for
        an empty non-terminal); an NSEC record owned by the name and covering nothing
        else (next name ``\\000.<name>``, as RFC 4470 online signers do) proves which types
        do not, so validators accept the denial (PowerDNS asks DS at every empty
        non-terminal on the way down)."""
        msg = dns.message.from_wire(wire)
        if msg.flags & dns.flags.TC or not msg.question:
            return wire
        q = msg.question[0]
        zone = self._zone_for(normalise(q.name.to_text()))
        if zone is None:
            return wire
        origin = dns.name.from_text(zone)
        if q.rdtype == DNSKEY and q.name == origin:  # the apex key set, self-signed
            keys = dns.rrset.from_rdata(origin, KEY_TTL, self.dnskeys[zone])
            msg.set_rcode(dns.rcode.NOERROR)
            msg.flags |= dns.flags.AA
            msg.answer = [keys]
            msg.authority = []
        answer = list(msg.answer)
        for rrset in answer:
            msg.answer.append(self._rrsig(rrset, zone))
        authority = list(msg.authority)
        if nodata_types is not None and not answer and msg.rcode() == 0:
            soa = next((r for r in authority if r.rdtype == SOA), None)
            if soa is not None:
                nsec = _nsec(q.name, nodata_types, soa.ttl)
                msg.authority += [nsec, self._rrsig(nsec, zone)]
        for rrset in authority:
            if rrset.rdtype == NS and rrset.name != origin:  # a delegation: its DS, signed
                ds = self._ds_rrset(rrset.name, rrset.ttl)
                msg.authority += [ds, self._rrsig(ds, zone)]
            elif rrset.rdtype == SOA:
                msg.authority.append(self._rrsig(rrset, zone))
        msg.ednsflags |= dns.flags.DO
        try:
            return msg.to_wire(max_size=limit, want_shuffle=False)
        except dns.exception.TooBig:
            msg.answer, msg.authority, msg.additional = [], [], []
            msg.flags |= dns.flags.TC
            return msg.to_wire(want_shuffle=False)


# ---------------------------------------------------------------------- validation


def _sigs(section: list[dns.rrset.RRset], name: dns.name.Name, rdtype: int
          ) -> dns.rrset.RRset | None:
    for rrset in section:
        if rrset.rdtype == RRSIG and rrset.name == name and rrset.covers == rdtype:
            return rrset
    return None


def _validate(rrset: dns.rrset.RRset, sigs: dns.rrset.RRset | None, signer: dns.name.Name,
              keys: dns.rdataset.Rdataset, what: str) -> None:
    if sigs is None:
        raise BogusError(f"{what}: no RRSIG")
    try:
        verify_rrset(rrset, sigs, signer, keys)
    except BogusError as exc:
        raise BogusError(f"{what}: {exc}") from None


def check_dnskey(wire: bytes, zone: str, ds_set: list) -> object:
    """Validate a DNSKEY answer for ``zone`` against DS records (from the parent's signed
    referral, or the trust anchor); returns the key rdataset to validate its answers."""
    msg = dns.message.from_wire(wire)
    origin = dns.name.from_text(zone)
    keys = next((r for r in msg.answer if r.rdtype == DNSKEY and r.name == origin), None)
    if keys is None:
        raise BogusError(f"{zone}: no DNSKEY in the answer")
    if not any(dns.dnssec.make_ds(origin, k, "SHA256") == ds for k in keys for ds in ds_set):
        raise BogusError(f"{zone}: DNSKEY does not match the parent's DS")
    _validate(keys, _sigs(msg.answer, origin, DNSKEY), origin, keys, f"{zone} DNSKEY")
    return keys


def check_answer(wire: bytes, zone: str, keys: object) -> dict[str, list]:
    """Validate every signed part of an answer from ``zone``'s servers: answer RRsets and,
    for a referral, the DS set of each child (NS and glue are not signed by the parent).
    ``keys``: the zone's DNSKEY set as :func:`check_dnskey` returns it. Returns the
    validated DS records per child zone."""
    if not isinstance(keys, dns.rdataset.Rdataset):
        raise TypeError(f"keys: a DNSKEY rdataset (check_dnskey), not {type(keys).__name__}")
    msg = dns.message.from_wire(wire)
    signer = dns.name.from_text(zone)
    for rrset in msg.answer:
        if rrset.rdtype != RRSIG:
            _validate(rrset, _sigs(msg.answer, rrset.name, rrset.rdtype), signer, keys,
                      f"{rrset.name} {dns.rdatatype.to_text(rrset.rdtype)}")
    children: dict[str, list] = {}
    for rrset in msg.authority:
        if rrset.rdtype == NS and rrset.name != signer:
            child = rrset.name.to_text()
            ds = next((r for r in msg.authority if r.rdtype == DS and r.name == rrset.name),
                      None)
            if ds is None:
                raise BogusError(f"referral to {child} without DS")
            _validate(ds, _sigs(msg.authority, rrset.name, DS), signer, keys, f"{child} DS")
            children[child] = list(ds)
    return children


def anchor_ds(text: str) -> list:
    """DS records from trust-anchor text (as :func:`trust_anchor` gives)."""
    return [dns.rdata.from_text(IN, DS, text)]
