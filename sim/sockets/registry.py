"""HTTP registries on real sockets: one registry node (:class:`nodes.registry.server.
RegistryServer`) served over HTTP/1.1 on TCP, or TLS 1.3 (:func:`start_registry`), and the
replicas of a run behind one name (:class:`RegistryReplicas`: crash, restart).

The node decides everything HTTP (parsing, deadlines, connection cap, answers); here each
connection's bytes are read and written, with the emulated one-way delay of each response.
Pipelined requests are answered one per turn of the event loop, each once the previous
answer has been taken (below ``WRITE_BUFFER`` bytes waiting), and nothing more is read from
the connection while any wait: a client that pipelines requests and never reads its
answers holds one request's work at a time, not a read's worth, and other clients are
served in between.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from nodes.registry.base import Routes
from nodes.registry.server import RegistryServer
from nodes.searchcost import SearchCost
from sim.build.registries import RegistrySetup
from sim.sockets.timing import sleep_precisely
from sim.sockets.udp import naming

WRITE_TIMEOUT = 10.0  # seconds a registry response may take to drain to a slow reader
LINGER = 1.0  # seconds a registry reads (and drops) what follows an error before closing
READ_SIZE = 65_536  # bytes read from a connection at once
WRITE_BUFFER = 16 * 1024  # response bytes waiting for a slow reader before the next request


async def start_registry(reg: RegistrySetup, tls: bool, now: Callable[[], float],
                         delay: Callable[[str, int], float] | None = None,
                         address: str | None = None, server: RegistryServer | None = None,
                         conns: set[asyncio.StreamWriter] | None = None,
                         write_timeout: float = WRITE_TIMEOUT, search: float | SearchCost = 0.0,
                         ) -> asyncio.base_events.Server:
    """Serve a registry over HTTP/1.1 (TLS 1.3 with ``tls``) on its address and port.

    ``delay(peer address, response bytes)`` gives the emulated one-way delay before each
    response is written; a peer's bad bytes get a 4xx (and, when the server gives the
    connection up, a short lingering close so the answer is not lost to a reset). The node
    decides the deadlines (request, idle keep-alive: its ``limits``) and the connection
    cap; here each read waits until the node's next deadline, and each write may take
    ``write_timeout`` seconds. ``now`` must advance (node time). A replica serves at
    ``address`` with its own ``server`` node; ``conns`` collects the open connections
    (so a crash can reset them). ``search`` seconds (``processing.registry``, modelled;
    a :class:`nodes.searchcost.SearchCost`: by the items the search scored) pass before each
    answer to a search request, awaited so other connections are served meanwhile.
    """
    node = server if server is not None else reg.server
    handler = RegistryConnections(node, now, delay, conns, write_timeout, search)
    with naming((address or reg.address, reg.port), "tcp"):
        return await asyncio.start_server(
            handler.serve, address or reg.address, reg.port, reuse_address=True,
            ssl=reg.server_context() if tls else None,
            ssl_handshake_timeout=node.limits.request_timeout if tls else None)


async def linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close our side, then read (and drop) what the peer still sends for ``LINGER`` s."""
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()
    end = asyncio.get_running_loop().time() + LINGER
    with contextlib.suppress(TimeoutError, ConnectionError, OSError):
        while await asyncio.wait_for(reader.read(65536),
                                     end - asyncio.get_running_loop().time()):
            pass


