"""Robustness of the testbed's servers under hostile input, measured on loopback.

Each probe is a module of :mod:`benchmarks.robustness` (``run(args) -> dict`` returns its
figures, ``show`` prints them; ``--json`` also writes them). DNS probes serve the hierarchy
in a child process (:mod:`benchmarks.robustness.serving`); ``--before TREE`` serves it from
an earlier checkout as well, where the probe supports it, and prints both.

``http``
    Starts the two HTTP registries (AgentDNS at ``--address``, ANS at the next address) in
    a **separate process**, exactly as the live engine serves them (``sim.sockets.registry.
    start_registry``, real TCP on 127.0.0.0/8, a token secret from ``secrets``), then fires
    malformed and hostile requests at them from this process over blocking sockets: a
    request split across reads (two pieces, and byte by byte), slowloris (one header byte
    every 0.2 s) with a well-formed request served meanwhile, bodies over the limit
    (``Content-Length`` and chunked), oversized headers, ``"limit": 1e400``, JSON nested
    10^5 deep, a never-issued bearer token, a rogue registration with a search token,
    ANS registrations unsigned / signed by a foreign CA / signed properly, an EOF in the
    middle of a request, an idle keep-alive connection, connections over the cap, a
    client that never reads its answers (write deadline) and a handler exception
    (injected by the server process's ``--inject-fault`` wrapper on one path only, so the
    500 path is reachable; the registries themselves have no known input that raises).

    Per case: the status expected and the one received (``close`` = the server closed
    without answering, ``reset`` = RST, ``timeout`` = nothing within the client's wait),
    the time from just before the case's last byte was sent (from its first byte for
    slowloris, from the previous answer for the idle connection, from the connect for
    the capped one) to the answer or close, whether the server process is still alive,
    and the status of a fresh well-formed request sent right after the case
    (``health``). The server process's
    counters (``RegistryServer.stats`` and the applications' ``stats``) are printed at
    the end. Every figure is measured in this run; nothing is assumed.

    Issue 45's cases (``--only issue45`` runs them alone; ``--before TREE`` also serves
    from an earlier checkout): a request framed by both ``Content-Length`` and
    ``Transfer-Encoding`` with a GET behind it (the statuses received, and whether the
    connection was closed), a body of ``--max-body`` + 1 one-byte chunks, and the answer
    times of ``--others`` clients searching one after another while ``--chunk-floods``
    such bodies arrive at once, then while ``--pipelined`` searches sit pipelined on
    ``--pipelining`` connections that never read.

``fuzz`` / ``spoof`` / ``memory`` / ``tcp`` (DNS)
    Each serves a synthetic hierarchy and its resolver
    (``sim.sockets.hierarchy.LiveHierarchy``, what ``tooldns serve`` runs) in a **separate
    process** (``serve-dns``) and attacks it from this one over loopback:

    * ``fuzz`` — ``--packets`` mutated queries (bit flips, truncations, splices, random
      bytes) at servers and resolver; crashes, counters, and whether it answers after;
    * ``spoof`` — forged answers (raw sockets, root): every ID at the listening port, every
      wrong ID at a pending query's own port from the server's address, the right ID from
      another address, another question; the control (everything right) must be accepted;
      then the blind attack after restarts that poisoned the old resolver;
    * ``memory`` — ``--intents`` distinct intents: the serving process's RSS growth after
      a warm-up against the resolver's cache bound (``--bounds``);
    * ``tcp`` — ``--held`` silent TCP connections, then other clients' UDP and TCP
      queries: answered and how fast, and the servers' TCP counters;
    * ``dot`` — ``--held`` silent TCP, then mid-message TLS connections at a DoT listener
      (``serve-dns --dot``): fresh DoT clients answered, how fast, the TLS/TCP counters;
    * ``dot-memory`` — ``--silent`` silent TCP connections per DoT listener: the serving
      process's RSS before, while held and after they close; then TLS handshake floods
      (one source address, ``--flood-sources``): a fresh client's UDP latency meanwhile;
    * ``names`` — ``--packets`` over-long labels/names and pointer tricks (UDP, AXFR over TCP):
      replies by rcode, bytes the child wrote to stderr, whether it answers after;
    * ``axfr`` — ``--clients`` parallel AXFR clients: transfers done and REFUSED, another
      client's UDP latency to the same server meanwhile (``--before`` too).

``llm``
    The LLM client (``sim.retrieval.llm.LLMClient``, in a child process per case, from this
    tree and from ``--before TREE``) against the stand-in's hostile faults on loopback:
    redirects (301/302/303/307) to another host (``--other``, 127.0.0.2), the key echoed
    in a 401, a 500, a body that is not JSON, a JSON error and an answer, a reply trickled
    one byte per ``--trickle-seconds``; the repr of a client whose URL carries the key;
    ``tooldns eval``'s stderr on an echoing 401. Per case: the outcome, the seconds to it
    (``--timeout`` per attempt, no retry), whether the key (or any 8 characters of it)
    was shown, and what the other host received.

Run
    python3 benchmarks/bench_robustness.py http
    sudo python3 benchmarks/bench_robustness.py spoof
    python3 benchmarks/bench_robustness.py fuzz --packets 100000
    python3 benchmarks/bench_robustness.py memory --intents 100000 --bounds 16777216 67108864
    python3 benchmarks/bench_robustness.py tcp --held 10000
    python3 benchmarks/bench_robustness.py dot-memory --before /tmp/before
    python3 benchmarks/bench_robustness.py http --deadline 1 --json /tmp/http.json
    python3 benchmarks/bench_robustness.py http --only issue45 --before /tmp/before
    python3 benchmarks/bench_robustness.py llm --before /tmp/before
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.robustness import axfr, dot, dotmem, fuzz, http, llm, memory, names, spoof, tcp
from benchmarks.robustness.serving import add_dns_options, serve_dns
from benchmarks.robustness.table import machine

PROBES: dict[str, ModuleType] = {"http": http, "fuzz": fuzz, "spoof": spoof,
                                 "memory": memory, "tcp": tcp, "dot": dot, "names": names,
                                 "axfr": axfr, "dot-memory": dotmem, "llm": llm}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)  # options of every probe
    common.add_argument("--json", help="also write the figures to this JSON file")
    dns = argparse.ArgumentParser(add_help=False)  # the served hierarchy of the DNS probes
    add_dns_options(dns)
    sub = p.add_subparsers(dest="command", required=True)
    for name, probe in PROBES.items():
        parents = [common, dns] if probe.USES_DNS else [common]
        probe.add_options(sub.add_parser(name, parents=parents, help=probe.HELP))
    sub.add_parser("serve-dns", parents=[dns], help=argparse.SUPPRESS)
    server = sub.add_parser("_http-server", help=argparse.SUPPRESS)
    http.add_options(server)
    server.add_argument("--inject-fault", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "_http-server":
        return http.serve_http(args)
    if args.command == "serve-dns":
        return serve_dns(args)
    probe = PROBES[args.command]
    result = probe.run(args)
    result.setdefault("machine", machine())
    probe.show(result)
    if getattr(args, "json", None):
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
