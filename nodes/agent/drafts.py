"""What each DNS-native draft's client asks the DNS, step by step, once a search has named
the agent (its organisation's domain and label): the questions of each round, which may
depend on the answers of the rounds before, and the endpoint read from the answers.

Every question goes through an unmodified recursive resolver as a plain query; nothing
here knows the namespace, so a record that is missing or wrong fails the discovery as it
would fail the draft's client. Versions: :data:`topologies.orgzones.DRAFTS`.

* ``dns-aid``: the organisation's ``_index._agents`` TXT (is the agent listed, under which
  protocol), then the agent's SVCB at its name; the endpoint is the SVCB's TargetName
  and ``port`` (its protocol in ``key65402``).
* ``ans-v2``: ``_ans.<host>`` TXT (the endpoint URL and protocol), then the host's HTTPS
  record with what its verification tier requires, in parallel: gold (the default) the
  ``_<port>._tcp`` TLSA record and the ``_ans-badge`` TXT, silver the TLSA record, bronze
  nothing more (``ans-v2-silver``, ``ans-v2-bronze``).
* ``dn-anr``: ``_agent.<host>`` SVCB and TXT (the agent's key) in parallel.
* ``aid``: ``_agent._<proto>.<host>`` TXT (the protocol-specific node, which a client that
  knows the protocol asks first); exactly one ``v=aid1`` record, whose ``u=`` URI's host
  is the endpoint.
* ``dns-sd``: PTR browse of ``_<proto>._tcp.<org>``, then the instance's SRV and TXT.

A target whose address did not come in any answer is asked for (A) in one more round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from dnslib import DNSRecord

from nodes.agent.mirror import Candidate
from nodes.dns import svcb
from nodes.dns.wire import normalise

TXT, PTR, SRV, TLSA = 16, 12, 33, 52
Question = tuple[str, int]  # (name, type)
Answers = Mapping[Question, DNSRecord | None]  # None: the question failed
#: one round's questions for a candidate, given every answer so far (None: drop it)
Round = Callable[[Candidate, Answers], list[Question] | None]
#: the candidate's (target, port) from the answers, or None
Locate = Callable[[Candidate, Answers], tuple[str, int] | None]


@dataclass(frozen=True)
class Draft:
    """A draft's client: its rounds of questions and how it reads the endpoint."""

    name: str
    rounds: tuple[Round, ...]
    locate: Locate


def records(answers: Answers, q: Question, rtype: int | None = None) -> list:
    """The answer-section records owned by the question's name, of ``rtype`` (default:
    the question's type)."""
    msg = answers.get(q)
    if msg is None:
        return []
    want = q[1] if rtype is None else rtype
    return [rr for rr in msg.rr if rr.rtype == want and normalise(str(rr.rname)) == q[0]]


def _txt(rr: object) -> str:
    return b"".join(rr.rdata.data).decode("utf-8", "replace")  # type: ignore[attr-defined]


def _fields(text: str, sep: str) -> dict[str, str]:
    out = {}
    for part in text.split(sep):
        key, eq, value = part.strip().partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


# ------------------------------------------------------------------------------ DNS-AID

def _index(c: Candidate) -> Question:
    return f"_index._agents.{c.domain}", TXT


def _dnsaid_listed(c: Candidate, answers: Answers) -> list[Question] | None:
    listed: set[str] = set()
    for rr in records(answers, _index(c)):
        text = _txt(rr)  # the TXT's strings concatenated
        if text.startswith("agents="):
            listed.update(text[len("agents="):].split(","))
    if f"{c.label}:{c.service}" not in listed:
        return None
    return [(c.host, svcb.TYPE_SVCB)]


def _dnsaid_locate(c: Candidate, answers: Answers) -> tuple[str, int] | None:
    for rr in records(answers, (c.host, svcb.TYPE_SVCB)):
        params = svcb.params(rr)
        if params.get("key65402", c.service) == c.service:  # bap: the agent protocol
            return normalise(svcb.target(rr, c.host)), int(params.get("port", "443"))
    return None


DNS_AID = Draft("dns-aid", (lambda c, a: [_index(c)], _dnsaid_listed), _dnsaid_locate)

# ------------------------------------------------------------------------------ ANS v2


def _ans(c: Candidate) -> Question:
    return f"_ans.{c.host}", TXT


def _ans_url(c: Candidate, answers: Answers) -> str | None:
    for rr in records(answers, _ans(c)):
        fields = _fields(_txt(rr), ";")
        if fields.get("v") == "ans1" and fields.get("p") == c.service and "url" in fields:
            return fields["url"]
    return None


def url_endpoint(url: str) -> tuple[str, int] | None:
    """The host and port of an ``https://`` URL a record gave, or None when it is not one
    (any other scheme, no host, a bad port: records are hostile input)."""
    try:
        parts = urlsplit(url)
        port = parts.port or 443
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.scheme != "https" or not host or len(host) > 253:
        return None
    return normalise(host), port


