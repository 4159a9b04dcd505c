"""topologies/{links,units,graphs,graphfile,placement,paths}.py: delay models, unit parsing,
graph builders, file loading, placement and path model."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from topologies.graphfile import from_file
from topologies.graphs import TOPOLOGIES, build_graph, waxman
from topologies.links import DelayModel, LinkSpec
from topologies.paths import PathModel
from topologies.placement import Role, place
from topologies.units import parse_bandwidth, parse_duration, parse_loss

CONST = LinkSpec(DelayModel("constant", 0.010))
JITTER = LinkSpec(DelayModel("lognormal", 0.008, 0.004), bandwidth=100e6)


def line_graph(delays: list[float], **link: float) -> nx.Graph:
    """A path 0 - 1 - … with the given constant delays (and optional loss/bandwidth)."""
    g = nx.path_graph(len(delays) + 1)
    for i, d in enumerate(delays):
        g.edges[i, i + 1]["link"] = LinkSpec(DelayModel.constant(d), **link)
    return g


def draws_left(rng: np.random.Generator) -> float:
    """The next uniform draw: equal for two generators iff they made the same number of draws."""
    return float(rng.random())


# --------------------------------------------------------------------------- delay models


def test_constant_delay_is_the_mean_and_consumes_one_draw() -> None:
    d = DelayModel("constant", 0.02)
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    assert [d.sample(a) for _ in range(5)] == [0.02] * 5
    for _ in range(5):
        b.random()
    assert draws_left(a) == draws_left(b)
    assert d.median() == 0.02 and d.expected() == 0.02


def test_normal_delay_is_never_negative_and_has_the_truncated_mean() -> None:
    rng = np.random.default_rng(1)
    wide = DelayModel("normal", 0.010, 0.010)  # 16 % of the untruncated mass is below zero
    x = np.array([wide.sample(rng) for _ in range(50_000)])
    assert x.min() >= 0.0
    assert x.mean() == pytest.approx(wide.expected(), rel=0.02)
    narrow = DelayModel("normal", 0.010, 0.001)
    y = np.array([narrow.sample(rng) for _ in range(50_000)])
    assert y.mean() == pytest.approx(0.010, rel=0.01)
    assert y.std() == pytest.approx(0.001, rel=0.03)
    assert narrow.median() == pytest.approx(0.010)


def test_lognormal_delay_has_the_requested_mean_and_std() -> None:
    d = DelayModel("lognormal", 0.008, 0.004)
    rng = np.random.default_rng(8)
    x = np.array([d.sample(rng) for _ in range(80_000)])
    assert x.min() > 0
    assert x.mean() == pytest.approx(0.008, rel=0.02)
    assert x.std() == pytest.approx(0.004, rel=0.05)
    assert d.median() < d.mean  # right-skewed
    assert d.median() == pytest.approx(float(np.median(x)), rel=0.02)


def test_empirical_delay_draws_uniformly_from_its_samples() -> None:
    d = DelayModel("empirical", 0.0, samples=(0.03, 0.01, 0.02, 0.02))
    assert d.samples == (0.01, 0.02, 0.02, 0.03)
    assert d.mean == pytest.approx(0.02) and d.median() == pytest.approx(0.02)
    rng = np.random.default_rng(5)
    x = [d.sample(rng) for _ in range(20_000)]
    assert set(x) == {0.01, 0.02, 0.03}
    assert x.count(0.02) / len(x) == pytest.approx(0.5, abs=0.02)
    assert statistics.fmean(x) == pytest.approx(0.02, rel=0.02)
    assert DelayModel.from_samples([0.01, 0.03]) == DelayModel("empirical", 9.9,
                                                               samples=(0.03, 0.01))


def test_scaled_keeps_kind_and_coefficient_of_variation() -> None:
    d = DelayModel("lognormal", 0.01, 0.005).scaled(3)
    assert (d.dist, d.mean, d.std) == ("lognormal", pytest.approx(0.03), pytest.approx(0.015))
    e = DelayModel.from_samples([0.01, 0.02]).scaled(2)
    assert e.samples == (0.02, 0.04) and e.mean == pytest.approx(0.03)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dist": "constant", "mean": -0.001}, "mean must be a finite number ≥ 0"),
    ({"dist": "normal", "mean": 0.01, "std": -1.0}, "std must be a finite number ≥ 0"),
    ({"dist": "normal", "mean": float("nan")}, "mean must be a finite number"),
    ({"dist": "empirical", "mean": 0.01}, "needs at least one sample"),
    ({"dist": "empirical", "mean": 0.0, "samples": (0.01, -0.02)}, "every sample"),
    ({"dist": "constant", "mean": 0.01, "std": 0.002}, "constant delay has std 0"),
    ({"dist": "normal", "mean": 0.01, "samples": (0.01,)}, "only for dist='empirical'"),
    ({"dist": "lognormal", "mean": 0.0, "std": 0.01}, "needs mean > 0"),
    ({"dist": "pareto", "mean": 0.01}, "unknown dist 'pareto'"),
    ({"dist": "constant", "mean": "10ms"}, "mean must be a number"),
])
def test_delay_model_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DelayModel(**kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"loss": 1.0}, r"loss must be in \[0, 1\)"),
    ({"loss": -0.1}, "loss must be a finite number ≥ 0"),
    ({"bandwidth": 0}, "bandwidth must be > 0"),
    ({"bandwidth": -5.0}, "bandwidth must be a finite number ≥ 0"),
])
def test_link_spec_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LinkSpec(DelayModel.constant(0.01), **kwargs)
    with pytest.raises(ValueError, match="delay must be a DelayModel"):
        LinkSpec(0.01)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "seconds"), [
    (0.25, 0.25), (3, 3.0), ("10ms", 0.010), ("1.5 ms", 0.0015), ("0.2s", 0.2),
    ("250us", 250e-6), ("2", 2.0), ("1e-3s", 0.001), (" 7 MS ", 0.007),
])
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "bps"), [
    (1e6, 1e6), ("100Mbps", 100e6), ("1Gbps", 1e9), ("10 kbps", 1e4), ("10 Mbit/s", 10e6),
    ("2MBps", 16e6), ("500", 500.0),
])
def test_parse_bandwidth(text: object, bps: float) -> None:
    assert parse_bandwidth(text) == pytest.approx(bps)


@pytest.mark.parametrize("bad", ["fast", "10 parsecs", "-3ms", "", "ms", True])
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize("bad", ["100 Mpx", "0Mbps", "M", "fast", 0])
def test_parse_bandwidth_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_bandwidth(bad)


def test_parse_loss() -> None:
    assert parse_loss("1%") == pytest.approx(0.01)
    assert parse_loss("0.2") == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        parse_loss(1)


# --------------------------------------------------------------------------- builders


@pytest.mark.parametrize(("kind", "params"), [
    ("star", {}), ("line", {}), ("tree", {}), ("tree", {"branching": 2.0}),
    ("waxman", {}), ("waxman", {"alpha": 0.05, "beta": 0.05}),
    ("geometric", {}), ("geometric", {"radius": 0.05}),
])
@pytest.mark.parametrize("n", [1, 2, 30])
def test_builders_give_connected_graphs_with_links_on_every_edge(
        kind: str, params: dict, n: int) -> None:
    g = build_graph(kind, n, JITTER, 11, **params)
    assert nx.is_connected(g)
    assert all(isinstance(v, int | str) for v in g)
    assert all(isinstance(d["link"], LinkSpec) for _, _, d in g.edges(data=True))
    assert g.number_of_edges() >= g.number_of_nodes() - 1


def test_star_and_tree_shapes() -> None:
    s = build_graph("star", 5, CONST, 0)
    assert s.number_of_nodes() == 6 and s.degree[0] == 5
    t = build_graph("tree", 40, CONST, 0, branching=3)
    assert t.number_of_nodes() == 40 and nx.is_tree(t) and t.degree[0] == 3
    assert {"star", "tree", "waxman", "geometric", "file"} <= set(TOPOLOGIES)


@pytest.mark.parametrize("kind", ["waxman", "geometric"])
def test_spatial_graphs_are_deterministic_per_seed(kind: str) -> None:
    def snapshot(seed: int) -> list:
        g = build_graph(kind, 40, JITTER, seed)
        return sorted((u, v, d["link"]) for u, v, d in g.edges(data=True))

    assert snapshot(4) == snapshot(4)
    assert sorted((u, v) for u, v, _ in snapshot(4)) != sorted((u, v) for u, v, _ in snapshot(5))


@pytest.mark.parametrize("kind", ["waxman", "geometric"])
def test_spatial_delays_scale_with_distance(kind: str) -> None:
    g = build_graph(kind, 60, JITTER, 2)
    edges = list(g.edges(data=True))
    means = [d["link"].delay.mean for _, _, d in edges]
    assert statistics.fmean(means) == pytest.approx(JITTER.delay.mean)
    assert len(set(means)) > 1
    for _, _, d in edges:
        link = d["link"]
        assert link.delay.dist == "lognormal" and link.bandwidth == JITTER.bandwidth
        assert link.delay.std == pytest.approx(link.delay.mean / 2)  # same CV as the default
    by_length = sorted(edges, key=lambda e: e[2]["distance"])
    assert by_length[0][2]["link"].delay.mean < by_length[-1][2]["link"].delay.mean


def test_sparse_waxman_is_bridged_into_one_component() -> None:
    raw = nx.waxman_graph(50, beta=0.05, alpha=0.05, seed=random.Random(1))
    assert not nx.is_connected(raw)
    g = waxman(50, CONST, 1, alpha=0.05, beta=0.05)
    assert nx.is_connected(g)
    assert any(d.get("bridge") for _, _, d in g.edges(data=True))


def test_build_graph_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown topology 'ring'.*star"):
        build_graph("ring", 5, CONST, 0)
    with pytest.raises(ValueError, match="has no parameter 'radius'"):
        build_graph("star", 5, CONST, 0, radius=0.2)
    with pytest.raises(ValueError, match="needs parameter 'path'"):
        build_graph("file", 5, CONST, 0)
    with pytest.raises(ValueError, match="branching must be an integer"):
        build_graph("tree", 5, CONST, 0, branching=2.5)
    with pytest.raises(ValueError, match="n must be ≥ 1"):
        build_graph("waxman", 0, CONST, 0)
    with pytest.raises(ValueError, match="alpha must be in"):
        build_graph("waxman", 5, CONST, 0, alpha=0.0)


# --------------------------------------------------------------------------- files

GML = """graph [
  node [ id 0 label "a" ]
  node [ id 1 label "b" ]
  node [ id 2 label "c" ]
  edge [ source 0 target 1 delay "10ms" bandwidth "100Mbps" ]
  edge [ source 1 target 2 delay 0.02 loss "1%" ]
  edge [ source 0 target 2 ]
]
"""

GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="d0" for="edge" attr.name="delay" attr.type="string"/>
  <key id="d1" for="edge" attr.name="bandwidth" attr.type="string"/>
  <key id="d2" for="edge" attr.name="loss" attr.type="double"/>
  <graph edgedefault="undirected">
    <node id="0"/><node id="1"/><node id="2"/>
    <edge source="0" target="1"><data key="d0">1.5 ms</data><data key="d1">1Gbps</data></edge>
    <edge source="1" target="2"><data key="d0">0.2s</data><data key="d2">0.25</data></edge>
  </graph>
</graphml>
"""


