"""The command line as researchers use it: conventions (version, no abbreviations, errors on
stderr, fast help), scenario overrides (--seed, --set, --show-config), validate and schema,
progress callbacks, provenance, agent timeouts from the scenario, busy ports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from sim.cli import common
from sim.cli import main as cli
from sim.loading import load_scenario
from sim.provenance import deterministic_summary
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from sim.schema import json_schema, markdown_reference

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))

SMALL = {
    "name": "cli-small", "seed": 4,
    "namespace": {"tools": 120, "branching": 3, "depth": 2, "orgs": 1},
    "network": {"topology": "star", "nodes": 6, "agents": 2,
                "link": {"delay": {"mean": 0.002}}},
    "schemes": [{"name": "tooldns", "k": 2}, {"name": "nocache", "k": 2, "cache": False}],
    "workload": {"queries": 30, "arrival": {"rate": 50.0}},
    "outputs": {"plots": False},
}


def _file(tmp_path: Path, data: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _tooldns(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_version_and_help_conventions() -> None:
    done = _tooldns("--version")
    assert done.returncode == 0 and done.stdout.startswith("tooldns ")
    done = _tooldns("run", "--help")
    assert done.returncode == 0
    assert "(default: " in done.stdout  # defaults shown
    assert "--set FIELD=VALUE" in done.stdout and "--show-config" in done.stdout
    for args in (["run", "scenarios/quickstart.yaml", "--engin", "live"],  # no abbreviations
                 ["serve", "--scorer", "foo"]):  # bad choice: usage error, no traceback
        done = _tooldns(*args)
        assert done.returncode == 2, args
        assert done.stdout == "" and "error:" in done.stderr and "Traceback" not in done.stderr


def test_help_imports_nothing_heavy() -> None:
    """`tooldns --help` must not import the scorers, pandas or the engines."""
    code = ("import sys\nfrom sim.cli.main import build_parser\n"
            "for argv in (['--help'], ['run', '--help'], ['serve', '--help']):\n"
            "    try:\n        build_parser().parse_args(argv)\n"
            "    except SystemExit:\n        pass\n"
            "heavy = [m for m in ('sklearn', 'pandas', 'numpy', 'simpy', 'dnslib', 'torch', "
            "'matplotlib', 'rich') if m in sys.modules]\n"
            "print(repr(heavy), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"


def test_option_defaults_agree_with_the_nodes() -> None:
    from nodes.dns.wire import DEFAULT_OPTION_CODE

    assert common.DEFAULT_OPTION_CODE == DEFAULT_OPTION_CODE


def test_show_config_applies_seed_and_set(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _file(tmp_path, SMALL)
    assert cli.main(["run", str(path), "--show-config", "--seed", "11", "--set",
                     "schemes.nocache.k=5", "--set", "network.link.delay.mean=0.02",
                     "--set", "agents.timeout=1.5"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["seed"] == 11
    assert [s["k"] for s in shown["schemes"]] == [2, 5]  # a scheme addressed by its name
    assert shown["network"]["link"]["delay"]["mean"] == 0.02
    assert shown["agents"] == {"timeout": 1.5, "attempts": 2, "session": None}
    assert not (tmp_path / "results").exists()
    # what is shown runs as it is: the same scenario when loaded back
    again = load_scenario(_file(tmp_path, shown, "shown.yaml"))
    assert again.seed == 11


@pytest.mark.parametrize(("setting", "expected"), [
    ("namespace.tols=5", "did you mean 'tools'?"),
    ("schemes.tooldsn.k=1", "did you mean 'tooldns'?"),
    ("namespace.tools=-1", "greater than or equal to 1"),
    ("engine=simpyy", "did you mean 'simpy'?"),
    ("namespace.tools", "expected FIELD=VALUE"),
])
def test_bad_set_is_one_clear_error_on_stderr(tmp_path: Path, setting: str, expected: str,
                                              capsys: pytest.CaptureFixture) -> None:
    path = _file(tmp_path, SMALL)
    assert cli.main(["run", str(path), "--set", setting, "--out", str(tmp_path / "o")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert expected in err and "--set" in err
    assert str(path) in err or "FIELD=VALUE" in expected  # a malformed option names no file
    assert not (tmp_path / "o").exists()


def test_unknown_keys_suggest_the_field(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = {**SMALL, "engin": "simpy", "network": {"link": {"delay": {"mean": 0.01,
                                                                      "dsit": "normal"}}},
           "schemes": [{"name": "a", "tiemout": 1.0, "kind": "tooldsn"}]}
    path = _file(tmp_path, bad)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "engin: unknown field (did you mean 'engine'?)" in err
    assert "network.link.delay.dsit: unknown field (did you mean 'dist'?)" in err
    assert "schemes.0.tiemout: unknown field (did you mean 'timeout'?)" in err
    assert "schemes.0.kind:" in err and "did you mean 'tooldns'?" in err


def test_validate_warns_about_units(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ms = {**SMALL, "network": {**SMALL["network"], "link": {"delay": {"mean": 10}}}}
    path = _file(tmp_path, ms)
    assert cli.main(["validate", "--allow-units", str(path)]) == 0  # valid: warnings only
    out, err = capsys.readouterr()
    assert f"{path}: ok" in out
    assert "network.link.delay.mean: 10 s one-way per link" in err
    assert cli.main(["validate", "--allow-units", "--strict", str(path)]) == 1
    capsys.readouterr()
    assert cli.main(["validate", *map(str, SCENARIOS)]) == 0
    out, err = capsys.readouterr()
    assert out.count(": ok (") == len(SCENARIOS) and "warning" not in err


def test_schema_validates_every_shipped_scenario() -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in SCENARIOS:
        jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "engin": "simpy"}, schema)
    assert "seconds" in json.dumps(schema["$defs"]["DelaySpec"])


def test_field_reference_in_docs_is_generated() -> None:
    """docs/*-reference.md are `tooldns schema --markdown [--eval]`: regenerate on change."""
    for kind, name in (("scenario", "scenario-reference.md"), ("eval", "eval-reference.md")):
        committed = (ROOT / "docs" / name).read_text(encoding="utf-8")
        assert committed == markdown_reference(kind) + "\n", (
            f"docs/{name} is stale: python3 -m sim.cli schema --markdown"
            f"{' --eval' if kind == 'eval' else ''} > docs/{name}")
    ref = markdown_reference()
    assert "| `mean` | float | `0.01` | ≥ 0 | seconds (0.010 = 10 ms) |" in ref
    assert "| `timeout` | float | `5.0` | > 0 | seconds an agent waits" in ref


def test_run_progress_and_provenance(tmp_path: Path) -> None:
    sc = Scenario.model_validate(SMALL)
    ticks: dict[str, list[tuple[int, int]]] = {}
    run_scenario(sc, out_dir=tmp_path / "a",
                 tick=lambda s, done, total: ticks.setdefault(s, []).append((done, total)))
    assert set(ticks) == {"tooldns", "nocache"}
    for seen in ticks.values():
        assert [d for d, _ in seen] == list(range(1, 31)) and {t for _, t in seen} == {30}
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    prov = summary["provenance"]
    assert list(summary)[-1] == "provenance"
    for key in ("tooldns", "git_commit", "python", "platform", "cpus", "started_utc",
                "finished_utc", "wall_s", "argv"):
        assert key in prov
    run_scenario(sc, out_dir=tmp_path / "b")
    assert deterministic_summary(tmp_path / "a") == deterministic_summary(tmp_path / "b")


def test_agent_timeout_comes_from_the_scenario(tmp_path: Path) -> None:
    """At 20 % loss the agents' retry timer bounds the tail: 0.6 s × 4 instead of 5 s × 2."""
    lossy = {**SMALL, "network": {**SMALL["network"], "link": {
        "delay": {"mean": 0.002}, "loss": 0.2}}, "schemes": [{"name": "tooldns", "k": 2}],
        "workload": {"queries": 80, "arrival": {"rate": 50.0}}}
    slow = run_scenario(Scenario.model_validate(lossy), write=False).records
    fast = run_scenario(Scenario.model_validate(
        {**lossy, "agents": {"timeout": 0.6, "attempts": 4}}), write=False).records
    assert slow.latency_ms.max() >= 5000  # an agent retried after the default 5 s
    assert fast.latency_ms.max() < 4 * 600 + 100  # four tries 0.6 s apart at most
    assert fast.success.mean() >= slow.success.mean()


def test_busy_port_names_the_address(capsys: pytest.CaptureFixture) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.53.1", 0))
        port = taken.getsockname()[1]
        assert cli.main(["serve", "--tools", "30", "--port", str(port), "--duration",
                         "1"]) == 1
    err = capsys.readouterr().err
    assert f"127.0.53.1:{port}/udp" in err and "in use" in err and "Traceback" not in err


def test_every_tooldns_command_in_the_readme_parses() -> None:
    """README commands use options that exist (no abbreviations, right choices)."""
    import re
    import shlex

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|\|", line.split(" #")[0]):
                part = part.split(">")[0].strip()
                if part.startswith("tooldns "):
                    lines.append(part)
    assert len(lines) >= 5
    parser = cli.build_parser()
    for line in lines:
        argv = shlex.split(line)[1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # argparse's error exit (0: --help or --version)
            if exc.code == 0:
                continue
            raise AssertionError(f"README: {line!r} does not parse") from exc


def test_quiet_and_verbose(tmp_path: Path) -> None:
    """-q: no progress lines; -v: log lines (what was built, each scheme's time)."""
    path = _file(tmp_path, SMALL)
    quiet = _tooldns("run", str(path), "--out", str(tmp_path / "q"), "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert "results written to" in quiet.stdout
    loud = _tooldns("-v", "run", str(path), "--out", str(tmp_path / "v"))
    assert loud.returncode == 0
    assert "scheme tooldns on simpy (30 queries)" in loud.stderr  # progress
    assert "tooldns.run INFO scheme nocache on simpy: 30 of 30 discoveries" in loud.stderr


# ------------------------------------------------------------------------ issue 45


def test_little_free_space_is_one_warning_line(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The output check's warning was printed ``warning: warning: ...``."""
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10**9, 0, 3_000_000))
    small = {**SMALL, "workload": {"queries": 5}, "schemes": SMALL["schemes"][:1]}
    path, out = _file(tmp_path, small), tmp_path / "out"
    assert cli.main(["run", str(path), "--out", str(out), "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert "warning: warning" not in err
    (line,) = [x for x in err.splitlines() if "little free space" in x]
    assert line.startswith(f"warning: {out}: little free space")
    sweep = _file(tmp_path, {**small, "sweep": {"grid": {"seed": [1]}}}, "sweep.yaml")
    assert cli.main(["sweep", str(sweep), "--out", str(tmp_path / "sw"), "--format",
                     "csv"]) == 0
    err = capsys.readouterr().err
    assert "warning: warning" not in err and f"warning: {tmp_path / 'sw'}: little" in err


def test_a_second_run_into_the_same_folder_is_refused(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """Two runs writing the same --out both reported success and the last silently won:
    the folder is locked for a run, and a second one is refused with one line naming the
    folder and the holder."""
    path = _file(tmp_path, {**SMALL, "workload": {"queries": 5}})
    out = tmp_path / "out"
    holder = subprocess.Popen(  # another process running into `out` (the lock a run takes)
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from analysis.files import OutputLock; "
         "lock = OutputLock(Path(sys.argv[1])); lock.__enter__(); print('held', flush=True); "
         "time.sleep(60)", str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert cli.main(["run", str(path), "--out", str(out)]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert str(out) in line and f"pid {holder.pid}" in line, line
        assert not (out / "summary.json").exists()
    finally:
        holder.kill()
        holder.wait()
    assert cli.main(["run", str(path), "--out", str(out)]) == 0  # the holder is gone
    assert (out / "summary.json").exists()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_run_in_process_holds_the_lock(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from analysis.files import OutputLock

    path = _file(tmp_path, {**SMALL, "workload": {"queries": 5}})
    out = tmp_path / "out"
    with OutputLock(out):
        assert cli.main(["run", str(path), "--out", str(out)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "another run" in line and f"pid {os.getpid()}" in line
    assert not out.exists()  # made for the lock, removed with it


@pytest.mark.live
def test_live_run_on_a_busy_port_is_one_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    """The live engine's port taken: a 60-line traceback after the first scheme had been
    calibrated; now one line naming the port and --port before any scheme runs."""
    small = {**SMALL, "engine": "live", "workload": {"queries": 4},
             "network": {**SMALL["network"], "agents": 1}}
    path, out = _file(tmp_path, small), tmp_path / "out"
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as taken:
            taken.bind(("0.0.0.0", 0))  # every loopback address of that port
            if kind == socket.SOCK_STREAM:
                taken.listen()
            port = taken.getsockname()[1]
            assert cli.main(["run", str(path), "--port", str(port), "--out", str(out)]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f":{port}" in line and "in use" in line and "--port" in line, line
        assert not out.exists()
