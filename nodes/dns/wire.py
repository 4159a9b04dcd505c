"""DNS wire helpers for ToolDNS: the EDNS0 intent option codec and cursor names.

Everything here is pure: bytes in, values out. dnslib does the message wire format;
this module adds the ToolDNS option (seed 000 §3.3.3, REFERENCE.md) and the two name
forms the protocol uses:

* fully expanded (SRV style): ``_mcp._tcp.history.weather.tools.``
* partially unfolded (search cursor): ``_mcp._tcp._history.weather.tools.`` — the extra
  ``_`` on the first domain label marks that the walk is still going on at that zone.

It also holds the optional *scores* option (our extension, not in the paper): a query
carries it empty to ask for relevance scores, as NSID does (RFC 5001 §2.1), and a
semantic reply carries one IEEE-754 float32 per choice, best first — per child zone of a
referral (in NS order) or per SRV record of an answer. A resolver needs them to compare
choices made by different servers (global beam, score-ordered merge).

A third name form carries the intent in the QNAME itself, for resolvers that drop unknown
EDNS options (every stock recursor does): ``k3.weather-forecast-for-a-city._mcp._tcp.tools.``
— K, then the intent's words in at most :data:`QNAME_INTENT_MAX` characters (LDH labels of
up to 63, in reading order), then the service. Servers answer it with one CNAME per level
to the same labels under their best child, and the leaf with its top-K SRV RRset (see
:mod:`nodes.authoritative.server`), so every step stays below the zone asked, as unmodified
resolvers require. K comes first so that no proper suffix of the name is a query: a
QNAME-minimising resolver sees only empty non-terminals on the way down.

And the optional *embedding* option (also ours): the intent's sentence embedding, so a
dense server need not compute it again — a model tag (length byte + ASCII) and the vector
as big-endian float16. A server uses it only if the tag names its own model.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from dnslib import EDNS0, QTYPE, DNSLabel, DNSRecord, EDNSOption

#: Default option code, from the RFC 6891 local/experimental range 65001–65534.
DEFAULT_OPTION_CODE = 65432
#: The scores option (see the module docstring), next to it in the same range.
SCORES_OPTION_CODE = 65433
#: The embedding option (see the module docstring).
EMBEDDING_OPTION_CODE = 65434
INTENT_VERSION = 0  # version · length · K · text
INTENT_VERSION_BEAM = 1  # version · length · K · beam · text: the client asks for a beam
_HEADER = struct.Struct("!BHB")  # version (8) · payload length (16) · K (8)
_HEADER_BEAM = struct.Struct("!BHBB")  # ... · beam (8)

#: Services (SRV ``_service`` labels) the namespace knows; ``_tcp`` is the usual protocol.
SERVICES = ("mcp", "a2a", "rest", "skill")
PROTOCOLS = ("tcp", "udp")

#: Classic DNS UDP limit (RFC 1035) and the DNS-flag-day 2020 EDNS buffer size.
CLASSIC_UDP_SIZE = 512
DEFAULT_EDNS_SIZE = 1232
MAX_MESSAGE_SIZE = 65535


#: Characters of intent text a QNAME carries (words past it are dropped): with K, the
#: service labels and a zone of up to 100 characters the name stays under 255 octets.
QNAME_INTENT_MAX = 120
_LABEL_MAX = 63


class IntentError(ValueError):
    """Raised when option data is not a valid ToolDNS intent option."""


@dataclass(frozen=True, slots=True)
class Intent:
    """The ToolDNS EDNS0 payload: natural-language intent plus K (0 = return everything)
    and, in version 1, the beam the client asks its resolver to walk with (1-255; None:
    the resolver's own, version 0). Servers read either version and ignore the beam."""

    text: str
    k: int = 1
    version: int = INTENT_VERSION
    beam: int | None = None

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, text: str, k: int = 1, version: int = INTENT_VERSION,
                 beam: int | None = None) -> None:
        if not 0 <= k <= 255:
            raise IntentError(f"K must fit in 8 bits, got {k}")
        if beam is not None:
            if not 1 <= beam <= 255:
                raise IntentError(f"beam must be 1 to 255, got {beam}")
            if version == INTENT_VERSION:  # a beam needs version 1
                version = INTENT_VERSION_BEAM
        elif version == INTENT_VERSION_BEAM:
            raise IntentError("version 1 carries a beam")
        if not 0 <= version <= 255:
            raise IntentError(f"version must fit in 8 bits, got {version}")
        if len(text.encode("utf-8")) > 65531:
            raise IntentError("intent payload longer than 65,531 bytes")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "beam", beam)

    def __reduce__(self) -> tuple[type[Intent], tuple[str, int, int, int | None]]:
        # by its fields: compiled by mypyc, a frozen dataclass is not restored field by field
        return (Intent, (self.text, self.k, self.version, self.beam))

    def encode(self) -> bytes:
        """Option data: version · length · K (· beam, version 1) · UTF-8 payload."""
        payload = self.text.encode("utf-8")
        if self.beam is not None:
            return _HEADER_BEAM.pack(self.version, len(payload), self.k, self.beam) + payload
        return _HEADER.pack(self.version, len(payload), self.k) + payload

    @classmethod
    def decode(cls, data: bytes) -> Intent:
        """Parse option data; raises :class:`IntentError` on any inconsistency."""
        if len(data) < _HEADER.size:
            raise IntentError(f"option data too short ({len(data)} bytes)")
        version, length, k = _HEADER.unpack_from(data)
        beam = None
        head = _HEADER.size
        if version == INTENT_VERSION_BEAM:
            if len(data) < _HEADER_BEAM.size:
                raise IntentError(f"option data too short ({len(data)} bytes)")
            beam = data[_HEADER.size]
            if beam == 0:
                raise IntentError("beam 0 (the beam is 1 to 255)")
            head = _HEADER_BEAM.size
        elif version != INTENT_VERSION:
            raise IntentError(f"unsupported intent version {version}")
        payload = data[head:]
        if len(payload) != length:
            raise IntentError(f"length field says {length} bytes, payload has {len(payload)}")
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IntentError(f"payload is not UTF-8: {exc}") from None
        return cls(text=text, k=k, version=version, beam=beam)