def test_gml_file_with_unit_strings(tmp_path: Path) -> None:
    f = tmp_path / "net.gml"
    f.write_text(GML)
    default = LinkSpec(DelayModel("normal", 0.005, 0.001), loss=0.001, bandwidth=1e7)
    g = build_graph("file", 0, default, 0, path=str(f))
    assert set(g) == {"a", "b", "c"}
    ab, bc, ac = g.edges["a", "b"]["link"], g.edges["b", "c"]["link"], g.edges["a", "c"]["link"]
    assert ab.delay.mean == pytest.approx(0.010) and ab.bandwidth == pytest.approx(100e6)
    assert ab.delay.dist == "normal" and ab.delay.std == pytest.approx(0.002)
    assert ab.loss == 0.001
    assert bc.delay.mean == pytest.approx(0.020) and bc.loss == pytest.approx(0.01)
    assert bc.bandwidth == 1e7
    assert ac == default


def test_graphml_file_with_unit_strings(tmp_path: Path) -> None:
    f = tmp_path / "net.graphml"
    f.write_text(GRAPHML)
    g = from_file(f, CONST)
    assert set(g) == {0, 1, 2}
    assert g.edges[0, 1]["link"] == LinkSpec(DelayModel.constant(0.0015), bandwidth=1e9)
    assert g.edges[1, 2]["link"].delay.mean == pytest.approx(0.2)
    assert g.edges[1, 2]["link"].loss == 0.25
    pm = PathModel(g, {"x": 0, "y": 2})
    assert pm.rtt_estimate("x", "y") == pytest.approx(2 * 0.2015)


