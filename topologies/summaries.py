"""Zone summaries: a zone's label words plus the frequent words of the tools below it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from nodes.scoring import tokenize
from topologies.namespace import ROOT, Namespace


def summarise(texts: Iterable[str], head: str = "", limit: int = 16,
              counts: Counter[str] | None = None) -> str:
    """A short summary: ``head`` plus the most frequent content words of ``texts`` (or of
    ``counts``: in how many texts each word occurs)."""
    if counts is None:
        counts = Counter()
        for text in texts:
            counts.update(set(tokenize(text)))
    head_tokens = tokenize(head)
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if w not in head_tokens][: max(0, limit - len(head_tokens))]
    return " ".join([head, *words]).strip()


def fill_summaries(ns: Namespace, limit: int = 16) -> None:
    """Summaries bottom-up for zones that have none: label words plus frequent terms."""
    wanted = {z for z, node in ns.zones.items() if not node.summary and z != ROOT}
    if not wanted:
        return
    # per zone, in how many texts of the tools in or below it each word occurs: each text
    # is tokenised once, counted in its own zone, and each zone's counts added up its path
    own: dict[str, Counter[str]] = {}
    for tool in ns.tools.values():
        counts = own.get(tool.zone)
        if counts is None:
            counts = own[tool.zone] = Counter()
        counts.update(set(tokenize(f"{tool.name} {tool.description}")))
    below: dict[str, Counter[str]] = {z: Counter() for z in wanted}
    for zone, counts in own.items():
        for z in ns.path(zone):
            if z in below:
                below[z].update(counts)
    for name, node in ns.zones.items():
        if name in wanted:
            head = name.split(".")[0].replace("-", " ")
            node.summary = summarise((), head=head, limit=limit, counts=below[name])
