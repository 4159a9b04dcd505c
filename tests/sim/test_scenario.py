"""Scenario files: malformed files fail early and clearly (loader and CLI), valid ones load
with defaults, resolve relative paths, round-trip through ``resolved_yaml`` and take dotted
overrides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sim.cli import main as cli
from sim.errors import ScenarioError
from sim.loading import load_scenario, resolved_yaml
from sim.scenario import NamespaceSpec, Scenario
from sim.schemes import DnsScheme

ROOT = Path(__file__).resolve().parents[2]

# (id, file text, field named in the message, words of the problem description)
MALFORMED = [
    ("yaml-syntax", "name: x\nseed: [1, 2\nengine: simpy\n", "line 3", "not valid yaml"),
    ("yaml-tab", "name: x\n\tseed: 1\n", "line 2", "not valid yaml"),
    ("top-level-list", "- name: x\n- seed: 1\n", "(top level)", "mapping"),
    ("top-level-scalar", "just a string\n", "(top level)", "mapping"),
    ("empty-file", "", "(top level)", "empty"),
    ("missing-name", "seed: 1\n", "name", "required"),
    ("unknown-top-level", "name: x\nseeed: 1\n", "seeed", "unknown field"),
    ("unknown-nested", "name: x\nnamespace: {branchng: 3}\n", "namespace.branchng",
     "unknown field"),
    ("unknown-deep", "name: x\nnetwork: {link: {delay: {jitter: 0.1}}}\n",
     "network.link.delay.jitter", "unknown field"),
    ("seed-not-int", "name: x\nseed: abc\n", "seed", "valid integer"),
    ("tools-negative", "name: x\nnamespace: {tools: -5}\n", "namespace.tools",
     "greater than or equal to 1"),
    ("depth-too-deep", "name: x\nnamespace: {depth: 9}\n", "namespace.depth", "less than"),
    ("loss-above-one", "name: x\nnetwork: {link: {loss: 1.5}}\n", "network.link.loss",
     "less than 1"),
    ("bandwidth-zero", "name: x\nnetwork: {link: {bandwidth: 0}}\n", "network.link.bandwidth",
     "greater than 0"),
    ("topology-unknown", "name: x\nnetwork: {topology: ring}\n", "network.topology", "'star'"),
    ("schemes-mapping", "name: x\nschemes: {}\n", "schemes", "valid tuple"),
    ("schemes-empty", "name: x\nschemes: []\n", "schemes", "at least one scheme"),
    ("schemes-duplicate", "name: x\nschemes: [{name: a}, {name: b}, {name: a}]\n", "schemes",
     "unique"),
    ("scheme-without-name", "name: x\nschemes: [{k: 3}]\n", "schemes.0.name", "required"),
    ("scheme-k-300", "name: x\nschemes: [{name: a}, {name: b, k: 300}]\n", "schemes.1.k",
     "less than or equal to 255"),
    ("scheme-mode", "name: x\nschemes: [{name: a, mode: magic}]\n", "schemes.0.mode", "'aware'"),
    ("scheme-unknown-key", "name: x\nschemes: [{name: a, kk: 3}]\n", "schemes.0.kk",
     "unknown field"),
    ("arrival-process", "name: x\nworkload: {arrival: {process: burst}}\n",
     "workload.arrival.process", "'poisson'"),
    ("arrival-rate-zero", "name: x\nworkload: {arrival: {rate: 0}}\n", "workload.arrival.rate",
     "greater than 0"),
    ("queries-zero", "name: x\nworkload: {queries: 0}\n", "workload.queries", "greater than"),
    ("empirical-without-samples", "name: x\nnetwork: {link: {delay: {dist: empirical}}}\n",
     "network.link.delay", "samples"),
    ("negative-delay", "name: x\nnetwork: {link: {delay: {mean: -0.1}}}\n",
     "network.link.delay.mean", "greater than or equal to 0"),
    ("catalog-without-path", "name: x\nnamespace: {source: catalog}\n", "namespace.catalog",
     "needed when source is 'catalog'"),
    ("catalog-not-found", "name: x\nnamespace: {source: catalog, catalog: nowhere.jsonl}\n",
     "namespace.catalog", "file not found"),
    ("topology-file-without-file", "name: x\nnetwork: {topology: file}\n", "network.file",
     "needed when topology is 'file'"),
    ("topology-file-not-found", "name: x\nnetwork: {topology: file, file: net.gml}\n",
     "network.file", "file not found"),
    ("trace-without-trace", "name: x\nworkload: {arrival: {process: trace}}\n",
     "workload.arrival.trace", "needed when process is 'trace'"),
    ("trace-not-found", "name: x\nworkload: {arrival: {process: trace, trace: t.csv}}\n",
     "workload.arrival.trace", "file not found"),
    ("trust-org-without-org", "name: x\ntrust: {policy: org}\n", "trust.org",
     "needed when policy is 'org'"),
    ("duplicate-key", "name: x\nseed: 1\nseed: 2\n", "line 3", "duplicate key 'seed'"),
    ("engine-unknown", "name: x\nengine: ns3\n", "engine", "'ray' or 'mininet'"),
    ("ray-placement", "name: x\nengine_options: {ray: {placement: zone}}\n",
     "engine_options.ray.placement", "'level', 'org' or 'count'"),
    ("name-with-spaces", "name: my scenario\n", "name", "pattern"),
    ("sweep-grid-empty", "name: x\nsweep: {grid: {}}\n", "sweep.grid", "empty"),
    ("sweep-grid-no-values", "name: x\nsweep: {grid: {namespace.depth: []}}\n", "sweep.grid",
     "no values"),
    ("sweep-grid-not-list", "name: x\nsweep: {grid: {namespace.depth: 2}}\n",
     "sweep.grid.namespace.depth", "valid list"),
    ("sweep-grid-unknown-field", "name: x\nsweep: {grid: {namespace.nope: [1, 2]}}\n",
     "sweep.grid.namespace.nope", "not a field"),
    ("sweep-grid-wrong-type", "name: x\nsweep: {grid: {namespace.branching: [abc, 4]}}\n",
     "sweep.grid.namespace.branching", "valid integer"),
    ("sweep-grid-out-of-range", "name: x\nsweep: {grid: {namespace.depth: [0]}}\n",
     "sweep.grid.namespace.depth", "greater than or equal to 1"),
    ("sweep-workers-zero", "name: x\nsweep: {grid: {seed: [1]}, workers: 0}\n",
     "sweep.workers", "greater than or equal to 1"),
    ("sweep-without-grid", "name: x\nsweep: {workers: 2}\n", "sweep.grid", "required"),
]
IDS = [case[0] for case in MALFORMED]


def _write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.mark.parametrize(("case", "text", "where", "problem"), MALFORMED, ids=IDS)
def test_malformed_scenario_is_rejected_with_file_field_and_problem(
        tmp_path: Path, case: str, text: str, where: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    assert f": {where}" in message
    assert problem.lower() in message.lower()
    assert "Traceback" not in message and "pydantic.dev" not in message


@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize(("case", "text", "where", "problem"), MALFORMED, ids=IDS)
def test_malformed_scenario_cli_exits_2_with_one_error_and_no_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str, text: str,
        where: str, problem: str) -> None:
    path = _write(tmp_path, text)
    out = tmp_path / "out"
    assert cli.main([command, str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    printed = _flat(captured.out + captured.err)
    assert printed.count("error:") == 1
    assert str(path) in printed and where in printed and problem.lower() in printed.lower()
    assert "Traceback" not in printed
    assert not out.exists() or not any(out.iterdir())


def test_cli_entry_point_exit_code_and_message(tmp_path: Path) -> None:
    """The real command line (a fresh interpreter), once."""
    path = _write(tmp_path, "name: x\nnamespace: {branchng: 3}\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(path), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    printed = _flat(proc.stdout + proc.stderr)
    assert printed.count("error:") == 1
    assert str(path) in printed and "namespace.branchng: unknown field" in printed
    assert "Traceback" not in printed
    assert not out.exists()


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "absent.yaml")


def test_every_problem_is_reported_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nseed: abc\nnamespace: {branchng: 3, tools: 0}\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    lines = str(info.value).splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"{path}: ") for line in lines)
    assert {line.split(": ")[1] for line in lines} == {"seed", "namespace.branchng",
                                                       "namespace.tools"}


def test_sweep_grid_wrong_type_in_a_later_value_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nsweep: {grid: {namespace.branching: [2, abc]}}\n")
    with pytest.raises(ScenarioError, match=r"sweep\.grid\.namespace\.branching"):
        load_scenario(path)


def test_sweep_cli_rejects_a_later_bad_grid_value(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`tooldns sweep` validates every point itself before running anything."""
    path = _write(tmp_path, "name: x\nsweep: {grid: {namespace.branching: [2, abc]}}\n")
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--out", str(out)]) == 2
    printed = _flat(capsys.readouterr().err)  # errors go to stderr
    assert printed.count("error:") == 1
    assert str(path) in printed and "sweep.grid" in printed and "namespace.branching" in printed
    assert "valid integer" in printed
    assert not out.exists()