def test_bad_delay_in_file_names_the_file_and_the_edge(tmp_path: Path) -> None:
    f = tmp_path / "bad.gml"
    f.write_text(GML.replace('delay "10ms"', 'delay "ten ms"'))
    with pytest.raises(ValueError) as err:
        from_file(f, CONST)
    text = str(err.value)
    assert str(f) in text and "'a', 'b'" in text and "bad delay 'ten ms'" in text
    g = tmp_path / "bad.graphml"
    g.write_text(GRAPHML.replace("1Gbps", "1 Gpx"))
    with pytest.raises(ValueError, match=r"bad\.graphml: edge \(0, 1\): bad bandwidth"):
        from_file(g, CONST)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown graph format '\.txt'"):
        from_file(tmp_path / "net.txt", CONST)
    with pytest.raises(ValueError, match="no such file"):
        from_file(tmp_path / "missing.gml", CONST)
    broken = tmp_path / "broken.gml"
    broken.write_text("graph [ node [ id 0 ")
    with pytest.raises(ValueError, match=r"broken\.gml: cannot read graph"):
        from_file(broken, CONST)
    split = tmp_path / "split.gml"
    split.write_text(GML.replace("edge [ source 0 target 2 ]", "")
                     .replace("edge [ source 1 target 2 delay 0.02 loss \"1%\" ]", ""))
    with pytest.raises(ValueError, match="not connected"):
        from_file(split, CONST)


