"""The HTTP agents of one process on real sockets: each :class:`nodes.registry.client.
RegistryAgent` decides what to open, send and close; :class:`RegistryClients` carries it out
with asyncio streams (TLS 1.3 when the scheme asks), waiting the emulated one-way delay of
every segment it sends and of the handshake's flights before connecting for real.

Replicas are tried in the agent's order (:func:`sim.build.faults.registry_order`), as
``socket.create_connection`` tries a name's addresses: a refused connection (a crashed
replica) costs its SYN and RST and the next address is tried.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from nodes.registry.client import RegistryAgent, RegistryResult
from sim.accounting import IPV4, TCP_SYN, TCP_TS, TlsSizes, http_segment
from sim.build.faults import registry_order
from sim.build.registries import REGISTRY_HOST
from sim.sockets.timing import sleep_precisely

#: ``delay(src, dst, IP bytes)``: one segment's emulated one-way delay (counted)
SegmentDelay = Callable[[str, str, int], float]


class RegistryClients:
    """Open, write, read and close the connections of this process's registry agents."""

    def __init__(self, agents: dict[str, RegistryAgent], address: tuple[str, int],
                 replicas: int, agent_index: dict[str, int], tls: TlsSizes | None,
                 client_ctx: ssl.SSLContext | None, delay: SegmentDelay,
                 now: Callable[[], float], origin: Callable[[], float],
                 on_done: Callable[[RegistryResult], None],
                 flows: dict[tuple[str, int], int]) -> None:
        self.agents, self.rip, self.port = agents, address[0], address[1]
        self.replicas, self.agent_index = replicas, agent_index
        self.tls, self.client_ctx, self.delay = tls, client_ctx, delay
        self.now, self.origin, self.on_done, self.flows = now, origin, on_done, flows
        self.loop = asyncio.get_running_loop()
        self.host_of: dict[tuple[str, int], str] = {}
        self.writers: dict[tuple[str, int], asyncio.StreamWriter] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def connect(self, ip: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                             str] | None:
        """Each replica address in turn (None: every one refused); waits the emulated
        handshake delays."""
        delay, tls = self.delay, self.tls
        for host in registry_order(self.replicas, self.agent_index[ip]):
            await sleep_precisely(delay(ip, host, IPV4 + TCP_SYN))
            try:
                reader, writer = await asyncio.open_connection(
                    host, self.port, ssl=self.client_ctx,
                    server_hostname=REGISTRY_HOST if self.client_ctx else None,
                    local_addr=(ip, 0))
            except OSError:  # refused: the RST travels back
                await sleep_precisely(delay(host, ip, IPV4 + TCP_SYN))
                continue
            wait = delay(host, ip, IPV4 + TCP_SYN)
            if tls is not None:
                wait += delay(ip, host, IPV4 + TCP_TS + tls.client_hello)
                wait += delay(host, ip, IPV4 + TCP_TS + tls.server_flight)
            await sleep_precisely(wait)
            return reader, writer, host
        return None

    async def open_conn(self, ip: str, conn: int) -> None:
        agent = self.agents[ip]
        opened = await self.connect(ip)
        if opened is None:
            agent.closed(conn, self.now())
            self.pump(ip)
            return
        reader, writer, self.host_of[(ip, conn)] = opened
        self.flows[(ip, writer.get_extra_info("sockname")[1])] = conn
        self.writers[(ip, conn)] = writer
        agent.connected(conn, self.now())
        self.pump(ip)
        try:
            while data := await reader.read(65536):
                agent.receive(conn, data, self.now())
                self.pump(ip)
        except (ConnectionError, OSError):
            pass
        self.writers.pop((ip, conn), None)
        agent.closed(conn, self.now())
        self.pump(ip)

    async def send(self, ip: str, conn: int, data: bytes) -> None:
        await sleep_precisely(self.delay(ip, self.host_of.get((ip, conn), self.rip),
                                         http_segment(self.tls, len(data))))
        writer = self.writers.get((ip, conn))
        if writer is not None and not writer.is_closing():
            writer.write(data)

    def pump(self, ip: str) -> None:
        """Carry out what agent ``ip`` wants done; hand on what it finished; re-arm its
        timer."""
        agent = self.agents[ip]
        for act in agent.to_send():
            if act.kind == "open":
                self.spawn(self.open_conn(ip, act.conn))
            elif act.kind == "send":
                self.spawn(self.send(ip, act.conn, act.data))
            else:
                self.host_of.pop((ip, act.conn), None)
                writer = self.writers.pop((ip, act.conn), None)
                if writer is not None:
                    writer.close()
        for result in agent.pop_done():
            self.on_done(result)
        when = agent.next_timer()
        old = self.timers.pop(ip, None)
        if old is not None:
            old.cancel()
        if when is not None:
            self.timers[ip] = self.loop.call_at(self.origin() + when, self.fire, ip)

    def fire(self, ip: str) -> None:
        self.timers.pop(ip, None)
        self.agents[ip].on_timer(self.now())
        self.pump(ip)

    async def close(self) -> None:
        """Close every connection (FINs out before the servers close), cancel the rest."""
        for writer in self.writers.values():
            writer.close()
        for handle in self.timers.values():
            handle.cancel()
        await asyncio.sleep(0.05)
        for task in list(self.tasks):
            task.cancel()
