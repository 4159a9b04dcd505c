"""``tooldns eval`` at ``run``'s standard: a file that the evaluation would refuse after
minutes of loading is refused by ``validate`` (and by ``eval``) in seconds, and an
interrupted evaluation keeps its finished methods and resumes after them."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sim.evalspec import EvalScenario
from sim.retrieval import run as eval_run
from sim.retrieval.run import MethodStore, run_eval

ROOT = Path(__file__).resolve().parents[3]
T_975 = {29: 2.045229642132703}  # t(0.975, 29), from tables
SPEC = {"name": "resume", "seed": 2,
        "dataset": {"source": "synthetic", "tools": 240, "branching": 3, "depth": 2,
                    "sample": 30},
        "taxonomy": {"kind": "categories"},
        "methods": ["flat:bm25", "tooldns:bm25", "tooldns:bm25:3", "a2x:bm25:get_all"],
        "k": 5, "plots": False}


@pytest.fixture
def nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluation's slow parts (the catalogue and its split, the encoder's weights) fail
    the test if reached: a refusal must come before them, which is why it takes about a
    second (``tooldns validate`` of a real-catalogue file: ~1 s here, against the half
    hour of loading it used to cost), on any machine, busy or not."""
    def loaded(*_: object, **__: object) -> None:
        raise AssertionError("the evaluation loaded its data or weights before refusing")

    for target in ("sim.retrieval.run.load_split", "nodes.scoring.default_encoder",
                   "topologies.taxonomy_namespace.default_encoder",
                   "sim.retrieval.run.disk_cached_encoder"):
        monkeypatch.setattr(target, loaded)


