"""``tooldns validate`` and ``tooldns run`` make one set of checks: every malformed scenario
of the scenario tests (and the build-time and unit cases here) is refused by both with the
same ``FILE: field: problem`` line and exit status 2, and run writes nothing. Times take
unit strings (``"10ms"``) and store seconds; a bare time that looks like milliseconds is an
error unless written with a unit or ``--allow-units`` is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.cli import main as cli
from sim.loading import load_scenario
from sim.spec import parse_seconds
from tests.sim.test_hostile_scenarios import HOSTILE, _bomb
from tests.sim.test_scenario import MALFORMED

SMALL = "name: x\nworkload: {queries: 5}\noutputs: {plots: false}\n"

# (id, file text): build-time checks the run makes and the unit checks; a file "t.csv"
# beside the scenario holds BAD_TRACE
BUILD_AND_UNITS = [
    ("source-file-synthetic", SMALL.replace("{queries: 5}", "{queries: 5, source: file}")),
    ("link-delay-10-s", SMALL + "network: {link: {delay: {mean: 10}}}\n"),
    ("delay-sample-2-s", SMALL + "network: {link: {delay: {dist: empirical, "
                                 "samples: [0.01, 2]}}}\n"),
    ("scheme-timeout-500", SMALL + "schemes: [{name: a, timeout: 500}]\n"),
    ("agents-timeout-5000", SMALL + "agents: {timeout: 5000}\n"),
    ("ttl-over-a-week", SMALL + "caches: {srv_ttl: 1000000}\n"),
    ("delay-10-parsecs", SMALL + "network: {link: {delay: {mean: 10 parsecs}}}\n"),
    ("delay-not-a-time", SMALL + "network: {link: {delay: {mean: soon}}}\n"),
    ("ttl-fraction", SMALL + "caches: {a_ttl: 1.5 s}\n"),
    ("trust-org-unknown", SMALL + "trust: {policy: org, org: nobody}\n"),
    ("session-unknown-tool", SMALL + "agents: {session: {always_include: [no/such-tool]}}\n"),
    ("fault-selects-nothing", SMALL + "faults: {events: [{kind: down, target: 'zone:nowhere"
                                      ".tools'}]}\n"),
    ("churn-zone-unknown", SMALL.replace("{queries: 5}", "{queries: 5, churn: {events: [{at: "
                                         "0.1, action: add, zone: nowhere.tools.}]}}")),
    ("churn-sharded", SMALL.replace("{queries: 5}", "{queries: 5, churn: {events: [{at: "
                                    "0.1, action: add, count: 1}]}}")
     + "engine_options: {shards: {workers: 2, shard_by: agent}}\nnetwork: {agents: 2}\n"),
    ("shards-on-live", SMALL + "engine: live\nengine_options: {shards: {workers: 2}}\n"),
    ("send-embedding-bm25", SMALL + "schemes: [{name: a, send_embedding: true}]\n"),
    ("services-leave-none", SMALL.replace("{queries: 5}", "{queries: 5, services: [a2a]}")
     + "namespace: {tools: 4, orgs: 0}\n"),
    ("trace-bad-columns", SMALL.replace("{queries: 5}", "{queries: 5, arrival: {process: "
                                        "trace, trace: t.csv}}")),
]
BAD_TRACE = "when,what\n1,x\n"

# the hostile-file cases of tests/sim/test_hostile_scenarios.py that are files
HOSTILE_FILES = [
    *((f"hostile-{field}", f"name: x\n{fields}\noutputs: {{plots: false}}\n")
      for fields, field, _ in HOSTILE),
    ("alias-bomb-grid", f"name: x\nsweep:\n  grid:\n    seed: {_bomb()}\n"),
    ("recursive-alias", "name: x\nsweep: {grid: {seed: &a [1, *a]}}\n"),
    ("deep-nesting", "name: x\nsweep: {grid: {seed: " + "[" * 500 + "]" * 500 + "}}\n"),
    ("huge-integer", "name: x\nseed: 1" + "0" * 5000 + "\n"),
    ("grid-too-deep", "name: x\nsweep: {grid: {seed: [[[[[1]]]]]}}\n"),
    ("grid-date", "name: x\nsweep: {grid: {seed: [[2020-01-01]]}}\n"),
    ("grid-point-too-large", SMALL + "sweep: {grid: {namespace.tools: [100, 1000000000000]}}\n"),
    *((f"seed-{seed}", SMALL + f"seed: {seed}\n")
      for seed in ("-5", "4294967296", "100000000000000000000")),
]

CASES = [(case, text) for case, text, _, _ in MALFORMED] + HOSTILE_FILES + BUILD_AND_UNITS
#: cases whose problem is in a sweep point, which ``run`` (the base scenario) never builds:
#: ``sweep`` refuses them as validate does
SWEEP_POINTS = {"grid-point-too-large"}


def _errors(err: str, command: str) -> list[str]:
    """The problems of one command's stderr, without the ``tooldns COMMAND: error:``."""
    head = f"tooldns {command}: error: "
    return [line.removeprefix(head) for line in err.splitlines() if line.startswith(head)]