# --------------------------------------------------------------------------- placement


def roles_for(n_res: int = 2, n_agents: int = 8) -> list[Role]:
    roles = [Role("server:root1", "root"), Role("server:root2", "root"),
             Role("server:tld1", "tld"), Role("server:tld2", "tld")]
    roles += [Role(f"server:mid{i}", "intermediate") for i in range(4)]
    roles += [Role(f"server:hku{i}", "leaf", "hku") for i in range(3)]
    roles += [Role(f"server:acme{i}", "intermediate", "acme") for i in range(2)]
    roles += [Role(f"server:leaf{i}", "leaf", "") for i in range(6)]
    roles += [Role(f"resolver:{i}", "resolver") for i in range(n_res)]
    roles += [Role(f"agent:{i}", "agent", f"resolver:{i % n_res}") for i in range(n_agents)]
    return roles


def mean_delay_distance(g: nx.Graph) -> dict:
    return dict(nx.all_pairs_dijkstra_path_length(
        g, weight=lambda _u, _v, d: d["link"].delay.mean))


@pytest.mark.parametrize(("kind", "seed"), [("waxman", 1), ("waxman", 2), ("geometric", 3),
                                            ("tree", 0), ("star", 0)])
def test_default_placement_rules(kind: str, seed: int) -> None:
    g = build_graph(kind, 30, JITTER, seed)
    roles = roles_for()
    p = place(g, roles, seed)
    assert set(p) == {r.id for r in roles} and all(v in g for v in p.values())
    dist = mean_delay_distance(g)
    agents = [p[r.id] for r in roles if r.kind == "agent"]
    # resolvers on distinct nodes; agents on their resolver's node or a neighbour of it
    assert p["resolver:0"] != p["resolver:1"]
    for r in roles:
        if r.kind == "agent":
            home = p[r.group]
            assert p[r.id] == home or g.has_edge(p[r.id], home)
    # root and TLD servers on distinct nodes, none nearer the agents than any unused node
    top = [p[r.id] for r in roles if r.kind in ("root", "tld")]
    assert len(set(top)) == len(top)
    remote = {v: statistics.fmean(dist[a][v] for a in agents) for v in g}
    unused = set(g) - set(p.values())
    for v in top:
        assert v not in agents
        assert all(remote[v] >= remote[u] - 1e-9 for u in unused)
    assert min(remote[v] for v in top) > statistics.fmean(remote.values())
    # organisations' servers on one site each, and not on a root/TLD node
    assert len({p[f"server:hku{i}"] for i in range(3)}) == 1
    assert len({p[f"server:acme{i}"] for i in range(2)}) == 1
    assert p["server:hku0"] != p["server:acme0"]
    assert not {p["server:hku0"], p["server:mid0"], p["server:leaf0"]} & set(top)
    # deterministic, and independent of the order the roles are listed in
    assert place(g, roles, seed) == p
    assert place(g, list(reversed(roles)), seed) == p


