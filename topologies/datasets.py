"""Retrieval datasets: catalogue and query rows, the ToolDNS release, synthetic data, splits.

* :func:`load_catalog` / :func:`load_queries` read the JSONL format of ``shared/data/tools``
  (one tool per line: ``id, name, description, protocol, path[, category, subcategory, …]``;
  one query per line: ``query, tool_ids[, source]``).
* :func:`load_tooldns_release` reads the ToolDNS paper's benchmark (seed 000 §5.1) as the
  paper describes it: per tool a name, a functional summary, a protocol (MCP/A2A/REST/Skill),
  a two-level category (top category from its Appendix B, sub-category) and generated task
  queries. The files themselves were not published where this project can read them, so
  the loader accepts JSON or JSONL records with the common spellings of those fields (see
  :data:`RELEASE_FIELDS`) and turns them into catalogue and query rows.
* :func:`synthetic_catalog` writes the core synthetic namespace (known truth) as rows.
* :func:`tool_split` — a split by tool: a seeded share of the tools with every query that
  names one held out, then :func:`stratified_split` of the rest;
* :func:`stratified_split` — a seeded train/test split of queries, stratified by the
  category of their (first) ground-truth tool; the paper uses 60/40.
* :func:`namespace_from_paths` builds a :class:`~topologies.namespace.Namespace` from rows
  and one label path per tool (used by the catalogue categories and by the taxonomy).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from nodes.dns.wire import SERVICES
from topologies.addresses import assign_endpoints
from topologies.catalog import org_of, unique_slugs
from topologies.labels import dns_label, zone_label
from topologies.namespace import ROOT, TLD, Namespace, Query, Tool, ZoneNode
from topologies.summaries import fill_summaries
from topologies.synthetic import synthetic

Row = dict

#: Release field → accepted spellings (first present wins).
RELEASE_FIELDS: dict[str, tuple[str, ...]] = {
    "name": ("name", "tool_name", "api_name", "tool"),
    "description": ("summary", "functional_summary", "description", "tool_description", "desc"),
    "protocol": ("protocol", "type", "tool_type", "source_type"),
    "category": ("category", "first_category", "top_category", "domain", "category_1"),
    "subcategory": ("subcategory", "sub_category", "second_category", "category_2"),
    "queries": ("queries", "query", "tasks", "task", "task_description", "instructions"),
}
_PROTOCOL_ALIASES = {"mcp": "mcp", "a2a": "a2a", "rest": "rest", "restful": "rest",
                     "restful api": "rest", "api": "rest", "toolbench": "rest", "skill": "skill",
                     "skills": "skill", "openclaw": "skill", "openclaw skills": "skill"}


def _jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: not a JSON object")
            yield lineno, row


def load_catalog(path: str | Path, limit: int | None = None,
                 protocols: Iterable[str] | None = None) -> list[Row]:
    """Catalogue rows (checked for ``id, name, description, protocol, path``)."""
    path = Path(path)
    wanted = set(protocols) if protocols else set(SERVICES)
    rows: list[Row] = []
    seen: set[str] = set()
    for lineno, row in _jsonl(path):
        missing = [k for k in ("id", "name", "description", "protocol", "path") if k not in row]
        if missing:
            raise ValueError(f"{path}:{lineno}: not a catalogue row (missing {missing})")
        if not isinstance(row["path"], list) or not row["path"]:
            raise ValueError(f"{path}:{lineno}: path must be a non-empty list")
        if row["id"] in seen:
            raise ValueError(f"{path}:{lineno}: duplicate id {row['id']!r}")
        seen.add(row["id"])
        if row["protocol"] in wanted:
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    return rows


def load_queries(path: str | Path, known: Iterable[str] | None = None) -> list[Row]:
    """Query rows (``query``, ``tool_ids``), keeping only known tool ids (rows left empty go)."""
    path = Path(path)
    ids = set(known) if known is not None else None
    out: list[Row] = []
    for lineno, row in _jsonl(path):
        if not isinstance(row.get("query"), str) or not isinstance(row.get("tool_ids"), list):
            raise ValueError(f"{path}:{lineno}: not a query row (needs query and tool_ids)")
        truth = [t for t in row["tool_ids"] if ids is None or t in ids]
        if truth:
            out.append({**row, "tool_ids": truth, "line": lineno})
    return out


def _pick(record: dict, field: str) -> object:
    for key in RELEASE_FIELDS[field]:
        if record.get(key) not in (None, "", []):
            return record[key]
    return None


def load_tooldns_release(path: str | Path) -> tuple[list[Row], list[Row]]:
    """Catalogue and query rows from the ToolDNS benchmark format (see module docstring)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8").strip()
    records = (list(enumerate(json.loads(text), 1)) if text.startswith("[")
               else list(_jsonl(path)))
    rows: list[Row] = []
    queries: list[Row] = []
    used: set[str] = set()
    for lineno, rec in records:
        name, desc = _pick(rec, "name"), _pick(rec, "description")
        category = _pick(rec, "category")
        if not name or not desc or not category:
            raise ValueError(f"{path}:{lineno}: needs a name, a summary/description and a "
                             "category")
        proto = _PROTOCOL_ALIASES.get(str(_pick(rec, "protocol") or "rest").strip().lower())
        if proto is None:
            raise ValueError(f"{path}:{lineno}: unknown protocol {_pick(rec, 'protocol')!r}")
        sub = _pick(rec, "subcategory")
        tool_path = [zone_label(str(category))] + ([zone_label(str(sub))] if sub else [])
        base = f"tooldns:{dns_label(str(name))}"
        tid, n = base, 1
        while tid in used:
            n += 1
            tid = f"{base}-{n}"
        used.add(tid)
        rows.append({"id": tid, "name": str(name), "description": str(desc), "protocol": proto,
                     "category": str(category), "subcategory": str(sub) if sub else None,
                     "path": tool_path, "source": "tooldns"})
        raw = _pick(rec, "queries")
        items: list[object]
        if isinstance(raw, str):
            items = [raw]
        elif isinstance(raw, list | dict):
            items = list(raw)
        elif not raw:
            items = []
        else:
            raise ValueError(f"{path}:{lineno}: queries must be text or a list")
        for q in items:
            text_q = q.get("query") if isinstance(q, dict) else q
            if isinstance(text_q, str) and text_q.strip():
                queries.append({"query": text_q.strip(), "tool_ids": [tid], "source": "tooldns"})
    return rows, queries