def test_sweep_cli_needs_a_sweep_section(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "name: plain\n")
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--out", str(out)]) == 2
    printed = _flat(capsys.readouterr().err)  # errors go to stderr
    assert printed.count("error:") == 1
    assert f"{path}: sweep:" in printed and "no sweep section" in printed
    assert not out.exists()


# ---------------------------------------------------------------------------- valid files


def test_minimal_scenario_loads_with_defaults(tmp_path: Path) -> None:
    sc = load_scenario(_write(tmp_path, "name: minimal\n"))
    assert sc == Scenario(name="minimal")
    assert sc.engine == "simpy" and sc.seed == 0 and sc.description == ""
    assert sc.namespace == NamespaceSpec()
    assert sc.namespace.source == "synthetic" and sc.namespace.tools == 2000
    assert sc.schemes == (DnsScheme(name="tooldns"),)
    assert sc.schemes[0].k == 3 and sc.schemes[0].mode == "aware"
    assert sc.network.topology == "star" and sc.network.link.loss == 0.0
    assert sc.workload.arrival.process == "poisson" and sc.trust.policy == "open"
    assert sc.outputs.plots is True and sc.outputs.dir is None and sc.sweep is None


def test_scenarios_are_frozen() -> None:
    sc = Scenario(name="x")
    with pytest.raises(ValidationError):
        sc.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml")))
