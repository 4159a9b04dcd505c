"""HTTP registry baselines: AgentDNS and ANS applications, signatures, the client agents,
and the simpy TCP/TLS accounting — all in memory (no sockets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from cryptography import x509

from nodes.registry.agentdns import AgentDNSRegistry, TokenStore
from nodes.registry.client import RegistryAgent, RegistryConfig, RegistryKind, registry_kind
from nodes.registry.http import ClientConnection, Request
from nodes.registry.pki import TrustError, canonical, issue, make_ca, serial_hex, verify_chain
from nodes.resolver.types import Discovery
from nodes.scoring import make_scorer
from sim.build.registries import (
    REGISTRIES,
    REGISTRY_HOST,
    build_registry,
    registry_tools,
    tls_sizes,
)
from sim.catalog.strategies import STRATEGIES
from sim.schemes import RegistryScheme, scheme_kinds
from tests.nodes.registry.drive import drive
from topologies.synthetic import synthetic

TOKEN = "Bearer agent_" + "a" * 43
ORG_TOKENS = {TOKEN.removeprefix("Bearer "): "org:org7"}  # configured by the operator


@pytest.fixture(scope="module")
def ns():
    return synthetic(n_tools=300, branching=3, depth=2, seed=3, n_orgs=1, n_queries=40)


def test_registry_kinds_agree() -> None:
    """One table names the kinds (sim); the client's own Literal (nodes) must match it."""
    assert list(REGISTRIES) == list(get_args(RegistryKind))
    assert scheme_kinds() == [*STRATEGIES, *REGISTRIES]
    assert RegistryScheme.model_json_schema()["properties"]["kind"]["enum"] == list(REGISTRIES)
    assert registry_kind("ans-v0") == "ans-v0"
    with pytest.raises(ValueError, match="no registry client speaks kind 'toy'"):
        registry_kind("toy")
    with pytest.raises(ValueError, match="unknown registry kind 'toy'"):
        build_registry("toy", synthetic(n_tools=5, seed=1), make_scorer("bm25"), seed=1)


