"""Fitting a reply to the requester's size: UDP payload size, truncation (TC), TCP.

:func:`fit` encodes a :class:`~nodes.authoritative.reply.Reply` into the response bytes
(header, question, sections, OPT), compressing names against the question's, and stops at
the size limit: optional additional records are left out, anything else sets TC (over UDP
with empty sections, so the client retries over TCP). A ranked answer (a leaf's top K) gets
each SRV record's rank written into its priority here, at reply time, so the records stay
encoded once per tool (:class:`nodes.authoritative.zonestate.Tools`).
"""

from __future__ import annotations

import struct
from collections import Counter

from nodes.authoritative.reply import Reply
from nodes.dns.codec import QueryView, opt_bytes, put_name, put_record, question_names
from nodes.dns.wire import CLASSIC_UDP_SIZE, MAX_MESSAGE_SIZE

HEADER = struct.Struct("!HHHHHH")
COUNTS3 = struct.Struct("!HHH")  # ANCOUNT, NSCOUNT, ARCOUNT
PRIORITY = struct.Struct("!H")
#: Where a ranked SRV record's priority starts: after the owner (a 2-byte pointer to the
#: question name), TYPE, CLASS, TTL and RDLENGTH.
SRV_PRIORITY_AT = 12


def size_limit(opt_udp: int | None, max_udp_size: int, transport: str) -> int:
    """The largest reply the requester takes: its EDNS size (at least 512, at most the
    server's), 512 without EDNS, a whole message over TCP."""
    if transport != "udp":
        return MAX_MESSAGE_SIZE
    if opt_udp is None:
        return CLASSIC_UDP_SIZE
    return min(max(CLASSIC_UDP_SIZE, opt_udp), max_udp_size)


def fit(q: QueryView, reply: Reply, transport: str, names: dict[str, int] | None,
        opt: bytes, max_udp_size: int, scores_code: int, counts: Counter[str]) -> bytes:
    """Encode ``reply`` to ``q``, attaching OPT when the query had one, within the size limit.

    ``names``: the offsets of the question name's suffixes, when known (copied, not
    changed); ``opt``: the server's OPT record without options. Records are appended in
    section order until one does not fit: optional additional data (beyond
    ``reply.required``) is simply left out (RFC 2181 §9); anything else truncates (TC),
    counted in ``counts``. Over UDP a truncated reply keeps only the question (and OPT), so
    the client retries over TCP; over TCP it keeps what fits.
    """
    opt_udp = q.opt_udp
    if opt_udp is None:
        opt = plain_opt = b""
        room = CLASSIC_UDP_SIZE if transport == "udp" else MAX_MESSAGE_SIZE
    else:
        if reply.ext_rcode:
            opt = opt_bytes(max_udp_size, reply.ext_rcode)
        plain_opt = opt
        if reply.scores is not None:  # OPT with the scores option (RDLENGTH is last)
            option = struct.pack("!HH", scores_code, len(reply.scores)) + reply.scores
            opt = opt[:-2] + struct.pack("!H", len(option)) + option
        room = (min(max(CLASSIC_UDP_SIZE, opt_udp), max_udp_size)
                if transport == "udp" else MAX_MESSAGE_SIZE) - len(opt)
    flags = 0x8000 | (q.flags & 0x7900) | (0x0400 if reply.aa else 0) | (reply.rcode & 0xF)
    question = q.question
    buf = bytearray(HEADER.pack(q.id, flags, 1 if question else 0, 0, 0, 0))
    buf += question
    if names is not None:
        names = names.copy()
    elif question and q.simple_name:
        names = question_names(q.qname)
    else:
        names = {}
    counts3 = [0, 0, 0]  # answer, authority, additional
    truncated = False
    section = -1
    # Header and question always fit (room >= 512 - 11 > 12 + 259), so an empty section
    # needs no size check.
    for recs in (reply.answer, reply.authority, reply.additional):
        section += 1
        if not recs:
            continue
        n = 0
        for rec in recs:
            wire = rec.wire
            if wire is not None:  # fixed bytes: check before copying
                if len(buf) + len(wire) > room:
                    truncated = section != 2 or n < reply.required
                    break
                buf += wire
            else:
                mark = len(buf)
                split = rec.split
                if split is not None:  # owner name + fixed rest
                    put_name(buf, names, split[0])
                    buf += split[1]
                else:  # NS/SOA: names in RDATA too
                    put_record(buf, names, rec)
                if len(buf) > room:
                    del buf[mark:]
                    truncated = section != 2 or n < reply.required
                    break
            n += 1
        else:
            counts3[section] = n
            if len(buf) >= room:
                break
            continue
        counts3[section] = n  # a record did not fit
        break
    if truncated:
        counts["truncated_" + transport] += 1
        if transport == "udp":  # TC with empty sections: the client retries over TCP
            del buf[12 + len(question):]
            counts3 = [0, 0, 0]
        buf[2] |= 0x02
    if reply.ranked and counts3[0]:
        rank_into(buf, 12 + len(question), reply, counts3[0])
    if opt_udp is not None:
        # scores describe every record chosen: a truncated reply goes without them
        buf += plain_opt if truncated else opt
        counts3[2] += 1
    COUNTS3.pack_into(buf, 6, *counts3)
    return bytes(buf)


def rank_into(buf: bytearray, start: int, reply: Reply, n: int) -> None:
    """Write the ranks 0, 1, … as the SRV priorities of the first ``n`` answer records of a
    ranked reply (``start``: where the answer section begins in ``buf``). Each record is a
    fixed-bytes SRV owned by the question name (``Rec.wire``); ranks beyond 65535 (a K = 0
    answer of a huge leaf) share the last priority."""
    pos = start + SRV_PRIORITY_AT
    pack_into = PRIORITY.pack_into
    for rank in range(n):
        wire = reply.answer[rank].wire
        if wire is None:  # not a fixed-bytes record: not a ranking fit() can patch
            break
        pack_into(buf, pos, rank if rank < 0xFFFF else 0xFFFF)
        pos += len(wire)
