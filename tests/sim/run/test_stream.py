"""Records streamed to disk: a streamed run's records and summary equal those made from
every discovery kept to the end; the results appear only when the run ends (an interrupted
run leaves no results file); finished discoveries and their walks do not pile up in the
engine's output; the spool's CSV is what one frame of all rows would write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.metrics import aggregate
from sim.engines.base import EngineOutput
from sim.run import spool as spool_module
from sim.run.outputs import RunInterrupted
from sim.run.recorder import Recorder
from sim.run.runner import run_scenario
from sim.run.spool import RecordSpool
from sim.run.summary import Tally
from sim.scenario import Scenario

# loss and a short agent timeout: queries time out while their walk still runs, so some
# discoveries wait for their walks ("parked"); a cached and an uncached scheme, a registry
LOSSY: dict[str, Any] = {
    "name": "stream-lossy", "engine": "simpy", "seed": 4,
    "namespace": {"tools": 300, "branching": 3, "depth": 2, "orgs": 0},
    "network": {"topology": "star", "nodes": 6, "agents": 4,
                "link": {"delay": {"mean": 0.01}, "loss": 0.08}},
    "agents": {"timeout": 0.12, "attempts": 3},
    "schemes": [{"name": "cold", "k": 2, "cache": False},
                {"name": "warm", "k": 3, "beam": 2},
                {"name": "reg", "kind": "agentdns"}],
    "workload": {"queries": 240, "pool": 60, "arrival": {"rate": 40.0}},
    "outputs": {"plots": False},
}


def _kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scheme's discoveries kept to the end (the records made at drain, as before)."""
    monkeypatch.setattr(Recorder, "keeps", staticmethod(lambda *a: True))


def test_streamed_records_equal_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sc = Scenario.model_validate(LOSSY)
    parked: list[int] = []
    walked = Recorder.walked

    def counting(self: Recorder, key: tuple[str, int], output: EngineOutput) -> None:
        parked.append(1)
        walked(self, key, output)

    monkeypatch.setattr(Recorder, "walked", counting)
    streamed = run_scenario(sc, out_dir=tmp_path / "streamed")
    assert parked  # some discoveries did wait for a walk that ended after them
    with monkeypatch.context() as m:
        _kept(m)
        kept = run_scenario(sc, out_dir=tmp_path / "kept")
    pd.testing.assert_frame_equal(streamed.records, kept.records)
    assert streamed.summary["schemes"] == kept.summary["schemes"]
    assert (streamed.records.timeouts > 0).any() and set(streamed.records.scheme) == {
        "cold", "warm", "reg"}
    for name in ("results.csv", "nodes.csv"):
        assert (tmp_path / "streamed" / name).read_bytes() == (
            tmp_path / "kept" / name).read_bytes()
    # without writing: the records come from the run's spool, the same
    pd.testing.assert_frame_equal(run_scenario(sc, write=False).records, streamed.records)


