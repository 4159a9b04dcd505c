"""Stock recursive resolvers in front of a served ToolDNS hierarchy: a compatibility matrix.

Does ToolDNS work through the DNS resolvers people actually run? This module puts five of
them in front of a hierarchy served with :class:`sim.sockets.endpoints.LiveHierarchy` and asks each the
same stub queries:

* :class:`Spec` — how to run one resolver: Unbound, BIND (``named``), Knot Resolver
  (``kresd``), PowerDNS Recursor and dnsdist (a proxy, not a recursor: its backend is our
  ToolDNS-aware resolver). Each spec writes its configuration into a temporary folder and
  gives the foreground command: listening on its own loopback address (127.0.99.1 … .5)
  port 53, the hierarchy's root server as its only root hint, queries leaving from that same
  address, every "phone home" feature off (trust-anchor updates, security polls, priming
  beyond the hints) and, in the DNSSEC variant, the hierarchy's root DS
  (:func:`sim.build.trust.sign_hierarchy`) as its only trust anchor with validation on.
  Everything it logs goes to a file in that folder (its tail is the error when it fails).
* :func:`run_matrix` re-executes this module as root under ``unshare --net`` (a fresh network
  namespace that has only loopback; port 53 is free there and nothing leaves the machine)
  and parses the JSON it prints. Inside (:func:`measure`): a small namespace (synthetic, or
  a catalogue), the hierarchy on 127.1.0.x:53 with our aware resolver on 127.0.53.1:53, a
  packet capture on ``lo`` (:class:`sim.run.capture.Capture`: tcpdump, else scapy's
  ``AsyncSniffer``), then per resolver a few *sessions* (a freshly started resolver, so its
  cache is cold) of stub queries sent with dnspython.
* Probes (rows of the matrix, :data:`ROWS`): ``option forwarded`` (does a query the resolver
  sends upstream carry the intent option 65432?), ``cursor walk`` (``_mcp._tcp._tools.`` SRV
  with the option returns the aware resolver's targets), ``qname walk`` (the intent in the
  QNAME, :func:`nodes.dns.wire.intent_qname`, no option: CNAMEs down the tree to the leaf's
  top-K SRV), ``expanded SRV`` (``_mcp._tcp.<leaf>.``: the leaf's whole RRset), ``A`` (a tool
  target's address) and ``DNSSEC`` (AD on a DO query for a target and for the qname walk).
* Cost: each probe's upstream queries, bytes (IP, both directions) and packets, from the
  capture, by the resolver's source address and the probe's time window; cold (first
  intent, fresh resolver), warm (a second intent of the same service) and repeated (the
  first intent again), against our aware resolver on the same probes.

``python3 -m sim.interop.recursors [--resolver NAME ...] [--variant plain|dnssec] [--json FILE]
[--markdown]`` prints the matrix; :func:`add_arguments` and :func:`run` are that command,
shaped for ``tooldns`` (as ``sim.interop.export``). ``docs/recursors.md`` tells how to reproduce a
row by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from sim.build.hierarchy import Hierarchy
    from sim.run.capture import Packet
    from sim.sockets.endpoints import LiveHierarchy

ROOT_DIR = Path(__file__).resolve().parents[1]
PORT = 53
AWARE = "127.0.53.1"  # our ToolDNS-aware resolver (sim.sockets.endpoints.DEFAULT_RESOLVER_ADDRESS)
STUB = "127.0.0.1"  # where the stub queries leave from
RESOLVERS = ("unbound", "bind", "knot-resolver", "pdns-recursor", "dnsdist")
VARIANTS = ("plain", "dnssec")
ROWS = ("option forwarded", "cursor walk", "qname walk", "expanded SRV", "A", "DNSSEC")
K = 3
SERVICE = "mcp"
QUERY_TIMEOUT = 6.0  # one stub query (recursors retry and fail over inside this)
START_TIMEOUT = 20.0  # a resolver answers its first query within this
SETTLE = 0.1  # after an answer, before the next probe: late packets stay in its window
HELP = "stock DNS resolvers in front of a served hierarchy (compatibility matrix)"
DESCRIPTION = (
    "Start a small ToolDNS hierarchy on port 53 in a fresh network namespace (only "
    "loopback), put Unbound, BIND, Knot Resolver, PowerDNS Recursor and dnsdist in front of "
    "it one at a time, send each the same stub queries (cursor walk with the intent option, "
    "qname walk, expanded SRV, A, DNSSEC) and print what works and what it cost upstream. "
    "Needs root (unshare --net, port 53) and the resolvers' binaries (bash .ci/setup).")

class RecursorError(Exception):
    """The matrix could not run (not root, no unshare, the namespace child failed)."""


# --------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class Setup:
    """What a resolver's configuration needs: where to write, listen, and find the root."""

    workdir: Path
    address: str  # listening and query source address
    root_hints: Sequence[tuple[str, str]]  # (host name, address) of the root servers
    trust_anchor: str | None = None  # the root DS rdata ("tag 15 2 hex"): validate
    backend: str = AWARE  # dnsdist's backend
    port: int = PORT
    verbose: bool = False  # log every step (large logs: for reading, not for the matrix)

    def hints_file(self) -> Path:
        """A root hints file (named.root format) naming only the hierarchy's root."""
        path = self.workdir / "root.hints"
        lines = [f".\t3600000\tIN\tNS\t{host}" for host, _ in self.root_hints]
        lines += [f"{host}\t3600000\tIN\tA\t{addr}" for host, addr in self.root_hints]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path


