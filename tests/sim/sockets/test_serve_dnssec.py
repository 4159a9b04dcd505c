"""``tooldns serve`` signed, transferring and encrypting what it says it does.

* ``--dnssec``: the manifest and the console carry the trust anchor; DNSKEY and DS are
  answered without DO; an AXFR (``kdig``) carries the signed zone, which ``dnssec-verify``
  accepts; the served resolver validates (AD).
* ``--allow-transfer``: its help says what the code does (no transfer by default) and the
  served servers refuse, then allow, an AXFR from loopback accordingly.
* ``--dot``: the resolver asks the servers over DNS over TLS too (none of its queries reach
  them in clear text), unless ``--resolver-upstream udp``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.zone
import pytest

from sim.build.hierarchy import build_hierarchy, dot_setup
from topologies.synthetic import synthetic

PORT = 33000 + os.getpid() % 8000
RESOLVER = "127.0.53.41"
SERVE = [sys.executable, "-m", "sim.cli", "serve", "--tools", "60", "--branching", "2",
         "--depth", "2", "--seed", "3", "--orgs", "0"]
KDIG = shutil.which("kdig")
VERIFY = shutil.which("dnssec-verify")
CI = bool(os.environ.get("CI"))


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, str]]:
    """`tooldns serve --dnssec --allow-transfer 127.0.0.1` running: (manifest, stdout)."""
    tmp = tmp_path_factory.mktemp("serve-dnssec")
    manifest, out = tmp / "m.json", tmp / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen([*SERVE, "--port", str(PORT), "--resolver", RESOLVER,
                                 "--dnssec", "--allow-transfer", "127.0.0.1",
                                 "--manifest", str(manifest), "--duration", "120"],
                                stdout=sink, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not manifest.exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.1)
            yield json.loads(manifest.read_text()), out.read_text()
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _ask(address: str, name: str, qtype: str, do: bool = False,
         rd: bool = False) -> dns.message.Message:
    q = dns.message.make_query(name, qtype, want_dnssec=do)
    if not rd:
        q.flags &= ~dns.flags.RD
    return dns.query.udp(q, address, port=PORT, timeout=5)


def test_serve_dnssec_prints_and_lists_the_trust_anchor(signed: tuple[dict, str]) -> None:
    from nodes.dns.dnssec import trust_anchor

    manifest, out = signed
    assert manifest["trust_anchor"] == f". DS {trust_anchor('3')}"  # --key-seed: --seed
    assert f"trust anchor: . DS {trust_anchor('3')}" in out and "validating" in out


def test_serve_dnssec_answers_dnskey_and_ds_without_do(signed: tuple[dict, str]) -> None:
    manifest, _ = signed
    tld = next(m["address"] for m in manifest["servers"] if m["zone"] == "tools.")
    child = next(m["zone"] for m in manifest["servers"] if m["zone"].count(".") == 2)
    keys = _ask(tld, "tools.", "DNSKEY")
    assert keys.flags & dns.flags.AA and [r.rdtype for r in keys.answer] == [
        dns.rdatatype.DNSKEY]
    ds = _ask(tld, child, "DS")
    assert ds.flags & dns.flags.AA and [r.rdtype for r in ds.answer] == [dns.rdatatype.DS]
    # through the served resolver, validated: AD for a stub that sets DO
    via = _ask(RESOLVER, "tools.", "NS", do=True, rd=True)
    assert via.rcode() == dns.rcode.NOERROR and via.flags & dns.flags.AD


@pytest.mark.skipif((KDIG is None or VERIFY is None) and not CI,
                    reason="kdig / dnssec-verify not installed (knot-dnsutils, bind9-utils)")
def test_serve_dnssec_axfr_is_signed_and_verifies(signed: tuple[dict, str],
                                                  tmp_path: Path) -> None:
    manifest, _ = signed
    for entry in manifest["servers"]:
        zone = entry["zone"]
        out = subprocess.run([KDIG or "kdig", f"@{entry['address']}", "-p", str(PORT),
                              "+time=5", "+retry=0", "AXFR", zone],
                             capture_output=True, text=True, timeout=30).stdout
        lines = [line for line in out.splitlines() if line and not line.startswith(";")]
        types = {line.split()[3] for line in lines if len(line.split()) > 4}
        assert {"DNSKEY", "RRSIG", "NSEC"} <= types, (zone, out[-500:])
        path = tmp_path / f"{zone.rstrip('.') or 'root'}.zone"
        path.write_text("\n".join(lines[:-1]) + "\n")  # the closing SOA once is enough
        check = subprocess.run([VERIFY or "dnssec-verify", "-z", "-o", zone, str(path)],
                               capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, (zone, check.stdout + check.stderr)


# ------------------------------------------------------------------ --allow-transfer


def _axfr(address: str, port: int, zone: str) -> dns.rcode.Rcode:
    try:
        msgs = list(dns.query.xfr(address, zone, port=port, timeout=5, lifetime=10))
    except dns.xfr.TransferError as exc:
        return exc.rcode
    return msgs[0].rcode()


def test_allow_transfer_help_says_what_the_code_does() -> None:
    """The option's help and the servers agree: nobody may transfer unless named."""
    from sim.cli import main as cli
    from sim.sockets.hierarchy import LiveHierarchy

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = " ".join(sub.choices["serve"].format_help().split())  # type: ignore[attr-defined]
    assert "by default none is: every transfer is REFUSED" in text
    assert "loopback and the hierarchy's own servers" not in text
    hierarchy = build_hierarchy(synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0),
                                first_address="127.97.0.1")
    tld = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")

    async def main(allow: list[str] | None) -> dns.rcode.Rcode:
        live = LiveHierarchy(hierarchy, port=PORT + 1, resolver_address="127.97.255.1",
                             allow_transfer=allow)
        await live.start()
        try:
            return await asyncio.to_thread(_axfr, tld, PORT + 1, "tools.")
        finally:
            live.close()
            await asyncio.sleep(0.1)

    assert asyncio.run(main(None)) == dns.rcode.REFUSED  # the default: nobody
    assert asyncio.run(main(["127.0.0.0/8"])) == dns.rcode.NOERROR


