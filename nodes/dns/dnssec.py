"""DNSSEC for ToolDNS zones (opt-in): deterministic zone keys, online and whole-zone signing,
authenticated denial of existence, validation.

* Keys: one Ed25519 key per zone (algorithm 15, flags 257: a combined signing key),
  derived from a seed and the zone name by hashing, so simulated runs stay byte-identical
  (Ed25519 signatures are deterministic) and any parent can publish its children's DS
  records without a key exchange.
* :class:`ZoneSigner` signs a reply the authoritative server has already built, when the
  query set the DO bit: an RRSIG over every answer RRset and over the SOA of negative
  answers; a DS RRset (and its RRSIG) beside every delegation in a referral. Semantic
  answers are subsets chosen per query (the top-K children or tools), so signing is online,
  as with PowerDNS live-signing. Unsigned replies (no DO) are never touched. The server
  itself answers DNSKEY at its apexes and DS at its delegations (with or without DO).
* Denial of existence, online (RFC 4470, minimally covering NSEC records):
  NODATA (empty non-terminals included) carries an NSEC owned by the question's name,
  next name ``\\000.<name>``, listing the types the name has; NXDOMAIN keeps its RCODE and
  carries two NSEC records (:func:`nxdomain_nsecs`): one whose range holds the next closer
  name (the closest encloser's child on the way to the question) and everything below it,
  one whose range holds the wildcard ``*.<closest encloser>``; each owner and next name is
  an epsilon away from the denied name (a label ending in ``\\127``, a label with ``\\000``
  appended), never a name a zone holds. Where no such bracket fits (a 63-octet label, a
  label ending in a zero octet, a name at the length limit) the answer is compact
  (RFC 9824): NOERROR with an NSEC at the name listing only RRSIG, NSEC and NXNAME.
* Whole zones (AXFR, ``tooldns export-zones --sign``): :meth:`ZoneSigner.sign_zone` adds the
  DNSKEY, the DS of every delegated child, an NSEC chain over the zone's names (RFC 4034
  §4; glue below a cut is outside it) and an RRSIG over every authoritative RRset, the
  same signatures the online signer makes for the same RRsets.
* Cursor names (``_mcp._tcp._weather.tools.``) are owned by the zone they point at: that
  zone's servers answer for them and sign with its key. Standard DNSSEC would want the
  signer to be the zone containing the owner name; validation here checks the signer is
  the zone that was asked (the walk's bailiwick), the ToolDNS reading of that rule.
* Validation helpers (:func:`check_dnskey`, :func:`check_answer`) are what the resolver
  runs: DNSKEY against the DS from the parent (or the trust anchor), RRSIGs with the
  zone's validated key, DS of every child a referral names. Our resolver does not check
  denial of existence: a delegation without a signed DS is refused, every zone being signed.

Signature validity is fixed (2026-01-01 for ten years) and validation uses a fixed clock
inside it: node time in a run is virtual and starts at zero. Signing and verification
call ``cryptography`` directly over the RFC 4034 §3.1.8.1 signature data (dnspython's own
``dns.dnssec.sign`` needs a newer ``cryptography`` than the project pins); dnspython
parses, renders and computes key tags and DS digests.
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
from dns.rdtypes.ANY.NSEC import NSEC as NsecRdata
from dns.rdtypes.ANY.NSEC import Bitmap as NsecBitmap
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
    """An RRSIG over ``rrset`` by ``signer``'s key (deterministic: Ed25519). A wildcard
    owner (``*.x.``) does not count its ``*`` label (RFC 4034 §3.1.3)."""
    tag = key_tag if key_tag is not None else dns.dnssec.key_id(dnskey_of(key))
    labels = len(rrset.name) - 1 - int(rrset.name.is_wild())
    fields = (IN, RRSIG, rrset.rdtype, ED25519, labels, rrset.ttl, EXPIRATION,
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


NXNAME = 128  # RFC 9824: the name does not exist (a compact answer's NSEC lists it)
_MAX_LABEL = 63
#: types listed by every NSEC the zones here generate
_NSEC_OWN = (RRSIG, NSEC)


def nsec_rrset(owner: dns.name.Name, next_name: dns.name.Name, types: Sequence[int],
               ttl: int) -> dns.rrset.RRset:
    """The NSEC RRset at ``owner``: ``next_name`` and ``types`` plus RRSIG and NSEC."""
    listed = sorted({*types, *_NSEC_OWN})
    bitmap = NsecBitmap.from_rdtypes(
        [dns.rdatatype.RdataType.make(t) for t in listed])
    return dns.rrset.from_rdata(owner, ttl, NsecRdata(IN, NSEC, next_name, bitmap))


def nodata_nsec(name: dns.name.Name, types: Sequence[int], ttl: int
                ) -> dns.rrset.RRset | None:
    """NSEC at ``name`` listing ``types``, next name ``\\000.name``: it covers no other name
    (RFC 4470 §3); None when ``name`` is too long to have that successor."""
    following = _successor(name)
    return None if following is None else nsec_rrset(name, following, types, ttl)


def _successor(name: dns.name.Name) -> dns.name.Name | None:
    """``\\000.name`` (the least name after ``name``: its first descendant), or the least
    name after ``name`` and everything below it when that does not fit."""
    try:
        return dns.name.Name([b"\x00", *name.labels])
    except dns.name.NameTooLong:
        return _bracket(name, after=True)


def _bracket(name: dns.name.Name, after: bool) -> dns.name.Name | None:
    """A name next to ``name`` among its siblings, one octet away in its first label: just
    before it (the label with its last octet lowered, skipping upper-case letters, which
    canonical order never sees, then ``\\127`` appended), or just after it and every name
    below it (``\\000`` appended). Only names with a DEL or non-ASCII octet lie between
    such a name and ``name``, and no zone here holds one (ASCII labels: letters, digits,
    ``-`` and ``_``); parsers that read only ASCII labels (dnslib) read these. None where
    no such label exists or fits."""
    if len(name) < 2:  # the root has no siblings
        return None
    first = name.labels[0].lower()
    if len(first) >= _MAX_LABEL:
        return None
    if after:
        label = first + b"\x00"
    else:
        if not first or first[-1] == 0:
            return None
        last = min(first[-1] - 1, 0x7F)
        if 0x41 <= last <= 0x5A:
            last = 0x40
        label = first[:-1] + bytes((last,)) + b"\x7f"
    try:
        return dns.name.Name([label, *name.labels[1:]])
    except dns.name.NameTooLong:
        return None


def nxdomain_nsecs(qname: dns.name.Name, encloser: dns.name.Name, ttl: int
                   ) -> list[dns.rrset.RRset] | None:
    """The NSEC records proving ``qname`` does not exist, ``encloser`` being its closest
    encloser (RFC 4035 §3.1.3.2, minimally covering as RFC 4470 §3): one covering the next
    closer name and every name below it (so ``qname``), one covering ``*.<encloser>``.
    Their owners and next names share ``encloser`` as their longest common ancestor with
    ``qname``, which is how validators find the closest encloser. None when ``encloser``
    is not a proper ancestor or no bracket fits (:func:`_bracket`)."""
    depth = len(qname) - len(encloser)
    if depth < 1 or not qname.is_subdomain(encloser):
        return None
    closer = qname.split(len(encloser) + 1)[1]
    try:
        wild = dns.name.Name([b"*", *encloser.labels])
    except dns.name.NameTooLong:
        return None
    out: list[dns.rrset.RRset] = []
    for name in (closer, wild):
        owner, following = _bracket(name, after=False), _bracket(name, after=True)
        if owner is None or following is None:
            return None
        if not out or out[0].name != owner:
            out.append(nsec_rrset(owner, following, (), ttl))
    return out


def compact_nsec(qname: dns.name.Name, ttl: int) -> dns.rrset.RRset | None:
    """RFC 9824's NSEC for a name that does not exist, answered NOERROR: owned by the name,
    listing RRSIG, NSEC and NXNAME, covering nothing else (None if no successor fits)."""
    following = _successor(qname)
    return None if following is None else nsec_rrset(qname, following, (NXNAME,), ttl)


def ds_of(zone: str, seed: str):  # -> dns.rdtypes.ANY.DS.DS
    """The DS record a parent publishes for ``zone`` (SHA-256 digest of its DNSKEY)."""
    return dns.dnssec.make_ds(normalise(zone), dnskey_of(zone_key(seed, zone)), "SHA256")


def trust_anchor(seed: str) -> str:
    """The root zone's DS as text: what a validating resolver is configured with."""
    return ds_of(".", seed).to_text()