def test_root_goes_to_the_far_end_of_a_line() -> None:
    g = line_graph([0.01] * 10)  # nodes 0..10, center 5
    roles = [Role("root", "root"), Role("tld", "tld"), Role("res", "resolver"),
             Role("a1", "agent", "res"), Role("a2", "agent", "res"), Role("a3", "agent", "res")]
    p = place(g, roles, 0)
    assert p["res"] == 5 and {p["a1"], p["a2"], p["a3"]} == {4, 5, 6}
    assert {p["root"], p["tld"]} == {0, 10}


def test_agents_without_resolver_and_registry() -> None:
    g = build_graph("tree", 20, CONST, 0)
    roles = [Role("res:a", "resolver"), Role("res:b", "resolver"), Role("reg", "registry"),
             Role("root", "root"), *(Role(f"ag{i}", "agent") for i in range(4))]
    p = place(g, roles, 3)
    for i in range(4):
        assert any(p[f"ag{i}"] == p[r] or g.has_edge(p[f"ag{i}"], p[r])
                   for r in ("res:a", "res:b"))
    assert p["reg"] == p["root"]  # a registry sits as far away as the root: a fair comparison


def test_random_and_same_node_strategies() -> None:
    g = build_graph("waxman", 30, JITTER, 1)
    roles = roles_for()
    r1, r2 = place(g, roles, 5, "random"), place(g, roles, 5, "random")
    assert r1 == r2 and len(set(r1.values())) > 5
    assert place(g, roles, 6, "random") != r1
    same = place(g, roles, 5, "same-node")
    assert len(set(same.values())) == 1
    pm = PathModel(g, same)
    rng = np.random.default_rng(0)
    assert pm.one_way("agent:0", "server:root1", 1500, rng) == 0.0
    assert pm.rtt_estimate("agent:0", "server:root1") == 0.0


