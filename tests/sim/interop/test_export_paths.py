"""What ``tooldns export-zones DIR`` writes into the configurations and zone files from
hostile input: a folder path that would break out of a quoted string or a comment is
refused (one error line, exit 2, nothing written); any other printable path is quoted and
read back verbatim by ``named-checkconf``, ``nsd-checkconf`` and ``knotc``; labels from
catalogue data are written with RFC 1035 §5.1 escapes and parsed back to the same names;
``--aaaa`` exports the AAAA records ``serve --aaaa`` serves."""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdatatype
import dns.zone
import pytest

from nodes.authoritative.zonefile import master_file
from nodes.dns.zone import ServerRef, ToolRecord, ZoneData
from sim.build.hierarchy import build_hierarchy
from sim.interop.export import ExportPathError, export_zones, path_problem, zone_file_name
from tests.nodes.authoritative.test_zones import needs, run
from topologies.synthetic import synthetic

SMALL = ["--tools", "30", "--branching", "2", "--depth", "1", "--seed", "4", "--orgs", "0"]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from sim.cli import export_zones as command
    from sim.cli import main as cli

    code = command.run(cli.build_parser().parse_args(["export-zones", *argv]))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ['q"uote\ninclude "/etc/shadow', "caf\u00e9"])
def test_unquotable_folder_is_refused_and_nothing_written(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / name
    code, stdout, stderr = _cli(capsys, str(out), *SMALL)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tooldns export-zones: error: the folder ")
    assert "cannot be written safely" in lines[0] and not stdout
    assert list(tmp_path.iterdir()) == []
    for bad in ('"', "\\", "\n", "\r", "\t", "\x00", "\x7f", "\u00e9"):
        assert path_problem(Path(f"/tmp/a{bad}b")) is not None, repr(bad)
    hierarchy = build_hierarchy(synthetic(n_tools=10, branching=2, depth=1, seed=1, n_orgs=0))
    with pytest.raises(ExportPathError):  # the library call refuses it too
        export_zones(hierarchy, out)
    assert list(tmp_path.iterdir()) == []


@needs("named-checkconf", "nsd-checkconf", "knotc")
def test_printable_folder_is_quoted_and_read_back_verbatim(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sp ace #hash ;semi {brace} 'single' $dollar //slashes */"
    assert path_problem(out) is None
    code, _, stderr = _cli(capsys, str(out), *SMALL)
    assert code == 0, stderr
    zone = "tools."
    expected = str(out.resolve() / zone_file_name(zone))
    bind = run("named-checkconf", "-z", "-p", str(out / "named.conf"))
    assert bind.returncode == 0, bind.stdout + bind.stderr
    files = [line.strip() for line in bind.stdout.splitlines() if line.strip().startswith("file")]
    assert f'file "{expected}";' in files and len(files) == len(list(out.glob("*.zone")))
    nsd = run("nsd-checkconf", "-z", zone, "-o", "zonefile", str(out / "nsd.conf"))
    assert nsd.returncode == 0 and nsd.stdout.strip() == expected, nsd.stdout + nsd.stderr
    assert run("nsd-checkconf", str(out / "nsd.conf")).returncode == 0
    dump = tmp_path / "knot-export.conf"
    knot = run("knotc", "-c", str(out / "knot.conf"), "conf-export", str(dump))
    assert knot.returncode == 0, knot.stdout + knot.stderr
    assert f'    file: "{expected}"' in dump.read_text().splitlines()


def _hostile_zone() -> ZoneData:
    targets = ['semi;colon', 'quo"te', "paren(s)", "at@", "dollar$", "back\\slash",
               "sp ace", "ctl\x01byte", "tab\tx"]
    tools = tuple(ToolRecord(f"t{i}", label, "a tool", "mcp", f"{label}.weather.tools.",
                             f"127.64.0.{i + 1}", 443) for i, label in enumerate(targets))
    return ZoneData("weather.tools.", (ServerRef("ns1.weather.tools.", "127.9.0.1"),),
                    "weather", tools=tools)


def test_hostile_labels_are_escaped_and_parse_back() -> None:
    zone = _hostile_zone()
    text = master_file(zone)
    records = [line for line in text.splitlines() if line and not line.startswith((";", "$"))]
    parsed = dns.zone.from_text(text, origin=zone.name, relativize=False)
    # one line per record, none injected: the names come back byte for byte
    assert sum(len(rds) for _, node in parsed.nodes.items() for rds in node) == len(records)
    for tool in zone.tools:
        name = dns.name.Name([*(label.encode() for label in tool.target.split(".")[:-1]), b""])
        assert parsed.find_rdataset(name, "A")[0].to_text() == tool.address
    srv = parsed.find_rdataset("_mcp._tcp.weather.tools.", "SRV")
    assert {rd.target for rd in srv} == {dns.name.Name(
        [*(label.encode() for label in t.target.split(".")[:-1]), b""]) for t in zone.tools}


@needs("named-checkzone", "nsd-checkzone", "kzonecheck")
def test_checkers_accept_hostile_labels(tmp_path: Path) -> None:
    zone = _hostile_zone()
    path = tmp_path / "weather.tools.zone"
    path.write_text(master_file(zone), encoding="ascii")
    # named-checkzone's host-name checks warn about such labels; the syntax is what counts
    bind = run("named-checkzone", "-i", "local", "-k", "ignore", zone.name, str(path))
    assert bind.returncode == 0 and bind.stdout.strip().endswith("OK"), bind.stdout
    nsd = run("nsd-checkzone", zone.name, str(path))
    assert nsd.returncode == 0 and "is ok" in nsd.stdout, nsd.stdout + nsd.stderr
    knot = run("kzonecheck", "-o", zone.name, str(path))
    assert knot.returncode == 0, knot.stdout + knot.stderr


def test_export_zones_aaaa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = _cli(capsys, str(tmp_path / "v6"), *SMALL, "--aaaa")
    assert code == 0, stderr
    leaves = [p for p in (tmp_path / "v6").glob("*.zone") if "\tSRV\t" in p.read_text()]
    assert leaves
    parsed = dns.zone.from_text(leaves[0].read_text(), relativize=False)
    aaaa = [rds for _, node in parsed.nodes.items() for rds in node
            if rds.rdtype == dns.rdatatype.AAAA]
    a = [rds for name, node in parsed.nodes.items() for rds in node
         if rds.rdtype == dns.rdatatype.A and not name.labels[0].startswith(b"ns")]
    assert aaaa and len(aaaa) == len(a)
    assert all(rd.to_text().startswith("fd74:6f6f:6c73::") for rds in aaaa for rd in rds)
    assert _cli(capsys, str(tmp_path / "v4"), *SMALL)[0] == 0 and "AAAA" not in "".join(
        p.read_text() for p in (tmp_path / "v4").glob("*.zone"))
