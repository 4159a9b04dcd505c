"""The organisations' own zones: what every DNS-native discovery draft publishes for a
namespace's tools, so each scheme discovers the same tools through its own records.

Each tool belongs to its publisher's domain ``<org>.example.`` (the reserved ``example.``
TLD, RFC 2606: a testbed name that collides with nothing). The publisher is the tool's
organisation: the repository owner for the real catalogue (``topologies.catalog.org_of``),
the certified organisation of a synthetic tool, else the tool itself. Under it the tool's
agent host ``<label>.<org>.example.`` has its A (and AAAA) record, and beside it every
draft's records, each at the owner names its draft gives (versions in :data:`DRAFTS`):

* DNS-AID (-02, as its reference implementation dns-aid-core writes it; the draft's body
  was not readable here): ``_index._agents.<org>`` TXT (``agents=label:proto,…``) and the
  agent's SVCB at its host (TargetName, ``alpn``, ``port``, capability document
  ``key65400``, agent protocol ``key65402``);
* ANS v2 (the ANS registry's DNS profile, TTL 3600): ``_ans.<host>`` TXT (``v=ans1;
  version=v1.0.0; p=…; mode=direct; url=…``), the host's HTTPS record,
  ``_ans-badge.<host>`` TXT (transparency-log URL) and ``_<port>._tcp.<host>`` TLSA 3 0 1
  (one per TLS port);
* DN-ANR (-01): ``_agent.<host>`` SVCB with its private keys (key65480 version, key65481
  protocols) and the identity TXT (``v=1;kid=…;alg=Ed25519;pk=…``);
* AID (v1.2): one TXT at the protocol-specific node ``_agent._<proto>.<host>``
  (``v=aid1;u=…;p=…;a=pat;s=…``); AID's protocol tokens have none for skills, so skill
  tools have no AID record;
* DNS-SD (RFC 6763): ``_<proto>._tcp.<org>`` PTR to each instance
  ``<label>._<proto>._tcp.<org>``, whose SRV and TXT give the host, port and description.

Keys and digests are derived from the tool id (deterministic; nothing verifies them here,
so they are sized as real ones and carry no security claim).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import struct
import uuid
from dataclasses import dataclass

from nodes.dns.codec import character_strings
from nodes.dns.zone import Delegation, ServerRef, StaticRecord, Ttls, ZoneData, aaaa_address
from topologies.addresses import addresses
from topologies.labels import dns_label
from topologies.namespace import Namespace

ORG_TLD = "example."
#: the drafts whose records the zones carry, with the version followed
DRAFTS = {
    "dns-aid": "draft-mozleywilliams-dnsop-dnsaid-02 (records as dns-aid-core writes them)",
    "ans-v2": "draft-narajala-courtney-ansv2-01 (the ANS registry's ans-txt profile)",
    "dn-anr": "draft-cui-dns-native-agent-naming-resolution-01",
    "aid": "draft-nemethi-aid-agent-identity-discovery-00 (AID v1.2)",
    "dns-sd": "RFC 6763",
}
A, TXT, PTR, SRV, AAAA, TLSA, SVCB, HTTPS = 1, 16, 12, 33, 28, 52, 64, 65
_ALPN = {"mcp": "mcp", "a2a": "a2a", "rest": "h2", "skill": "h2"}  # DNS-AID's alpn per protocol
_AID_PROTO = {"mcp": "mcp", "a2a": "a2a", "rest": "openapi"}  # AID v1.2's protocol tokens
_ANS_TTL = 3600  # every ANS record (the ANS registry's spec)
INDEX_TEXT = 1000  # characters of one DNS-AID index TXT record
ANSWER_BYTES = 60_000  # bytes of one RRset an answer may carry (a DNS message: 65,535)
_LABEL_MAX = 40  # leaves room for "_<label>._<proto>._agents." under long organisation names


@dataclass(frozen=True, slots=True)
class Publication:
    """Where one tool is published: its organisation's domain and its agent host."""

    tool_id: str
    org: str  # the organisation's label
    domain: str  # ``<org>.example.``
    label: str  # the agent's label, unique in the domain
    service: str  # mcp | a2a | rest | skill
    address: str
    port: int
    description: str

    @property
    def host(self) -> str:
        return f"{self.label}.{self.domain}"

    # the owner names each draft's client asks for
    @property
    def dnssd_instance(self) -> str:
        return f"{self.label}._{self.service}._tcp.{self.domain}"


def dnsaid_index(domain: str) -> str:
    return f"_index._agents.{domain}"


def dnssd_browse(domain: str, service: str) -> str:
    return f"_{service}._tcp.{domain}"