def _refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run the command in-process; it must exit 2 with one error line; returns stderr."""
    from sim.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_validate_refuses_a_walk_with_centroids_and_bm25_before_loading(
        tmp_path: Path, nothing_loads: None, capsys: pytest.CaptureFixture) -> None:
    data = yaml.safe_load((ROOT / "scenarios" / "eval" / "tools-learned.yaml").read_text())
    data["methods"] = ["flat:dense", "tooldns:bm25:6:global"]  # the scorer has no vectors
    bad = tmp_path / "bad-eval.yaml"
    bad.write_text(yaml.safe_dump(data))
    for command in ("validate", "eval"):
        err = _refused([command, str(bad)], capsys)
        assert (f"{bad}: methods: tooldns:bm25:6:global: the 'bm25' scorer cannot score "
                f"vectors") in err
        assert "use tooldns:dense:6:global" in err


def test_an_interrupted_eval_resumes_with_the_finished_methods(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = EvalScenario.model_validate(SPEC)
    whole = run_eval(spec, tmp_path / "whole")
    expected = pd.read_csv(tmp_path / "whole" / "per_query.csv")
    assert not (tmp_path / "whole" / ".methods").exists()  # complete: nothing kept
    # intervals over the queries, and each method paired with the first, query by query
    summary = pd.read_csv(tmp_path / "whole" / "summary.csv").set_index("method")
    walk = expected[expected.method == "tooldns:bm25"].recall_k
    half = T_975[len(walk) - 1] * statistics.stdev(walk) / math.sqrt(len(walk))
    assert summary.loc["tooldns:bm25", "recall_k_half"] == pytest.approx(half)
    paired = pd.read_csv(tmp_path / "whole" / "paired.csv").set_index("method")
    flat = expected[expected.method == "flat:bm25"].set_index("query").recall_k
    diff = walk.to_numpy() - flat.loc[expected[expected.method == "tooldns:bm25"]["query"]]
    assert paired.loc["tooldns:bm25", "recall_k"] == pytest.approx(diff.mean())
    assert paired.loc["tooldns:bm25", "baseline"] == "flat:bm25"

    out = tmp_path / "stopped"
    save = MethodStore.save
    calls: list[str] = []

    def stop_after_two(self: MethodStore, method: str, rows: pd.DataFrame) -> None:
        save(self, method, rows)
        calls.append(method)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(MethodStore, "save", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        run_eval(spec, out)
    assert not (out / "per_query.csv").exists()
    assert len(list((out / ".methods").glob("*.parquet"))) == 2
    monkeypatch.setattr(MethodStore, "save", save)

    said: list[str] = []
    ran: list[str] = []
    real_run = eval_run.Evaluator.run

    def counted(self, queries, progress=None, tick=None, methods=None, finished=None):  # type: ignore[no-untyped-def]
        ran.extend(methods or [])
        return real_run(self, queries, progress, tick, methods, finished)

    monkeypatch.setattr(eval_run.Evaluator, "run", counted)
    resumed = run_eval(spec, out, progress=said.append)
    assert ran == ["tooldns:bm25:3", "a2x:bm25:get_all"]  # only what had not finished
    assert any("2 of 4 methods already done" in s for s in said)
    got = pd.read_csv(out / "per_query.csv")
    timeless = [c for c in expected.columns if c != "time_ms"]
    pd.testing.assert_frame_equal(got[timeless], expected[timeless])
    quality = ["method", "hit1_tool", "hitk_tool", "recall_k", "rr", "examined"]
    pd.testing.assert_frame_equal(resumed["summary"][quality], whole["summary"][quality])
    assert not (out / ".methods").exists()


def test_kept_methods_are_not_reused_for_another_evaluation(tmp_path: Path) -> None:
    spec = EvalScenario.model_validate(SPEC)
    store = MethodStore(tmp_path, spec, ["q1", "q2"])
    store.save("flat:bm25", pd.DataFrame({"method": ["flat:bm25"], "query": ["q1"]}))
    assert store.has("flat:bm25")
    assert not MethodStore(tmp_path, spec, ["q1", "q3"]).has("flat:bm25")  # other sample
    other = spec.model_copy(update={"k": 3})
    assert not MethodStore(tmp_path, other, ["q1", "q2"]).has("flat:bm25")
    more = spec.model_copy(update={"methods": (*spec.methods, "flat:tfidf")})
    assert MethodStore(tmp_path, more, ["q1", "q2"]).has("flat:bm25")  # a method added


def test_eval_formats(tmp_path: Path) -> None:
    spec = tmp_path / "e.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "methods": ["flat:bm25", "tooldns:bm25"]}))
    done = subprocess.run([sys.executable, "-m", "sim.cli", "eval", str(spec), "--out",
                           str(tmp_path / "o"), "--format", "csv"], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[0].split(",")
    assert head[:2] == ["method", "queries"] and "recall_k_half" in head
    assert len(done.stdout.splitlines()) == 3  # the header and one row per method


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize(("change", "expected"), [
    ({"dataset": {"source": "catalog"}}, "dataset.catalog: 'catalog' needs a catalogue file"),
    ({"dataset": {"source": "catalog", "catalog": "nowhere/tools.jsonl"}},
     "dataset.catalog: no such file: "),
    ({"dataset": {"source": "tooldns-release", "catalog": "gone.json"}},
     "dataset.catalog: no such file: "),
    ({"dataset": {"source": "catalog", "catalog": __file__, "queries": "missing.jsonl"}},
     "dataset.queries: no such file: "),
    ({"dataset": {"source": "catalog", "catalog": __file__}},
     "dataset.queries: not given, and no "),
])
def test_every_eval_time_refusal_of_the_data_comes_from_validate_first(
        tmp_path: Path, change: dict, expected: str, nothing_loads: None,
        capsys: pytest.CaptureFixture) -> None:
    """What ``eval`` used to meet only after loading (a file that is not there) is refused
    by ``validate`` and by ``eval`` with one line naming file and field."""
    spec = {**SPEC, **change}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(spec))
    for argv in (["validate", str(bad)], ["eval", str(bad), "--out", str(tmp_path / "o")]):
        assert f"{bad}: {expected}" in _refused(argv, capsys)
    assert not (tmp_path / "o").exists()


def test_a_language_model_method_without_an_endpoint(
        tmp_path: Path, nothing_loads: None, capsys: pytest.CaptureFixture) -> None:
    """``flat:llm`` (or LLM zone labels) with no endpoint: ``eval`` refuses before loading
    anything; ``validate`` accepts the file but says eval needs ``--llm-url``."""
    spec = {**SPEC, "methods": ["flat:bm25", "flat:llm"]}
    file = tmp_path / "llm.yaml"
    file.write_text(yaml.safe_dump(spec))
    err = _refused(["eval", str(file), "--out", str(tmp_path / "o")], capsys)
    assert (f"{file}: methods: flat:llm need a language model: set llm.url or give "
            f"--llm-url") in err
    assert not (tmp_path / "o").exists()
    checked = _cli("validate", str(file))
    assert checked.returncode == 0, checked.stderr
    assert "flat:llm: `tooldns eval` needs --llm-url" in checked.stderr
    assert _cli("validate", "--strict", str(file)).returncode == 1
