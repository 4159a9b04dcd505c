"""The namespace of a tool catalogue (a JSONL file in the format of ``shared/data/tools``).

Each tool's ``path`` becomes zones ``sub.category.tools.``; tools without a subcategory in
a category that has some go to ``general.category.tools.``. A query JSONL adds queries
with their truth.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from nodes.dns.wire import SERVICES
from topologies.addresses import assign_endpoints
from topologies.gcpause import gc_paused
from topologies.labels import dns_label, zone_label
from topologies.namespace import ROOT, TLD, Namespace, Query, Tool, ZoneNode
from topologies.summaries import fill_summaries


@gc_paused()
def from_catalog(
    path: str | Path,
    queries: str | Path | None = None,
    limit: int | None = None,
    protocols: Iterable[str] | None = None,
) -> Namespace:
    """Build the tree from a catalogue JSONL (and optionally a query JSONL with truth)."""
    path = Path(path)
    wanted = set(protocols) if protocols else set(SERVICES)
    # per kept row only what the tree needs (not the parsed row): id, name, description,
    # protocol, path labels, whether the path has a subcategory, slug, organisation
    rows: list[tuple[str, str, str, str, list[str], bool, str, str]] = []
    shared: dict[str, str] = {}  # one string object per distinct protocol / organisation
    label_of: dict[str, str] = {}  # path entry -> its DNS label (few distinct)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                _ = row["id"], row["name"], row["description"], row["protocol"], row["path"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a catalogue row ({exc})") from None
            if row["protocol"] in wanted:
                org = org_of(row)
                rows.append((row["id"], row["name"], row["description"],
                             shared.setdefault(row["protocol"], row["protocol"]),
                             [label_of.get(x) or label_of.setdefault(x, zone_label(x))
                              for x in row["path"][:2]], len(row["path"]) > 1,
                             dns_label(row.get("slug") or row["name"]),
                             shared.setdefault(org, org)))
            if limit is not None and len(rows) >= limit:
                break
    zones: dict[str, ZoneNode] = {ROOT: ZoneNode(ROOT, children=[TLD]), TLD: ZoneNode(TLD)}
    has_sub = {r[4][0] for r in rows if r[5]}
    tools: dict[str, Tool] = {}
    for tid, name, description, service, labels, _, slug, org in rows:
        if len(labels) == 1 and labels[0] in has_sub:
            labels.append("general")
        zone = TLD
        for label in labels:
            child = f"{label}.{zone}"
            node = zones.get(child)
            if node is None:
                node = zones[child] = ZoneNode(child)
                zones[zone].children.append(child)
            zone = node.name  # the zone's own string, shared by its tools
        tools[tid] = Tool(id=tid, name=name, description=description, service=service,
                          zone=zone, slug=slug, org=org)
    del rows
    unique_slugs(tools)
    for tool in tools.values():
        zones[tool.zone].tools.append(tool.id)
    for node in zones.values():
        node.children.sort()
    ns = Namespace(zones=zones, tools=tools, queries=[], origin=str(path))
    fill_summaries(ns)
    assign_endpoints(ns)
    if queries is not None:
        ns.queries = _load_queries(queries, tools)
    return ns


def org_of(row: dict) -> str:
    """The publisher's label: the owner in an ``owner/name`` name, else the row's source."""
    name = str(row.get("name", ""))
    if "/" in name:
        return dns_label(name.split("/")[0], "org")
    return dns_label(str(row.get("source", "community")), "community")


def unique_slugs(tools: dict[str, Tool]) -> None:
    """Suffix ``-2``, ``-3`` … to slugs taken in their zone (in id order), so targets are
    unique. (Slugs are DNS labels: a target is taken iff its slug is taken in its zone.)"""
    seen: dict[str, set[str]] = {}  # zone -> slugs
    for tid in sorted(tools):
        tool = tools[tid]
        taken = seen.get(tool.zone)
        if taken is None:
            taken = seen[tool.zone] = set()
        slug, n = tool.slug, 1
        while slug in taken:
            n += 1
            slug = f"{tool.slug[:58]}-{n}"
        tool.slug = slug
        taken.add(slug)


def _load_queries(path: str | Path, tools: dict[str, Tool]) -> list[Query]:
    """Queries JSONL (``{"query", "tool_ids", "source"}``) restricted to known tools."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                text, ids = row["query"], row["tool_ids"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a query row ({exc})") from None
            truth = tuple(i for i in ids if i in tools)
            if truth:
                out.append(Query(id=f"q{lineno}", text=text, service=tools[truth[0]].service,
                                 truth=truth, source=row.get("source", "file")))
    return out