def synthetic_catalog(n_tools: int = 1000, branching: int = 4, depth: int = 2, seed: int = 0,
                      n_queries: int = 200) -> tuple[list[Row], list[Row]]:
    """The core synthetic namespace (:func:`topologies.synthetic.synthetic`) as rows."""
    ns = synthetic(n_tools=n_tools, branching=branching, depth=depth, seed=seed,
                   n_queries=n_queries)
    rows = []
    for tid in sorted(ns.tools):
        tool = ns.tools[tid]
        labels = [z.split(".")[0] for z in ns.path(tool.zone)[1:]]
        rows.append({"id": tid, "name": tool.name, "description": tool.description,
                     "protocol": tool.service, "category": labels[0],
                     "subcategory": labels[1] if len(labels) > 1 else None, "path": labels,
                     "slug": tool.slug, "source": "synthetic"})
    queries = [{"query": q.text, "tool_ids": list(q.truth), "source": q.source}
               for q in ns.queries]
    return rows, queries


def category_of(row: Row) -> str:
    """A row's leaf category as a ``/``-joined label path."""
    return "/".join(dns_label(str(x)) for x in row["path"])


def stratified_split(
    queries: Sequence[Row], stratum: Callable[[Row], str], test_fraction: float = 0.4,
    seed: int = 0,
) -> tuple[list[Row], list[Row]]:
    """(train, test): per stratum a seeded shuffle, ``round(test_fraction·n)`` held out.

    Strata are visited in sorted order and each gets its own RNG stream from ``seed``, so
    adding queries to one category leaves the split of the others unchanged.
    """
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError("test_fraction must lie in [0, 1]")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(queries):
        groups[stratum(q)].append(i)
    train: list[int] = []
    test: list[int] = []
    for key in sorted(groups):
        idx = groups[key][:]
        random.Random(f"{seed}:{key}").shuffle(idx)
        n_test = round(test_fraction * len(idx))
        test += idx[:n_test]
        train += idx[n_test:]
    return [queries[i] for i in sorted(train)], [queries[i] for i in sorted(test)]