class ZoneSigner:
    """Signs the replies of one server's zones (online signing, only when DO is set), and
    whole zones for transfers and exports (:meth:`sign_zone`)."""

    def __init__(self, seed: str, zones: list[str]) -> None:
        self.seed = seed
        self.zones = sorted((normalise(z) for z in zones), key=len, reverse=True)
        self.keys = {z: zone_key(seed, z) for z in self.zones}
        self.dnskeys = {z: dnskey_of(k) for z, k in self.keys.items()}
        self.tags = {z: dns.dnssec.key_id(k) for z, k in self.dnskeys.items()}
        self._ds: dict[str, object] = {}
        self.signatures = 0
        # whole signed zones by name: (what they were signed from, the result); shared by
        # copies of this signer (the server's per-run instances), as the keys are
        self.signed_zones: dict[str, tuple[object, list]] = {}

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

    def dnskey_wire(self, zone: str) -> bytes:
        """The RDATA of ``zone``'s DNSKEY (a zone this signer holds)."""
        return bytes(self.dnskeys[normalise(zone)].to_digestable())

    def ds_wire(self, child: str) -> bytes:
        """The RDATA of the DS a parent publishes for ``child``."""
        return bytes(self._ds_rrset(dns.name.from_text(normalise(child)), 0)[0]
                     .to_digestable())

    def sign_reply(self, wire: bytes, limit: int,
                   nodata_types: Sequence[int] | None = None,
                   encloser: str | None = None) -> bytes:
        """The reply with RRSIG/DS records (and denial NSECs) added; TC when it no longer
        fits ``limit``.

        ``nodata_types``: the reply is NODATA and these types exist at the name (none for
        an empty non-terminal): an NSEC owned by the name, covering nothing else
        (:func:`nodata_nsec`), proves which types do not (PowerDNS asks DS at every empty
        non-terminal on the way down). ``encloser``: the reply is NXDOMAIN and this is the
        question's closest encloser: two minimally covering NSECs prove the name and the
        wildcard that could have made it do not exist (:func:`nxdomain_nsecs`), or, where
        none fits, the reply becomes RFC 9824's compact NOERROR (:func:`compact_nsec`)."""
        msg = dns.message.from_wire(wire)
        if msg.flags & dns.flags.TC or not msg.question:
            return wire
        q = msg.question[0]
        qtext = normalise(q.name.to_text())
        zone = self._zone_for(qtext)
        if zone is None:
            return wire
        if q.rdtype == DS and zone == qtext and zone != ".":  # DS is the parent's, if held
            zone = self._zone_for(qtext.partition(".")[2] or ".") or zone
        answer = list(msg.answer)
        for rrset in answer:
            msg.answer.append(self._rrsig(rrset, zone))
        authority = list(msg.authority)
        soa = next((r for r in authority if r.rdtype == SOA), None)
        if soa is not None and not answer:
            for nsec in self._denial(msg, q.name, soa.ttl, nodata_types, encloser):
                msg.authority += [nsec, self._rrsig(nsec, zone)]
        for rrset in authority:
            if rrset.rdtype == NS and rrset.name != dns.name.from_text(zone):
                ds = self._ds_rrset(rrset.name, rrset.ttl)  # a delegation: its DS, signed
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

    @staticmethod
    def _denial(msg: dns.message.Message, qname: dns.name.Name, ttl: int,
                nodata_types: Sequence[int] | None, encloser: str | None
                ) -> list[dns.rrset.RRset]:
        """The NSEC records of a negative reply (see :meth:`sign_reply`); an NXDOMAIN made
        compact is turned into NOERROR here."""
        rcode = msg.rcode()
        if rcode == dns.rcode.NOERROR and nodata_types is not None:
            nsec = nodata_nsec(qname, nodata_types, ttl)
            return [nsec] if nsec is not None else []
        if rcode != dns.rcode.NXDOMAIN or encloser is None:
            return []
        try:
            ce = dns.name.from_text(encloser)
        except dns.exception.DNSException:
            return []
        covering = nxdomain_nsecs(qname, ce, ttl)
        if covering is not None:
            return covering
        compact = compact_nsec(qname, ttl)
        if compact is None:
            return []
        msg.set_rcode(dns.rcode.NOERROR)
        return [compact]

    # ------------------------------------------------------------------ whole zones

    def sign_zone(self, zone: str, rrsets: Sequence[dns.rrset.RRset], nsec_ttl: int
                  ) -> list[dns.rrset.RRset]:
        """``zone``'s RRsets (glue included) with DNSSEC added: the apex DNSKEY, a DS at
        every delegation (TTL of its NS), an NSEC chain over every owner not below a cut,
        in canonical order (RFC 4034 §6.1; the last points back at the apex), and an
        RRSIG over every authoritative RRset (not a delegation's NS, not glue). Returns
        what is added: first the RRSIGs of ``rrsets``, then each new RRset followed by its
        RRSIG."""
        origin = dns.name.from_text(normalise(zone))
        by_owner: dict[dns.name.Name, set[int]] = {}
        cuts: dict[dns.name.Name, int] = {}
        for rrset in rrsets:
            by_owner.setdefault(rrset.name, set()).add(rrset.rdtype)
            if rrset.rdtype == NS and rrset.name != origin:
                cuts[rrset.name] = rrset.ttl

        def below_cut(name: dns.name.Name) -> bool:
            return any(name != cut and name.is_subdomain(cut) for cut in cuts)

        keys = dns.rrset.from_rdata(origin, KEY_TTL, self.dnskeys[normalise(zone)])
        added: list[dns.rrset.RRset] = [keys]
        by_owner.setdefault(origin, set()).add(DNSKEY)
        for cut, ttl in sorted(cuts.items()):
            added.append(self._ds_rrset(cut, ttl))
            by_owner[cut].add(DS)
        names = sorted(n for n in by_owner if n.is_subdomain(origin) and not below_cut(n))
        for name, following in zip(names, [*names[1:], origin], strict=True):
            types = by_owner[name] & {NS, DS} if name in cuts else by_owner[name]
            added.append(nsec_rrset(name, following, sorted(types), nsec_ttl))
        zone_name = normalise(zone)

        def signs(rrset: dns.rrset.RRset) -> bool:  # authoritative: not glue, not a cut's NS
            if rrset.name in cuts:
                return rrset.rdtype in (DS, NSEC)
            return rrset.name.is_subdomain(origin) and not below_cut(rrset.name)

        out: list[dns.rrset.RRset] = []
        for rrset in rrsets:
            if signs(rrset):
                out.append(self._rrsig(rrset, zone_name))
        for rrset in added:
            out.append(rrset)
            if signs(rrset):
                out.append(self._rrsig(rrset, zone_name))
        return out


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
