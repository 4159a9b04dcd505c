"""Addresses in the namespace: NS replicas for every zone, an endpoint for every tool."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from nodes.dns.zone import ServerRef
from topologies.namespace import ROOT, Namespace


def addresses(first: str) -> Iterator[str]:
    """Consecutive usable IPv4 host addresses from ``first`` (skipping .0 and .255)."""
    for addr in range(int(ipaddress.IPv4Address(first)), 1 << 32):
        if 0 < addr & 255 < 255:
            yield f"{addr >> 24}.{addr >> 16 & 255}.{addr >> 8 & 255}.{addr & 255}"
    raise ValueError(f"no IPv4 addresses left after {first}")


def assign_servers(
    ns: Namespace, replicas: int = 1, first: str = "127.1.0.1"
) -> dict[str, tuple[ServerRef, ...]]:
    """Give every zone ``replicas`` NS hosts (``nsN.<zone>``) with distinct addresses."""
    addrs = addresses(first)
    out: dict[str, tuple[ServerRef, ...]] = {}
    for zone in ns.zones:
        hosts = [f"{chr(ord('a') + i)}.root-servers." if zone == ROOT else f"ns{i + 1}.{zone}"
                 for i in range(replicas)]
        out[zone] = tuple(ServerRef(h, next(addrs)) for h in hosts)
    return out


def assign_endpoints(ns: Namespace, first: str = "127.64.0.1") -> None:
    """Give every tool a distinct endpoint address (deterministic, in sorted id order)."""
    tools = ns.tools
    for tid, address in zip(sorted(tools), addresses(first), strict=False):
        tools[tid].address = address
