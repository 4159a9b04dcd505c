"""A registry given the query log (``index: log``): AgentDNS searches each tool's
pseudo-document, the same log ToolDNS's learned centroids route with, and answers what
flat retrieval over those pseudo-documents answers; refused where there is no log."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from analysis.conditions import knowledge_line
from nodes.scoring import top_k
from sim.build.namespace import build_namespace, namespace_encoder
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from sim.schemes import RegistryScheme

ROOT = Path(__file__).resolve().parents[3]
CATALOG = ROOT.parent / "shared" / "data" / "tools" / "catalog.jsonl"


def test_index_log_is_refused_without_a_log_or_a_search() -> None:
    base = {"name": "x", "schemes": [{"name": "r", "kind": "agentdns", "index": "log"}]}
    with pytest.raises(ValueError, match="index: log needs a query log"):
        Scenario.model_validate(base)
    sc = load_scenario(ROOT / "scenarios" / "learned-routing.yaml")
    with pytest.raises(ValueError, match="index: log is an AgentDNS search index"):
        sc.with_overrides({"schemes": [{"name": "a", "kind": "ans-v0", "index": "log"}]})
    given = sc.with_overrides({"schemes": [
        {"name": "t", "k": 10, "beam": 10, "search": "global"},
        {"name": "flat", "kind": "agentdns", "k": 10},
        {"name": "flat-log", "kind": "agentdns", "k": 10, "index": "log"}]})
    line = knowledge_line(given.model_dump(mode="json"))
    assert line is not None and line.endswith(
        "flat-log index the same log (pseudo-documents); flat index tool descriptions only")


@pytest.mark.skipif(not CATALOG.exists() and not os.environ.get("CI"),
                    reason="needs ../shared/data/tools (CI has it)")
def test_a_registry_given_the_log_ranks_pseudo_documents(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "learned-routing.yaml").with_overrides({
        "namespace.protocols": ["a2a"], "namespace.cache_dir": str(tmp_path / "cache"),
        "namespace.taxonomy.branching": 4, "workload.queries": 12, "network.nodes": 8,
        "schemes": [{"name": "plain", "kind": "agentdns", "k": 10},
                    {"name": "log", "kind": "agentdns", "k": 10, "index": "log"}]})
    assert isinstance(sc.schemes[1], RegistryScheme)
    df = run_scenario(sc, out_dir=tmp_path / "run").records
    ns = build_namespace(sc)
    assert ns.pseudo_documents is not None
    ids, matrix = ns.pseudo_documents
    matrix = np.asarray(matrix, dtype=np.float32)
    services = np.asarray([ns.tools[t].service for t in ids])
    encode = namespace_encoder(sc)
    log = df[df.scheme == "log"].set_index("job").sort_index()
    plain = df[df.scheme == "plain"].set_index("job").sort_index()
    assert log.success.all() and len(log) == 12
    for _, row in log.iterrows():
        q = np.asarray(encode([row.intent])[0])
        want = [ids[i] for i in top_k((matrix @ q).astype(float), 10,
                                      np.flatnonzero(services == row.service))]
        assert row.returned.split() == want
    assert (log.returned != plain.returned).any()  # the log changes what is found