def test_placement_errors() -> None:
    g = build_graph("star", 4, CONST, 0)
    with pytest.raises(ValueError, match="unknown placement strategy 'nearest'"):
        place(g, [], 0, strategy="nearest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="duplicate role ids"):
        place(g, [Role("x", "leaf"), Role("x", "root")], 0)
    with pytest.raises(ValueError, match="names resolver 'resolver:9'"):
        place(g, [Role("a", "agent", "resolver:9")], 0)
    with pytest.raises(ValueError, match="unknown kind 'cache'"):
        Role("x", "cache")  # type: ignore[arg-type]
    assert Role("x", "leaf", "").group is None


# --------------------------------------------------------------------------- path model


def test_same_node_is_free_and_draws_nothing() -> None:
    pm = PathModel(line_graph([0.01], loss=0.9), {"a": 0, "b": 0})
    rng, ref = np.random.default_rng(1), np.random.default_rng(1)
    assert all(pm.one_way("a", "b", 1000, rng) == 0.0 for _ in range(100))
    assert draws_left(rng) == draws_left(ref)
    assert pm.hops("a", "b") == 0 and pm.rtt_estimate("a", "b") == 0.0


def test_constant_delays_sum_along_the_path() -> None:
    g = line_graph([0.001, 0.002, 0.003, 0.004])
    pm = PathModel(g, {"src": 0, "mid": 2, "dst": 4})
    rng = np.random.default_rng(0)
    assert pm.one_way("src", "dst", 100, rng) == pytest.approx(0.010)
    assert pm.one_way("dst", "mid", 100, rng) == pytest.approx(0.007)
    assert pm.hops("src", "dst") == 4 and pm.hops("mid", "src") == 2
    assert pm.rtt_estimate("src", "dst") == pytest.approx(0.020)
    assert pm.path("dst", "src") == [4, 3, 2, 1, 0]


def test_routes_follow_the_least_mean_delay_and_are_symmetric() -> None:
    g = nx.Graph()
    g.add_edge("a", "c", link=LinkSpec(DelayModel.constant(0.050)))
    g.add_edge("a", "b", link=LinkSpec(DelayModel.constant(0.010)))
    g.add_edge("b", "c", link=LinkSpec(DelayModel.constant(0.015)))
    pm = PathModel(g, {"x": "a", "y": "c"})
    assert pm.path("x", "y") == ["a", "b", "c"] and pm.path("y", "x") == ["c", "b", "a"]
    assert pm.rtt_estimate("x", "y") == pytest.approx(0.050)


def test_half_loss_drops_about_half_and_keeps_the_stream_aligned() -> None:
    g = line_graph([0.01, 0.01, 0.01])
    g.edges[1, 2]["link"] = LinkSpec(DelayModel("normal", 0.01, 0.002), loss=0.5)
    lossy = PathModel(g, {"a": 0, "b": 3})
    clean = PathModel(line_graph([0.01, 0.01, 0.01]), {"a": 0, "b": 3})
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    got = [lossy.one_way("a", "b", 100, r1) for _ in range(10_000)]
    for _ in range(10_000):
        assert clean.one_way("a", "b", 100, r2) == pytest.approx(0.03)
    lost = sum(d is None for d in got)
    assert 4700 <= lost <= 5300  # binomial(10000, 0.5): ± 6 sigma
    assert draws_left(r1) == draws_left(r2)  # same number of draws whatever the outcome
    assert statistics.fmean(d for d in got if d is not None) == pytest.approx(0.03, rel=0.01)


def test_serialisation_delay_adds_size_over_bandwidth() -> None:
    pm = PathModel(line_graph([0.001, 0.001], bandwidth=1e6), {"a": 0, "b": 2})
    rng = np.random.default_rng(0)
    assert pm.one_way("a", "b", 0, rng) == pytest.approx(0.002)
    assert pm.one_way("a", "b", 1250, rng) == pytest.approx(0.002 + 2 * 1250 * 8 / 1e6)
    assert pm.rtt_estimate("a", "b") == pytest.approx(0.004)  # means only
    with pytest.raises(ValueError, match="size must be ≥ 0"):
        pm.one_way("a", "b", -1, rng)


def test_identical_seeds_give_identical_sequences() -> None:
    g = build_graph("waxman", 30, LinkSpec(DelayModel("lognormal", 0.008, 0.004), loss=0.05,
                                           bandwidth=1e8), 3)
    roles = roles_for()
    pm = PathModel(g, place(g, roles, 3))
    pairs = [("agent:0", "server:root1"), ("agent:3", "resolver:1"),
             ("resolver:0", "server:hku1"), ("server:tld2", "agent:5")]

    def run(seed: int) -> list[float | None]:
        rng = np.random.default_rng(seed)
        return [pm.one_way(s, d, 512, rng) for _ in range(200) for s, d in pairs]

    a = run(42)
    assert a == run(42) and a != run(43)
    assert any(x is None for x in a) and any(x for x in a)


def test_path_model_errors() -> None:
    g = line_graph([0.01])
    with pytest.raises(ValueError, match="not in the graph"):
        PathModel(g, {"a": 7})
    pm = PathModel(g, {"a": 0})
    with pytest.raises(KeyError, match="unknown role 'zz'"):
        pm.one_way("a", "zz", 10, np.random.default_rng(0))
    g.add_edge(1, 2)
    with pytest.raises(ValueError, match=r"edge \(1, 2\) has no LinkSpec"):
        PathModel(g, {"a": 0})
