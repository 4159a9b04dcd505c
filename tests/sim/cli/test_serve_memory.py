"""``tooldns serve``'s memory bounds: what its defaults let the process hold, at worst.

A long-running ``serve`` under a stream of fresh intents fills every bounded table it has:
the resolver's cache, each server's packet cache and the process's reply memo. Their
bounds together must fit a small machine; ``benchmarks/bench_robustness.py memory
--seconds 600`` measures the RSS that results (flat once they are full).
"""

from __future__ import annotations

import argparse

from nodes.authoritative.memo import REPLY_MEMO
from sim.cli import serve
from sim.cli.common import namespace
from topologies.addresses import assign_servers

#: what the bounded tables of a default ``serve`` may hold together (estimated bytes), on
#: top of the zones, score indexes and interpreter (about 210 MB RSS for the default
#: namespace)
BUDGET = 192 * 2**20


def test_serve_defaults_bound_what_fresh_intents_can_fill():
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args([])
    servers = len(assign_servers(namespace(args))) * args.replicas
    assert servers > 40  # the default namespace: every zone has its own server
    worst = args.cache_max_bytes + servers * args.packet_cache_bytes + REPLY_MEMO.max_bytes
    assert worst <= BUDGET, f"{worst / 2**20:.0f} MiB"