def encode_scores(scores: Sequence[float]) -> bytes:
    """Scores option data: one big-endian float32 per choice, best first."""
    return struct.pack(f"!{len(scores)}f", *scores)


def decode_scores(data: bytes) -> list[float]:
    """Parse scores option data; raises :class:`IntentError` unless it is whole float32s."""
    if len(data) % 4:
        raise IntentError(f"scores option of {len(data)} bytes is not a list of float32")
    return list(struct.unpack(f"!{len(data) // 4}f", data))


def encode_embedding(model: str, vector: Sequence[float] | np.ndarray) -> bytes:
    """Embedding option data: tag length · ASCII model tag · float16 vector (big-endian)."""
    tag = model.encode("ascii")
    if not 0 < len(tag) < 256:
        raise IntentError(f"model tag must be 1-255 ASCII bytes, got {len(tag)}")
    return bytes([len(tag)]) + tag + np.asarray(vector, dtype=">f2").tobytes()


def decode_embedding(data: bytes) -> tuple[str, np.ndarray]:
    """Parse embedding option data into (model tag, float32 vector); raises IntentError."""
    if len(data) < 2 or len(data) < 1 + data[0]:
        raise IntentError(f"embedding option of {len(data)} bytes has no complete model tag")
    end = 1 + data[0]
    try:
        model = data[1:end].decode("ascii")
    except UnicodeDecodeError:
        raise IntentError("embedding model tag is not ASCII") from None
    body = data[end:]
    if not body or len(body) % 2:
        raise IntentError(f"embedding of {len(body)} bytes is not a float16 vector")
    vector = np.frombuffer(body, dtype=">f2").astype(np.float32)
    if not np.isfinite(vector).all():
        raise IntentError("embedding holds a NaN or infinity")
    return model, vector


def opt_record(
    intent: Intent | None, option_code: int = DEFAULT_OPTION_CODE,
    udp_size: int = DEFAULT_EDNS_SIZE, want_scores: bool = False,
    scores_code: int = SCORES_OPTION_CODE,
) -> EDNS0:
    """An OPT pseudo-record advertising ``udp_size``, carrying the intent if given (and an
    empty scores option when ``want_scores``)."""
    opts = [EDNSOption(option_code, intent.encode())] if intent is not None else []
    if want_scores:
        opts.append(EDNSOption(scores_code, b""))
    return EDNS0(udp_len=udp_size, opts=opts)


