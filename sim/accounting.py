"""Bytes and packets on the wire for each DNS exchange, from the real message sizes.

Every engine uses these functions, so their figures agree by construction; what differs
between engines is only *which* messages were exchanged. UDP is exact (IPv4 20 bytes +
UDP 8 bytes, no options). TCP is a model of one short connection per exchange — the
three-way handshake, one data segment each way carrying the 2-byte length prefix, and a
FIN/ACK teardown — with 20-byte TCP headers (no options); the capture-verified accounting
of the baselines issue refines it. DNS over TLS to the authoritative servers (transport
"tls", :func:`dot_exchange_cost`) follows :class:`TcpModel` on persistent connections.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from nodes.resolver.types import Step

IPV4 = 20
UDP = 8
TCP = 20


@dataclass(frozen=True, slots=True)
class WireCost:
    bytes_up: int = 0
    packets_up: int = 0
    bytes_down: int = 0
    packets_down: int = 0

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, bytes_up: int = 0, packets_up: int = 0, bytes_down: int = 0,
                 packets_down: int = 0) -> None:
        object.__setattr__(self, "bytes_up", bytes_up)
        object.__setattr__(self, "packets_up", packets_up)
        object.__setattr__(self, "bytes_down", bytes_down)
        object.__setattr__(self, "packets_down", packets_down)

    def __add__(self, other: WireCost) -> WireCost:
        return WireCost(self.bytes_up + other.bytes_up, self.packets_up + other.packets_up,
                        self.bytes_down + other.bytes_down, self.packets_down + other.packets_down)

    def __reduce__(self) -> tuple[type[WireCost], tuple[int, int, int, int]]:
        # by its fields: compiled by mypyc, a frozen dataclass is not restored field by field
        return (WireCost, (self.bytes_up, self.packets_up, self.bytes_down, self.packets_down))


class Exchange(Protocol):
    """What the TCP cost model reads of one exchange (a DNS :class:`Step` or a registry
    client's :class:`nodes.registry.client.HttpStep`)."""

    @property
    def conn(self) -> int: ...
    @property
    def sent(self) -> float: ...
    @property
    def rtt(self) -> float | None: ...
    @property
    def bytes_out(self) -> int: ...
    @property
    def bytes_in(self) -> int: ...


def datagram_size(payload: int) -> int:
    """IP packet size of one UDP datagram carrying ``payload`` bytes."""
    return IPV4 + UDP + payload


def exchange_cost(transport: str, query_len: int, reply_len: int) -> WireCost:
    """IP-layer cost of one DNS exchange (``reply_len`` 0: no reply arrived)."""
    if transport == "udp":
        reply = (datagram_size(reply_len), 1) if reply_len else (0, 0)
        return WireCost(datagram_size(query_len), 1, *reply)
    bare = IPV4 + TCP
    # client: SYN, ACK, query segment, FIN, final ACK; server: SYN-ACK, reply, FIN
    up_packets, down_packets = 5, 3 if reply_len else 1
    up = 4 * bare + bare + 2 + query_len
    down = bare + ((bare + 2 + reply_len) + bare if reply_len else 0)
    return WireCost(up, up_packets, down, down_packets)


def steps_cost(steps: Iterable[Step], dot: DotModel | None = None) -> WireCost:
    """Cost of a discovery's exchanges; exchanges over DNS over TLS (transport "tls")
    need ``dot``."""
    bytes_up = packets_up = bytes_down = packets_down = 0  # summed, one WireCost at the end
    for s in steps:
        if s.transport == "tls":
            assert dot is not None  # a run over DNS over TLS has its model
            cost = dot_exchange_cost(s, dot)
        else:
            cost = exchange_cost(s.transport, s.bytes_out, s.bytes_in)
        bytes_up += cost.bytes_up
        packets_up += cost.packets_up
        bytes_down += cost.bytes_down
        packets_down += cost.packets_down
    return WireCost(bytes_up, packets_up, bytes_down, packets_down)


# ------------------------------------------------------------------ HTTP over TCP (and TLS)

TCP_SYN = 40  # TCP header of a Linux SYN / SYN-ACK: MSS, SACK-permitted, timestamps, WS
TCP_TS = 32  # TCP header with the timestamp option (every later Linux segment)
LOOPBACK_MTU = 65536


@dataclass(frozen=True, slots=True)
class TcpModel:
    """Packets of HTTP/1.1 connections as Linux sends them on loopback (checked by capture).

    Plain TCP, a connection carrying n requests:
      * handshake SYN, SYN-ACK, ACK; the client closes: FIN →, ← FIN, ACK →;
      * a message of m bytes: ceil(m / MSS) segments of 52 + payload bytes, the receiver
        acknowledging every second full-sized segment (RFC 5681 §4.2; never on loopback,
        where one segment carries up to 65,483 bytes);
      * the server ACKs the first request at once (Linux "quickack" at connection start)
        and later ones ride on its response;
      * the client ACKs the first response on a connection at once (quickack); a later
        response is acknowledged by whatever the client sends next (the next request or
        its FIN); on kept-alive connections :func:`keepalive_acks` follows Linux's
        interactive ("pingpong") mode across discoveries: a response after an idle
        period is ACKed at once, one followed by silence longer than the 40 ms
        delayed-ACK timer gets its ACK from the timer.
    TLS 1.3 (full handshake, then the client closes with close_notify):
      * → ClientHello, ← ACK, ← server flight, → ACK, → Finished, ← session tickets;
        requests and responses as TLS records, no pure ACKs in between;
      * → close_notify, ← close_notify, ← FIN (the server closes first), → FIN, ← ACK.
    """

    mtu: int = LOOPBACK_MTU

    def __reduce__(self) -> tuple[type[TcpModel], tuple[int]]:  # as WireCost's
        return (TcpModel, (self.mtu,))

    @property
    def mss(self) -> int:
        return self.mtu - IPV4 - TCP_TS

    def segments(self, payload: int) -> tuple[int, int]:
        """(packets, IP bytes) of one message of ``payload`` bytes."""
        if payload <= 0:
            return 0, 0
        n = -(-payload // self.mss)
        return n, payload + n * (IPV4 + TCP_TS)


@dataclass(frozen=True)
class TlsSizes:
    """Bytes of each TLS 1.3 flight (full handshake) and per-record overhead, as
    :func:`sim.build.registries.tls_sizes` measures them in a real handshake."""

    client_hello: int
    server_flight: int  # ServerHello … server Finished
    client_finished: int
    tickets: int  # NewSessionTicket records sent after the handshake
    record_overhead: int  # header + content type + AEAD tag per application record
    max_record: int = 16384

    def records(self, payload: int) -> int:
        """TLS bytes that carry ``payload`` application bytes in one write."""
        if payload == 0:
            return 0
        n = -(-payload // self.max_record)
        return payload + n * self.record_overhead

    def __reduce__(self) -> tuple[type[TlsSizes], tuple[int, ...]]:  # as WireCost's
        return (TlsSizes, (self.client_hello, self.server_flight, self.client_finished,
                           self.tickets, self.record_overhead, self.max_record))


ATO = 0.040  # Linux's delayed-ACK timeout floor (TCP_ATO_MIN = HZ / 25)


def keepalive_acks(steps: Sequence[Exchange], ato: float = ATO) -> list[int]:
    """Pure ACKs the client sends after each response on one kept-alive connection.

    ``steps`` are all HTTP exchanges on the connection in order (several discoveries).
    Linux acknowledges a response at once unless the connection is "interactive"
    (pingpong): at its start (quickack), or when the client did not answer the previous
    response within the delayed-ACK timeout. Otherwise the ACK waits: it rides on the
    next request if that leaves within ``ato``, else the timer sends it (and ends the
    interactive mode). Sending within ``ato`` of a response makes the connection
    interactive. Gaps come from the exchanges' node times.
    """
    acks = [0] * len(steps)
    pingpong = False
    for i, s in enumerate(steps):
        if not s.bytes_in or s.rtt is None:
            continue
        gap = steps[i + 1].sent - (s.sent + s.rtt) if i + 1 < len(steps) else float("inf")
        if not pingpong:
            acks[i] = 1
            pingpong = gap <= ato
        elif gap > ato:
            acks[i], pingpong = 1, False
    return acks


def http_cost(steps: Sequence[Exchange], opened: set[int], closed: bool, keepalive: bool,
              tls: TlsSizes | None, model: TcpModel, response_acks: list[int] | None = None
              ) -> WireCost:
    """IP-layer cost of one registry discovery under :class:`TcpModel`.

    ``steps`` are its HTTP exchanges in order (``conn``, application ``bytes_out`` and
    ``bytes_in``; 0 when no response came), ``opened`` the connections it opened, ``closed``
    whether it closed its connection, ``tls`` a :class:`TlsSizes` or None;
    ``response_acks`` (kept-alive plain TCP, from :func:`keepalive_acks`) overrides the
    client's pure ACKs after each response.
    """
    bare = IPV4 + TCP_TS
    cost = [0, 0, 0, 0]  # bytes up, packets up, bytes down, packets down

    def up(size: int, n: int = 1) -> None:
        cost[0] += size
        cost[1] += n

    def down(size: int, n: int = 1) -> None:
        cost[2] += size
        cost[3] += n

    for _ in opened:
        c = open_cost(tls, model)
        up(c.bytes_up, c.packets_up)
        down(c.bytes_down, c.packets_down)
    seen: set[int] = set()
    for i, s in enumerate(steps):
        first = s.conn in opened and s.conn not in seen
        seen.add(s.conn)
        n, size = model.segments(tls.records(s.bytes_out) if tls else s.bytes_out)
        up(size, n)
        down(bare * (n // 2), n // 2)  # an ACK for every second full-sized segment
        if tls is None and first:
            down(bare)  # quickack of the first request
        if s.bytes_in:
            n, size = model.segments(tls.records(s.bytes_in) if tls else s.bytes_in)
            down(size, n)
            up(bare * (n // 2), n // 2)
            last = i == len(steps) - 1
            if response_acks is not None:
                up(bare * response_acks[i], response_acks[i])
            elif (tls is None and first) or (keepalive and last and not closed):
                up(bare)
    if closed:
        if tls is not None:
            c = tls_close_cost(tls)
            up(c.bytes_up, c.packets_up)
            down(c.bytes_down, c.packets_down)
        else:
            up(2 * bare, 2)  # FIN and the last ACK
            down(bare)  # server FIN
    return WireCost(cost[0], cost[1], cost[2], cost[3])


def http_segment(tls: TlsSizes | None, payload: int) -> int:
    """IP bytes of one segment carrying ``payload`` bytes of HTTP (in TLS records with
    ``tls``): what the socket engines' adapters count and delay per write."""
    return IPV4 + TCP_TS + (tls.records(payload) if tls is not None else payload)


def open_cost(tls: TlsSizes | None, model: TcpModel) -> WireCost:
    """Opening a connection under :class:`TcpModel`: → SYN, ← SYN-ACK, → ACK and, with
    ``tls`` (:class:`TlsSizes`), the TLS 1.3 flights → ClientHello, ← ACK,
    ← server flight, → ACK, → Finished, ← tickets (HTTPS and DNS over TLS alike)."""
    bare = IPV4 + TCP_TS
    bu, pu, bd, pd = IPV4 + TCP_SYN + bare, 2, IPV4 + TCP_SYN, 1
    if tls is not None:
        for size, toward_server in ((tls.client_hello, True), (tls.server_flight, False),
                                    (tls.client_finished, True), (tls.tickets, False)):
            n, b = model.segments(size)
            if toward_server:
                bu, pu = bu + b, pu + n
            else:
                bd, pd = bd + b, pd + n
        bd, pd = bd + bare, pd + 1  # the server's ACK of the ClientHello
        bu, pu = bu + bare, pu + 1  # the client's ACK of the server flight
    return WireCost(bu, pu, bd, pd)


def tls_close_cost(tls: TlsSizes) -> WireCost:
    """Closing a TLS connection (HTTPS, or DNS over TLS at an idle timeout, a full table
    or the end of a run): → close_notify, ← close_notify, ← FIN, → FIN, ← ACK."""
    bare = IPV4 + TCP_TS
    alert = bare + tls.records(2)  # close_notify: a 2-byte alert in one record
    return WireCost(alert + bare, 2, alert + 2 * bare, 3)


# ------------------------------------------------------------------ DNS over TLS (RFC 7858)

DOT_PORT = 853


def dot_port(dns_port: int) -> int:
    """The DNS-over-TLS port beside a DNS port: 853 beside 53, moved with it (15353 →
    16153) when the live engine runs off the privileged ports."""
    return dns_port + DOT_PORT - 53


@dataclass(frozen=True, slots=True)
class DotModel:
    """What the cost of a DNS-over-TLS exchange depends on: the TLS sizes of the run's
    certificate (:class:`TlsSizes`, a real in-memory handshake), the TCP
    model, the client's pure ACK after each response by exchange (``id(step)`` → 0/1,
    from :func:`dot_acks`; missing: 1) and the server's pure ACK of pipelined queries
    (``server_acks``, also from :func:`dot_acks`; missing: 0)."""

    tls: TlsSizes
    model: TcpModel = TcpModel()
    acks: dict[int, int] | None = None
    server_acks: dict[int, int] | None = None

    def __reduce__(self) -> tuple[type[DotModel], tuple[object, ...]]:  # as WireCost's
        return (DotModel, (self.tls, self.model, self.acks, self.server_acks))


def dot_acks(steps: Iterable[Step]) -> tuple[dict[int, int], dict[int, int]]:
    """Pure ACKs of DNS-over-TLS exchanges, by ``id(step)``: the client's after each
    response, and the server's of pipelined queries.

    Both are empirical rules read off captures of these connections on Linux loopback
    (``tooldns run scenarios/dot-cost.yaml --engine live --capture``), not a model of the
    kernel's quickack and receive-MSS heuristics. Client: a response is acknowledged by
    the next query on the connection when that leaves within the delayed-ACK timeout,
    else by a pure ACK (from the timer) — the handshake's flights leave the connection
    out of quickack, and unlike the plain-TCP registries (:func:`keepalive_acks`) it was
    never seen to return to it. Server: one pure ACK per burst of pipelined queries (a
    query sent before the previous one on the connection was answered: the A or AAAA
    queries for a leaf's targets), counted on the burst's second query."""
    conns: dict[int, list[Step]] = {}
    for s in steps:
        if s.transport == "tls" and s.conn:
            conns.setdefault(s.conn, []).append(s)
    client: dict[int, int] = {}
    server: dict[int, int] = {}
    for group in conns.values():
        group.sort(key=lambda st: st.sent)
        for i, s in enumerate(group):
            if s.bytes_in and s.rtt is not None:
                gap = (group[i + 1].sent - (s.sent + s.rtt) if i + 1 < len(group)
                       else float("inf"))
                client[id(s)] = 1 if gap > ATO else 0
        bursting = False
        for prev, s in itertools.pairwise(group):
            pipelined = prev.rtt is not None and s.sent < prev.sent + prev.rtt
            if pipelined and not bursting:
                server[id(s)] = 1
            bursting = pipelined
    return client, server


def dot_exchange_cost(step: Step, dot: DotModel) -> WireCost:
    """IP-layer cost of one DNS message exchange over a persistent TLS 1.3 connection
    (RFC 7858; RFC 7766 reuse), under :class:`TcpModel`: the TCP and TLS handshakes when
    the exchange ``opened`` the connection (SYN, SYN-ACK, ACK, ClientHello, ACK, server
    flight, ACK, Finished, tickets — as :func:`http_cost`), the query and the response as
    TLS records carrying the 2-byte length prefix and the message, the client's pure ACK
    after the response (``dot.acks``). The teardown (close_notify, FINs) belongs to the
    connection, not to one exchange, and is not counted here (the engines count it)."""
    tls, model = dot.tls, dot.model
    bare = IPV4 + TCP_TS
    bu = pu = bd = pd = 0
    if step.opened:
        c = open_cost(tls, model)
        bu, pu, bd, pd = c.bytes_up, c.packets_up, c.bytes_down, c.packets_down
    n, b = model.segments(tls.records(2 + step.bytes_out))
    bu, pu = bu + b, pu + n
    if dot.server_acks:
        ack = dot.server_acks.get(id(step), 0)
        bd, pd = bd + bare * ack, pd + ack
    if step.bytes_in:
        n, b = model.segments(tls.records(2 + step.bytes_in))
        bd, pd = bd + b, pd + n
        ack = 1 if dot.acks is None else dot.acks.get(id(step), 1)
        bu, pu = bu + bare * ack, pu + ack
    return WireCost(bu, pu, bd, pd)