class RegistryConnections:
    """The connections of one registry node on its listening socket (:func:`start_registry`
    describes the arguments)."""

    def __init__(self, node: RegistryServer, now: Callable[[], float],
                 delay: Callable[[str, int], float] | None,
                 conns: set[asyncio.StreamWriter] | None, write_timeout: float,
                 search: float | SearchCost) -> None:
        self.node, self.now, self.delay, self.conns = node, now, delay, conns
        self.write_timeout, self.search = write_timeout, search
        self.searches: Callable[[], int] | None = None  # the app's counter, when modelled
        self.scored: Callable[[], int] = int  # the app's items-scored counter (a cost model)
        if search:
            app = node.app
            assert isinstance(app, Routes)  # a search time needs the app's search counter
            self.searches, self.scored = app.searches, app.scored

    async def write(self, writer: asyncio.StreamWriter, peer: tuple[str, int],
                    reply: bytes) -> None:
        if self.delay is not None:
            await sleep_precisely(self.delay(peer[0], len(reply)))
        writer.write(reply)
        await asyncio.wait_for(writer.drain(), self.write_timeout)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection, from accept (or refusal at the cap) to close."""
        node, conns = self.node, self.conns
        peer = writer.get_extra_info("peername")[:2]
        if not node.accept(peer, self.now(), client=peer[0]):
            with contextlib.suppress(ConnectionError, OSError):
                writer.write(node.refusal())
            writer.close()
            return
        if conns is not None:
            conns.add(writer)
        try:
            await self.exchange(reader, writer, peer)
        except TimeoutError:  # the response did not drain within write_timeout
            node.lost(peer, "write_timeout")
            writer.transport.abort()
        except (ConnectionError, OSError):
            node.lost(peer, "reset")
        finally:
            node.lost(peer)
            if conns is not None:
                conns.discard(writer)
            writer.close()

    async def exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       peer: tuple[str, int]) -> None:
        """Requests and responses until the node or the peer closes: one request answered
        at a time, pipelined ones a turn of the loop apart (see the module)."""
        node, now, searches, scored = self.node, self.now, self.searches, self.scored
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER)
        while True:
            items = scored()
            if node.backlog(peer):  # read already: the other connections' turn first
                await asyncio.sleep(0)
                searched = searches() if searches is not None else 0
                reply, close = node.resume(peer, now(), 1)
                data = b"-"
            else:
                deadline = node.deadline(peer)  # at least one look at what has arrived:
                wait = None if deadline is None else max(0.01, deadline - now())
                try:
                    data = await asyncio.wait_for(reader.read(READ_SIZE), wait)
                except TimeoutError:
                    searched = searches() if searches is not None else 0
                    reply, close = node.on_timer(peer, now())
                    data = b"-"  # a timeout is the server giving up, as an error is
                else:
                    searched = searches() if searches is not None else 0
                    reply, close = node.receive(peer, data, now(), 1)
            if reply and searches is not None and searches() > searched:
                search = self.search  # the modelled search: fixed, or by the items scored
                await sleep_precisely(search if isinstance(search, float | int)
                                      else search.search(scored() - items))
            if reply:
                await self.write(writer, peer, reply)
            if close or not data:
                if data and reply:
                    await linger(reader, writer)
                break


def replica_nodes(reg: RegistrySetup, replicas: int, addresses: list[str],
                  address_of: Callable[[int], str]) -> dict[str, RegistryServer]:
    """The registry node of each replica address in ``addresses`` (replica 0 is the setup's
    own node; the others share its app, i.e. its index, with their own connection state)."""
    server = reg.server
    out = {}
    for i in range(replicas):
        host = address_of(i)
        if host in addresses:
            out[host] = server if i == 0 else RegistryServer(
                server.app, name=f"{server.name}-{i}", limits=server.limits,
                max_connections=server.max_connections)
    return out


class RegistryReplicas:
    """The registry replicas one process serves, each on its own address: started, crashed
    (listener closed, connections reset, as when the process dies) and restarted.

    ``delay(replica, peer, payload bytes)`` is the emulated one-way delay of a response;
    ``search`` the modelled search time (:func:`start_registry`)."""

    def __init__(self, reg: RegistrySetup, nodes: dict[str, RegistryServer], tls: bool,
                 now: Callable[[], float], delay: Callable[[str, str, int], float],
                 search: float | SearchCost = 0.0) -> None:
        self.reg, self.nodes, self.tls, self.now, self.delay = reg, nodes, tls, now, delay
        self.search = search
        self.listening: dict[str, asyncio.base_events.Server] = {}
        self.conns: dict[str, set[asyncio.StreamWriter]] = {h: set() for h in nodes}
        self.tasks: set[asyncio.Task] = set()

    async def serve(self, host: str) -> None:
        self.listening[host] = await start_registry(
            self.reg, tls=self.tls, now=self.now,
            delay=lambda peer, n: self.delay(host, peer, n), address=host,
            server=self.nodes[host], conns=self.conns[host], search=self.search)

    async def start(self) -> None:
        for host in self.nodes:
            await self.serve(host)

    def crash(self, host: str) -> None:
        """The process dies: no listener, connections reset."""
        server = self.listening.pop(host, None)
        if server is not None:
            server.close()
        for writer in list(self.conns[host]):
            writer.transport.abort()

    def restart(self, host: str) -> None:
        task = asyncio.get_running_loop().create_task(self.serve(host))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for server in self.listening.values():
            server.close()
        self.listening.clear()