def test_shipped_scenarios_load_and_round_trip(tmp_path: Path, name: str) -> None:
    sc = load_scenario(ROOT / "scenarios" / name)
    again = load_scenario(_write(tmp_path, resolved_yaml(sc)))
    assert again == sc
    assert resolved_yaml(again) == resolved_yaml(sc)


def test_resolved_yaml_round_trips_with_paths_and_sweep(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "catalog.jsonl").write_text("", encoding="utf-8")
    text = ("name: full\nseed: 5\nnamespace: {source: catalog, catalog: data/catalog.jsonl, "
            "protocols: [mcp, a2a]}\nnetwork: {params: {alpha: 0.4}, link: {delay: "
            "{dist: empirical, samples: [0.001, 0.002]}}}\nschemes: [{name: a, k: 1}, "
            "{name: b, beam: 2}]\nworkload: {services: [mcp]}\ntrust: {policy: org, org: hku}\n"
            "sweep: {grid: {schemes.0.k: [1, 2], seed: [1, 2, 3]}, workers: 3}\n")
    sc = load_scenario(_write(tmp_path, text))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = load_scenario(_write(elsewhere, resolved_yaml(sc)))
    assert again == sc
    assert again.sweep is not None and list(again.sweep.grid) == ["schemes.0.k", "seed"]
    assert again.namespace.protocols == ("mcp", "a2a")


