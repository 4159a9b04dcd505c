"""A hierarchy's zones as master files plus NSD, Knot and BIND configuration that loads them.

:func:`export_zones` writes, atomically (``analysis.files.Staging``: all files appear
together or none), one ``<zone>.zone`` per zone (the root as ``root.zone``; text from
``nodes.authoritative.zonefile``) and three configuration fragments serving them as primary
zones: ``nsd.conf``, ``knot.conf`` and ``named.conf``, each opening with a comment on how to
use it. ``tooldns export-zones`` (sim/cli/export_zones.py) is its command. A hierarchy whose servers
sign (``sim.build.trust.sign_hierarchy``, ``--sign``) is written signed: each file holds what
its server transfers (DNSKEY, the children's DS, an NSEC chain, RRSIGs), so the copies join
the chain the trust anchor starts.

The configurations name the files by absolute path inside double quotes, and the zones by
name. A folder whose path could not be written safely into all three grammars (a double
quote or backslash, which NSD's and Knot's quoted strings cannot escape, a control
character such as a newline, which would end a comment or a statement, a non-ASCII
character) is refused (:class:`ExportPathError`), as is a zone whose name is not plain
letters, digits, ``-`` and ``_`` (it names a file, too): nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.build.hierarchy import Hierarchy

CONFIGS = ("nsd.conf", "knot.conf", "named.conf")
_ZONE_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


class ExportPathError(ValueError):
    """An output folder whose path cannot be written into the configurations safely."""


def path_problem(path: Path) -> str | None:
    """Why ``path`` (absolute) cannot go into nsd.conf, knot.conf and named.conf, or None:
    printable ASCII only, and neither ``"`` nor ``\\``."""
    text = str(path)
    bad = next((c for c in text if c in '"\\' or not " " <= c <= "~"), None)
    if bad is None:
        return None
    return (f"the folder {text!r} has the character {bad!r}, which cannot be written safely "
            f"into nsd.conf, knot.conf and named.conf (refused: double quotes, backslashes, "
            f"control and non-ASCII characters); choose another folder")


def _zone_name_problem(zone: str) -> str | None:
    labels = zone.rstrip(".").split(".") if zone not in (".", "") else []
    if all(label and set(label) <= _ZONE_PLAIN for label in labels):
        return None
    return (f"zone {zone!r}: a zone name must be letters, digits, '-' and '_' (it names a "
            f"file and is quoted in nsd.conf, knot.conf and named.conf)")

_NOTE = ("Zones exported by `tooldns export-zones` from a ToolDNS hierarchy: the static records "
         "its servers answer to standard questions (intent answers are computed per query "
         "and are not in the files; see each zone file's header). Zone files are named by "
         "absolute path: export again, or edit the paths, if the folder moves.")


@dataclass
class Export:
    """What :func:`export_zones` wrote: file names (in ``out``), zones and records."""

    out: Path
    files: list[str] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    records: int = 0
    signed: bool = False  # the files carry DNSSEC records (the servers sign)
    #: "zone Z: the SRV RRset at … needs at least N bytes, …"
    #: (``nodes.authoritative.zonefile.oversized``)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"wrote {len(self.files)} files to {self.out}/: {len(self.zones)} "
                f"{'signed ' if self.signed else ''}zones, {self.records} records; "
                f"{', '.join(CONFIGS)} load them")


def zone_file_name(zone: str) -> str:
    """``tools.`` → ``tools.zone``; the root → ``root.zone``."""
    return (zone.rstrip(".") or "root") + ".zone"


