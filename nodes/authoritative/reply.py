"""A reply before encoding: its RCODE, flags and sections of prepared records.

The answering code (:mod:`nodes.authoritative.answers`) builds one per query and
:func:`nodes.authoritative.fit.fit` encodes it within the requester's size limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodes.dns.codec import Rec

NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED, NOTAUTH = 0, 1, 2, 3, 4, 5, 9
BADVERS = 16  # RFC 6891 extended RCODE


class Reply:
    """Sections of a reply before encoding (a plain class: one is built per query)."""

    __slots__ = ("aa", "additional", "answer", "authority", "ext_rcode", "ranked", "rcode",
                 "required", "scores")

    def __init__(
        self, rcode: int, aa: bool = False, answer: Sequence[Rec] = (),
        authority: Sequence[Rec] = (), additional: Sequence[Rec] = (), ext_rcode: int = 0,
        required: int = 0, scores: bytes | None = None, ranked: bool = False,
    ) -> None:
        self.scores = scores  # scores option data, when the query asked for it
        # the answer is a ranking of SRV records owned by the query name: fit() writes each
        # one's rank (0 = best) as its SRV priority (RFC 2782: the lowest is tried first)
        self.ranked = ranked
        self.rcode = rcode
        self.aa = aa
        self.answer = answer
        self.authority = authority
        self.additional = additional
        self.ext_rcode = ext_rcode
        self.required = required  # leading additional records that must fit (in-domain glue,
        # RFC 9471)