def publications(ns: Namespace) -> dict[str, Publication]:
    """Every tool's publication, in tool-id order (labels made unique per domain)."""
    out: dict[str, Publication] = {}
    taken: dict[str, set[str]] = {}
    for tid in sorted(ns.tools):
        tool = ns.tools[tid]
        org = dns_label(tool.org or tool.slug, "org")
        domain = f"{org}.{ORG_TLD}"
        base = dns_label(tool.slug, "agent", _LABEL_MAX)
        label, n = base, 1
        used = taken.setdefault(domain, set())
        while label in used:
            n += 1
            label = f"{base[:_LABEL_MAX - 1 - len(str(n))]}-{n}"
        used.add(label)
        out[tid] = Publication(tid, org, domain, label, tool.service, tool.address, tool.port,
                               f"{tool.name} {tool.description}")
    return out


def hosts(pubs: dict[str, Publication]) -> dict[str, str]:
    """Agent host name -> tool id (what a scheme's endpoints are scored by)."""
    return {p.host: p.tool_id for p in pubs.values()}


def _txt(text: str) -> tuple[bytes]:
    raw = text.encode("utf-8")
    return (character_strings([raw[i:i + 255] for i in range(0, len(raw), 255)] or [b""]),)


def _svcb(priority: int, target: str, params: list[tuple[int, bytes]]) -> tuple[bytes | str, ...]:
    """SVCB/HTTPS RDATA: priority, TargetName (a name: the server adds its addresses),
    SvcParams in ascending key order (RFC 9460 §2.2)."""
    body = b"".join(struct.pack("!HH", k, len(v)) + v for k, v in sorted(params))
    return (struct.pack("!H", priority), target, body)


def _alpn(*ids: str) -> bytes:
    return b"".join(bytes([len(i)]) + i.encode() for i in ids)


def _digest(tool_id: str, what: str) -> bytes:
    return hashlib.sha256(f"{what}:{tool_id}".encode()).digest()


def tool_records(p: Publication, ttls: Ttls, aaaa: bool) -> list[StaticRecord]:
    """Every draft's records for one tool (owner names absolute)."""
    host, port, ttl = p.host, p.port, ttls.srv
    url = f"https://{host.rstrip('.')}{'' if port == 443 else f':{port}'}/"
    out = [StaticRecord(host, A, ttls.a, (ipaddress.IPv4Address(p.address).packed,))]
    if aaaa:
        out.append(StaticRecord(host, AAAA, ttls.a, (aaaa_address(p.address).packed,)))
    # DNS-AID -02 (as dns-aid-core writes it): the agent's SVCB at its own name, with the
    # capability document (key65400) and the agent protocol (bap, key65402)
    out.append(StaticRecord(host, SVCB, ttl, _svcb(1, host, [
        (1, _alpn(_ALPN[p.service])), (3, struct.pack("!H", port)),
        (65400, f"{url}.well-known/agent-card.json".encode()),
        (65402, p.service.encode())])))
    # ANS v2: _ans TXT, the host's HTTPS record, the badge and the TLSA record, TTL 3600
    out.append(StaticRecord(f"_ans.{host}", TXT, _ANS_TTL, _txt(
        f"v=ans1; version=v1.0.0; p={p.service}; mode=direct; url={url}")))
    out.append(StaticRecord(host, HTTPS, _ANS_TTL, _svcb(1, ".", [
        (1, _alpn("h2")), (3, struct.pack("!H", port))])))
    out.append(StaticRecord(f"_ans-badge.{host}", TXT, _ANS_TTL, _txt(
        f"v=ans-badge1; version=v1.0.0; url=https://tlog.{ORG_TLD.rstrip('.')}/v1/agents/"
        f"{uuid.UUID(bytes=_digest(p.tool_id, 'badge')[:16])}")))
    out.append(StaticRecord(f"_{port}._tcp.{host}", TLSA, _ANS_TTL,
                            (bytes([3, 0, 1]) + _digest(p.tool_id, "certificate"),)))
    # DN-ANR -01: _agent SVCB with version and protocols, the identity TXT
    out.append(StaticRecord(f"_agent.{host}", SVCB, ttl, _svcb(1, host, [
        (1, _alpn("h2")), (3, struct.pack("!H", port)),
        (65480, b"v1"), (65481, p.service.encode())])))
    key = base64.b64encode(_digest(p.tool_id, "ed25519")).decode()
    out.append(StaticRecord(f"_agent.{host}", TXT, ttls.ns, _txt(
        f"v=1;kid=k1;alg=Ed25519;pk={key}")))
    # AID v1.2 at the protocol-specific node (its token list has no skills)
    if p.service in _AID_PROTO:
        desc = p.description.encode()[:60].decode("utf-8", "ignore").replace(";", ",")
        out.append(StaticRecord(f"_agent._{p.service}.{host}", TXT, ttl, _txt(
            f"v=aid1;u={url};p={_AID_PROTO[p.service]};a=pat;s={desc}")))
    # DNS-SD: the instance's SRV and TXT (the PTR browse set is per organisation)
    out.append(StaticRecord(p.dnssd_instance, SRV, ttl,
                            (struct.pack("!HHH", 0, 0, port), host)))
    out.append(StaticRecord(p.dnssd_instance, TXT, ttl, (character_strings(  # RFC 6763 §6
        [b"txtvers=1", f"desc={p.description}".encode()[:255]]),)))
    return out