# ------------------------------------------------------------------------ --dot


@pytest.mark.parametrize("upstream", [True, False], ids=["tls", "udp"])
def test_dot_resolver_asks_the_servers_over_tls(upstream: bool) -> None:
    """With ``dot_upstream`` (``serve --dot``'s default) every query the resolver sends a
    server arrives over DNS over TLS, none in clear text; without it, over UDP."""
    from sim.sockets.hierarchy import LiveHierarchy

    hierarchy = build_hierarchy(synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0),
                                first_address="127.98.0.1")
    live = LiveHierarchy(hierarchy, port=PORT + 2, resolver_address="127.98.255.1",
                         dot=dot_setup(5), dot_upstream=upstream)

    async def main() -> dns.message.Message:
        await live.start()
        try:
            q = dns.message.make_query("tools.", "NS")
            return await dns.asyncquery.udp(q, "127.98.255.1", port=PORT + 2, timeout=10)
        finally:
            live.close()
            await asyncio.sleep(0.1)

    import dns.asyncquery

    reply = asyncio.run(main())
    assert reply.rcode() == dns.rcode.NOERROR and reply.answer
    assert live.manifest()["resolver"]["upstream"] == ("tls" if upstream else "udp")
    tls = sum(s.stats["rx_tls"] for s in hierarchy.servers.values())
    clear = sum(s.stats["rx_udp"] + s.stats["rx_tcp"] for s in hierarchy.servers.values())
    assert (tls > 0 and clear == 0) if upstream else (tls == 0 and clear > 0), (tls, clear)


def test_resolver_upstream_tls_needs_dot(tmp_path: Path) -> None:
    out = subprocess.run([*SERVE, "--duration", "1", "--resolver-upstream", "tls"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    assert out.returncode == 2 and "--resolver-upstream tls needs --dot" in out.stderr
