"""netem delay tables: the simulation's delay distributions, in tc's table format."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from sim.engines.netemtable import SCALE, netem_args, table, write_table
from topologies.links import DelayModel, LinkSpec


@pytest.mark.parametrize("model", [DelayModel("normal", 0.05, 0.01),
                                   DelayModel("normal", 0.01, 0.02),  # truncated at 0
                                   DelayModel("lognormal", 0.05, 0.03),
                                   DelayModel.from_samples([0.01, 0.02, 0.02, 0.09])])
def test_table_gives_the_models_quantiles(model: DelayModel) -> None:
    values = table(model)
    assert len(values) == 4096 and all(-32768 <= t <= 32767 for t in values)
    delays = [model.mean + model.std * t / SCALE for t in values]  # what netem computes
    assert min(delays) >= -1e-6  # never negative, as the simulation's are
    for u in (0.1, 0.25, 0.5, 0.75, 0.9):
        got = sorted(delays)[int(u * len(delays))]
        assert got == pytest.approx(model.quantile(u), abs=model.std * 0.01 + 1e-6)
    if model.dist != "lognormal":  # (its far right tail is clipped at +4 std)
        assert statistics.fmean(delays) == pytest.approx(model.expected(), rel=0.01)


def test_constant_delays_need_no_table() -> None:
    with pytest.raises(ValueError):
        table(DelayModel.constant(0.05))
    assert netem_args(LinkSpec(DelayModel.constant(0.05)), None) == ["delay", "50000us"]


def test_table_file_and_arguments(tmp_path: Path) -> None:
    link = LinkSpec(DelayModel("normal", 0.05, 0.01), loss=0.01)
    name = write_table(link.delay, tmp_path)
    text = (tmp_path / f"{name}.dist").read_text().splitlines()
    assert text[0].startswith("#")
    assert [int(v) for line in text[1:] for v in line.split()] == table(link.delay)
    assert write_table(link.delay, tmp_path) == name  # same model, same file
    assert netem_args(link, name) == ["delay", "50000us", "10000us", "distribution", name,
                                      "loss", "1.000000%"]
