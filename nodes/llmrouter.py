"""The LLM router of seed 000 §3.5: an authoritative server asks an LLM which of its child
zones (or, at a leaf, which tools) fit the intent, by name.

The paper's own prompts (Appendix A): Prompt A ("Agent Role of TLD server") for the
children of the root and the TLD, Prompt B ("Agent Role of NS server", with the zone's
name as ``{topdomain}``) below. Candidates are listed as ``name: summary`` lines — a child
zone by its label (``weather``), a tool by its id — and the model answers with names,
comma-separated, best first. The answer is matched back to candidates leniently (case,
``_``/``-``/spaces, a trailing zone suffix, bullets, numbering, prose around a name);
unknown names and repeats are dropped. Unlike ``llm`` (:class:`nodes.scoring.LLMScorer`,
numbered candidates), nothing here depends on the model copying numbers.

Transport-free like every node: the chat call is injected
(``sim.retrieval.llm.LLMClient``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from nodes.llmreply import LLMError, answer_text, prompt_tokens
from nodes.scoring import LLMScorer, ScoreIndex, approx_tokens, means_nothing

#: Prompt A, Appendix A of seed 000 (the TLD server's role).
TLD_PROMPT = (
    "You are a service-discovery ranking expert.\n"
    "Task: Given a user **query**, a service domain list, select the top **{k}** domains "
    "from the candidate service domains list that can be used to solve user's query.\n"
    "User query: {task}\n"
    "Candidate service domains (each domain describes a service's category and "
    "capability):\n{candidates}\n"
    "Ranking rules:\n"
    "1. Identify the core functionality of the candidate service domains.\n"
    "2. Select no more than {k} domains that are most critical for performing the query "
    "task.\n"
    "3. If no domain is relevant, avoid forcing classifications for unclear entries and "
    "return other.\n"
    "4. The domain must be one of the candidate service domains.\n"
    "5. Return domain names in descending relevance order separated by commas. No "
    "explanation, no markdown, no extra keys."
)

#: Prompt B, Appendix A of seed 000 (an NS server's role below the TLD).
NS_PROMPT = (
    "You are a service-discovery ranking expert in domain {domain}.\n"
    "Task: Given a user **task** and a service category list, select the top **{k}** "
    "category from the candidate service list that can be used to solve user's task.\n"
    "User task: {task}\n"
    "Candidate service category list (each category describes a service's category and "
    "capability):\n{candidates}\n"
    "Ranking rules: 1. Identify the core functionality of the candidate service "
    "categories. 2. Select no more than {k} categories that are most critical for "
    "performing the task. 3. If no category is relevant, avoid forcing classifications for "
    "unclear entries and return other. 4. The category must be one of the candidate "
    "service categories. 5. Return category names in descending relevance order separated "
    "by commas. No explanation, no markdown, no extra keys."
)

_SEPARATORS = re.compile(r"[,;\n]+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)]|#+)\s*")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "-", name.strip().strip("`'\"*.").lower())


def display_names(keys: Sequence[str]) -> tuple[list[str], str | None]:
    """What the model sees for each key, and the zone the keys are children of: a child
    zone by its first label (``weather.tools.`` → ``weather``), anything else (a tool id)
    as it is; the parent is None for tools or for children of different zones."""
    if keys and all(k.endswith(".") and k != "." for k in keys):
        parents = {k.split(".", 1)[1] or "." for k in keys}
        labels = [k.split(".", 1)[0] for k in keys]
        if len(parents) == 1 and len(set(labels)) == len(labels):
            return labels, parents.pop()
    return list(keys), None


def match_names(answer: str, names: Sequence[str], parent: str | None = None) -> list[int]:
    """Indices of the candidates an answer names, in its order, each once (see the module
    docstring for what is tolerated)."""
    lookup: dict[str, int] = {}
    for i, name in enumerate(names):
        lookup.setdefault(_norm(name), i)
        if parent is not None:
            lookup.setdefault(_norm(f"{name}.{parent}"), i)
    by_length = sorted(lookup, key=len, reverse=True)
    out: list[int] = []
    for piece in _SEPARATORS.split(answer):
        piece = _BULLET.sub("", piece)
        key = _norm(piece)
        if not key:
            continue
        found = lookup.get(key)
        if found is None:  # prose around a name: the longest name standing as a word
            padded = f"-{key}-"
            found = next((lookup[n] for n in by_length if f"-{n}-" in padded), None)
        if found is not None and found not in out:
            out.append(found)
    return out


class _RouterIndex:
    def __init__(self, router: LLMRouter, keys: Sequence[str], texts: Sequence[str]) -> None:
        self._router = router
        self._names, self._parent = display_names(keys)
        self._texts = [" ".join(t[: router.max_chars].split()) for t in texts]

    def prompt(self, intent: str) -> str:
        """The prompt this index sends for ``intent``."""
        k = min(self._router.top, len(self._names))
        lines = "\n".join(f"- {n}: {t}" for n, t in zip(self._names, self._texts, strict=True))
        task = " ".join(intent.split())
        if self._parent in (".", "tools."):
            return TLD_PROMPT.format(k=k, task=task, candidates=lines)
        domain = (self._parent or self._router.domain).rstrip(".") or self._router.domain
        return NS_PROMPT.format(domain=domain, k=k, task=task, candidates=lines)

    def scores(self, intent: str) -> np.ndarray:
        router = self._router
        n = len(self._names)
        if n == 0:
            return np.zeros(0)
        prompt = self.prompt(intent)
        body = {"model": router.model, "temperature": 0,
                "messages": [{"role": "user", "content": prompt}]}
        reply = router.chat(body)
        endpoint = str(getattr(router.chat, "endpoint", ""))
        answer = answer_text(reply, endpoint)
        router.prompt_tokens += prompt_tokens(reply, approx_tokens(prompt))
        router.calls += 1
        chosen = match_names(answer, self._names, self._parent)[: max(router.top, 1)]
        if not chosen and not means_nothing(answer):
            router.unparsed += 1
            if router.strict:
                raise LLMError(endpoint, f"answer names no candidate: {answer[:120]!r}")
        out = np.zeros(n)
        for rank, i in enumerate(chosen):
            out[i] = float(n - rank)  # named items first, in the model's order
        return out


class LLMRouter(LLMScorer):
    """A scorer whose ranking is the children (or tools) an LLM names for the intent.

    Named items score ``n - rank`` in the model's order, the rest 0 (ties keep the zone's
    order), at most ``top`` named items count. Its settings and counters (``calls``,
    ``prompt_tokens``, ``unparsed``: answers naming no candidate and not saying ``other``;
    LLMError instead when ``strict``) are :class:`nodes.scoring.LLMScorer`'s; only the
    prompt and the reading of the answer differ. Not ``pure``: every query asks the model
    again."""

    name = "llm-router"

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        return _RouterIndex(self, keys, texts)