#: ANS's verification tiers (the ANS registry's design): what a client asks beside the
#: host's HTTPS record and requires before it connects. Bronze trusts PKIX alone; silver
#: pins the server key with the DANE TLSA record at ``_<port>._tcp``; gold also requires
#: the transparency-log badge (its inclusion proof is fetched over HTTPS by real clients,
#: which the testbed does not model: docs/schemes.md).
ANS_TIERS = ("gold", "silver", "bronze")


def _ans_checks(tier: str, host: str, port: int) -> list[Question]:
    checks = [] if tier == "bronze" else [(f"_{port}._tcp.{host}", TLSA)]
    return checks + ([(f"_ans-badge.{host}", TXT)] if tier == "gold" else [])


def _ans_where(c: Candidate, answers: Answers) -> tuple[str, int] | None:
    """The endpoint the ``_ans`` record names, if its host is the agent's own name (ANS:
    a url's host MUST be the agent's FQDN)."""
    url = _ans_url(c, answers)
    where = url_endpoint(url) if url is not None else None
    return where if where is not None and where[0] == c.host else None


def _ans_resolve(tier: str) -> Round:
    def ask(c: Candidate, answers: Answers) -> list[Question] | None:
        where = _ans_where(c, answers)
        if where is None:
            return None
        host, port = where
        return [(host, svcb.TYPE_HTTPS), *_ans_checks(tier, host, port)]
    return ask


def _ans_locate(tier: str) -> Locate:
    def locate(c: Candidate, answers: Answers) -> tuple[str, int] | None:
        where = _ans_where(c, answers)
        if where is None:
            return None
        host, port = where
        for q in _ans_checks(tier, host, port):  # a check that found nothing: not trusted
            found = records(answers, q)
            if q[1] == TXT and not any(_fields(_txt(rr), ";").get("v") == "ans-badge1"
                                       for rr in found):
                return None
            if not found:
                return None
        return host, port
    return locate


def _ans_v2(tier: str) -> Draft:
    name = "ans-v2" if tier == "gold" else f"ans-v2-{tier}"
    return Draft(name, (lambda c, a: [_ans(c)], _ans_resolve(tier)), _ans_locate(tier))

# ------------------------------------------------------------------------------ DN-ANR


def _anr(c: Candidate) -> str:
    return f"_agent.{c.host}"


def _anr_locate(c: Candidate, answers: Answers) -> tuple[str, int] | None:
    for rr in records(answers, (_anr(c), svcb.TYPE_SVCB)):
        params = svcb.params(rr)
        if c.service in params.get("key65481", "").split(","):  # the protocols it speaks
            return normalise(svcb.target(rr, _anr(c))), int(params.get("port", "443"))
    return None


DN_ANR = Draft("dn-anr", (lambda c, a: [(_anr(c), svcb.TYPE_SVCB), (_anr(c), TXT)],),
               _anr_locate)

# ------------------------------------------------------------------------------ AID


def _aid(c: Candidate) -> Question:
    return f"_agent._{c.service}.{c.host}", TXT


_AID_PROTO = {"mcp": "mcp", "a2a": "a2a", "rest": "openapi"}  # AID v1.2's tokens


def _aid_locate(c: Candidate, answers: Answers) -> tuple[str, int] | None:
    valid = [f for rr in records(answers, _aid(c))
             if (f := _fields(_txt(rr), ";")).get("v") == "aid1" and "u" in f]
    if len(valid) != 1:  # none, or ambiguous: the draft fails both
        return None
    for fields in valid:
        if fields.get("p") == _AID_PROTO.get(c.service):
            return url_endpoint(fields["u"])
    return None


AID = Draft("aid", (lambda c, a: [_aid(c)],), _aid_locate)

# ------------------------------------------------------------------------------ DNS-SD


def _browse(c: Candidate) -> Question:
    return f"_{c.service}._tcp.{c.domain}", PTR


def _instance(c: Candidate) -> str:
    return f"{c.label}._{c.service}._tcp.{c.domain}"


def _dnssd_listed(c: Candidate, answers: Answers) -> list[Question] | None:
    listed = {normalise(str(rr.rdata.label)) for rr in records(answers, _browse(c))}
    if _instance(c) not in listed:
        return None
    return [(_instance(c), SRV), (_instance(c), TXT)]


def _dnssd_locate(c: Candidate, answers: Answers) -> tuple[str, int] | None:
    for rr in records(answers, (_instance(c), SRV)):
        return normalise(str(rr.rdata.target)), int(rr.rdata.port)
    return None


DNS_SD = Draft("dns-sd", (lambda c, a: [_browse(c)], _dnssd_listed), _dnssd_locate)

#: every draft's client by name
DRAFTS: dict[str, Draft] = {d.name: d for d in (DNS_AID, *map(_ans_v2, ANS_TIERS), DN_ANR,
                                                AID, DNS_SD)}