def get_scores(msg: DNSRecord, scores_code: int = SCORES_OPTION_CODE) -> list[float] | None:
    """The scores a reply carries, or None; raises IntentError if malformed."""
    opt = find_opt(msg)
    if opt is None:
        return None
    for option in opt.rdata:
        if option.code == scores_code:
            return decode_scores(bytes(option.data))
    return None


def find_opt(msg: DNSRecord):  # -> RR | None (dnslib has no precise type)
    """The OPT record of a parsed message, if any."""
    for rr in msg.ar:
        if rr.rtype == QTYPE.OPT:
            return rr
    return None


def get_intent(msg: DNSRecord, option_code: int = DEFAULT_OPTION_CODE) -> Intent | None:
    """The intent carried by ``msg`` or None; raises IntentError if present but malformed."""
    opt = find_opt(msg)
    if opt is None:
        return None
    for option in opt.rdata:
        if option.code == option_code:
            return Intent.decode(bytes(option.data))
    return None


def requester_udp_size(msg: DNSRecord) -> int:
    """Largest UDP response the requester accepts (RFC 6891 §6.2.5: never below 512)."""
    opt = find_opt(msg)
    if opt is None:
        return CLASSIC_UDP_SIZE
    return max(CLASSIC_UDP_SIZE, int(opt.rclass))


# ---------------------------------------------------------------------------- names


#: Names already normalised (text -> normal form), normal forms included (mapped to
#: themselves); bounded: when full it starts afresh, so that the names of the moment (a
#: resolver normalises the same few thousand again and again) replace those of the build.
_NORMAL: dict[str, str] = {}
_NORMAL_MAX = 1 << 16


def normalise(name: str | DNSLabel) -> str:
    """Lower-case absolute form with a trailing dot (``tools.``)."""
    hit = _NORMAL.get(name)  # a DNSLabel (slow path) hashes as a tuple: no str key matches
    if hit is not None:
        return hit
    text = str(name).lower()
    text = text if text.endswith(".") else text + "."
    if name.__class__ is str:
        if len(_NORMAL) >= _NORMAL_MAX - 1:
            _NORMAL.clear()
        _NORMAL[name] = text
        _NORMAL[text] = text
    return text


def parent(zone: str) -> str:
    """Parent of a zone name; the parent of ``tools.`` is the root ``.``."""
    zone = normalise(zone)
    if zone == ".":
        raise ValueError("the root has no parent")
    _, _, rest = zone.partition(".")
    return rest or "."


def is_subdomain(name: str, zone: str) -> bool:
    """True if ``name`` is ``zone`` or lies below it (label-wise)."""
    get = _NORMAL.get  # normalise's memo first: this runs per record of every referral
    name = get(name) or normalise(name)
    zone = get(zone) or normalise(zone)
    return zone == "." or name == zone or name.endswith("." + zone)


def below(name: str, zone: str) -> bool:
    """:func:`is_subdomain` for names already in :func:`normalise`'s form."""
    return zone == "." or name == zone or name.endswith("." + zone)


def name_fits(name: str) -> bool:
    """Can ``name`` (absolute, text form) go on the wire: labels of 1–63 octets, at most
    255 octets in all (RFC 1035 §2.3.4)? A cursor adds ``_`` to its zone's first label, so
    a zone learned from a referral can make one that does not."""
    if len(name) <= 63:
        return True
    labels = name.rstrip(".").split(".")
    return len(name) + 1 <= 255 and all(0 < len(label.encode()) <= 63 for label in labels)


def cursor_name(service: str, zone: str, proto: str = "tcp") -> str:
    """Partially unfolded name: the search stands at ``zone`` (``_mcp._tcp._weather.tools.``)."""
    zone = normalise(zone)
    if zone == ".":
        raise ValueError("a cursor needs at least one label")
    return f"_{service}._{proto}._{zone}"


def expanded_name(service: str, zone: str, proto: str = "tcp") -> str:
    """Fully expanded SRV owner name at a leaf zone (``_mcp._tcp.history.weather.tools.``)."""
    return f"_{service}._{proto}.{normalise(zone)}"


class ToolQuery(NamedTuple):
    """A query name split into its ToolDNS parts."""

    service: str
    proto: str
    zone: str  # absolute zone the name points at
    cursor: bool  # True: partially unfolded, False: fully expanded


