"""`tooldns report` and the analysis helpers: self-contained HTML and Markdown reports of a
run, a sweep and an evaluation; console headlines; plot fixes (titles, zero-success
schemes in the CDF legend, no cache line across phase gaps, deterministic PNGs); the
``python3 -m analysis.*`` entry points."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from analysis import console, report
from analysis.plots import folder
from analysis.plots import run as plots
from analysis.results import kind_of, load_run, load_sweep, per_phase
from sim.run.runner import run_scenario
from sim.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")

PHASED = {
    "name": "tiny-phased", "seed": 4,
    "namespace": {"tools": 80, "branching": 3, "depth": 2, "orgs": 2, "org_tools": 6,
                  "rogue": {"tools": 4, "mode": "public"}},
    "network": {"topology": "star", "nodes": 4, "agents": 2,
                "link": {"delay": {"dist": "constant", "mean": 0.004}}},
    "schemes": [{"name": "tooldns", "k": 3},
                {"name": "certified", "k": 3, "trust": {"policy": "certified"}},
                {"name": "strip", "k": 3, "mode": "strip"}],  # fails by design: 0 successes
    "workload": {"queries": 16, "pool": 8, "phases": 2, "gap": 20.0,
                 "arrival": {"process": "poisson", "rate": 20.0}},
    "outputs": {"plots": True},
}
TINY_SWEEP = {
    "name": "tiny-report-sweep", "seed": 2,
    "namespace": {"tools": 40, "branching": 2, "depth": 1, "orgs": 0},
    "network": {"topology": "star", "nodes": 4, "agents": 2,
                "link": {"delay": {"mean": 0.002}}},
    "schemes": [{"name": "k1", "k": 1}, {"name": "k3", "k": 3},
                {"name": "agentdns", "kind": "agentdns", "k": 3}],
    "workload": {"queries": 8, "pool": 8, "arrival": {"rate": 20.0}},
    "sweep": {"grid": {"namespace.branching": [2, 3], "namespace.depth": [1, 2]},
              "workers": 1},
}


class _Links(HTMLParser):
    """Every src/href and every <img> of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("src", "href"):
                self.links.append(value or "")
            if tag == "img" and key == "src":
                self.images.append(value or "")


def _page(path: Path) -> tuple[str, _Links]:
    text = path.read_text(encoding="utf-8")
    parser = _Links()
    parser.feed(text)
    return text, parser


def _self_contained(path: Path) -> str:
    text, page = _page(path)
    assert page.images, "no figures embedded"
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    # only in-page anchors and data: URIs; nothing fetched from anywhere
    assert all(link.startswith(("#", "data:")) for link in page.links), page.links
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<link" not in text and "<script" not in text
    return text


