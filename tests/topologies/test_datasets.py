"""Dataset loaders, the ToolDNS release format, synthetic rows and the stratified split."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from topologies.catalog import from_catalog
from topologies.datasets import (
    canonical_id,
    catalog_paths,
    category_of,
    load_catalog,
    load_queries,
    load_tooldns_release,
    namespace_from_paths,
    stratified_split,
    synthetic_catalog,
    write_jsonl,
)
from topologies.synthetic import synthetic

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "tools"


def _rows() -> list[dict]:
    return [
        {"id": "s:a", "name": "a", "description": "weather forecast tool", "protocol": "mcp",
         "path": ["weather", "forecast"]},
        {"id": "s:b", "name": "b", "description": "historical weather data", "protocol": "mcp",
         "path": ["weather"]},
        {"id": "s:c", "name": "c", "description": "translate english text", "protocol": "rest",
         "path": ["nlp", "translate"]},
    ]


def test_catalog_round_trip_and_checks(tmp_path: Path) -> None:
    path = tmp_path / "cat.jsonl"
    write_jsonl(path, _rows())
    assert load_catalog(path) == _rows()
    assert [r["id"] for r in load_catalog(path, protocols=["rest"])] == ["s:c"]
    assert len(load_catalog(path, limit=2)) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "name": "n"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a catalogue row"):
        load_catalog(bad)
    dup = tmp_path / "dup.jsonl"
    write_jsonl(dup, [_rows()[0], _rows()[0]])
    with pytest.raises(ValueError, match="duplicate id"):
        load_catalog(dup)


def test_queries_keep_known_tools_only(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    write_jsonl(path, [{"query": "rain?", "tool_ids": ["s:a", "zz"]},
                       {"query": "nothing known", "tool_ids": ["zz"]}])
    rows = load_queries(path, ["s:a", "s:b"])
    assert [(r["query"], r["tool_ids"], r["line"]) for r in rows] == [("rain?", ["s:a"], 1)]
    (tmp_path / "bad.jsonl").write_text('{"query": 3}\n')
    with pytest.raises(ValueError, match="not a query row"):
        load_queries(tmp_path / "bad.jsonl")


def test_tooldns_release_loader_json_and_jsonl(tmp_path: Path) -> None:
    records = [
        {"tool_name": "Weather Now", "summary": "Current weather", "protocol": "MCP",
         "category": "Weather_and_Climate", "sub_category": "Forecast",
         "queries": ["is it raining", {"query": "wind speed"}]},
        {"name": "Weather Now", "description": "Another", "type": "RESTful API",
         "first_category": "Weather_and_Climate", "task": "storm alerts"},
    ]
    (tmp_path / "r.json").write_text(json.dumps(records))
    rows, queries = load_tooldns_release(tmp_path / "r.json")
    assert [r["id"] for r in rows] == ["tooldns:weather-now", "tooldns:weather-now-2"]
    assert rows[0]["path"] == ["weather-and-climate", "forecast"]
    assert rows[0]["protocol"] == "mcp" and rows[1]["protocol"] == "rest"
    assert [(q["query"], q["tool_ids"]) for q in queries] == [
        ("is it raining", ["tooldns:weather-now"]), ("wind speed", ["tooldns:weather-now"]),
        ("storm alerts", ["tooldns:weather-now-2"])]
    write_jsonl(tmp_path / "r.jsonl", records)
    assert load_tooldns_release(tmp_path / "r.jsonl") == (rows, queries)
    (tmp_path / "bad.json").write_text(json.dumps([{"name": "x", "category": "c"}]))
    with pytest.raises(ValueError, match="needs a name"):
        load_tooldns_release(tmp_path / "bad.json")


def test_synthetic_rows_rebuild_the_synthetic_tree() -> None:
    rows, queries = synthetic_catalog(n_tools=120, branching=3, depth=2, seed=4, n_queries=30)
    ns = namespace_from_paths(rows, catalog_paths(rows), queries)
    ref = synthetic(n_tools=120, branching=3, depth=2, seed=4, n_queries=30)
    assert {t.id: t.zone for t in ns.tools.values()} == {t.id: t.zone for t in ref.tools.values()}
    assert [(q.text, q.truth) for q in ns.queries] == [(q.text, q.truth) for q in ref.queries]


def test_rows_namespace_matches_from_catalog(tmp_path: Path) -> None:
    src = SHARED / "catalog.jsonl"
    path = src if src.exists() else tmp_path / "cat.jsonl"
    if not src.exists():
        write_jsonl(path, _rows())
    rows = load_catalog(path, limit=3000)
    ns = namespace_from_paths(rows, catalog_paths(rows))
    ref = from_catalog(path, limit=3000)
    assert set(ns.zones) == set(ref.zones)
    assert all(ns.zones[z].summary == ref.zones[z].summary for z in ref.zones)
    assert {t.id: t.target for t in ns.tools.values()} == {t.id: t.target
                                                          for t in ref.tools.values()}


def test_multi_parent_copies_map_back() -> None:
    rows = _rows()
    paths = catalog_paths(rows)
    paths["s:c"] = [["nlp", "translate"], ["weather", "forecast"]]
    ns = namespace_from_paths(rows, paths)
    assert "s:c~2" in ns.tools and ns.tools["s:c~2"].zone == "forecast.weather.tools."
    assert canonical_id("s:c~2") == "s:c" and category_of(rows[2]) == "nlp/translate"


def test_stratified_split_is_seeded_and_proportional() -> None:
    queries = [{"query": f"q{i}", "cat": c} for i, c in enumerate("a" * 50 + "b" * 20 + "c" * 5)]
    train, test = stratified_split(queries, lambda q: q["cat"], 0.4, seed=3)
    again = stratified_split(queries, lambda q: q["cat"], 0.4, seed=3)
    other = stratified_split(queries, lambda q: q["cat"], 0.4, seed=4)
    assert (train, test) == again and test != other[1]
    assert Counter(q["cat"] for q in test) == {"a": 20, "b": 8, "c": 2}
    assert sorted(q["query"] for q in train + test) == sorted(q["query"] for q in queries)
    with pytest.raises(ValueError):
        stratified_split(queries, lambda q: q["cat"], 1.5)