def parse_tool_name(name: str | DNSLabel) -> ToolQuery | None:
    """Split ``_svc._proto[._]zone.`` into its parts; None if the name is not of that shape."""
    parts = normalise(name).split(".", 3)
    if len(parts) < 4:  # fewer than three labels
        return None
    svc, proto, first, rest = parts
    if not (svc.startswith("_") and proto.startswith("_")) or len(svc) < 2 or len(proto) < 2:
        return None
    cursor = first.startswith("_")
    head = first[1:] if cursor else first
    if not head or head.startswith("_"):
        return None
    return ToolQuery(svc[1:], proto[1:], f"{head}.{rest}", cursor)


def intent_words(text: str) -> list[str]:
    """The intent as QNAME words: lower-case letters and digits (anything else splits)."""
    out, word = [], []
    for ch in text.lower():
        if ch.isascii() and ch.isalnum():
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def intent_labels(text: str) -> list[str]:
    """The intent's words packed into hyphen-joined labels of at most 63 characters, at
    most :data:`QNAME_INTENT_MAX` characters in all (cut at a word; a longer word is cut).
    Raises ValueError for an intent without a letter or digit."""
    labels: list[str] = []
    used = 0
    for word in intent_words(text):
        word = word[:_LABEL_MAX]
        if labels and len(labels[-1]) + 1 + len(word) <= _LABEL_MAX:
            extra, join = 1 + len(word), True
        else:
            extra, join = len(word) + (1 if labels else 0), False  # a dot between labels
        if used + extra > QNAME_INTENT_MAX:
            break
        used += extra
        if join:
            labels[-1] += "-" + word
        else:
            labels.append(word)
    if not labels:
        raise ValueError(f"intent {text!r} has no letters or digits to put in a name")
    return labels


def intent_qname(intent: str, k: int, service: str = "mcp", zone: str = "tools.",
                 proto: str = "tcp") -> str:
    """The intent carried in the name: ``k3.weather-forecast._mcp._tcp.tools.``."""
    if not 0 <= k <= 255:
        raise ValueError(f"K must be 0..255, got {k}")
    return _intent_name(k, intent_labels(intent), service, proto, zone)


def _intent_name(k: int, labels: Sequence[str], service: str, proto: str, zone: str) -> str:
    zone = normalise(zone)
    return ".".join([f"k{k}", *labels, f"_{service}", f"_{proto}"]) + (
        "." + zone if zone != "." else ".")


class IntentName(NamedTuple):
    """An intent-carrying name split into its parts (relative to the zone it is under)."""

    k: int
    text: str  # the words, space-separated
    service: str
    proto: str
    labels: tuple[str, ...]  # the intent labels as they appear in the name


def parse_intent_labels(relative: Sequence[str]) -> IntentName | None:
    """``[k3, words…, _svc, _proto]`` (the labels below a zone apex) as an intent name, or
    None: any other shape, or fewer labels (the empty non-terminals above one)."""
    if len(relative) < 4:
        return None
    head, svc, proto = relative[0], relative[-2], relative[-1]
    if (len(head) < 2 or head[0] != "k" or not head[1:].isdigit() or len(head) > 4
            or not svc.startswith("_") or not proto.startswith("_")
            or len(svc) < 2 or len(proto) < 2):
        return None
    words = relative[1:-2]
    if any(not w or w.startswith("_") for w in words):
        return None
    k = int(head[1:])
    if k > 255:
        return None
    return IntentName(k, " ".join(w.replace("-", " ") for w in words), svc[1:], proto[1:],
                      tuple(words))


def parse_intent_qname(name: str | DNSLabel, zone: str) -> IntentName | None:
    """:func:`parse_intent_labels` for a full name under ``zone`` (None if not under it)."""
    name, zone = normalise(name), normalise(zone)
    if not is_subdomain(name, zone) or name == zone:
        return None
    relative = name[: len(name) - len(zone)] if zone != "." else name
    return parse_intent_labels(relative.rstrip(".").split("."))


def retarget(intent: IntentName, zone: str) -> str:
    """The same intent name under another zone (a CNAME target one level down)."""
    return _intent_name(intent.k, intent.labels, intent.service, intent.proto, zone)