def test_relative_paths_resolve_against_the_scenario_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "scenarios" / "sub"
    (folder / "data").mkdir(parents=True)
    (tmp_path / "nets").mkdir()
    for f in (folder / "data" / "catalog.jsonl", folder / "data" / "queries.jsonl",
              tmp_path / "nets" / "net.gml", folder / "trace.csv"):
        f.write_text("", encoding="utf-8")
    absolute = tmp_path / "nets" / "net.gml"
    path = _write(folder, "name: paths\n"
                          "namespace: {source: catalog, catalog: data/catalog.jsonl, "
                          "queries: ./data/queries.jsonl}\n"
                          f"network: {{topology: file, file: {absolute}}}\n"
                          "workload: {arrival: {process: trace, trace: trace.csv}}\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sc = load_scenario(os.path.relpath(path, elsewhere))
    assert Path(sc.namespace.catalog or "") == folder.resolve() / "data" / "catalog.jsonl"
    assert Path(sc.namespace.queries or "").resolve() == (folder / "data" / "queries.jsonl"
                                                          ).resolve()
    assert Path(sc.network.file or "") == absolute
    assert Path(sc.workload.arrival.trace or "") == folder.resolve() / "trace.csv"
    assert all(Path(p).is_absolute() for p in (sc.namespace.catalog, sc.namespace.queries,
                                               sc.network.file, sc.workload.arrival.trace))


def test_relative_path_missing_beside_the_scenario_even_if_present_in_cwd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "scn"
    folder.mkdir()
    (tmp_path / "catalog.jsonl").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    path = _write(folder, "name: x\nnamespace: {source: catalog, catalog: catalog.jsonl}\n")
    with pytest.raises(ScenarioError, match=r"namespace\.catalog: file not found"):
        load_scenario(path)


# ---------------------------------------------------------------------------- overrides


def test_with_overrides_replaces_dotted_fields_and_validates() -> None:
    sc = Scenario(name="x", schemes=(DnsScheme(name="a"), DnsScheme(name="b", k=5)))
    new = sc.with_overrides({"namespace.branching": 4, "schemes.0.k": 1,
                             "workload.arrival.rate": 2.5, "seed": 9, "name": "y"})
    assert new.namespace.branching == 4 and new.schemes[0].k == 1 and new.schemes[1].k == 5
    assert new.workload.arrival.rate == 2.5 and new.seed == 9 and new.name == "y"
    assert sc.namespace.branching == 6 and sc.schemes[0].k == 3 and sc.seed == 0  # unchanged
    assert sc.with_overrides({}) == sc
    assert new.namespace.depth == sc.namespace.depth  # untouched siblings kept
    whole = sc.with_overrides({"namespace": {"tools": 50}})
    assert whole.namespace == NamespaceSpec(tools=50)


@pytest.mark.parametrize("dotted", ["nope", "namespace.nope", "namespace.tools.x",
                                    "schemes.0.nope", "seed.x", "sweep.grid"])
def test_with_overrides_rejects_unknown_fields(dotted: str) -> None:
    with pytest.raises(ValueError, match="not a field"):
        Scenario(name="x").with_overrides({dotted: 1})


@pytest.mark.parametrize(("dotted", "value"), [("namespace.branching", 0),
                                               ("schemes.0.mode", "magic"),
                                               ("network.link.loss", 1.5),
                                               ("engine", "ns3")])
def test_with_overrides_rejects_invalid_values(dotted: str, value: object) -> None:
    with pytest.raises(ValidationError):
        Scenario(name="x").with_overrides({dotted: value})


def test_with_overrides_rejects_an_index_out_of_range() -> None:
    with pytest.raises(ValueError, match="not a field"):
        Scenario(name="x").with_overrides({"schemes.3.k": 1})