@dataclass(frozen=True)
class Spec:
    """One stock resolver: binary, address, and how to configure and start it."""

    name: str
    binary: str
    address: str
    kind: Literal["recursor", "proxy"]
    configure: Callable[[Setup], list[str]]  # writes its files, returns the command line
    version_args: tuple[str, ...]
    notes: str  # the configuration essentials, for the report and docs

    def executable(self) -> str | None:
        """The binary's path, also when /usr/sbin is not on PATH (non-root shells)."""
        path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin",
                                "/sbin", "/usr/local/sbin"])
        return shutil.which(self.binary, path=path)

    def version(self) -> str:
        exe = self.executable()
        if exe is None:
            return ""
        try:
            out = subprocess.run([exe, *self.version_args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        found = re.search(r"\b(\d+\.\d+(?:\.\d+)?)\b", out.stdout + "\n" + out.stderr)
        return f"{self.binary} {found.group(1)}" if found else ""


def _unbound(s: Setup) -> list[str]:
    hints = s.hints_file()
    validate = s.trust_anchor is not None
    conf = s.workdir / "unbound.conf"
    lines = [
        "server:",
        f"  interface: {s.address}@{s.port}",
        f"  outgoing-interface: {s.address}",
        "  do-ip6: no",
        "  do-not-query-localhost: no",  # the hierarchy lives on 127.0.0.0/8
        "  access-control: 127.0.0.0/8 allow",
        f"  root-hints: {hints}",
        '  username: ""',
        '  chroot: ""',
        f'  directory: "{s.workdir}"',
        f'  pidfile: "{s.workdir}/unbound.pid"',
        "  use-syslog: no",
        '  logfile: ""',  # stderr, which goes to the log file
        f"  verbosity: {4 if s.verbose else 1}",
        "  log-servfail: yes",
        "  num-threads: 1",
        "  prefetch: no",
        # no auto-trust-anchor-file (RFC 5011 updates) and no unbound-anchor run
        f'  module-config: "{"validator iterator" if validate else "iterator"}"',
    ]
    if validate:
        lines += [f'  trust-anchor: ". DS {s.trust_anchor}"', "  val-log-level: 2"]
    lines += ["remote-control:", "  control-enable: no"]
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["-d", "-c", str(conf)]


def _bind(s: Setup) -> list[str]:
    hints = s.hints_file()
    validate = s.trust_anchor is not None
    conf = s.workdir / "named.conf"
    anchor = ""
    if validate:
        tag, alg, digest_type, digest = str(s.trust_anchor).split(None, 3)
        anchor = (f'trust-anchors {{ . static-ds {tag} {alg} {digest_type} '
                  f'"{digest.replace(" ", "")}"; }};\n')
    conf.write_text(f"""options {{
    directory "{s.workdir}";
    pid-file "{s.workdir}/named.pid";
    session-keyfile "{s.workdir}/session.key";
    managed-keys-directory "{s.workdir}";
    listen-on port {s.port} {{ {s.address}; }};
    listen-on-v6 {{ none; }};
    query-source address {s.address};
    recursion yes;
    allow-query {{ any; }};
    allow-recursion {{ any; }};
    dnssec-validation {"yes" if validate else "no"};
    empty-zones-enable no;
    max-cache-size 32m;
}};
{anchor}controls {{ }};
zone "." {{ type hint; file "{hints}"; }};
""", encoding="utf-8")
    # -g: foreground, everything logged to stderr; -4: IPv4 only; -n 1: one worker
    return ["-g", "-4", "-n", "1", *(["-d", "5"] if s.verbose else []), "-c", str(conf)]


def _kresd(s: Setup) -> list[str]:
    conf = s.workdir / "kresd.conf"
    anchor = (f"trust_anchors.add('. IN DS {s.trust_anchor}')" if s.trust_anchor
              else "-- no trust anchor: nothing is validated")
    hints = ", ".join(f"['{host}'] = '{addr}'" for host, addr in s.root_hints)
    conf.write_text(f"""-- written by sim.interop.recursors
log_target('stderr')
log_level('{"debug" if s.verbose else "info"}')
net.ipv6 = false
net.listen('{s.address}', {s.port}, {{ kind = 'dns' }})
net.outgoing_v4('{s.address}')
-- phone-home and self-updating features off
modules.unload('ta_update')
modules.unload('ta_signal_query')
modules.unload('priming')
modules.unload('detect_time_skew')
modules.unload('detect_time_jump')
trust_anchors.remove('.')
{anchor}
modules.load('hints > iterate')
hints.root({{ {hints} }})
-- kresd 5.x has no option('ALLOW_LOCAL'): the flag is per query, set by a policy; without
-- it glue on 127.0.0.0/8 is ignored ("<= ignoring address")
policy.add(policy.all(policy.FLAGS({{'ALLOW_LOCAL'}})))
cache.open(16 * MB, 'lmdb://{s.workdir}/cache')
""", encoding="utf-8")
    return ["-n", "-c", str(conf), str(s.workdir)]


def _pdns_recursor(s: Setup) -> list[str]:
    hints = s.hints_file()
    lua = s.workdir / "recursor.lua"
    lua.write_text("clearTA('.')\n" + (f'addTA(".", "{s.trust_anchor}")\n'
                                        if s.trust_anchor else ""), encoding="utf-8")
    conf = s.workdir / "recursor.conf"
    conf.write_text("\n".join([
        f"local-address={s.address}",
        f"local-port={s.port}",
        f"query-local-address={s.address}",
        "allow-from=127.0.0.0/8",
        f"hint-file={hints}",
        "security-poll-suffix=",  # no security status query to secpoll.powerdns.com
        "dont-query=",  # the default list holds 127.0.0.0/8: the hierarchy lives there
        f"lua-config-file={lua}",
        f"dnssec={'validate' if s.trust_anchor else 'process-no-validate'}",
        "dnssec-log-bogus=yes",
        f"socket-dir={s.workdir}",
        "daemon=no",
        "write-pid=no",
        "disable-syslog=yes",
        "log-common-errors=yes",
        "loglevel=6",
        "threads=1",
        *(["trace=yes"] if s.verbose else []),
    ]) + "\n", encoding="utf-8")
    return [f"--config-dir={s.workdir}"]


def _dnsdist(s: Setup) -> list[str]:
    conf = s.workdir / "dnsdist.conf"
    conf.write_text(f"""-- written by sim.interop.recursors: a proxy in front of the ToolDNS-aware resolver
setSecurityPollSuffix('')
setLocal('{s.address}:{s.port}')
setACL({{'127.0.0.0/8'}})
setVerboseHealthChecks(true)
newServer({{address='{s.backend}:{s.port}', source='{s.address}', name='tooldns-aware',
           checkName='tools.', checkType='SOA', checkInterval=3600}})
""", encoding="utf-8")
    return ["--supervised", "--disable-syslog", *(["--verbose"] if s.verbose else []),
            "-C", str(conf)]


SPECS: dict[str, Spec] = {s.name: s for s in (
    Spec("unbound", "unbound", "127.0.99.1", "recursor", _unbound, ("-V",),
         "root-hints file; do-not-query-localhost: no; module-config iterator (validator "
         "iterator + trust-anchor \". DS …\" for DNSSEC); no auto-trust-anchor-file; "
         "remote-control off"),
    Spec("bind", "named", "127.0.99.2", "recursor", _bind, ("-v",),
         "zone \".\" type hint; dnssec-validation no (yes + trust-anchors static-ds for "
         "DNSSEC); empty-zones-enable no; controls {} (no rndc); named -g -4"),
    Spec("knot-resolver", "kresd", "127.0.99.3", "recursor", _kresd, ("--version",),
         "hints.root{}; ta_update, ta_signal_query, priming, detect_time_skew/jump "
         "unloaded; trust_anchors.remove('.') (add('. IN DS …') for DNSSEC); "
         "policy.FLAGS('ALLOW_LOCAL') so glue on 127/8 is used"),
    Spec("pdns-recursor", "pdns_recursor", "127.0.99.4", "recursor", _pdns_recursor,
         ("--version",),
         "hint-file; security-poll-suffix= ; dont-query= ; lua-config-file with clearTA('.') "
         "(addTA for DNSSEC); dnssec=process-no-validate (validate for DNSSEC)"),
    Spec("dnsdist", "dnsdist", "127.0.99.5", "proxy", _dnsdist, ("--version",),
         "setSecurityPollSuffix(''); newServer 127.0.53.1:53 (our aware resolver), one "
         "health check (tools. SOA) an hour"),
)}


# ------------------------------------------------------------------ a running resolver


def _die_with_parent(sig: int = signal.SIGKILL) -> None:
    """preexec_fn: send this child ``sig`` when the process that started it dies (Linux
    PR_SET_PDEATHSIG), so no resolver outlives an interrupted run."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)


def _term_with_parent() -> None:
    _die_with_parent(signal.SIGTERM)  # the namespace child cleans up on SIGTERM


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # asyncio.run cancels, the finally blocks stop every process


class Running:
    """One started resolver process; its output goes to ``log``."""

    def __init__(self, spec: Spec, setup: Setup, log: Path) -> None:
        exe = spec.executable()
        if exe is None:
            raise FileNotFoundError(spec.binary)
        setup.workdir.mkdir(parents=True, exist_ok=True)
        argv = [exe, *spec.configure(setup)]
        self.spec, self.setup, self.log, self.argv = spec, setup, log, argv
        self._log = log.open("ab")
        self._log.write(f"### {' '.join(argv)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=setup.workdir,
                                     preexec_fn=_die_with_parent)

    def tail(self, lines: int = 25) -> str:
        with contextlib.suppress(OSError):
            text = self.log.read_text(encoding="utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


# ------------------------------------------------------------------------ stub side


@dataclass
class Answer:
    """What one stub query got back (or why not)."""

    qname: str
    qtype: str
    rcode: str = ""
    ad: bool = False
    tc_retry: bool = False  # answered over TCP after a truncated UDP reply
    cnames: list[str] = field(default_factory=list)  # CNAME targets, in order
    srv: list[str] = field(default_factory=list)  # SRV targets (lower case, absolute)
    a: list[str] = field(default_factory=list)  # A rdata in the answer section
    additional_a: dict[str, str] = field(default_factory=dict)  # target -> address
    error: str = ""
    seconds: float = 0.0

    def summary(self) -> str:
        if self.error:
            return self.error
        bits = [self.rcode]
        if self.cnames:
            bits.append(f"{len(self.cnames)} CNAME")
        if self.srv:
            bits.append(f"{len(self.srv)} SRV")
        if self.a:
            bits.append(f"A {','.join(self.a)}")
        if self.ad:
            bits.append("AD")
        return " ".join(bits)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in ("", [], {}, False)} | {
            "rcode": self.rcode}


async def ask(server: str, qname: str, qtype: str, option: tuple[int, bytes] | None = None,
              do: bool = False, timeout: float = QUERY_TIMEOUT, port: int = PORT,
              rd: bool = True, rdclass: str = "IN") -> Answer:
    """One stub query with dnspython (UDP, TCP after TC); never raises."""
    import dns.asyncquery
    import dns.edns
    import dns.exception
    import dns.flags
    import dns.message
    import dns.rcode
    import dns.rdatatype

    options = [dns.edns.GenericOption(option[0], option[1])] if option else []
    query = dns.message.make_query(qname, qtype, rdclass, use_edns=0, payload=1232,
                                   options=options, want_dnssec=do)
    if not rd:
        query.flags &= ~dns.flags.RD
    out = Answer(qname, qtype)
    start = time.monotonic()
    try:
        reply, out.tc_retry = await dns.asyncquery.udp_with_fallback(
            query, server, timeout=timeout, port=port, source=STUB)
    except dns.exception.Timeout:
        out.error = f"timeout ({timeout:g} s)"
        return out
    except (OSError, dns.exception.DNSException) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    finally:
        out.seconds = round(time.monotonic() - start, 4)
    out.rcode = dns.rcode.to_text(reply.rcode())
    out.ad = bool(reply.flags & dns.flags.AD)
    for rrset in reply.answer:
        for rd_ in rrset:
            if rrset.rdtype == dns.rdatatype.CNAME:
                out.cnames.append(rd_.target.to_text().lower())
            elif rrset.rdtype == dns.rdatatype.SRV:
                out.srv.append(rd_.target.to_text().lower())
            elif rrset.rdtype == dns.rdatatype.A:
                out.a.append(rd_.address)
    for rrset in reply.additional:
        if rrset.rdtype == dns.rdatatype.A:
            for rd_ in rrset:
                out.additional_a[rrset.name.to_text().lower()] = rd_.address
    return out


# ------------------------------------------------------------------ capture and cost


@dataclass
class Window:
    """A probe's time window and the addresses whose upstream traffic it is charged."""

    name: str
    start: float
    end: float = 0.0
    clients: frozenset[str] = frozenset()  # who sends upstream (the resolver's address)
    upstreams: frozenset[str] = frozenset()  # who it sends to
    cost: dict = field(default_factory=dict)  # upstream_cost(), once the capture is read
    behind: dict | None = None  # a proxy's: what reached the servers behind it


def _dns_messages(p: Packet) -> list[bytes]:
    """The DNS messages in a packet's payload (TCP: length-prefixed; partial ones dropped)."""
    if p.proto == "udp":
        return [p.payload] if p.payload else []
    out, data = [], p.payload
    while len(data) >= 2:
        n = int.from_bytes(data[:2], "big")
        if n == 0 or len(data) < 2 + n:
            break
        out.append(data[2:2 + n])
        data = data[2 + n:]
    return out


def upstream_cost(packets: Sequence[Packet], w: Window, zone_of: dict[str, str]) -> dict:
    """Queries, bytes and packets the window's clients exchanged with its upstreams."""
    import dns.exception
    import dns.flags
    import dns.message
    import dns.rdatatype

    up = down = n_up = n_down = 0
    queries: list[str] = []
    options: set[int] = set()
    do = edns = tcp = False
    carried = 0
    for p in packets:
        if not w.start <= p.ts < w.end:
            continue
        if p.src in w.clients and p.dst in w.upstreams and p.dport == PORT:
            up += p.size
            n_up += 1
            tcp |= p.proto == "tcp"
            for wire in _dns_messages(p):
                try:
                    msg = dns.message.from_wire(wire)
                except (dns.exception.DNSException, ValueError):
                    try:  # an odd record further on: the question at least
                        msg = dns.message.from_wire(wire, question_only=True)
                    except (dns.exception.DNSException, ValueError):
                        continue
                if msg.flags & dns.flags.QR or not msg.question:
                    continue
                q = msg.question[0]
                where = zone_of.get(p.dst, p.dst)
                queries.append(f"{q.name.to_text().lower()} "
                               f"{dns.rdatatype.to_text(q.rdtype)} @{where}")
                if msg.edns >= 0:
                    edns = True
                    codes = {int(o.otype) for o in msg.options}
                    options |= codes
                    carried += 65432 in codes
                do |= bool(msg.ednsflags & dns.flags.DO)
        elif p.src in w.upstreams and p.dst in w.clients and p.sport == PORT:
            down += p.size
            n_down += 1
    return {"queries": len(queries), "bytes": up + down, "bytes_up": up, "bytes_down": down,
            "packets": n_up + n_down, "tcp": tcp, "edns": edns, "do": do,
            "option_codes": sorted(options), "intent_option_queries": carried,
            "asked": queries}


def minimised(asked: Sequence[str], qname: str) -> bool:
    """Whether qname minimisation shows: a name asked that is a proper ancestor of
    ``qname`` (BIND's and Unbound's ``_.`` probes included), other than the root; DNSKEY and
    DS questions (a validator's, at zone apexes and cuts) do not count."""
    qname = qname.lower()
    for line in asked:
        name, qtype = line.split()[:2]
        if qtype in ("DNSKEY", "DS"):
            continue
        name = name[2:] if name.startswith("_.") and name != "_." else name
        if name not in (".", qname) and qname.endswith("." + name):
            return True
    return False


# ----------------------------------------------------------------------- measuring


@dataclass
class Context:
    """Everything the probes of one variant share."""

    live: LiveHierarchy
    hierarchy: Hierarchy
    workdir: Path
    intents: list[str]
    leaf: str  # a leaf with several tools of SERVICE (expanded SRV probe)
    expected_srv: list[str]  # that leaf's whole SRV RRset (targets), from its own server
    target: str  # a tool target in another leaf (A probe)
    expected_a: str
    trust_anchor: str | None = None
    verbose_logs: bool = False
    windows: list[Window] = field(default_factory=list)
    reference: dict[str, list[str]] = field(default_factory=dict)  # intent -> aware targets

    @property
    def servers(self) -> frozenset[str]:
        return frozenset(self.hierarchy.servers)


async def restart_aware(ctx: Context) -> None:
    """A fresh aware resolver on 127.0.53.1 (cold cache; validating in the DNSSEC variant)."""
    import asyncio

    from nodes.resolver.core import ResolverConfig
    from sim.sockets.endpoints import NodeEndpoint

    live = ctx.live
    if live.resolver is not None:
        live.resolver.close()
        await asyncio.sleep(0.05)
    config = ResolverConfig(dns_port=PORT, dnssec=ctx.trust_anchor is not None,
                            trust_anchor=ctx.trust_anchor or "")
    node = ctx.hierarchy.resolver(seed=0, config=config)
    live.resolver = NodeEndpoint(node, (AWARE, PORT), source_ip=AWARE,
                                 tcp_limits=live.tcp_limits)
    await live.resolver.start()


class Prober:
    """Sends the probes of one resolver (or of the aware baseline) and notes their windows."""

    def __init__(self, ctx: Context, name: str, server: str, clients: frozenset[str],
                 upstreams: frozenset[str]) -> None:
        self.ctx, self.name, self.server = ctx, name, server
        self.clients, self.upstreams = clients, upstreams
        self.probes: dict[str, dict] = {}

    async def probe(self, key: str, qname: str, qtype: str, intent: str | None = None,
                    do: bool = False) -> Answer:
        import asyncio

        from nodes.dns.wire import Intent

        w = Window(f"{self.name}:{key}", time.time(), clients=self.clients,
                   upstreams=self.upstreams)
        option = (self.ctx.hierarchy.option_code, Intent(intent, k=K).encode()) if (
            intent is not None) else None
        answer = await ask(self.server, qname, qtype, option=option, do=do)
        await asyncio.sleep(SETTLE)
        w.end = time.time()
        self.ctx.windows.append(w)
        self.probes[key] = {"answer": answer, "window": w, "qname": qname, "intent": intent}
        return answer


async def _ready(server: str, running: Running | None) -> str | None:
    """Wait until ``server`` answers ``version.bind. CH TXT`` (any answer, an error too: it
    is listening; the class keeps recursors from asking the hierarchy); else the error."""
    import asyncio

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if running is not None and running.proc.poll() is not None:
            return (f"{running.spec.binary} exited with status {running.proc.returncode}; "
                    f"log {running.log}:\n{running.tail()}")
        a = await ask(server, "version.bind.", "TXT", timeout=0.5, rdclass="CH")
        if not a.error:
            return None
        await asyncio.sleep(0.1)
    tail = running.tail() if running is not None else ""
    return f"no answer on {server}:{PORT} within {START_TIMEOUT:g} s; log:\n{tail}"


_QUIRK = re.compile(r"error|fail|refus|lame|bogus|badvers|formerr|bailiwick|denied|warn|"
                    r"not allowed|insecure|servfail|validat|ignor|dnssec|unable|cannot|"
                    r"timed out|timeout|no answer|throttl|too many|unreachable|mismatch",
                    re.I)
_NOISE = re.compile(r"^###|within bailiwick|stats for thread|histogram|recursion processing|"
                    r"requestlist|lower\(secs\)|\[25%\]|built with|algorithms:|TKEY mode|"
                    r"NOT using IPv6|Aggressive NSEC|init module", re.I)


def log_quirks(text: str, limit: int = 30, workdir: str = "") -> list[str]:
    """Distinct log lines worth reading (errors, refusals, validation), time stamps and the
    temporary folder's path cut."""
    seen: dict[str, None] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if workdir:
            line = re.sub(re.escape(workdir) + r"/[^/\s']*", "<dir>", line)
        if not line or _NOISE.search(line) or not _QUIRK.search(line):
            continue
        line = re.sub(r"^\[\d+\] ", "", line)  # unbound: [epoch]
        line = re.sub(r"^\d{2}-\w{3}-\d{4} [\d:.]+ ", "", line)  # named -g
        line = re.sub(r"^\w{3} \d+ [\d:]+ ", "", line)  # pdns / dnsdist
        line = re.sub(r"\[\d+:\d+\]", "", line)  # unbound: [pid:thread]
        line = re.sub(r' (tid|ts)="[^"]*"', "", line)  # pdns structured logging
        seen.setdefault(line[:300])
        if len(seen) >= limit:
            break
    return list(seen)


async def session(ctx: Context, spec: Spec, variant: str, label: str,
                  body: Callable[[Prober], Any], result: dict) -> bool:
    """Start ``spec`` fresh (cold cache), run ``body(prober)``, stop it; False on failure."""
    import asyncio

    workdir = ctx.workdir / f"{spec.name}-{variant}-{label}"
    setup = Setup(workdir, spec.address, _root_hints(ctx.hierarchy),
                  ctx.trust_anchor, AWARE, verbose=ctx.verbose_logs)
    log = ctx.workdir / f"{spec.name}-{variant}.log"
    try:
        running = Running(spec, setup, log)
    except FileNotFoundError:
        result["status"] = "not installed"
        result["error"] = f"{spec.binary} is not installed (bash .ci/setup installs it)"
        return False
    except OSError as exc:
        result["status"] = "failed"
        result["error"] = f"{spec.binary} could not be started: {exc}"
        return False
    try:
        error = await _ready(spec.address, running)
        if error is not None:
            result["status"] = "failed"
            result["error"] = f"{spec.name} did not start: {error}"
            return False
        await asyncio.sleep(SETTLE)
        await restart_aware(ctx)  # cold for dnsdist's backend too
        upstreams = frozenset({AWARE}) if spec.kind == "proxy" else ctx.servers
        prober = Prober(ctx, spec.name, spec.address, frozenset({spec.address}), upstreams)
        await body(prober)
        result.setdefault("sessions", {})[label] = prober.probes
        if running.proc.poll() is not None:
            result["status"] = "failed"
            result["error"] = (f"{spec.name} exited during the probes (status "
                               f"{running.proc.returncode}):\n{running.tail()}")
            return False
        return True
    finally:
        running.stop()
        result.setdefault("logs", {})[f"{variant}:{label}"] = str(log)


def _root_hints(h: Hierarchy) -> list[tuple[str, str]]:
    return [(m["host"], m["address"]) for m in h.manifest if m["zone"] == "."]


def _cursor_body(ctx: Context) -> Callable[[Prober], Any]:
    from nodes.dns.wire import cursor_name

    qname = cursor_name(SERVICE, "tools.")

    async def body(p: Prober) -> None:
        i1, i2 = ctx.intents
        await p.probe("cursor cold", qname, "SRV", intent=i1)
        await p.probe("cursor warm", qname, "SRV", intent=i2)
        await p.probe("cursor repeat", qname, "SRV", intent=i1)
    return body


def _qname_body(ctx: Context, do: bool = False, follow: bool = True
                ) -> Callable[[Prober], Any]:
    from nodes.dns.wire import intent_qname  # late: ``--help`` stays light

    async def body(p: Prober) -> None:
        i1, i2 = ctx.intents
        first = await p.probe("qname cold", intent_qname(i1, K, service=SERVICE), "SRV",
                              do=do)
        await p.probe("qname warm", intent_qname(i2, K, service=SERVICE), "SRV", do=do)
        await p.probe("qname repeat", intent_qname(i1, K, service=SERVICE), "SRV", do=do)
        if follow:
            for n, target in enumerate(first.srv):
                await p.probe(f"qname follow-up A {n}", target, "A")
    return body


def _plain_body(ctx: Context, do: bool = False) -> Callable[[Prober], Any]:
    from nodes.dns.wire import expanded_name

    async def body(p: Prober) -> None:
        await p.probe("A", ctx.target, "A", do=do)
        await p.probe("expanded SRV", expanded_name(SERVICE, ctx.leaf), "SRV", do=do)
    return body


def _pick(ns: Any) -> tuple[list[str], str, str]:
    """Two intents of SERVICE, a leaf with several SERVICE tools, a target in another leaf."""
    intents = [q.text for q in ns.queries if q.service == SERVICE and q.text.strip()]
    if len(intents) < 2:  # a catalogue without its queries: the tools' own words
        intents = [" ".join(t.description.split()[:6]) for t in ns.tools.values()
                   if t.service == SERVICE and t.description.strip()]
    intents = list(dict.fromkeys(intents))
    if len(intents) < 2:
        raise RecursorError(f"the namespace has fewer than two {SERVICE} intents")
    leaves = sorted(ns.leaves(), key=lambda z: (-sum(
        ns.tools[t].service == SERVICE for t in ns.zones[z].tools), z))
    leaf = leaves[0]
    other = next((z for z in leaves[1:] if any(ns.tools[t].service == SERVICE
                                                for t in ns.zones[z].tools)), leaf)
    return intents[:2], leaf, other


async def measure(resolvers: Sequence[str], variants: Sequence[str], catalog: str | None,
                  limit: int, tools: int, branching: int, depth: int, seed: int,
                  workdir: Path, verbose_logs: bool = False) -> dict:
    """Inside a fresh network namespace: serve a hierarchy on port 53, run every probe
    through each resolver and our aware resolver, and return the results (JSON-able)."""
    import asyncio

    from nodes.dns.wire import expanded_name
    from sim.build.hierarchy import build_hierarchy
    from sim.build.trust import sign_hierarchy
    from sim.run.capture import Capture, read_packets
    from sim.sockets.endpoints import LiveHierarchy
    from topologies.namespace import from_catalog, synthetic

    started = time.time()
    if catalog:
        queries = Path(catalog).parent / "queries.jsonl"
        ns = from_catalog(catalog, queries if queries.exists() else None, limit=limit)
    else:
        ns = synthetic(n_tools=tools, branching=branching, depth=depth, seed=seed)
    hierarchy = build_hierarchy(ns)
    intents, leaf, other = _pick(ns)
    live = LiveHierarchy(hierarchy, port=PORT, resolver_address=AWARE)
    capture = Capture(workdir / "lo.pcap", f"udp port {PORT} or tcp port {PORT}",
                      snaplen=4096).start()
    out: dict[str, Any] = {"resolvers": {}, "aware": {}}
    try:
        await live.start()
        leaf_server = next(a for a, z in hierarchy.zone_of.items() if z == leaf)
        srv = await ask(leaf_server, expanded_name(SERVICE, leaf), "SRV", rd=False)
        other_server = next(a for a, z in hierarchy.zone_of.items() if z == other)
        other_srv = await ask(other_server, expanded_name(SERVICE, other), "SRV", rd=False)
        if not srv.srv or not other_srv.srv:
            raise RecursorError(f"the leaf servers did not answer their SRV RRsets: "
                                f"{srv.summary()}; {other_srv.summary()}")
        target = sorted(other_srv.srv)[0]
        a = await ask(other_server, target, "A", rd=False)
        ctx = Context(live, hierarchy, workdir, intents, leaf, sorted(srv.srv), target,
                      a.a[0] if a.a else "", verbose_logs=verbose_logs)
        variants = [v for v in VARIANTS if v in variants]
        if "plain" not in variants:  # the reference answers come from the plain baseline
            await _aware_baseline(ctx, "plain", {})
        for variant in variants:
            if variant == "dnssec":
                ctx.trust_anchor = sign_hierarchy(hierarchy, seed)
            else:
                hierarchy.reset()  # unsigned
                ctx.trust_anchor = None
            await _aware_baseline(ctx, variant, out["aware"])
            for name in resolvers:
                spec = SPECS[name]
                res = out["resolvers"].setdefault(name, {"status": "ok", "variants": {}})
                res.setdefault("kind", spec.kind)
                res.setdefault("address", spec.address)
                res.setdefault("notes", spec.notes)
                if res["status"] == "not installed":
                    continue
                vres: dict[str, Any] = {"status": "ok"}
                res["variants"][variant] = vres
                bodies: list[tuple[str, Callable[[Prober], Any]]]
                if variant == "plain":
                    bodies = [("cursor", _cursor_body(ctx)), ("qname", _qname_body(ctx)),
                              ("plain", _plain_body(ctx))]
                else:
                    bodies = [("dnssec", _plain_body(ctx, do=True)),
                              ("dnssec-qname", _qname_body(ctx, do=True, follow=False))]
                for label, body in bodies:
                    if not await session(ctx, spec, variant, label, body, vres):
                        break
                if vres["status"] == "not installed":
                    res["status"] = "not installed"
                    res["error"] = vres["error"]
        await restart_aware(ctx)
    finally:
        live.close()
        await asyncio.sleep(0.1)
        capture.stop()
    packets = read_packets(capture.path)
    zone_of = dict(hierarchy.zone_of) | {AWARE: "aware resolver"}
    servers = frozenset(hierarchy.servers)
    for w in ctx.windows:
        w.cost = upstream_cost(packets, w, zone_of)
        if w.upstreams == {AWARE}:  # a proxy: what reached the servers behind it
            behind = Window(w.name, w.start, w.end, frozenset({AWARE}), servers)
            w.behind = upstream_cost(packets, behind, zone_of)
    meta = {
        "namespace": ns.origin, "tools": len(ns.tools), "zones": len(ns.zones),
        "servers": len(hierarchy.servers), "intents": intents, "k": K, "service": SERVICE,
        "leaf": leaf, "expected_srv": ctx.expected_srv, "target": target,
        "expected_a": ctx.expected_a, "reference": ctx.reference,
        "capture": capture.tool, "packets": len(packets),
        "seconds": round(time.time() - started, 2), "variants": list(variants),
        "versions": {n: SPECS[n].version() for n in resolvers},
        "option_code": hierarchy.option_code,
    }
    return finalise(out, meta)


async def _aware_baseline(ctx: Context, variant: str, out: dict) -> None:
    """Our aware resolver on the same probes (fresh for each group: cold caches)."""
    probes: dict[str, dict] = {}
    # in the DNSSEC variant our resolver validates (DO upstream whatever the stub asks)
    groups = [_cursor_body(ctx), _plain_body(ctx, do=variant == "dnssec")]
    for body in groups:
        await restart_aware(ctx)
        p = Prober(ctx, "aware", AWARE, frozenset({AWARE}), ctx.servers)
        await body(p)
        probes.update(p.probes)
    if variant == "plain":
        for key, intent in (("cursor cold", ctx.intents[0]), ("cursor warm", ctx.intents[1])):
            ctx.reference[intent] = sorted(probes[key]["answer"].srv)
    out[variant] = probes


# ------------------------------------------------------------------- the matrix


def _cell(ok: bool | None, detail: str) -> dict:
    return {"cell": "skip" if ok is None else ("yes" if ok else "no"), "detail": detail}


def _probe_view(p: dict) -> dict:
    """A probe as JSON: its answer, cost (and the servers' side behind a proxy)."""
    w = p["window"]
    out = {"qname": p["qname"], **({"intent": p["intent"]} if p["intent"] else {}),
           "answer": p["answer"].as_dict(), "cost": w.cost}
    if w.behind is not None:
        out["servers_cost"] = w.behind
    cost = out["cost"]
    out["minimised"] = minimised(cost.get("asked", []), p["qname"])
    return out


def finalise(out: dict, meta: dict) -> dict:
    """Turn the raw probes into rows of the matrix plus per-probe answers and costs."""
    ref = meta["reference"]
    i1, i2 = meta["intents"]
    aware = {v: {k: _probe_view(p) for k, p in probes.items()}
             for v, probes in out["aware"].items()}
    result: dict[str, Any] = {"meta": meta, "aware": aware, "resolvers": {}}
    for name, res in out["resolvers"].items():
        row: dict[str, Any] = {k: v for k, v in res.items() if k != "variants"}
        row["variants"] = {}
        for variant, vres in res["variants"].items():
            sessions = vres.pop("sessions", {})
            probes = {k: _probe_view(p) for s in sessions.values() for k, p in s.items()}
            logs = vres.pop("logs", {})
            quirks: list[str] = []
            for path in dict.fromkeys(logs.values()):
                with contextlib.suppress(OSError):
                    quirks += log_quirks(Path(path).read_text(encoding="utf-8",
                                                              errors="replace"),
                                         workdir=str(Path(path).parent))
            row["variants"][variant] = {**vres, "probes": probes, "logs": logs,
                                        "log_lines": list(dict.fromkeys(quirks))}
        row["rows"] = _rows(row, ref, i1, i2, meta)
        result["resolvers"][name] = row
    return result


def _answer_text(probe: dict | None) -> str:
    if probe is None:
        return "not measured"
    a = probe["answer"]
    if a.get("error"):
        return a["error"]
    bits = [a.get("rcode", "")]
    if a.get("cnames"):
        bits.append(f"{len(a['cnames'])} CNAME")
    if a.get("srv") is not None:
        bits.append(f"{len(a.get('srv', []))} SRV")
    return " ".join(bits)


def _rows(row: dict, ref: dict, i1: str, i2: str, meta: dict) -> dict:
    status = row.get("status", "ok")
    if status == "not installed":
        return {r: {"cell": "not installed", "detail": row.get("error", "")} for r in ROWS}
    rows: dict[str, dict] = {}
    plain = row["variants"].get("plain")
    sec = row["variants"].get("dnssec")

    def failed(v: dict | None, what: str) -> dict | None:
        if v is None:
            return {"cell": "skip", "detail": f"the {what} variant was not run"}
        if v.get("status") == "failed":
            return {"cell": "failed", "detail": v.get("error", "")}
        return None

    bad = failed(plain, "plain")
    pr = plain["probes"] if plain and not bad else {}
    proxy = row.get("kind") == "proxy"
    # option forwarded
    cold = pr.get("cursor cold")
    if bad and "cursor cold" not in pr:
        rows["option forwarded"] = bad
        rows["cursor walk"] = bad
    elif cold is None:
        rows["option forwarded"] = _cell(None, "cursor probe not run")
        rows["cursor walk"] = _cell(None, "cursor probe not run")
    else:
        c = cold["cost"]
        where = "backend (our aware resolver)" if proxy else "the hierarchy's servers"
        fwd = c.get("intent_option_queries", 0) > 0
        detail = (f"{c.get('intent_option_queries', 0)}/{c.get('queries', 0)} queries to "
                  f"{where} carried 65432; EDNS option codes seen: "
                  f"{c.get('option_codes') or 'none'}" + ("; DO set" if c.get("do") else ""))
        if proxy and "servers_cost" in cold:
            s = cold["servers_cost"]
            detail += (f"; behind it {s.get('intent_option_queries', 0)}/"
                       f"{s.get('queries', 0)} queries to the servers carried 65432")
        rows["option forwarded"] = _cell(fwd, detail)
        walked = []
        for key, intent in (("cursor cold", i1), ("cursor warm", i2), ("cursor repeat", i1)):
            p = pr.get(key)
            got = sorted(p["answer"].get("srv", [])) if p else []
            walked.append(bool(got) and got == ref.get(intent))
        first = pr["cursor cold"]["answer"]
        ok = all(walked)
        detail = (f"{_answer_text(cold)}; expected {len(ref.get(i1, []))} SRV "
                  f"{ref.get(i1)}" if not ok else
                  f"{len(first.get('srv', []))} SRV = the aware resolver's (cold, warm, "
                  f"repeat)")
        if not ok and any(walked):
            detail += f"; cold/warm/repeat: {walked}"
        rows["cursor walk"] = _cell(ok, detail)
    # qname walk
    if bad and "qname cold" not in pr:
        rows["qname walk"] = bad
    elif "qname cold" not in pr:
        rows["qname walk"] = _cell(None, "qname probe not run")
    else:
        walked, notes = [], []
        for key, intent in (("qname cold", i1), ("qname warm", i2), ("qname repeat", i1)):
            p = pr.get(key)
            got = sorted(p["answer"].get("srv", [])) if p else []
            walked.append(bool(got) and got == ref.get(intent))
        qa = pr["qname cold"]["answer"]
        targets = qa.get("srv", [])
        extra = qa.get("additional_a", {})
        follow = [pr.get(f"qname follow-up A {n}") for n in range(len(targets))]
        follow_ok = sum(1 for f in follow if f and f["answer"].get("a"))
        notes.append(f"{_answer_text(pr['qname cold'])}; CNAME chain "
                     f"{len(qa.get('cnames', []))}; A in additional "
                     f"{sum(t in extra for t in targets)}/{len(targets)}; follow-up A "
                     f"{follow_ok}/{len(targets)}")
        if not all(walked):
            notes.append(f"cold/warm/repeat match the aware resolver: {walked}; expected "
                         f"{ref.get(i1)}")
        rows["qname walk"] = _cell(all(walked), "; ".join(notes))
    # expanded SRV and A
    for key, want, label in (("expanded SRV", meta["expected_srv"], "expanded SRV"),
                             ("A", [meta["expected_a"]], "A")):
        p = pr.get(key)
        if bad and p is None:
            rows[label] = bad
        elif p is None:
            rows[label] = _cell(None, "not run")
        else:
            got = sorted(p["answer"].get("srv" if key != "A" else "a", []))
            ok = got == sorted(want)
            rows[label] = _cell(ok, f"{_answer_text(p)}" + ("" if ok else
                                                            f"; expected {sorted(want)}"))
    # DNSSEC
    bad = failed(sec, "dnssec")
    sp = sec["probes"] if sec and not bad else {}
    if bad and "A" not in sp:
        rows["DNSSEC"] = bad
    else:
        a, q = sp.get("A"), sp.get("qname cold")
        a_ok = bool(a and a["answer"].get("ad") and a["answer"].get("a") == [meta["expected_a"]])
        bits = [f"A: {_answer_text(a)}{' AD' if a and a['answer'].get('ad') else ' no AD'}"]
        ok = a_ok
        if q is not None:
            got = sorted(q["answer"].get("srv", []))
            q_ok = bool(q["answer"].get("ad")) and got == ref.get(i1)
            bits.append(f"qname walk: {_answer_text(q)}"
                        f"{' AD' if q['answer'].get('ad') else ' no AD'}"
                        + ("" if got == ref.get(i1) or not got else " (targets differ)"))
            ok = ok and q_ok
        else:
            bits.append("qname walk: not run")
        e = sp.get("expanded SRV")
        if e is not None:
            bits.append(f"expanded SRV: {_answer_text(e)}"
                        f"{' AD' if e['answer'].get('ad') else ' no AD'}")
        rows["DNSSEC"] = _cell(ok, "; ".join(bits))
    return rows


# ------------------------------------------------------------------- outer side


def _inside_main(argv: Sequence[str]) -> int:
    """The namespace child: loopback up, check isolation, measure, JSON to a file."""
    import asyncio
    import socket

    ap = argparse.ArgumentParser(prog="sim.interop.recursors --inside")
    ap.add_argument("--inside", required=True, help="write the JSON here")
    ap.add_argument("--resolver", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--catalog")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--tools", type=int, default=120)
    ap.add_argument("--branching", type=int, default=3)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--verbose-logs", action="store_true")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for spec in SPECS.values():  # BIND listens only on addresses an interface has
        subprocess.run(["ip", "addr", "add", f"{spec.address}/32", "dev", "lo"], check=True)
    names = sorted(n for _, n in socket.if_nameindex())
    if names != ["lo"]:
        print(f"sim.interop.recursors: error: the namespace has interfaces {names}, not only lo; "
              "refusing to run resolvers there", file=sys.stderr)
        return 1
    result = asyncio.run(measure(args.resolver, args.variant, args.catalog, args.limit,
                                 args.tools, args.branching, args.depth, args.seed,
                                 Path(args.workdir), args.verbose_logs))
    Path(args.inside).write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    return 0


def run_matrix(resolvers: Sequence[str] = RESOLVERS, variants: Sequence[str] = VARIANTS,
               catalog: str | None = None, limit: int = 200, tools: int = 120,
               branching: int = 3, depth: int = 2, seed: int = 7, keep: bool = False,
               verbose_logs: bool = False, timeout: float = 600.0) -> dict:
    """Run the matrix in a fresh network namespace (root only) and return its results.

    Resolvers whose binary is missing come back as ``status: not installed`` without being
    run. Raises :class:`RecursorError` with one clear message when the matrix cannot run.
    """
    for name in resolvers:
        if name not in SPECS:
            raise RecursorError(f"unknown resolver {name!r} (choose from {', '.join(SPECS)})")
    for variant in variants:
        if variant not in VARIANTS:
            raise RecursorError(f"unknown variant {variant!r} (plain or dnssec)")
    if os.geteuid() != 0:
        raise RecursorError("must run as root: the matrix needs a network namespace "
                            "(unshare --net) and port 53 inside it (sudo python3 -m "
                            "sim.interop.recursors)")
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RecursorError("unshare (util-linux) is not installed")
    installed = [n for n in resolvers if SPECS[n].executable() is not None]
    missing = [n for n in resolvers if n not in installed]
    workdir = Path(tempfile.mkdtemp(prefix="tooldns-recursors-"))
    out_json = workdir / "result.json"
    result: dict[str, Any] = {"meta": {}, "aware": {}, "resolvers": {}}
    ok = False
    try:
        if installed:
            argv = [unshare, "--net", "--", sys.executable, "-m", "sim.interop.recursors",
                    "--inside", str(out_json), "--workdir", str(workdir),
                    "--tools", str(tools), "--branching", str(branching),
                    "--depth", str(depth), "--seed", str(seed), "--limit", str(limit)]
            argv += [a for n in installed for a in ("--resolver", n)]
            argv += [a for v in variants for a in ("--variant", v)]
            if catalog:
                argv += ["--catalog", str(catalog)]
            if verbose_logs:
                argv.append("--verbose-logs")
            # its own process group: on a timeout or an interrupt the whole group goes
            # (the namespace child, its resolvers and its tcpdump), nothing else
            proc = subprocess.Popen(argv, cwd=ROOT_DIR, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    start_new_session=True, preexec_fn=_term_with_parent)
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except BaseException as exc:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.communicate(timeout=15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                if isinstance(exc, subprocess.TimeoutExpired):
                    raise RecursorError(f"the namespace run took over {timeout:g} s "
                                        f"(logs kept in {workdir})") from None
                raise
            if proc.returncode != 0 or not out_json.exists():
                tail = "\n".join((stderr or stdout).strip().splitlines()[-25:])
                raise RecursorError(f"the namespace run failed (status {proc.returncode}; "
                                    f"logs kept in {workdir}):\n{tail}")
            result = json.loads(out_json.read_text(encoding="utf-8"))
        for name in missing:
            spec = SPECS[name]
            error = f"{spec.binary} is not installed (bash .ci/setup installs it)"
            result["resolvers"][name] = {
                "status": "not installed", "error": error, "kind": spec.kind,
                "address": spec.address, "notes": spec.notes, "variants": {},
                "rows": {r: {"cell": "not installed", "detail": error} for r in ROWS}}
        result["resolvers"] = {n: result["resolvers"][n] for n in resolvers
                               if n in result["resolvers"]}
        failed = any(v.get("status") == "failed" for r in result["resolvers"].values()
                     for v in r.get("variants", {}).values())
        result["meta"]["workdir"] = str(workdir) if (keep or failed) else None
        ok = not failed
        return result
    finally:
        if ok and not keep:
            shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------- presentation


def matrix_markdown(result: dict) -> str:
    """The compatibility matrix: one row per probe, one column per resolver."""
    names = list(result["resolvers"])
    lines = ["| probe | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    for row in ROWS:
        cells = [result["resolvers"][n]["rows"].get(row, {}).get("cell", "") for n in names]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details_markdown(result: dict) -> str:
    """Each cell's detail, per resolver."""
    out = []
    for name, res in result["resolvers"].items():
        version = result.get("meta", {}).get("versions", {}).get(name, "")
        out.append(f"**{name}** ({version or res.get('status')}, {res.get('address')}):")
        for row in ROWS:
            cell = res["rows"].get(row, {})
            detail = cell.get("detail", "").replace("\n", " ")
            out.append(f"- {row}: {cell.get('cell', '')} — {detail}")
        out.append("")
    return "\n".join(out).rstrip()


COST_PROBES = (("cursor cold", "cursor walk, first intent"),
               ("cursor warm", "cursor walk, second intent"),
               ("cursor repeat", "cursor walk, first again"),
               ("qname cold", "qname walk, first intent"),
               ("qname warm", "qname walk, second intent"),
               ("qname repeat", "qname walk, first again"),
               ("A", "A of a tool target"),
               ("expanded SRV", "expanded SRV"))
#: which aware-resolver probe a resolver's probe is compared with: the qname walk does
#: through a stock recursor what the cursor walk does through ours
BASELINE = {"qname cold": "cursor cold", "qname warm": "cursor warm",
            "qname repeat": "cursor repeat"}


def _server_side(probe: dict) -> dict:
    return probe.get("servers_cost") or probe.get("cost") or {}


def cost_rows(result: dict, variant: str = "plain") -> list[dict]:
    """Upstream queries and bytes per probe and resolver, with the ratio against our aware
    resolver on the matching probe (queries and bytes that reached the servers)."""
    aware = result.get("aware", {}).get(variant, {})
    rows = []
    for name, res in result["resolvers"].items():
        probes = res.get("variants", {}).get(variant, {}).get("probes", {})
        for key, label in COST_PROBES:
            p = probes.get(key)
            if p is None:
                continue
            c = _server_side(p)
            base = aware.get(BASELINE.get(key, key))
            b = base["cost"] if base else {}
            rows.append({
                "resolver": name, "probe": key, "label": label,
                "ok": bool(p["answer"].get("srv") or p["answer"].get("a")),
                "queries": c.get("queries", 0), "bytes": c.get("bytes", 0),
                "minimised": p.get("minimised", False),
                "aware_probe": BASELINE.get(key, key) if base else None,
                "aware_queries": b.get("queries"), "aware_bytes": b.get("bytes"),
                "query_ratio": (round(c.get("queries", 0) / b["queries"], 2)
                                if b.get("queries") else None),
                "byte_ratio": (round(c.get("bytes", 0) / b["bytes"], 2)
                               if b.get("bytes") else None),
            })
    return rows


def cost_markdown(result: dict, variant: str = "plain") -> str:
    aware = result.get("aware", {}).get(variant, {})
    lines = ["| resolver | probe | answered | upstream queries | bytes | qname min. | "
             "aware: queries | aware: bytes | × queries | × bytes |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for key, _ in COST_PROBES:
        p = aware.get(key)
        if p is not None:
            c, a = p["cost"], p["answer"]
            answered = "yes" if a.get("srv") or a.get("a") else "no"
            lines.append(f"| aware (ours) | {key} | {answered} "
                         f"| {c.get('queries', 0)} | {c.get('bytes', 0)} | "
                         f"{'yes' if p.get('minimised') else 'no'} | | | | |")
    for r in cost_rows(result, variant):
        lines.append(
            f"| {r['resolver']} | {r['probe']} | {'yes' if r['ok'] else 'no'} | "
            f"{r['queries']} | {r['bytes']} | {'yes' if r['minimised'] else 'no'} | "
            f"{'' if r['aware_queries'] is None else r['aware_queries']} | "
            f"{'' if r['aware_bytes'] is None else r['aware_bytes']} | "
            f"{'' if r['query_ratio'] is None else r['query_ratio']} | "
            f"{'' if r['byte_ratio'] is None else r['byte_ratio']} |")
    return "\n".join(lines)


def quirks_markdown(result: dict) -> str:
    out = []
    for name, res in result["resolvers"].items():
        for variant, v in res.get("variants", {}).items():
            lines = v.get("log_lines", [])
            if lines:
                out.append(f"**{name}** ({variant}):")
                out += [f"    {line}" for line in lines[:15]]
    return "\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``python3 -m sim.interop.recursors`` (and of a future ``tooldns recursors``)."""
    p.add_argument("--resolver", action="append", choices=RESOLVERS, metavar="NAME",
                   help=f"resolver to test, repeatable ({', '.join(RESOLVERS)}; default: all)")
    p.add_argument("--variant", action="append", choices=VARIANTS,
                   help="plain (unsigned hierarchy) and/or dnssec (signed, validating "
                   "resolvers); default: both")
    p.add_argument("--json", metavar="FILE", help="write the full results as JSON")
    p.add_argument("--markdown", action="store_true",
                   help="print markdown tables (matrix, details, cost, log lines)")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary folder (configurations, logs, pcap)")
    p.add_argument("--verbose-logs", action="store_true",
                   help="resolvers log every step (large logs, for reading; with --keep)")
    g = p.add_argument_group("namespace (small synthetic unless --catalog is given)")
    g.add_argument("--catalog", help="catalogue JSONL (e.g. ../shared/data/tools/catalog.jsonl)")
    g.add_argument("--limit", type=int, default=200, help="catalogue rows to load")
    g.add_argument("--tools", type=int, default=120, help="synthetic: number of tools")
    g.add_argument("--branching", type=int, default=3, help="synthetic: branching factor")
    g.add_argument("--depth", type=int, default=2, help="synthetic: depth below tools.")
    g.add_argument("--seed", type=int, default=7, help="synthetic tree; DNSSEC keys")


def run(args: argparse.Namespace) -> int:
    """Run the matrix and print it; 0 done, 1 failed (a resolver failed or no run)."""
    try:
        result = run_matrix(args.resolver or RESOLVERS, args.variant or VARIANTS,
                            catalog=args.catalog, limit=args.limit, tools=args.tools,
                            branching=args.branching, depth=args.depth, seed=args.seed,
                            keep=args.keep, verbose_logs=args.verbose_logs)
    except RecursorError as exc:
        print(f"sim.interop.recursors: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        from analysis.files import OutputError, atomic_write

        text = json.dumps(result, indent=1) + "\n"
        try:
            atomic_write(Path(args.json),
                         lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        except OutputError as exc:
            print(f"sim.interop.recursors: error: {exc}", file=sys.stderr)
            return 1
    print(matrix_markdown(result))
    if args.markdown:
        print()
        print(details_markdown(result))
        for variant in result.get("aware", {}):
            print()
            print(f"Upstream cost ({variant}):")
            print()
            print(cost_markdown(result, variant))
        quirks = quirks_markdown(result)
        if quirks:
            print()
            print(quirks)
    else:
        for name, res in result["resolvers"].items():
            for variant, v in res.get("variants", {}).items():
                if v.get("status") == "failed":
                    print(f"{name} ({variant}): {v.get('error')}", file=sys.stderr)
    meta = result.get("meta", {})
    if meta.get("workdir"):
        print(f"configurations and logs kept in {meta['workdir']}", file=sys.stderr)
    failed = any(v.get("status") == "failed" for r in result["resolvers"].values()
                 for v in r.get("variants", {}).values())
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--inside" in argv:
        return _inside_main(argv)
    p = argparse.ArgumentParser(prog="python3 -m sim.interop.recursors", description=DESCRIPTION,
                                allow_abbrev=False)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("sim.interop.recursors: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
