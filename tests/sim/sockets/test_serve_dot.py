"""``tooldns serve --dot``: DNS over TLS (RFC 7858) at every server and the resolver of the
served hierarchy, with a certificate from a CA made at start; asked by ``kdig +tls`` (the
CA and host name verified) and dnspython's ``dns.query.tls``; bad DoT flags refused.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import pytest

from sim.build.hierarchy import DOT_HOST

ROOT = Path(__file__).resolve().parents[3]
PORT = 41000 + os.getpid() % 8000
RESOLVER = "127.0.53.31"
KDIG = shutil.which("kdig")
SERVE = [sys.executable, "-m", "sim.cli", "serve", "--tools", "60", "--branching", "2",
         "--depth", "2", "--seed", "3", "--orgs", "0"]

needs_kdig = pytest.mark.skipif(KDIG is None and not os.environ.get("CI"),
                                reason="kdig not installed (knot-dnsutils); CI installs it")


@pytest.fixture(scope="module")
def served(tmp_path_factory):  # type: ignore[no-untyped-def]
    """`tooldns serve --dot` running: (manifest, CA file)."""
    tmp = tmp_path_factory.mktemp("serve-dot")
    manifest, ca = tmp / "m.json", tmp / "ca.pem"
    proc = subprocess.Popen([*SERVE, "--port", str(PORT), "--resolver", RESOLVER, "--dot",
                             "--dot-ca", str(ca), "--manifest", str(manifest),
                             "--duration", "120"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not manifest.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
        yield json.loads(manifest.read_text()), ca
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_manifest_names_the_dot_port_beside_the_dns_port(served) -> None:
    manifest, ca = served
    assert manifest["dot"] == {"port": PORT + 800, "hostname": DOT_HOST}
    assert ca.read_text().startswith("-----BEGIN CERTIFICATE-----")


def test_dnspython_over_tls_to_the_resolver_and_a_server(served) -> None:
    manifest, ca = served
    ctx = ssl.create_default_context(cafile=str(ca))
    port = manifest["dot"]["port"]
    q = dns.message.make_query("tools.", "NS")
    via = dns.query.tls(q, RESOLVER, port=port, timeout=10, ssl_context=ctx,
                        server_hostname=DOT_HOST)
    assert via.rcode() == dns.rcode.NOERROR and via.answer
    tld = next(m["address"] for m in manifest["servers"] if m["zone"] == "tools.")
    q = dns.message.make_query("tools.", "SOA")
    q.flags &= ~dns.flags.RD
    direct = dns.query.tls(q, tld, port=port, timeout=10, ssl_context=ctx,
                           server_hostname=DOT_HOST)
    assert direct.rcode() == dns.rcode.NOERROR and direct.flags & dns.flags.AA
    # a client that does not know the CA refuses the certificate
    with pytest.raises(ssl.SSLError):
        dns.query.tls(q, tld, port=port, timeout=10,
                      ssl_context=ssl.create_default_context(), server_hostname=DOT_HOST)


@needs_kdig
def test_kdig_tls_verifies_and_gets_answers(served) -> None:
    manifest, ca = served
    port = str(manifest["dot"]["port"])

    def kdig(*args: str) -> str:
        assert KDIG is not None
        return subprocess.run([KDIG, "-p", port, "+time=5", "+retry=0", *args],
                              capture_output=True, text=True, timeout=30).stdout

    out = kdig(f"@{RESOLVER}", f"+tls-ca={ca}", f"+tls-hostname={DOT_HOST}", "tools.", "NS")
    assert "TLS1.3" in out and "status: NOERROR" in out and "ns1.tools." in out
    wrong = kdig(f"@{RESOLVER}", f"+tls-ca={ca}", "+tls-hostname=other.test", "tools.", "NS")
    assert "status: NOERROR" not in wrong  # the certificate is for dot.tools.test only


@pytest.mark.parametrize("flags", [["--dot-port", "9853"], ["--dot", "--dot-port", "70000"],
                                   ["--dot", "--port", "65000"], ["--dot-ca", "x.pem"]])
def test_bad_dot_flags_are_one_error_line(flags: list[str], tmp_path: Path) -> None:
    out = subprocess.run([*SERVE, "--duration", "1", *flags], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2
    assert out.stderr.startswith("tooldns serve: error:") and "Traceback" not in out.stderr
    assert not (tmp_path / "x.pem").exists()