@pytest.mark.parametrize(("case", "text"), CASES, ids=[c for c, _ in CASES])
def test_validate_and_run_refuse_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       case: str, text: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    (tmp_path / "t.csv").write_text(BAD_TRACE, encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 2, case
    checked = _errors(capsys.readouterr().err, "validate")
    out = tmp_path / "out"
    command = "sweep" if case in SWEEP_POINTS else "run"
    assert cli.main([command, str(path), "--out", str(out)]) == 2, case
    ran = _errors(capsys.readouterr().err, command)
    assert len(checked) == 1 and checked == ran, (checked, ran)
    assert checked[0].startswith(f"{path}: ") and "Traceback" not in checked[0]
    assert not out.exists() or not any(out.iterdir())


def test_the_build_time_messages_name_the_field(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The lines of the cases above say what the run found (not only that it failed)."""
    expected = {
        "source-file-synthetic": "workload.source: 'file' but the namespace has no query file",
        "link-delay-10-s": "network.link.delay.mean: 10 s one-way per link looks like "
                           "milliseconds meant (10 ms is 0.01 or '10ms')",
        "delay-sample-2-s": "network.link.delay.samples.1: 2 s",
        "trust-org-unknown": "trust.org: no zone of organisation 'nobody'",
        "session-unknown-tool": "agents.session.always_include: no tool with id",
        "fault-selects-nothing": "faults.events.0",
        "churn-zone-unknown": "workload.churn.events.0.zone",
        "churn-sharded": "workload.churn: a sharded run does not apply tool changes",
        "shards-on-live": "engine_options.shards.workers: 2 shards run the simpy engine only",
        "send-embedding-bm25": "schemes: scheme 0 (a): send_embedding needs namespace.scorer",
        "services-leave-none": "workload: no queries left",
        "trace-bad-columns": "workload.arrival.trace: line 2: need columns time,query",
    }
    (tmp_path / "t.csv").write_text(BAD_TRACE, encoding="utf-8")
    for case, text in BUILD_AND_UNITS:
        if case not in expected:
            continue
        path = tmp_path / "s.yaml"
        path.write_text(text, encoding="utf-8")
        assert cli.main(["validate", str(path)]) == 2
        [line] = _errors(capsys.readouterr().err, "validate")
        assert line.startswith(f"{path}: {expected[case]}"), (case, line)


# ------------------------------------------------------------------------ unit strings


@pytest.mark.parametrize(("text", "seconds"), [
    ("10ms", 0.010), ("2s", 2.0), ("500us", 0.0005), ("1.5 min", 90.0), ("20 µs", 2e-5),
    ("3 ms", 0.003), ("1h", 3600.0), ("0.25", 0.25), (0.01, 0.01), (3, 3)])
def test_times_take_unit_strings(text: object, seconds: float) -> None:
    assert parse_seconds(text) == seconds


def test_a_delay_in_ms_is_stored_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SMALL + 'network: {link: {delay: {mean: "10ms", samples: ["1ms"]}}}\n'
                    'agents: {timeout: 2s}\ncaches: {srv_ttl: 5 min}\n'
                    'schemes: [{name: a, timeout: 250ms, stale_ttl: 1 d}]\n', encoding="utf-8")
    sc = load_scenario(path)
    assert sc.network.link.delay.mean == 0.010 and sc.network.link.delay.samples == (0.001,)
    assert sc.agents.timeout == 2.0 and sc.caches.srv_ttl == 300
    assert sc.schemes[0].timeout == 0.25 and sc.schemes[0].stale_ttl == 86_400
    plain = tmp_path / "p.yaml"  # the same in seconds
    plain.write_text(SMALL + "network: {link: {delay: {mean: 0.010, samples: [0.001]}}}\n"
                     "agents: {timeout: 2.0}\ncaches: {srv_ttl: 300}\n"
                     "schemes: [{name: a, timeout: 0.25, stale_ttl: 86400}]\n",
                     encoding="utf-8")
    assert load_scenario(plain) == sc


def test_an_unknown_unit_is_one_line_naming_the_units(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SMALL + "network: {link: {delay: {mean: 10 parsecs}}}\n", encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    [line] = _errors(err, "validate")
    assert line.startswith(f"{path}: network.link.delay.mean: '10 parsecs': unknown unit")
    assert all(u in line for u in ("ns, us, ms, s, min, h, d", "'10ms' is 0.010"))
    assert len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------ suspicious units


def test_a_time_written_with_its_unit_is_meant(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``mean: 2s`` says seconds are meant: valid (a bare 2 is not); ``--allow-units`` lets
    the bare number through as a warning, in validate and run alike."""
    meant = tmp_path / "meant.yaml"
    meant.write_text(SMALL + "network: {link: {delay: {mean: 2s}}}\nagents: {timeout: 60}\n",
                     encoding="utf-8")
    assert cli.main(["validate", str(meant)]) == 0
    bare = tmp_path / "bare.yaml"
    bare.write_text(SMALL + "network: {link: {delay: {mean: 2}}}\nagents: {timeout: 60}\n",
                    encoding="utf-8")
    assert cli.main(["validate", str(bare)]) == 2
    assert "write '2s' if seconds are meant, or pass --allow-units" in capsys.readouterr().err
    assert cli.main(["validate", "--allow-units", str(bare)]) == 0
    assert cli.main(["validate", "--allow-units", "--strict", str(bare)]) == 1
    assert f"warning: {bare}: network.link.delay.mean: 2 s" in capsys.readouterr().err
    assert cli.main(["run", str(bare), "--show-config", "--allow-units"]) == 0
    assert cli.main(["run", str(bare), "--show-config"]) == 2


def test_set_values_are_judged_like_the_file(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SMALL + "network: {link: {delay: {mean: 2s}}}\nagents: {timeout: 60}\n",
                    encoding="utf-8")
    show = ["run", str(path), "--show-config"]
    assert cli.main([*show, "--set", "network.link.delay.mean=3"]) == 2
    assert f"{path}: network.link.delay.mean: 3 s" in capsys.readouterr().err
    assert cli.main([*show, "--set", "network.link.delay.mean=3s"]) == 0
    assert "mean: 3.0" in capsys.readouterr().out
    assert cli.main([*show, "--set", "schemes.tooldns.timeout=45"]) == 2
    assert f"{path}: schemes.0.timeout: 45 s" in capsys.readouterr().err
    assert cli.main([*show, "--set", "schemes.tooldns.timeout=45 s"]) == 0
