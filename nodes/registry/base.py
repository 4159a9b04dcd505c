"""What the HTTP registry baselines share: the tools they list, their search catalogue,
request plumbing (counters, JSON errors) and the checks of JSON request fields.

The applications are :class:`nodes.registry.agentdns.AgentDNSRegistry` and
:class:`nodes.registry.ans.ANSRegistry`; both search with the very scorer objects the
ToolDNS servers use (``nodes.scoring``), over the same tools, so accuracy differences come
from the architecture, not the retriever.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from nodes.registry.http import Request, Response, json_response
from nodes.scoring import ScoreIndex, Scorer, top_k

ANS_VERSION = "1.0.0"
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}$")  # agentID, provider, protocol


@dataclass(frozen=True, slots=True)
class RegistryTool:
    """One tool as a registry lists it (built from the namespace by the engine side)."""

    id: str
    name: str
    description: str
    service: str
    org: str  # organisation, "public" for the public branch
    category: str  # zone path without "tools.", e.g. "history.weather"
    slug: str
    address: str
    port: int

    @property
    def agentdns_url(self) -> str:
        return f"agentdns://{self.org}/{self.category}/{self.slug}"

    @property
    def capability(self) -> str:
        """ANS capability label: the category path, dots turned into hyphens."""
        return self.category.replace(".", "--")

    @property
    def ans_name(self) -> str:
        return f"{self.service}://{self.slug}.{self.capability}.{self.org}.v{ANS_VERSION}"


@dataclass
class Catalogue:
    """Tools plus a flat score index over ``name description``, the text a ToolDNS leaf
    scores (rebuilt after a change)."""

    scorer: Scorer
    tools: list[RegistryTool]
    _index: ScoreIndex | None = None
    _by_service: dict[str, np.ndarray] = field(default_factory=dict)

    def instance(self) -> Catalogue:
        """This catalogue for one run: its own list of tools, the index shared until a
        change (it is rebuilt then, not changed in place)."""
        return Catalogue(self.scorer, list(self.tools), self._index, self._by_service)

    def add(self, tool: RegistryTool) -> None:
        self.tools.append(tool)
        self._index = None

    def apply_change(self, add: Sequence[RegistryTool], remove: Iterable[str]) -> None:
        """Tools with an id in ``remove`` go; ``add`` replaces tools of the same id (a
        moved endpoint, in place) or is appended; the index is rebuilt on the next search."""
        gone = set(remove)
        new = {t.id: t for t in add}
        self.tools = [new.pop(t.id, t) for t in self.tools if t.id not in gone]
        self.tools.extend(new.values())
        self._index = None

    def use_vectors(self, ids: Sequence[str], matrix: np.ndarray) -> None:
        """Index the tools by given unit vectors (``ids[i]``'s row ``i``: e.g. pseudo-
        documents of a query log) instead of their texts; needs a scorer that scores
        vectors (dense)."""
        vector_index = getattr(self.scorer, "vector_index", None)
        if vector_index is None:
            raise ValueError(f"the {self.scorer.name!r} scorer cannot score vectors")
        row = {t: i for i, t in enumerate(ids)}
        missing = [t.id for t in self.tools if t.id not in row]
        if missing:
            raise ValueError(f"no vector for {len(missing)} tools (e.g. {missing[0]})")
        keys = [t.id for t in self.tools]
        self._index = vector_index(keys, np.asarray([matrix[row[k]] for k in keys]))
        services = np.asarray([t.service for t in self.tools])
        self._by_service = {s: np.flatnonzero(services == s) for s in set(services)}

    def search(self, text: str, k: int, service: str | None) -> list[RegistryTool]:
        if self._index is None:
            self._index = self.scorer.index([t.id for t in self.tools],
                                            [f"{t.name} {t.description}" for t in self.tools])
            services = np.asarray([t.service for t in self.tools])
            self._by_service = {s: np.flatnonzero(services == s) for s in set(services)}
        cand = None if service is None else self._by_service.get(service, np.zeros(0, int))
        return [self.tools[i] for i in top_k(self._index.scores(text), k, cand)]

    def pool(self, service: str | None) -> int:
        """Items a search for ``service`` scored (after :meth:`search` built the index)."""
        if service is None or self._index is None:
            return len(self.tools)
        return len(self._by_service.get(service, ()))


class Routes:
    """Shared plumbing: request counters and JSON error answers.

    A request the application cannot make sense of (bad JSON, a missing or mistyped field,
    a number out of range) is the peer's fault: 400. Anything else raised by a route is a
    bug of ours; it propagates to :class:`nodes.registry.http.ServerConnection`, which answers 500
    and counts it (``handler_error``) without dropping the connection.
    """

    server_name = "registry"
    #: ``stats`` keys of the requests that run a search (what ``processing.registry`` costs)
    search_routes: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()
        self.items_scored = 0

    def instance(self) -> Routes:
        """This application for one run, leaving this one as it is: counters at zero and
        its own catalogue (a change applied in the run, e.g. by churn, changes the instance
        only); what a subclass changes as it answers is copied by its override."""
        new = copy.copy(self)
        new.stats = Counter()
        new.items_scored = 0
        catalogue = getattr(self, "catalogue", None)
        if isinstance(catalogue, Catalogue):
            new.catalogue = catalogue.instance()  # type: ignore[attr-defined]
        return new

    def searches(self) -> int:
        """Search requests answered so far (an engine compares it before and after a
        request to charge the modelled search time to searching requests only)."""
        return sum(self.stats[k] for k in self.search_routes)

    def scored(self) -> int:
        """Items the searches so far have scored (what a search compute model charges by;
        not a ``stats`` key, so node records are as before)."""
        return self.items_scored

    def _error(self, status: int, message: str,
               headers: Sequence[tuple[str, str]] = ()) -> Response:
        self.stats[f"http_{status}"] += 1
        return json_response(status, {"error": message}, self.server_name, headers)

    def __call__(self, req: Request, now: float) -> Response:
        try:
            return self.route(req, now)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OverflowError) as exc:
            return self._error(400, f"bad request: {type(exc).__name__}")

    def route(self, req: Request, now: float) -> Response:
        raise NotImplementedError


def json_object(req: Request) -> dict:
    """The request body as a JSON object (TypeError otherwise: a 400)."""
    body = req.json()
    if not isinstance(body, dict):
        raise TypeError("the body must be a JSON object")
    return body


def text_field(value: object, name: str, max_len: int = 4096) -> str:
    """A non-empty string field of at most ``max_len`` characters (ValueError otherwise)."""
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ValueError(f"{name} must be text of 1 to {max_len} characters")
    return value


def integer_field(value: object, name: str, low: int, high: int) -> int:
    """An integer field within ``[low, high]`` (ValueError otherwise; bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return value