def tool_split(
    queries: Sequence[Row], category: Callable[[str], str], unseen_fraction: float,
    test_fraction: float, seed: int = 0,
) -> tuple[list[Row], list[Row], set[str]]:
    """(train, test, unseen tools): a split by tool. Per leaf category (sorted, each its
    own seeded stream) ``round(unseen_fraction·n)`` of the ``n`` tools some query names
    are held out; every query naming a held-out tool is a test query, so no training query
    names one. The other queries are split as :func:`stratified_split` splits them."""
    if not 0.0 < unseen_fraction < 1.0:
        raise ValueError("unseen_fraction must lie in (0, 1)")
    by_cat: dict[str, set[str]] = defaultdict(set)
    for q in queries:
        for t in q["tool_ids"]:
            by_cat[category(t)].add(t)
    unseen: set[str] = set()
    for key in sorted(by_cat):
        tools = sorted(by_cat[key])
        random.Random(f"{seed}:tools:{key}").shuffle(tools)
        unseen.update(tools[:round(unseen_fraction * len(tools))])
    held = [q for q in queries if unseen.intersection(q["tool_ids"])]
    rest = [q for q in queries if not unseen.intersection(q["tool_ids"])]
    train, test = stratified_split(rest, lambda q: category(q["tool_ids"][0]), test_fraction,
                                   seed)
    order = {id(q): i for i, q in enumerate(queries)}
    return train, sorted(test + held, key=lambda q: order[id(q)]), unseen


def write_jsonl(path: str | Path, rows: Iterable[Row]) -> None:
    """Write rows as JSONL, atomically (a temporary file beside it, then one rename)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# -------------------------------------------------------------------- rows → namespace


def catalog_paths(rows: Sequence[Row]) -> dict[str, list[list[str]]]:
    """The catalogue's own two-level paths, as ``from_catalog`` builds them (plus
    ``general`` for tools without a subcategory in a category that has some)."""
    has_sub = {zone_label(r["path"][0]) for r in rows if len(r["path"]) > 1}
    out: dict[str, list[list[str]]] = {}
    for r in rows:
        labels = [zone_label(x) for x in r["path"][:2]]
        if len(labels) == 1 and labels[0] in has_sub:
            labels.append("general")
        out[r["id"]] = [labels]
    return out


def namespace_from_paths(
    rows: Sequence[Row], paths: dict[str, list[list[str]]], queries: Sequence[Row] = (),
    summaries: dict[tuple[str, ...], str] | None = None, origin: str = "",
) -> Namespace:
    """A namespace with each tool under its label path(s), top label first.

    A tool with several paths (multi-parent placement) is published once per path: the
    first copy keeps its id, the others get ``id~2``, ``id~3`` (:func:`canonical_id` maps
    them back). ``summaries`` maps a label path to its zone summary; zones without one get
    the default summary (label words plus frequent terms).
    """
    zones: dict[str, ZoneNode] = {ROOT: ZoneNode(ROOT, children=[TLD]), TLD: ZoneNode(TLD)}
    tools: dict[str, Tool] = {}
    zone_of_path: dict[tuple[str, ...], str] = {(): TLD}
    for row in rows:
        for n, labels in enumerate(paths[row["id"]], 1):
            zone = TLD
            for depth in range(len(labels)):
                key = tuple(labels[: depth + 1])
                child = zone_of_path.get(key)
                if child is None:
                    child = f"{labels[depth]}.{zone}"
                    zones[child] = ZoneNode(child)
                    zones[zone].children.append(child)
                    zone_of_path[key] = child
                zone = child
            tid = row["id"] if n == 1 else f"{row['id']}~{n}"
            tools[tid] = Tool(id=tid, name=row["name"], description=row["description"],
                              service=row["protocol"], zone=zone,
                              slug=dns_label(row.get("slug") or row["name"]), org=org_of(row))
    unique_slugs(tools)
    for tool in tools.values():
        zones[tool.zone].tools.append(tool.id)
    for node in zones.values():
        node.children.sort()
    for key, text in (summaries or {}).items():
        found = zone_of_path.get(key)
        if found is not None:
            zones[found].summary = text
    ns = Namespace(zones=zones, tools=tools, queries=[], origin=origin)
    fill_summaries(ns)
    assign_endpoints(ns)
    kept: list[Query] = []
    for i, q in enumerate(queries):
        truth = tuple(t for t in q["tool_ids"] if t in tools)
        if truth:
            kept.append(Query(id=f"q{q.get('line', i + 1)}", text=q["query"],
                              service=tools[truth[0]].service, truth=truth,
                              source=q.get("source", "file")))
    ns.queries = kept
    return ns


def canonical_id(tool_id: str) -> str:
    """The catalogue id of a published tool (strips a multi-parent copy's ``~n``)."""
    return tool_id.split("~", 1)[0]
