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


# ------------------------------------------------------------------------ values that reached work
# (issue 45: each was accepted and then built, drawn, run or printed before anything said no)


def _tooldns_bounded(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``tooldns`` in a subprocess held to 4 GiB of address space and ``timeout`` seconds:
    on a tree without the check these runs draw, build or wait without end."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    try:
        return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tooldns {' '.join(args)}: no answer within {timeout} s")


def test_org_tools_count_as_tools_and_are_named(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``namespace.org_tools`` is per organisation: 10^7 of them in 3 organisations are
    3·10^7 tools, named as the field that asks for them."""
    sc = Scenario.model_validate({"name": "x", "namespace": {"org_tools": 10_000_000}})
    with pytest.raises(ScenarioError, match=r"^here: namespace\.org_tools: 3e\+07 tools in 3 "
                                            r"organisations .* more than"):
        check_scenario(sc, "here", memory=16 * 2**30)
    monkeypatch.setattr("sim.limits.physical_memory", lambda: 16 * 2**30)  # a 16 GiB machine
    path = _write(tmp_path, "name: x\nnamespace: {org_tools: 10000000}\n")
    for command in ("validate", "run"):
        out = tmp_path / f"out-{command}"
        assert cli.main([command, str(path)] + (["--out", str(out)] if command == "run"
                                                else [])) == 2
        _one_error(capsys.readouterr().err, f"{path}: namespace.org_tools:", "organisations")
        assert not out.exists()


def test_validate_builds_no_namespace_larger_than_it_would_for_tools(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine with the memory for it, 10^7 tools of one organisation is a valid file;
    validate leaves building it to the run, as it does for 10^7 ``namespace.tools``
    (it built it: 7 minutes and 2.9 GB before answering)."""
    import sim.build.namespace

    def built(*_: object) -> None:
        raise AssertionError("validate built the namespace")

    monkeypatch.setattr(sim.build.namespace, "build_namespace", built)
    monkeypatch.setattr("sim.limits.physical_memory", lambda: 2**40)
    monkeypatch.setattr("sim.limits.available_memory", lambda: 2**40)
    path = _write(tmp_path, "name: x\nnamespace: {orgs: 1, org_tools: 10000000}\n")
    assert cli.main(["validate", str(path)]) == 0
    assert f"{path}: ok" in capsys.readouterr().out


RATE_DOWN = "{kind: down, target: servers, rate: 1, duration: 1}"


@pytest.mark.parametrize(("faults", "field"), [
    (f"{{events: [{RATE_DOWN}], horizon: 1e12}}", "faults.horizon"),
    ("{events: [{kind: down, target: 'zone:tools.', rate: 1000000, duration: 1e-6}]}",
     "faults.events.0.rate"),
], ids=["horizon", "rate"])
def test_random_faults_are_bounded_before_drawing(tmp_path: Path, faults: str,
                                                  field: str) -> None:
    """A random fault process is drawn up front, interval by interval, up to the horizon
    (``faults.horizon: 1e12``: 2.3 GB in 40 s, then more): the expected number of failure
    intervals (rate × (horizon − at) × targets, each cycle a wait and a failure) is bounded
    before anything is drawn, in validate and run alike."""
    path = _write(tmp_path, f"name: x\nworkload: {{queries: 5}}\nfaults: {faults}\n"
                            f"outputs: {{plots: false}}\n")
    done = _tooldns_bounded("validate", str(path))
    assert done.returncode == 2, done.stderr
    _one_error(done.stderr, f"{path}: {field}:", "failure intervals")
    out = tmp_path / "out"
    done = _tooldns_bounded("run", str(path), "--out", str(out))
    assert done.returncode == 2, done.stderr
    _one_error(done.stderr, f"{path}: {field}:", "failure intervals")
    assert not out.exists()


def test_fault_plan_refuses_before_drawing() -> None:
    """The build's own bound counts the selector's real targets (here 200 servers)."""
    from sim.build.faults import Nodes, build_fault_plan
    from sim.faultspec import FaultsSpec

    servers = {f"z{i}.tools.": [f"10.0.{i // 200}.{i % 200}"] for i in range(200)}
    nodes = Nodes(servers, dict.fromkeys((a for v in servers.values() for a in v), "leaf"),
                  dict.fromkeys(a for v in servers.values() for a in v))
    spec = FaultsSpec.model_validate({"events": [{"kind": "down", "target": "servers",
                                                  "rate": 10, "duration": 0.1}]})
    with pytest.raises(ScenarioError, match=r"^faults\.events\.0\.rate: .* 200 targets .* "
                                            r"failure intervals"):
        build_fault_plan(spec, nodes, 0, horizon=10_000.0)  # 10^7 intervals expected
    assert build_fault_plan(spec, nodes, 0, horizon=20.0).intervals  # 10^4: drawn


@pytest.mark.parametrize(("workload", "field"), [
    ("{queries: 10, arrival: {process: closed, think: 1e9}}", "workload.arrival.think"),
    ("{queries: 10, phases: 2, gap: 1e9}", "workload.gap"),
    ("{queries: 200000, arrival: {rate: 1}}", "workload.arrival.rate"),  # 56 h
], ids=["think", "gap", "rate"])
def test_real_time_runs_are_bounded(tmp_path: Path, workload: str, field: str) -> None:
    """A real-time engine waits out the workload's times on the wall clock: ``think: 1e9``
    on live validated, then hung (and left its staging folder). A run on live, ray or
    mininet whose workload would last over a day is refused, naming the field; the
    simulation runs the same file in virtual time."""
    text = f"name: x\nworkload: {workload}\noutputs: {{plots: false}}\n"
    path = _write(tmp_path, text + "engine: live\n")
    done = _tooldns_bounded("validate", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    _one_error(done.stderr, f"{path}: {field}:", "real time", "24 h")
    out = tmp_path / "out"
    done = _tooldns_bounded("run", str(path), "--out", str(out))
    assert done.returncode == 2, done.stderr
    _one_error(done.stderr, f"{path}: {field}:", "real time")
    assert not out.exists()
    simulated = _write(tmp_path, text, "simpy.yaml")  # virtual time: valid
    done = _tooldns_bounded("validate", str(simulated))
    assert done.returncode == 0, done.stderr
    done = _tooldns_bounded("run", str(simulated), "--engine", "live", "--out", str(out))
    assert done.returncode == 2, done.stderr  # --engine makes it real time
    _one_error(done.stderr, f"{simulated}: {field}:", "real time")


@pytest.mark.parametrize("value", ["/tmp/x\\0y", "out\\nnext\\e[31mred", "out\\tx", "a\\x7fb",
                                   "a\\x9bb"], ids=["nul", "newline-esc", "tab", "del", "c1"])
def test_control_characters_in_outputs_dir_are_refused(tmp_path: Path, value: str,
                                                       capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """NUL in ``outputs.dir`` simulated, then a traceback; newline and ESC were printed raw
    to the terminal (``results written to ...``). Refused before any work, and the value
    shown escaped."""
    path = _write(tmp_path, f'name: x\nworkload: {{queries: 5}}\noutputs: {{dir: "{value}"}}\n')
    monkeypatch.chdir(tmp_path)  # outputs.dir is relative to where tooldns runs
    for command in ("validate", "run"):
        assert cli.main([command, str(path)]) == 2
        err = capsys.readouterr().err
        line = _one_error(err, f"{path}: outputs.dir:", "control character")
        assert "\\x" in line or "\\n" in line or "\\t" in line or "\\0" in line
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", err), repr(err)
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]  # nothing written


@pytest.mark.parametrize("command", ["run", "sweep", "eval"])
def test_control_characters_in_out_are_refused(tmp_path: Path, command: str,
                                               capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, SMALL + ("sweep: {grid: {seed: [1]}}\n" if command == "sweep"
                                     else ""))
    if command == "eval":
        path = _write(tmp_path, "name: x\ndataset: {source: synthetic, tools: 60, "
                                "branching: 3, depth: 2}\nmethods: [flat:bm25]\n", "e.yaml")
    out = tmp_path / "a\x1b[2Jb\nc"
    assert cli.main([command, str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    _one_error(err, "--out", "control character", "\\x1b")
    assert "\x1b" not in err
    assert not out.exists() and not (tmp_path / "a\x1b[2Jb").exists()


def test_messages_never_print_raw_control_characters(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """A file whose name carries ESC sequences: its errors show them escaped."""
    path = _write(tmp_path, "name: x\nengin: simpy\n", "s\x1b[31m.yaml")
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "s\\x1b[31m.yaml: engin: unknown field" in err


def test_fault_duration_that_looks_like_milliseconds(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """``duration: 30000`` (8 hours; 30 s meant) is a unit mistake like a 30,000 s delay:
    an error unless written with a unit or --allow-units."""
    fault = "{kind: down, target: servers, at: 1, duration: %s}"
    path = _write(tmp_path, SMALL + f"faults: {{events: [{fault % '30000'}]}}\n")
    assert cli.main(["validate", str(path)]) == 2
    _one_error(capsys.readouterr().err, f"{path}: faults.events.0.duration:",
               "looks like milliseconds", "--allow-units")
    assert cli.main(["validate", "--allow-units", str(path)]) == 0
    assert "faults.events.0.duration" in capsys.readouterr().err
    assert cli.main(["validate", str(_write(tmp_path, SMALL + "faults: {events: ["
                                            f"{fault % '30000s'}]}}\n", "unit.yaml"))]) == 0
    rate = "{kind: down, target: servers, rate: 0.001, duration: 20000}"
    assert cli.main(["validate", str(_write(tmp_path, SMALL + f"faults: {{events: [{rate}]}}\n",
                                            "rate.yaml"))]) == 2
    assert "faults.events.0.duration" in capsys.readouterr().err
