"""The stock resolvers of the compatibility matrix and how each is configured.

:class:`Spec` — how to run one resolver: Unbound, BIND (``named``), Knot Resolver
(``kresd``), PowerDNS Recursor and dnsdist (a proxy, not a recursor: its backend is our
ToolDNS-aware resolver). Each spec writes its configuration into a temporary folder
(:class:`Setup`) and gives the foreground command: listening on its own loopback address
(127.0.99.1 … .5) port 53, the hierarchy's root server as its only root hint, queries
leaving from that same address, every "phone home" feature off (trust-anchor updates,
security polls, priming beyond the hints) and, in the DNSSEC variant, the hierarchy's root
DS (:func:`sim.build.trust.sign_hierarchy`) as its only trust anchor with validation on.
Everything it logs goes to a file in that folder (its tail is the error when it fails).
``docs/recursors.md`` explains each configuration.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PORT = 53
AWARE = "127.0.53.1"  # our ToolDNS-aware resolver (sim.sockets.hierarchy.DEFAULT_RESOLVER_ADDRESS)
RESOLVERS = ("unbound", "bind", "knot-resolver", "pdns-recursor", "dnsdist")
VARIANTS = ("plain", "dnssec")


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
    cache_bytes: int | None = None  # the cache's size (None: as below, or the default)

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
        *([f"  msg-cache-size: {s.cache_bytes // 3}",
           f"  rrset-cache-size: {2 * s.cache_bytes // 3}"] if s.cache_bytes else []),
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
    max-cache-size {s.cache_bytes or "32m"};
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
    conf.write_text(f"""-- written by sim.interop.resolvers
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
cache.open({s.cache_bytes or "16 * MB"}, 'lmdb://{s.workdir}/cache')
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
        # entries, not bytes: about one per 512 bytes of the scheme's cache_max_bytes
        *([f"max-cache-entries={max(1, s.cache_bytes // 512)}"] if s.cache_bytes else []),
        *(["trace=yes"] if s.verbose else []),
    ]) + "\n", encoding="utf-8")
    return [f"--config-dir={s.workdir}"]


def _dnsdist(s: Setup) -> list[str]:
    conf = s.workdir / "dnsdist.conf"
    conf.write_text(f"""-- written by sim.interop.resolvers: a proxy in front of the aware resolver
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