def test_outputs_hold_no_finished_discoveries(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the run goes, walks leave with their discovery: the output never holds more
    than those of the discoveries in flight (about 16 at 40 queries/s, up to 3 walks each;
    no query is lost here, so none waits to the end), not a growing share of the 240
    discoveries' walks; at the end it holds no discovery."""
    sc = Scenario.model_validate({**LOSSY, "schemes": LOSSY["schemes"][:1]}).with_overrides(
        {"network.link.loss": 0.0})  # a query lost on its way to the resolver: parked
    seen: list[tuple[int, int]] = []
    ends: list[tuple[int, int, int]] = []
    stub, drain = Recorder.stub, Recorder.drain

    def watching(self: Recorder, job: Any, result: Any, output: EngineOutput) -> bool:
        seen.append((len(output.stubs), sum(map(len, output.walks.values()))))
        return stub(self, job, result, output)

    def ending(self: Recorder, output: EngineOutput) -> None:
        ends.append((len(output.stubs), output.streamed, len(self.waiting)))
        drain(self, output)

    monkeypatch.setattr(Recorder, "stub", watching)
    monkeypatch.setattr(Recorder, "drain", ending)
    result = run_scenario(sc, write=False)
    jobs = len(result.records)
    assert len(seen) == jobs == 240
    assert max(s for s, _ in seen) == 0  # no finished discovery is kept
    walks = [w for _, w in seen]
    assert max(walks) <= 48  # the walks of the discoveries in flight
    assert max(walks[jobs // 2:]) <= max(walks[:jobs // 2]) + 8  # not growing
    stubs, streamed, waiting = ends[0]
    assert stubs == 0 and streamed == jobs and waiting == 0


def test_results_appear_at_the_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Chunks go to a hidden folder inside the output folder; results.csv and
    summary.json appear only when the run ends."""
    monkeypatch.setattr(spool_module, "CHUNK_ROWS", 50)
    out = tmp_path / "run"
    during: list[tuple[bool, int]] = []

    def finished(_scheme: str, _done: int, _total: int) -> None:  # each discovery's end
        chunks = [p for p in out.rglob("chunk-*") if p.name != "results.csv"]
        during.append(((out / "results.csv").exists() or (out / "summary.json").exists(),
                       len(chunks)))

    run_scenario(Scenario.model_validate(LOSSY), out_dir=out, tick=finished)
    assert during and not any(final for final, _ in during)
    assert max(n for _, n in during) >= 4  # 240 rows a scheme, 50 a chunk
    assert {p.name for p in out.iterdir()} >= {"results.csv", "results.parquet",
                                               "summary.json"}
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the spool is gone


def test_interrupted_run_leaves_no_results(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """Ctrl-C half-way through the only scheme: no results file (nothing finished), no
    spool left behind."""
    monkeypatch.setattr(spool_module, "CHUNK_ROWS", 20)
    sc = Scenario.model_validate({**LOSSY, "schemes": LOSSY["schemes"][:1]})
    stub = Recorder.stub

    def stopping(self: Recorder, job: Any, result: Any, output: EngineOutput) -> bool:
        if self.finished == 150:
            raise KeyboardInterrupt
        return stub(self, job, result, output)

    monkeypatch.setattr(Recorder, "stub", stopping)
    out = tmp_path / "run"
    with pytest.raises(RunInterrupted) as stopped:
        run_scenario(sc, out_dir=out)
    assert stopped.value.files == []
    assert not out.exists() or not any(out.rglob("*"))


def test_spool_types_as_one_frame(tmp_path: Path) -> None:
    """Columns typed over all rows (an int column that later holds floats is float in every
    block; a column some rows lack), rows back in job order from unordered chunks."""
    rows = [{"job": j, "x": j if j < 5 else j + 0.5, "flag": j % 2 == 0, "name": f"n{j}",
             **({"extra": "e"} if j == 7 else {})} for j in range(12)]
    spool = RecordSpool(tmp_path / "spool", chunk_rows=3)
    spool.begin("s", len(rows))
    for j in (3, 1, 0, 2, 11, 6, 5, 4, 10, 7, 9, 8):
        spool.add(j, rows[j])
    spool.end()
    expect = pd.DataFrame(rows)
    pd.testing.assert_frame_equal(spool.frame(), expect)
    for size in range(1, 13):  # blocks that cut through chunks: rows found by counting
        blocks = list(spool.blocks(size=size))
        assert [len(b) for b in blocks] == [min(size, 12 - lo) for lo in range(0, 12, size)]
        pd.testing.assert_frame_equal(pd.concat(blocks, ignore_index=True), expect)
    spool.write(tmp_path / "r.csv", tmp_path / "r.parquet")
    assert (tmp_path / "r.csv").read_text() == expect.to_csv(index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "r.parquet"), expect)
    spool.close()
    assert not (tmp_path / "spool").exists()


def test_tally_equals_aggregate() -> None:
    """The summary counted row by row is the metric table's, bit for bit."""
    records = run_scenario(Scenario.model_validate(LOSSY), write=False).records
    tally = Tally()
    for row in records.to_dict("records"):
        tally.add({k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()})
    assert tally.exact
    assert tally.schemes(300) == aggregate(records, 300)