def export_zones(hierarchy: Hierarchy, out_dir: str | Path, source: str = "") -> Export:
    """Write every zone of ``hierarchy`` and the three configurations into ``out_dir``
    (created if missing; files of the same names are replaced, others left alone).

    Raises :class:`ExportPathError` (a folder the configurations cannot name safely),
    ``nodes.authoritative.zonefile.ZoneFileError`` (a bad name) or
    ``analysis.files.OutputError`` (the folder cannot be written); then nothing is written.
    """
    from analysis.files import Staging
    from nodes.authoritative.zonefile import (
        ZoneFileError,
        check_zone,
        master_file,
        oversized,
        walk_records,
    )

    out = Path(out_dir)
    where = out.resolve()
    problem = path_problem(where)
    if problem is not None:
        raise ExportPathError(problem)
    result = Export(out)
    texts: dict[str, str] = {}
    too_big: list[str] = []  # zones BIND will not load (an RRset over 64 KiB of RDATA)
    for zone, address in hierarchy.zone_servers().items():  # the first replica of each
        server = hierarchy.servers[address]
        data = server.zone_data(zone)
        check_zone(data)  # before its records are encoded (a bad name would break that)
        if (problem := _zone_name_problem(zone)) is not None:
            raise ZoneFileError(problem)
        signed = server.signer is not None
        records = server.transfer_records(zone) if signed else server.zone_records(zone)
        warnings = oversized(records)
        if any(w.bind_refuses for w in warnings):
            too_big.append(zone)
        result.warnings += [f"zone {zone}: {w}" for w in warnings]
        texts[zone] = master_file(data, source, records, warnings, signed)
        result.zones.append(zone)
        result.records += len(records) + (0 if signed else len(walk_records(data)))
        result.signed = signed
    configs = {"nsd.conf": nsd_conf(result.zones, where), "knot.conf": knot_conf(
        result.zones, where), "named.conf": named_conf(result.zones, where, too_big)}
    with Staging(out) as staging:
        for zone, text in texts.items():
            staging.write(zone_file_name(zone), _writer(text))
        for name, text in configs.items():
            staging.write(name, _writer(text))
        # configurations last: they never name a zone file not yet in place
        result.files = staging.commit(last=CONFIGS)
    return result


def _writer(text: str) -> Callable[[str], None]:
    def write(path: str) -> None:
        Path(path).write_text(text, encoding="ascii")
    return write


def _comment(prefix: str, lines: list[str]) -> str:
    import textwrap

    wrapped = [w for line in lines
               for w in (textwrap.wrap(line, 86, break_on_hyphens=False) or [""])]
    return "\n".join(f"{prefix} {w}".rstrip() for w in wrapped) + "\n"


def nsd_conf(zones: list[str], where: Path) -> str:
    """NSD ``zone:`` clauses for the exported files (primary zones)."""
    head = _comment("#", [
        "NSD configuration fragment: " + _NOTE, "",
        f'Use: add `include: "{where}/nsd.conf"` to nsd.conf (its server: clause, '
        "addresses and port stay yours), then `nsd-checkconf` and `nsd-control reconfig` "
        "(or restart NSD). NSD serves every zone on every address it listens on; ToolDNS "
        "gives each zone its own server, so a parent answering for a child here answers "
        "from the child's zone instead of referring."])
    body = "".join(f'\nzone:\n\tname: "{z}"\n\tzonefile: "{where / zone_file_name(z)}"\n'
                   for z in zones)
    return head + body


def knot_conf(zones: list[str], where: Path) -> str:
    """Knot DNS ``zone:`` entries for the exported files (primary zones, never rewritten)."""
    head = _comment("#", [
        "Knot DNS configuration fragment: " + _NOTE, "",
        f"Use: add `include: {where}/knot.conf` to knot.conf (server:, database: and "
        "template: stay yours; the file holds the zone: section, which must not appear "
        "elsewhere), then `knotc conf-check` and `knotc reload`. The files are loaded "
        "whole and never written back (zonefile-sync: -1, journal-content: none)."])
    body = "\nzone:\n" + "".join(
        f'  - domain: "{z}"\n    file: "{where / zone_file_name(z)}"\n'
        "    zonefile-load: whole\n    zonefile-sync: -1\n    journal-content: none\n"
        for z in zones)
    return head + body


def named_conf(zones: list[str], where: Path, too_big: Sequence[str] = ()) -> str:
    """BIND 9 ``zone`` statements for the exported files (primary zones); ``too_big``:
    zones with an RRset BIND refuses to load (``nodes.authoritative.zonefile.Oversized``)."""
    lines = [
        "BIND 9 configuration fragment: " + _NOTE, "",
        f'Use: add `include "{where}/named.conf";` to named.conf (options stay yours), '
        "then `named-checkconf -z` and `rndc reconfig`. (`named-checkzone` run on a file "
        "alone looks the delegations' name servers up with the system resolver unless "
        "given `-i local`: the glue in the file is what matters.)"]
    if too_big:
        lines += ["", f"BIND will not load {', '.join(too_big)}: an RRset there holds more "
                  "than 64 KiB of data (see the WARNING in the zone file); named serves the "
                  "other zones and logs the failure."]
    head = _comment("//", lines)
    body = "".join(f'\nzone "{z}" {{\n\ttype primary;\n\tfile "{where / zone_file_name(z)}";'
                   f"\n}};\n" for z in zones)
    return head + body