@pytest.fixture(scope="module")
def phased(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("phased")
    run_scenario(Scenario.model_validate(PHASED), out_dir=out)
    return out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sim.run.sweep import run_sweep

    out = tmp_path_factory.mktemp("sweep")
    run_sweep(Scenario.model_validate(TINY_SWEEP), out, workers=1,
              console=Console(file=io.StringIO()))
    return out


# ---------------------------------------------------------------------------- run report


def test_run_report_is_self_contained_with_provenance_phases_and_trust(
        phased: Path, tmp_path: Path) -> None:
    written = report.write_report(phased, tmp_path)
    assert {p.name for p in written} == {"report.html", "report.md", "latency_cdf.png",
                                         "bytes_per_query.png", "cache_hits_over_time.png",
                                         "per_phase.png"}
    text = _self_contained(tmp_path / "report.html")
    summary = json.loads((phased / "summary.json").read_text())
    prov = summary["provenance"]
    for needle in ("tiny-phased: run report", ">seed<", ">4<", "Provenance",
                   prov["started_utc"], str(prov["git_commit"]), "Per workload phase",
                   "Trust", "rogue returned", "Scenario", "name: tiny-phased"):
        assert needle in text, needle
    for scheme in ("tooldns", "certified", "strip"):  # one row per scheme
        assert f"<td>{scheme}</td>" in text
    # the per-phase table: every scheme in phases 0 and 1
    phase_rows = re.findall(r"<tr>\s*<td>(\w+)</td>\s*<td>([01])</td>", text)
    assert sorted(phase_rows) == sorted((s, p) for s in ("certified", "strip", "tooldns")
                                        for p in "01")
    assert "<title>tiny-phased: run report</title>" in text
    assert text.count("<img") == 4  # 3 standard figures and the per-phase one
    # the Markdown version links the same figures, written beside it
    md = (tmp_path / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) == 4 and all("/" not in link for link in links)
    for link in links:
        assert (tmp_path / link).read_bytes().startswith(b"\x89PNG")
    assert "| tooldns " in md and "```yaml" in md and "## Per workload phase" in md


def test_older_runs_show_unknown_provenance(phased: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(phased, old)
    summary = json.loads((old / "summary.json").read_text())
    del summary["provenance"]
    (old / "summary.json").write_text(json.dumps(summary))
    assert report.write_report(old, formats=["html"]) == [old / "report.html"]
    text = (old / "report.html").read_text()
    assert "no provenance block" in text and "<td>unknown</td>" in text


def test_interrupted_run_is_reported_as_such(phased: Path, tmp_path: Path) -> None:
    part = tmp_path / "partial"
    shutil.copytree(phased, part)
    summary = json.loads((part / "summary.json").read_text())
    summary.update(complete=False, reason="interrupted", unfinished_schemes=["late"])
    (part / "partial.json").write_text(json.dumps(summary))
    (part / "summary.json").unlink()
    assert kind_of(part) == "run"
    text = (report.write_report(part, formats=["html"])[0]).read_text()
    assert "Interrupted run (interrupted)" in text and "missing: late" in text


# ---------------------------------------------------------------------------- plots


def test_zero_success_scheme_is_in_the_cdf_legend(phased: Path) -> None:
    run = load_run(phased)
    assert not run.records[run.records.scheme == "strip"].success.any()
    fig = plots.latency_cdf(run.records)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[0] == "tooldns" and "strip (0 successes)" in legend
    assert "tiny-phased (simpy, seed 4)" in fig.axes[0].get_title()


def test_cache_lines_do_not_cross_phase_gaps(phased: Path) -> None:
    df = load_run(phased).records
    spans = [(g.sent_s.min(), g.sent_s.max()) for _, g in df.groupby("phase")]
    assert spans[0][1] < spans[1][0]  # a real gap
    fig = plots.cache_hits_over_time(df)
    lines = [line for ax in fig.axes for line in ax.get_lines()]
    assert lines
    for line in lines:  # every line lies within one phase
        x = line.get_xdata()
        assert any(lo <= min(x) and max(x) <= hi for lo, hi in spans)
    assert "seed 4" in fig._suptitle.get_text()


def test_standard_plots_are_byte_identical(phased: Path, tmp_path: Path) -> None:
    df = load_run(phased).records
    paths = plots.standard_plots(df, tmp_path)
    assert [p.name for p in paths] == list(plots.STANDARD)
    # the runner drew the same figures (plots: true) from the same records: same bytes
    for path in paths:
        assert path.read_bytes() == (phased / path.name).read_bytes(), path.name


# ---------------------------------------------------------------------------- console


def test_console_headline_shows_phases_trust_and_faults(phased: Path) -> None:
    run = load_run(phased)
    buf = io.StringIO()
    console.print_summary(run.summary, Console(file=buf, width=200), run.records)
    text = buf.getvalue()
    assert "hit@1" in text and "median ms" in text  # the usual table
    assert "per phase (phase 0 → phase 1)" in text
    table = per_phase(run.records)
    upstream = table.loc["tooldns"].mean_upstream_queries  # the per-phase effect's metrics
    assert f"{upstream[0]:.2f} → {upstream[1]:.2f}" in text
    share = table.loc["tooldns"].answered_without_upstream
    assert f"{share[0]:.1%} → {share[1]:.1%}" in text
    assert "rogue look-alike tools" in text and "rogue returned" in text
    faults = {"bin_s": 5, "schemes": {"tooldns": {
        "success": 0.9, "success_during_faults": 0.5, "success_outside_faults": 1.0,
        "mean_retries": 0.1, "stale_answers": 2, "baseline": {"success": 1.0},
        "extra_latency_during_faults_ms": {"mean": 12.5, "p95": 40.0},
        "recovery": [{"queries_ok_after_s": 1.5}]}}}
    buf = io.StringIO()
    console.print_summary({**run.summary, "faults": faults}, Console(file=buf, width=200))
    assert "faults: success and cost" in buf.getvalue() and "50.0%" in buf.getvalue()


# ---------------------------------------------------------------------------- sweep, eval


def test_sweep_report_has_grid_table_and_a_figure_per_axis(sweep: Path,
                                                           tmp_path: Path) -> None:
    assert kind_of(sweep) == "sweep"
    written = report.write_report(sweep, tmp_path)
    names = {p.name for p in written}
    assert {"sweep_namespace-branching.png", "sweep_namespace-depth.png"} <= names
    text = _self_contained(tmp_path / "report.html")
    assert text.count("<img") == 2
    table = load_sweep(sweep).table
    for point in table.point.unique():  # hashes only as folder names, in the Points table
        assert text.count(f"points/{point}") == 1 and f"<td>{point}</td>" not in text
    for name in ("b=2,d=1", "b=2,d=2", "b=3,d=1", "b=3,d=2"):
        rows = text.count(f"<td>{name}</td>") - 1  # Points, then a row per scheme per part
        assert rows > 0 and rows % 3 == 0, name
    assert "namespace.branching" in text and "2, 3" in text and "tiny-report-sweep" in text


def test_sweep_figure_lines_per_scheme_and_other_axis(sweep: Path) -> None:
    from analysis.plots.sweep import sweep_figure

    sw = load_sweep(sweep)
    fig = sweep_figure(sw.table, "namespace.depth", sw.grid, title="t")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["k1, b=2", "k1, b=3", "k3, b=2", "k3, b=3", "agentdns, b=2",
                      "agentdns, b=3"]
    # every metric sweep.csv records has a panel, bytes up included
    ylabels = {ax.get_ylabel() for ax in fig.axes if ax.get_visible()}
    assert {"bytes up", "hit@K", "round trips per query"} <= ylabels
    # axes beyond max_lines combinations are averaged
    fig = sweep_figure(sw.table, "namespace.depth", sw.grid, max_lines=1)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["k1", "k3", "agentdns"]


def _scroll_width(page: Path, tmp_path: Path) -> int:
    """document.documentElement.scrollWidth of ``page`` in headless Chromium with a
    1,400 px window (a probe script appended to a copy writes it into the DOM)."""
    probe = ('<script>window.addEventListener("load",()=>{const p=document.createElement('
             '"pre");p.textContent="SCROLLWIDTH="+document.documentElement.scrollWidth;'
             'document.body.appendChild(p);});</script>')
    copy = tmp_path / "probe.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"),
                    encoding="utf-8")
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--window-size=1400,900", "--virtual-time-budget=5000",
                          "--dump-dom", copy.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.findall(r"SCROLLWIDTH=(\d+)", out.stdout)
    assert found, out.stderr[-2000:]
    return int(found[0])


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/setup)")
def test_sweep_report_fits_a_1400_px_page_with_a_pivot_per_metric(sweep: Path,
                                                                 tmp_path: Path) -> None:
    report.write_report(sweep, tmp_path, formats=["html"])
    page = tmp_path / "report.html"
    assert _scroll_width(page, tmp_path) <= 1400
    text = page.read_text()
    # a pivot per metric: a row per (scheme, b), a column per d; bytes up among them
    for caption in ("RTTs (round trips)", "bytes up (bytes)", "hit@K", "C(q) (items)"):
        assert f"<caption>{caption}" in text, caption
    header = re.search(r"<caption>bytes up \(bytes\).*?</thead>", text, re.S)
    assert header and re.findall(r"<th>([^<]*)</th>", header.group(0)) == [
        "scheme", "b", "d=1", "d=2"]
    sw = load_sweep(sweep)
    cell = sw.table[(sw.table.scheme == "k3") & (sw.table["namespace.branching"] == 3)
                    & (sw.table["namespace.depth"] == 2)].mean_bytes_up.iloc[0]
    assert re.search(rf"<td>k3</td>\s*<td>3</td>\s*<td>[^<]*</td>\s*<td>{cell:.0f}</td>",
                     text[header.end():])
    # the probe sees overflow: the same page with one wide table is wider than 1,400 px
    wide = "<table><tr>" + "<td>0123456789abcdef</td>" * 60 + "</tr></table>"
    page.write_text(text.replace("</h1>", "</h1>" + wide, 1), encoding="utf-8")
    assert _scroll_width(page, tmp_path) > 1400