def test_scenario_models_load_without_the_registries() -> None:
    """The scheme models read the kind table; it must not load the scorers."""
    code = ("import sys\nimport sim.scenario\n"
            "print([m for m in ('sklearn', 'pandas', 'bm25s', 'nodes.registry.agentdns') "
            "if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3], timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _post(app, target: str, obj: object, headers=()) -> tuple[int, dict]:
    resp = app(Request("POST", target, [("Content-Type", "application/json"), *headers],
                       json.dumps(obj).encode()), 0.0)
    return resp.status, json.loads(resp.body)


def test_agentdns_search_layout_and_auth(ns) -> None:
    app = AgentDNSRegistry(registry_tools(ns), make_scorer("bm25"),
                           tokens=TokenStore(configured=ORG_TOKENS))
    q = ns.queries[0]
    status, body = _post(app, "/api/v1/discovery/search",
                         {"query": q.text, "limit": 5, "protocol": q.service},
                         [("Authorization", TOKEN)])
    assert status == 200 and body["query"] == q.text and body["total"] == len(body["tools"]) == 5
    tool = body["tools"][0]
    assert set(tool) == {"name", "description", "organization", "agentdns_url", "cost",
                         "protocol", "method", "http_mode", "input_description",
                         "output_description"}
    assert set(tool["cost"]) == {"type", "price", "currency", "description"}
    assert all(t["protocol"].lower() == q.service for t in body["tools"])
    assert _post(app, "/api/v1/discovery/search", {"query": "x"})[0] == 401
    assert _post(app, "/api/v1/discovery/search", {"query": "x", "limit": 0},
                 [("Authorization", TOKEN)])[0] == 400
    assert _post(app, "/api/v1/discovery/search", {"limit": 3},
                 [("Authorization", TOKEN)])[0] == 400


def test_agentdns_registration_is_searchable(ns) -> None:
    app = AgentDNSRegistry(registry_tools(ns), make_scorer("bm25"),
                           tokens=TokenStore(configured=ORG_TOKENS))
    status, body = _post(app, "/api/v1/services/?organization_id=7", {
        "name": "Zyxcorp Quasar", "category": "astro.science", "protocol": "mcp",
        "description": "quasar redshift catalogue zyxcorp", "endpoint_url":
        "https://127.64.9.9:8443/"}, [("Authorization", TOKEN)])
    assert status == 201
    _, found = _post(app, "/api/v1/discovery/search", {"query": "zyxcorp quasar redshift",
                                                       "limit": 1, "protocol": "mcp"},
                     [("Authorization", TOKEN)])
    assert found["tools"][0]["agentdns_url"] == body["agentdns_url"]
    resp = app(Request("GET", "/api/v1/discovery/resolve/" + body["agentdns_url"][11:], [
        ("Authorization", TOKEN)], b""), 0.0)
    assert resp.status == 200 and json.loads(resp.body)["endpoint_url"].startswith(
        "https://127.64.9.9:8443")


def test_pki_is_deterministic_and_verifies() -> None:
    ca, ca2 = make_ca(5), make_ca(5)
    leaf, leaf2 = issue(ca, 5, REGISTRY_HOST), issue(ca2, 5, REGISTRY_HOST)
    assert leaf.cert_pem == leaf2.cert_pem and leaf.sign(b"m") == leaf2.sign(b"m")
    assert verify_chain(leaf.cert_pem, ca.cert, 100.0).subject == leaf.cert.subject
    other = make_ca(6)
    with pytest.raises(TrustError):
        verify_chain(leaf.cert_pem, other.cert, 0.0)  # issued by someone else
    with pytest.raises(TrustError):
        verify_chain(leaf.cert_pem, ca.cert, 11 * 365 * 86400.0)  # expired
    forged = issue(other, 5, REGISTRY_HOST)  # same subject, wrong issuer key
    with pytest.raises(TrustError):
        verify_chain(forged.cert_pem, ca.cert, 0.0)  # same CA name, other key
    assert isinstance(x509.load_pem_x509_certificate(leaf.cert_pem.encode()),
                      x509.Certificate)


def test_agentdns_agent_discovers_in_one_call(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=1)
    agent = RegistryAgent((setup.address, setup.port), REGISTRY_HOST,
                          RegistryConfig(kind="agentdns", token=setup.token))
    q = ns.queries[1]
    agent.ask("job", Discovery(q.text, service=q.service, k=3), 0.0)
    (res,) = drive(agent, setup.server)
    assert res.error is None and len(res.endpoints) == 3 and len(res.steps) == 1
    assert res.round_trips == 2  # TCP handshake + one HTTP exchange
    ids = {t.agentdns_url: t.id for t in registry_tools(ns)}
    assert all(e.target in ids for e in res.endpoints)


def test_ans_agent_verifies_signed_answers_and_revocation(ns) -> None:
    setup = build_registry("ans-v0", ns, make_scorer("bm25"), seed=1)
    config = RegistryConfig(kind="ans-v0", revocation=True, keepalive=True)
    agent = RegistryAgent((setup.address, setup.port), REGISTRY_HOST, config,
                          scorer=make_scorer("bm25"), ca=setup.ca.cert)
    q = ns.queries[2]
    agent.ask(1, Discovery(q.text, service=q.service, k=3), 0.0)
    (res,) = drive(agent, setup.server)
    assert res.error is None, res.error
    assert [s.call for s in res.steps] == ["capabilities", "agents", "resolve", "ocsp"]
    assert res.verified == 2 and res.endpoints[0].address
    agent.ask(2, Discovery(q.text, service=q.service, k=3), 1.0)  # caches: list + OCSP
    (res2,) = drive(agent, setup.server, 1.0)
    assert [s.call for s in res2.steps] == ["agents", "resolve"]
    assert res2.round_trips == 2  # kept-alive connection: no handshake
    # a revoked registry certificate fails the (fresh) OCSP check
    setup.server.app.revoked.add(serial_hex(setup.identity.cert))
    fresh = RegistryAgent((setup.address, setup.port), REGISTRY_HOST, config,
                          scorer=make_scorer("bm25"), ca=setup.ca.cert)
    fresh.ask(3, Discovery(q.text, service=q.service, k=3), 2.0)
    (res3,) = drive(fresh, setup.server, 2.0)
    assert res3.error and "revoked" in res3.error and not res3.endpoints


def test_ans_agent_rejects_a_tampered_answer(ns) -> None:
    setup = build_registry("ans-v0", ns, make_scorer("bm25"), seed=1)
    agent = RegistryAgent((setup.address, setup.port), REGISTRY_HOST,
                          RegistryConfig(kind="ans-v0"), scorer=make_scorer("bm25"),
                          ca=setup.ca.cert)

    def tamper(reply: bytes) -> bytes:  # redirect the endpoint, keep the length
        return reply.replace(b'"actualEndpoint":"mcp://127.', b'"actualEndpoint":"mcp://128.')

    q = next(q for q in ns.queries if q.service == "mcp")
    agent.ask(1, Discovery(q.text, service="mcp", k=1), 0.0)
    (res,) = drive(agent, setup.server, tamper=tamper)
    assert res.error and "signature" in res.error and not res.endpoints


def test_http_server_answers_garbage_with_400_and_counts_it(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=1)
    server = setup.server
    reply, close = server.receive("c1", b"\x00\x01GARBAGE\r\n\r\n", 0.0)
    assert reply.startswith(b"HTTP/1.1 400") and close
    assert server.stats["malformed"] == 1
    client = ClientConnection(REGISTRY_HOST)  # and a well-formed request still works
    data = client.request("POST", "/api/v1/discovery/search",
                          [("Authorization", f"Bearer {setup.token}")],
                          canonical({"query": "weather", "limit": 2}))
    reply, close = server.receive("c2", data, 0.0)
    assert client.receive(reply).status == 200 and not close


def test_tls_sizes_come_from_a_real_handshake() -> None:
    ca = make_ca(9)
    leaf = issue(ca, 9, REGISTRY_HOST, ("127.0.80.1",))
    sizes = tls_sizes(leaf.cert_pem, leaf.key_pem, ca.cert_pem)
    assert sizes.server_flight > len(leaf.cert.public_bytes(
        __import__("cryptography.hazmat.primitives.serialization",
                   fromlist=["Encoding"]).Encoding.DER))  # the certificate rides in it
    assert sizes.record_overhead == 22  # 5-byte header, content type, 16-byte AEAD tag
    assert sizes.records(100) == 122 and sizes.records(0) == 0


def test_tcp_model_packet_patterns() -> None:
    """The TcpModel counts the packet sequences captured on Linux loopback (see
    sim/accounting.py): cold HTTP 6 up / 4 down, TLS 8 / 8, a later kept-alive query 2 / 1."""
    from nodes.registry.client import HttpStep
    from sim.accounting import TcpModel, http_cost

    model = TcpModel()
    one = [HttpStep("search", 1, 0.0, bytes_out=300, bytes_in=900)]
    cold = http_cost(one, {1}, True, False, None, model)
    assert (cold.packets_up, cold.packets_down) == (6, 4)
    assert cold.bytes_up == 60 + 52 + (52 + 300) + 52 + 2 * 52
    assert cold.bytes_down == 60 + 52 + (52 + 900) + 52
    ca = make_ca(2)
    leaf = issue(ca, 2, REGISTRY_HOST)
    tls = tls_sizes(leaf.cert_pem, leaf.key_pem, ca.cert_pem)
    secure = http_cost(one, {1}, True, False, tls, model)
    assert (secure.packets_up, secure.packets_down) == (8, 8)
    later = http_cost(one, set(), False, True, None, model)
    assert (later.packets_up, later.packets_down) == (2, 1)
    # Ethernet MTU: a 3,000-byte response is 3 segments, the client ACKs one pair
    eth = http_cost([HttpStep("search", 1, 0.0, bytes_out=300, bytes_in=3000)], set(), False,
                    True, None, TcpModel(mtu=1500))
    assert eth.packets_down == 3 and eth.packets_up == 1 + 1 + 1


def test_keepalive_acks_follow_linux_interactive_mode() -> None:
    """A response after an idle connection is ACKed at once; one answered within the
    delayed-ACK timeout lets the next request carry the ACK; silence past it costs a
    timer ACK (the patterns captured on loopback, HISTORY.md §6)."""
    from nodes.registry.client import HttpStep
    from sim.accounting import keepalive_acks

    def step(sent: float, rtt: float = 0.01) -> HttpStep:
        return HttpStep("x", 1, sent, rtt=rtt, bytes_out=100, bytes_in=900)

    # two discoveries of two calls each, 5 ms between calls, 100 ms think time
    calls = [step(0.0), step(0.015), step(0.13), step(0.145)]
    assert keepalive_acks(calls) == [1, 1, 1, 1]
    # the second discovery starts 20 ms after the first: its ACK rides on that request
    calls = [step(0.0), step(0.015), step(0.045), step(0.06)]
    assert keepalive_acks(calls) == [1, 0, 0, 1]
    # one call per discovery, idle in between: one immediate ACK each
    assert keepalive_acks([step(0.0), step(0.2), step(0.4)]) == [1, 1, 1]
