"""An agent's local mirror of a registry listing: the search front end of the DNS-native
discovery schemes, which leave capability search out of their scope.

The MCP Registry is meant to be mirrored by aggregators and searched locally; a mirror
here is the namespace's whole catalogue (every tool's text and where its organisation
publishes it), ranked in the agent with the namespace's scorer, one index per service
built on first use and shared by every agent of the run (read-only after). A search
costs what the search compute model says (:mod:`nodes.searchcost`: one encoding and the
service's items), the time the agent waits before its first DNS query. Keeping the mirror
fresh (downloading the listing) is not part of a discovery and not counted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nodes.scoring import Ranker, Scorer, ranker
from nodes.searchcost import SearchCost


@dataclass(frozen=True, slots=True)
class Candidate:
    """A tool the search chose: where its organisation publishes it."""

    tool_id: str
    domain: str  # the organisation's domain (``acme.example.``)
    label: str  # the agent's label in it
    service: str  # mcp | a2a | rest | skill

    @property
    def host(self) -> str:
        return f"{self.label}.{self.domain}"


@dataclass
class Mirror:
    """The catalogue an agent searches locally: candidates with their texts."""

    candidates: Sequence[Candidate]
    texts: Sequence[str]
    scorer: Scorer
    cost: SearchCost
    _indexes: dict[str, tuple[list[int], Ranker]] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, object]:
        """Shipped to another process without its indexes (rebuilt there on first use:
        a ranker may be a closure, which does not pickle)."""
        return {**self.__dict__, "_indexes": {}}

    def _service(self, service: str) -> tuple[list[int], Ranker]:
        entry = self._indexes.get(service)
        if entry is None:
            rows = [i for i, c in enumerate(self.candidates) if c.service == service]
            index = self.scorer.index([self.candidates[i].tool_id for i in rows],
                                      [self.texts[i] for i in rows])
            entry = self._indexes[service] = (rows, ranker(index))
        return entry

    def items(self, service: str) -> int:
        """Tools of ``service`` a search ranks."""
        return len(self._service(service)[0])

    def search(self, intent: str, service: str, k: int) -> list[Candidate]:
        """The top-``k`` candidates of ``service`` for ``intent``, best first."""
        rows, rank = self._service(service)
        if not rows:
            return []
        return [self.candidates[rows[i]] for i in rank(intent, max(k, 1))]

    def seconds(self, service: str) -> float:
        """The modelled time of one search of ``service``."""
        return self.cost.search(self.items(service))
