"""The engine catalogue (sim/catalog/engines.py): its declarations, the refusals made from
them (``check_engine``, before anything runs) and the table generated into docs/engines.md.
Running every cell is ``test_matrix.py``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sim.catalog.engines import (
    ENGINES,
    FEATURES,
    SHARDED,
    EngineInfo,
    Feature,
    Support,
    engine_info,
    engines_with,
    refusal,
)
from sim.cli.main import main as cli
from sim.engines import matrix
from sim.errors import ScenarioError
from sim.run.runner import check_engine
from tests.sim.engines.features import SHARDED_COLUMN, cell_scenario

# the field a refusal names first, per feature
FIELD = {"registries": "schemes.agentdns: an HTTP-registry scheme (kind agentdns): ",
         "faults": "faults: ", "capture": "--capture: ", "dot": "schemes.tooldns.upstream: ",
         "sessions": "agents.session: ", "churn": "workload.churn: ",
         "dense": "namespace.scorer: ", "shards": "engine_options.shards.workers: ",
         "stock": "schemes.qname-unbound.resolver: "}


def test_docs_table_is_the_catalogues() -> None:
    """docs/engines.md shows the catalogue (regenerate: python3 -m sim.engines.matrix --write)."""
    assert matrix.section(matrix.DOC.read_text(encoding="utf-8")) == matrix.render_markdown()


def test_every_engine_declares_every_feature_once() -> None:
    assert list(FEATURES) == ["registries", "faults", "capture", "dot", "sessions", "churn",
                              "dense", "shards", "drafts", "stock"]
    for info in ENGINES.values():
        assert list(info.features) == list(FEATURES)
        assert all(s.level in ("exact", "statistical", "no") for s in info.features.values())
    assert set(SHARDED) == set(FEATURES) - {"shards"}
    assert engines_with("shards") == ["simpy"]  # and so every SHARDED cell is simpy's too
    assert not ENGINES["simpy"].can("capture") and not SHARDED["capture"].ok


@pytest.mark.parametrize(("level", "note"), [("maybe", "a note"), ("no", ""),
                                             ("exact", "two\nlines")])
def test_a_support_needs_a_level_and_one_line(level: str, note: str) -> None:
    with pytest.raises(ValueError, match="Support"):
        Support(level, note)  # type: ignore[arg-type]


def test_an_engine_without_every_feature_is_refused() -> None:
    features = dict(ENGINES["live"].features)
    del features["dense"]
    with pytest.raises(ValueError, match=r"EngineInfo\('toy'\)\.features"):
        replace(ENGINES["live"], name="toy", features=features)
    assert isinstance(engine_info("live"), EngineInfo)
    with pytest.raises(ScenarioError, match="engine: unknown engine 'nope'"):
        engine_info("nope")


def test_engines_with_reads_features_and_flags() -> None:
    assert engines_with("capture") == [n for n in ENGINES if n != "simpy"]
    assert engines_with("virtual_time") == ["simpy"]
    assert engines_with("real_sockets") == ["live", "ray", "mininet"]
    assert ENGINES["simpy"].shards and not ENGINES["live"].shards  # as sim.engines.shards asks


def test_refusals_say_why_and_where_it_runs() -> None:
    note = ENGINES["live"].support("shards").note
    assert refusal(ENGINES["live"], "shards") == f"{note} (use simpy)"
    assert refusal(ENGINES["live"], "capture") is None
    capture = refusal(ENGINES["simpy"], "capture")
    assert capture is not None and capture.startswith(ENGINES["simpy"].support("capture").note)
    assert capture.endswith("(use live or ray or mininet)")
    sharded = refusal(ENGINES["simpy"], "capture", sharded=True)
    assert sharded == f"{SHARDED['capture'].note} (use live or ray or mininet)"
    for feature, support in SHARDED.items():
        got = refusal(ENGINES["simpy"], feature, sharded=True)
        if support.ok:
            assert got is None
        elif ENGINES["simpy"].can(feature):
            assert got == f"{support.note} (run it unsharded: engine_options.shards.workers: 1)"


def _cells() -> list[tuple[Feature, str, Support]]:
    cells = [(f, n, s) for n, e in ENGINES.items() for f, s in e.features.items()]
    return cells + [(f, SHARDED_COLUMN, s) for f, s in SHARDED.items()]


@pytest.mark.parametrize(("feature", "column", "support"), _cells(),
                         ids=[f"{f}-{c}" for f, c, _ in _cells()])
def test_check_engine_follows_the_cell(feature: Feature, column: str, support: Support) -> None:
    """A supported cell passes ``check_engine``; an unsupported one is refused naming the
    field that asks for it, with the catalogue's note."""
    sc = cell_scenario(feature, column)
    engine = "simpy" if column == SHARDED_COLUMN else column
    if support.ok:
        check_engine(sc, engine, ENGINES[engine], capture=feature == "capture")
        return
    with pytest.raises(ScenarioError) as refused:
        check_engine(sc, engine, ENGINES[engine], capture=feature == "capture")
    message = str(refused.value)
    assert message.startswith(FIELD[feature]), message
    assert message.startswith(f"{FIELD[feature]}{support.note} ("), message


def test_validate_prints_the_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tooldns validate`` says it as a run would (exit 2): a feature a sharded run lacks."""
    lacking = [f for f, s in SHARDED.items() if not s.ok and f in ("dot", "sessions", "churn")]
    if not lacking:
        pytest.skip("a sharded run supports everything a scenario file can ask for")
    sc = cell_scenario(lacking[0], SHARDED_COLUMN)
    path = tmp_path / "s.yaml"
    path.write_text(sc.model_dump_json(), encoding="utf-8")  # JSON is YAML
    assert cli(["validate", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert SHARDED[lacking[0]].note in err


def test_matrix_main_prints_and_rewrites_the_section(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "engines.md"
    doc.write_text(f"# Engines\n\nbefore\n\n{matrix.START}\nold table\n{matrix.END}\n\nafter\n",
                   encoding="utf-8")
    monkeypatch.setattr(matrix, "DOC", doc)
    assert matrix.main([]) == 0
    assert capsys.readouterr().out == matrix.render_markdown() + "\n"
    assert matrix.main(["--write"]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text == (f"# Engines\n\nbefore\n\n{matrix.START}\n{matrix.render_markdown()}\n"
                    f"{matrix.END}\n\nafter\n")
    assert matrix.main(["--write"]) == 0 and doc.read_text(encoding="utf-8") == text
    doc.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError, match="matrix:start"):
        matrix.main(["--write"])


def test_table_has_a_row_per_feature_and_a_column_per_engine() -> None:
    text = matrix.render_markdown()
    header, _, *rows = text.split("\n\n")[0].splitlines()
    assert header.split(" | ")[2:] == [*ENGINES, f"{matrix.SHARDED_COLUMN} |"]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == [i.title for i in
                                                                FEATURES.values()]
    notes = text.split("\n\n")[1].splitlines()  # one per distinct note, numbered in order
    distinct = {s.note for e in ENGINES.values() for s in e.features.values()}
    assert len(notes) == len(distinct | {s.note for s in SHARDED.values()})
    assert notes[0].startswith("1. ")
