"""Hostile scenario files and flags: YAML alias bombs, deep nesting, huge integers, namespaces
and networks too large to build, out-of-range seeds, oversized sweep grids. Each is one
line naming the file, the field and the problem, before any work: exit 2, nothing written.
The same checks run in ``validate``, ``run`` and ``sweep``.

The alias bombs run ``tooldns`` in a subprocess with a timeout: today's tree hangs on them
(a guard, not a timed assertion)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main as cli
from sim.errors import ScenarioError, shown
from sim.limits import check_scenario, memory_estimate
from sim.loading import load_scenario
from sim.scenario import Scenario
from sim.yamlfile import MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
SMALL = "name: x\nworkload: {queries: 5}\noutputs: {plots: false}\n"


def _bomb(levels: int = 9) -> str:
    """Billion laughs as a YAML flow sequence: 9^levels strings by expansion."""
    text = "[&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"
    for i in range(1, levels):
        text += f", &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]"
    return text + "]"


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _tooldns(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def _one_error(err: str, *words: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and all(w in lines[0] for w in words), lines[0]
    assert len(lines[0]) < 400  # no value printed unbounded
    return lines[0]


# ------------------------------------------------------------------------ YAML


def test_alias_bomb_in_the_sweep_grid_is_refused_by_validate(tmp_path: Path) -> None:
    path = _write(tmp_path, f"name: x\nsweep:\n  grid:\n    seed: {_bomb()}\n")
    done = _tooldns("validate", str(path))
    assert done.returncode == 2
    _one_error(done.stderr, str(path), "aliases expand to more than")


def test_alias_bomb_as_a_set_value_is_refused_by_run(tmp_path: Path) -> None:
    path = _write(tmp_path, SMALL)
    out = tmp_path / "out"
    done = _tooldns("run", str(path), "--out", str(out), "--set", f"sweep.grid={_bomb()}")
    assert done.returncode == 2
    _one_error(done.stderr, "--set sweep.grid", "aliases expand to more than")
    assert not out.exists()


@pytest.mark.parametrize(("text", "words"), [
    ("name: x\nsweep: {grid: {seed: &a [1, *a]}}\n", "recursive"),
    ("name: x\nsweep: {grid: {seed: " + "[" * 500 + "]" * 500 + "}}\n", "nested more than"),
    ("name: x\nseed: 1" + "0" * 5000 + "\n", "not valid YAML"),  # int() refuses > 4,300 digits
], ids=["recursive-alias", "deep-nesting", "huge-integer"])
def test_malformed_yaml_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError, match=words) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_small_aliases_still_load(tmp_path: Path) -> None:
    """Anchors for sharing (a delay block, a scheme's settings) are legitimate YAML."""
    path = _write(tmp_path, "name: x\n"
                  "network: {link: {delay: &d {dist: constant, mean: 0.004}}}\n"
                  "sweep: {grid: {network.link.delay: [*d, *d]}}\n")
    sc = load_scenario(path)
    assert sc.network.link.delay.mean == 0.004 and sc.sweep is not None


def test_oversized_and_binary_files(tmp_path: Path) -> None:
    big = _write(tmp_path, "name: x\n#" + "x" * MAX_FILE_BYTES + "\n", "big.yaml")
    with pytest.raises(ScenarioError, match="scenario files are limited"):
        load_scenario(big)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(binary)


# ------------------------------------------------------------------------ sweep grids


@pytest.mark.parametrize(("value", "words"), [
    ("[[[[1]]]]", "at most 2 deep"),
    ("[2020-01-01]", "got date"),
    ("[" + ", ".join(["1"] * 1001) + "]", "at most 1,000 items"),
], ids=["too-deep", "date", "too-many-items"])
def test_grid_values_are_typed(tmp_path: Path, value: str, words: str) -> None:
    path = _write(tmp_path, f"name: x\nsweep: {{grid: {{seed: [{value}]}}}}\n")
    with pytest.raises(ScenarioError, match=words) as info:
        load_scenario(path)
    assert "sweep.grid.seed" in str(info.value)


def test_grid_of_too_many_points_is_refused_before_expanding(tmp_path: Path) -> None:
    axes = {f"schemes.0.{f}": list(range(1, 11)) for f in ("k", "beam", "attempts")}
    axes["seed"] = list(range(20))
    grid = ", ".join(f"{k}: {v}" for k, v in axes.items())  # 10 * 10 * 10 * 20 points
    path = _write(tmp_path, f"name: x\nsweep: {{grid: {{{grid}}}}}\n")
    with pytest.raises(ScenarioError, match=r"sweep\.grid: 20,000 points; a sweep runs at most"):
        load_scenario(path)
    many = ", ".join(f"network.params.p{i}: [1]" for i in range(5000))  # one point
    path = _write(tmp_path, f"name: x\nsweep: {{grid: {{{many}}}}}\n")
    with pytest.raises(ScenarioError, match=r"sweep\.grid: 5,000 fields; a grid varies at most"):
        load_scenario(path)


def test_each_sweep_point_is_checked_like_a_file(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, SMALL + "sweep: {grid: {namespace.tools: [100, 1000000000000]}}\n")
    for command in ("validate", "sweep"):
        out = tmp_path / f"out-{command}"
        assert cli.main([command, str(path)] + (["--out", str(out)] if command == "sweep"
                                                else [])) == 2
        _one_error(capsys.readouterr().err, str(path), "point 1", "namespace.tools",
                   "more than this machine's")
        assert not out.exists()


# ------------------------------------------------------------------------ sizes and seeds


HOSTILE = [  # (file fields, the field named, the same as --set)
    ("namespace: {tools: 1000000000000}", "namespace.tools",
     ["namespace.tools=1000000000000"]),
    ("network: {agents: 100000000}", "network.agents", ["network.agents=100000000"]),
    ("namespace: {branching: 1000000, depth: 8}", "namespace.branching",
     ["namespace.branching=1000000", "namespace.depth=8"]),
    ("network: {nodes: 10000000}", "network.nodes", ["network.nodes=10000000"]),
    ("workload: {queries: 1000000000000}", "workload.queries",
     ["workload.queries=1000000000000"]),
]


@pytest.mark.parametrize(("fields", "field", "sets"), HOSTILE, ids=[f for _, f, _ in HOSTILE])
def test_too_large_to_build_is_refused_up_front(tmp_path: Path, fields: str, field: str,
                                                sets: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, f"name: x\n{fields}\noutputs: {{plots: false}}\n")
    for command in ("validate", "run"):
        out = tmp_path / f"out-{command}"
        assert cli.main([command, str(path)] + (["--out", str(out)] if command == "run"
                                                else [])) == 2
        _one_error(capsys.readouterr().err, f"{path}: {field}:", "more than this machine's")
        assert not out.exists()
    small = _write(tmp_path, SMALL, "small.yaml")  # --set takes the same check
    args = [a for s in sets for a in ("--set", s)]
    assert cli.main(["run", str(small), "--out", str(tmp_path / "o"), *args]) == 2
    _one_error(capsys.readouterr().err, f"{small}: {field}:")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("seed", ["-5", "4294967296", "100000000000000000000"])
def test_seeds_out_of_range_are_refused(tmp_path: Path, seed: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, SMALL + f"seed: {seed}\n")
    assert cli.main(["validate", str(path)]) == 2
    _one_error(capsys.readouterr().err, f"{path}: seed:")
    small = _write(tmp_path, SMALL, "small.yaml")
    out = tmp_path / "o"
    assert cli.main(["run", str(small), "--out", str(out), "--seed", seed]) == 2
    _one_error(capsys.readouterr().err, "seed")
    assert cli.main(["validate", str(_write(tmp_path, SMALL + f"sweep: {{grid: {{seed: [1, "
                                            f"{seed}]}}}}\n", "sw.yaml"))]) == 2
    _one_error(capsys.readouterr().err, "sweep.grid.seed")
    assert not out.exists()


def test_largest_valid_seed_and_shipped_scenarios_pass() -> None:
    Scenario.model_validate({"name": "x", "seed": 2**32 - 1})
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(path)
        check_scenario(sc, str(path), memory=8 * 2**30)  # each fits a small machine


def test_memory_estimate_grows_with_what_is_built() -> None:
    base = Scenario.model_validate({"name": "x"})
    more = base.with_overrides({"namespace.tools": 20_000, "network.agents": 400})
    small, large = memory_estimate(base), memory_estimate(more)
    assert large["namespace.tools"][0] > 9 * small["namespace.tools"][0]  # + org tools
    assert large["network.agents"][0] == 100 * small["network.agents"][0]
    with pytest.raises(ScenarioError, match=r"^here: namespace\.tools: .* more than"):
        check_scenario(base, "here", memory=1)


def test_shown_is_bounded() -> None:
    laughs: object = ["lol"] * 9
    for _ in range(30):  # 9^30 strings by expansion, 30 list objects in memory
        laughs = [laughs] * 9
    assert len(shown(laughs)) < 100
    assert "digits" in shown(10**5000) and len(shown("x" * 10**6)) < 100


@pytest.mark.parametrize("command", ["serve", "export-zones"])
@pytest.mark.parametrize(("flags", "problem"), [
    (["--tools", str(10**12)], r"--tools: 1e\+12 tools .* more than this machine's"),
    (["--branching", str(10**6), "--depth", "8"], r"--branching/--depth: .* zones would need"),
    (["--seed", "-5"], r"--seed -5: must be 0\.\.4294967295"),
    (["--seed", str(10**20)], r"--seed 1\d+: must be"),
    (["--depth", "9"], r"--depth 9: must be 1\.\.8"),
    (["--replicas", "0"], r"--replicas 0: must be 1\.\.8"),
])
def test_serve_and_export_flags_are_checked_before_building(
        command: str, flags: list[str], problem: str, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "zones"
    argv = [command, *([str(out)] if command == "export-zones" else []), *flags]
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert re.search(problem, line), line
    assert not out.exists()


def test_eval_files_are_read_with_the_bounded_loader(tmp_path: Path) -> None:
    from sim.evalspec import load_eval

    path = _write(tmp_path, f"name: x\nmethods: {_bomb()}\n", "e.yaml")
    with pytest.raises(ScenarioError, match=r"e\.yaml: .*alias"):
        load_eval(path)