def org_records(domain: str, pubs: list[Publication], ttls: Ttls,
                aaaa: bool) -> tuple[StaticRecord, ...]:
    """One organisation's zone contents beyond SOA/NS: every tool's records, DNS-AID's
    index and DNS-SD's browse PTRs (each browse RRset as large as one answer carries, as
    the index: :func:`dnsaid_index_records`)."""
    out: list[StaticRecord] = []
    for p in pubs:
        out += tool_records(p, ttls, aaaa)
    out += dnsaid_index_records(domain, [f"{p.label}:{p.service}" for p in pubs], ttls.srv)
    used: dict[str, int] = {}  # browse name -> answer bytes so far
    for p in pubs:  # each PTR: compressed owner and fields (12), its target uncompressed
        browse = dnssd_browse(domain, p.service)
        size = used.get(browse, 0) + 12 + len(p.dnssd_instance) + 1
        if size > ANSWER_BYTES:  # more instances than one answer carries: left unlisted
            continue
        used[browse] = size
        out.append(StaticRecord(browse, PTR, ttls.srv, (p.dnssd_instance,)))
    return tuple(out)


def dnsaid_index_records(domain: str, entries: list[str], ttl: int) -> list[StaticRecord]:
    """DNS-AID's ``_index._agents`` TXT RRset: ``agents=label:proto,…`` records of at most
    :data:`INDEX_TEXT` characters each, as many as one DNS message carries
    (:data:`ANSWER_BYTES`); an organisation with more agents than that cannot list them all
    in DNS, and its agents past the limit are not in the index (their discovery fails at
    the index step, as a client of the draft would)."""
    out: list[StaticRecord] = []
    used, i = 0, 0
    while i < len(entries) and (i == 0 or used < ANSWER_BYTES):
        chunk: list[str] = []
        size = len("agents=")
        while i < len(entries) and (not chunk or size + 1 + len(entries[i]) <= INDEX_TEXT):
            size += len(entries[i]) + (1 if chunk else 0)
            chunk.append(entries[i])
            i += 1
        rdata = _txt("agents=" + ",".join(chunk))
        used += 12 + len(rdata[0])  # compressed owner, type, class, TTL, length, RDATA
        if used > ANSWER_BYTES and out:
            break
        out.append(StaticRecord(dnsaid_index(domain), TXT, ttl, rdata))
    return out


def by_domain(pubs: dict[str, Publication]) -> dict[str, list[Publication]]:
    """Publications grouped by organisation domain, domains in sorted order."""
    out: dict[str, list[Publication]] = {}
    for p in pubs.values():
        out.setdefault(p.domain, []).append(p)
    return dict(sorted(out.items()))


def hosting(domains: list[str], addresses_: tuple[str, ...]) -> dict[str, str]:
    """Which hosting server (address) serves each organisation's zone (round-robin in
    domain order, as a few DNS hosting providers serve most domains)."""
    return {d: addresses_[i % len(addresses_)] for i, d in enumerate(domains)}


@dataclass(frozen=True)
class OrgZones:
    """The zones the organisations publish: ``example.``'s (delegating every organisation)
    on its own server, and the organisations' zones on a few hosting servers (each zone's
    NS name in its own bailiwick, at its host's address, so the TLD's referral has glue)."""

    delegation: Delegation  # what the root adds: example. and its server
    servers: dict[str, tuple[ZoneData, ...]]  # address -> its zones (example.'s first)
    publications: dict[str, Publication]


def org_zones(ns: Namespace, ttls: Ttls, aaaa: bool, first_address: str = "127.9.0.1",
              hosting_servers: int = 4) -> OrgZones:
    """Every organisation's zone for ``ns``'s tools and the ``example.`` zone above them."""
    addrs = addresses(first_address)
    tld_ref = ServerRef(f"a.nic.{ORG_TLD}", next(addrs))
    pubs = publications(ns)
    grouped = by_domain(pubs)
    where = hosting(list(grouped), tuple(next(addrs) for _ in range(hosting_servers)))
    children = []
    served: dict[str, list[ZoneData]] = {}
    for domain, members in grouped.items():
        ref = ServerRef(f"ns1.{domain}", where[domain])
        served.setdefault(ref.address, []).append(ZoneData(
            name=domain, servers=(ref,), ttls=ttls,
            records=org_records(domain, members, ttls, aaaa)))
        children.append(Delegation(zone=domain, servers=(ref,), summary="",
                                   services=frozenset(), leaf=True))
    tld = ZoneData(name=ORG_TLD, servers=(tld_ref,), children=tuple(children), ttls=ttls)
    delegation = Delegation(zone=ORG_TLD, servers=(tld_ref,), summary="",
                            services=frozenset())
    return OrgZones(delegation, {tld_ref.address: (tld,),
                                 **{a: tuple(z) for a, z in served.items()}}, pubs)
