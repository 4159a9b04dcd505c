"""LLM taxonomy labelling (``taxonomy.labels: llm``): a model names and summarises each zone
of a built taxonomy, in place of the clustering's distinctive terms.

Seed 000 §3.5 lets zone summaries be "generated offline using an LLM"; A2X (seed 001) has
an LLM name its categories. For every zone, top-down (a parent's new name is in its
children's prompts), the model is shown the zone's distinctive terms and up to
``examples`` of its tools (those sharing the most of those terms) and asked for two
lines, ``label:`` and ``summary:``. The label becomes the zone's DNS label (DNS-safe, unique
among its siblings: a clash gets ``-2``, ``-3`` …; an unusable one keeps the old label)
and ``label. summary`` its summary, the text its parent routes by. The tools' paths follow
the renamed zones. An answer without a ``label:`` or ``summary:`` line raises
:class:`nodes.llmreply.LLMError` naming the zone (or, with ``strict=False``, keeps the
zone's terms and counts it).

Transport-free: the chat call is injected (``sim.retrieval.llm.LLMClient``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from nodes.llmreply import ChatTransport, LLMError, answer_text
from topologies.datasets import Row
from topologies.labels import zone_label
from topologies.taxonomy import RESERVED, Taxonomy

#: the prompt for one zone (the stand-in, ``sim.retrieval.standin``, recognises its start)
LABEL_PROMPT = (
    "Name this group of tools for a DNS-style service directory{within}.\n"
    "Distinctive words of the group: {terms}\n"
    "Tools in the group ({size} in all, {shown} shown):\n{tools}\n"
    "Answer with exactly two lines and nothing else:\n"
    "label: <one to three lower-case words joined by hyphens, naming what the tools do>\n"
    "summary: <one sentence saying what these tools do>"
)

_FIELD = re.compile(r"^[\s*_#>-]*(label|name|summary|description)[\s*_]*[:=]\s*(.*)$",
                    re.IGNORECASE)


@dataclass
class LabelReport:
    """What a labelling did: zones asked, renamed, and answers that could not be read."""

    asked: int = 0
    renamed: int = 0
    unparsed: list[str] = field(default_factory=list)


def parse_label(answer: str) -> tuple[str, str] | None:
    """(label, summary) from a ``label:`` / ``summary:`` answer; None without either line.
    Markdown emphasis, bullets and quotes around the fields are tolerated."""
    found: dict[str, str] = {}
    for line in answer.splitlines():
        match = _FIELD.match(line)
        if match:
            key = "label" if match.group(1).lower() in ("label", "name") else "summary"
            value = match.group(2).strip().strip("*_`'\"").strip()
            if value and key not in found:
                found[key] = value
    if "label" not in found or "summary" not in found:
        return None
    return found["label"], " ".join(found["summary"].split())


def _members(tax: Taxonomy) -> dict[tuple[str, ...], list[str]]:
    """Tool ids below each zone path (a tool under two parents counts in both)."""
    out: dict[tuple[str, ...], list[str]] = {}
    for tid, paths in tax.paths.items():
        seen: set[tuple[str, ...]] = set()
        for path in paths:
            for depth in range(1, len(path) + 1):
                prefix = tuple(path[:depth])
                if prefix not in seen:
                    seen.add(prefix)
                    out.setdefault(prefix, []).append(tid)
    return out


def _terms(summary: str) -> list[str]:
    return summary.split(".", 1)[0].split()


def label_prompt(path: Sequence[str], summary: str, tools: Sequence[Row], size: int,
                 parent: str | None) -> str:
    """The prompt for one zone (``parent``: its parent's label, None at the top)."""
    lines = "\n".join(f"- {r['name']}: {' '.join(str(r['description'])[:200].split())}"
                      for r in tools)
    within = f", inside the group {parent!r}" if parent else ""
    return LABEL_PROMPT.format(within=within, terms=", ".join(_terms(summary)[:24]),
                               size=size, shown=len(tools), tools=lines)


def llm_labels(tax: Taxonomy, rows: Sequence[Row], chat: ChatTransport,
               model: str = "default", examples: int = 8, strict: bool = True,
               report: LabelReport | None = None) -> Taxonomy:
    """A copy of ``tax`` with every zone named and summarised by the model behind ``chat``
    (see the module docstring); ``report`` (if given) is filled in. Zones are asked in
    sorted order, top-down, so a deterministic endpoint gives a deterministic tree."""
    report = report if report is not None else LabelReport()
    by_id = {r["id"]: r for r in rows}
    members = _members(tax)
    endpoint = str(getattr(chat, "endpoint", ""))
    renamed: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}
    summaries: dict[tuple[str, ...], str] = {}
    used: dict[tuple[str, ...], set[str]] = {}
    for path in sorted(tax.summaries, key=lambda p: (len(p), p)):
        old_summary = tax.summaries[path]
        parent_new = renamed.get(path[:-1], path[:-1])
        ids = members.get(path, [])
        terms = set(_terms(old_summary))
        central = sorted(ids, key=lambda t: (-len(terms & set(
            f"{by_id[t]['name']} {by_id[t]['description']}".lower().split())), t))
        shown = [by_id[t] for t in central[:examples]]
        prompt = label_prompt(path, old_summary, shown, len(ids),
                              parent_new[-1] if parent_new else None)
        body = {"model": model, "temperature": 0,
                "messages": [{"role": "user", "content": prompt}]}
        report.asked += 1
        parsed = parse_label(answer_text(chat(body), endpoint))
        siblings = used.setdefault(parent_new, set())
        if parsed is None:
            if strict:
                raise LLMError(endpoint, f"the answer for zone {'.'.join(reversed(path))} "
                               f"has no 'label:' and 'summary:' lines")
            report.unparsed.append(".".join(reversed(path)))
            label, summary = path[-1], old_summary
        else:
            name, sentence = parsed
            label = _unique(zone_label(name, fallback=""), siblings) or path[-1]
            summary = f"{label.replace('-', ' ')}. {sentence}"
        if label in siblings:  # the old label, taken by a renamed sibling
            label = _unique(label, siblings) or label
        siblings.add(label)
        new_path = (*parent_new, label)
        renamed[path] = new_path
        summaries[new_path] = summary
        report.renamed += new_path != path
    paths = {tid: [list(renamed.get(tuple(p), tuple(p))) for p in ps]
             for tid, ps in tax.paths.items()}
    return replace(tax, paths=paths, summaries=summaries)


def _unique(label: str, taken: set[str]) -> str:
    """``label``, or ``label-2``, ``label-3`` … when a sibling has it; '' if unusable."""
    if not label or label in RESERVED:
        return ""
    if label not in taken:
        return label
    n = 2
    while f"{label}-{n}"[:62] in taken:
        n += 1
    return f"{label}-{n}"[:62]