def test_eval_report(tmp_path: Path) -> None:
    from sim.evalspec import EvalScenario
    from sim.retrieval.run import run_eval

    spec = EvalScenario.model_validate({
        "name": "tiny-eval", "seed": 3,
        "dataset": {"source": "synthetic", "tools": 120, "branching": 3, "depth": 2,
                    "sample": 20},
        "methods": ["flat:bm25", "tooldns:bm25", "tooldns:bm25:2", "a2x:bm25:get_one"],
        "plots": False})
    run_eval(spec, tmp_path / "eval")
    assert kind_of(tmp_path / "eval") == "eval"
    report.write_report(tmp_path / "eval", formats=["html"])
    text = _self_contained(tmp_path / "eval" / "report.html")
    for method in spec.methods:
        assert f"<td>{method}</td>" in text
    assert "tiny-eval (seed 3)" in text or "tiny-eval: retrieval evaluation report" in text


# ---------------------------------------------------------------------------- entry points


def test_subcommand_parser_and_run(phased: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from sim.cli.main import build_parser

    parser = build_parser()  # `tooldns report` as registered
    calls = []
    monkeypatch.setattr(report, "write_report", lambda *a: calls.append(a) or [tmp_path / "x"])
    args = parser.parse_args(["report", str(phased), "--out", str(tmp_path)])
    assert report.run(args) == 0
    assert calls == [(phased, tmp_path, ["html", "md"])]
    assert capsys.readouterr().out.strip() == str(tmp_path / "x")
    report.run(parser.parse_args(["report", str(phased), "--format", "md"]))
    assert calls[-1] == (phased, None, ["md"])
    with pytest.raises(SystemExit):
        parser.parse_args(["report", str(phased), "--format", "pdf"])
    monkeypatch.undo()
    assert report.run(parser.parse_args(["report", str(tmp_path / "nothing")])) == 2
    assert "not a run, sweep or evaluation folder" in capsys.readouterr().err


def test_python_m_entry_points(phased: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "analysis.report", str(phased), "--out",
                          str(tmp_path / "r")], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r" / "report.html").exists() and "report.md" in out.stdout
    from analysis import results
    from analysis.plots import faults
    from analysis.plots import sweep as sweep_plots

    assert folder.main([str(phased), "--out", str(tmp_path / "p")]) == 0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == sorted(plots.STANDARD)
    capsys.readouterr()
    assert results.main([str(phased)]) == 0
    text = capsys.readouterr().out
    assert "tiny-phased (simpy, seed 4)" in text and "per phase" in text and "strip" in text
    for module in (report, folder, results, sweep_plots, faults):
        with pytest.raises(SystemExit) as exit_:
            module.main(["--help"])
        assert exit_.value.code == 0 and "DIR" in capsys.readouterr().out, module
