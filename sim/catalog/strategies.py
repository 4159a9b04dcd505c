"""The DNS client strategies a scheme may name (``schemes[].kind`` of a DNS scheme), as
:mod:`sim.catalog.registries` names the HTTP registries.

A strategy is how an agent goes from an intent to endpoints through the DNS: which agent
asks (its code, imported on first use), the resolver behaviour it needs, the records the
namespace must publish for it, the scheme fields that do not apply to it, and the engines
that run it. A strategy runs in one or more *modes* (``schemes[].mode``; the first is the
default): today's ToolDNS walk with the intent option (``aware``), the same cursor query
through a stock resolver that drops or forwards the option (``strip``, ``pass-through``),
and the intent carried in the query name through a stock resolver (``qname``).

The plan builds each scheme's agents and resolvers from its entry
(:func:`sim.build.plan.make_plan`); the run loop refuses a scheme on an engine its entry
does not list, and a scheme field its mode fixes, before anything is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, get_args

from nodes.resolver.config import Mode as ResolverMode

#: Record sets a namespace can publish (the hierarchy's ``publishes``), by name: what a
#: strategy's ``publishes`` may list.
RECORD_SETS: Mapping[str, str] = MappingProxyType({
    "tooldns": "the .tools zones: cursor names answered with the intent option (top-K NS "
               "referrals, SRV + A at leaves), SRV/A/TXT under plain names, and "
               "intent-in-QNAME names answered by CNAME chains (nodes.authoritative.server)",
    "orgzones": "the organisations' own zones under example. (topologies.orgzones): every "
                "tool's records as DNS-AID, ANS v2, DN-ANR, AID and DNS-SD publish them",
})


@dataclass(frozen=True)
class Mode:
    """One way a strategy runs: the resolver's behaviour (``ResolverConfig.mode``), the
    agent (``"module:Class"``, built as ``Class(resolver, rng, name=, option_code=,
    timeout=, attempts=, aaaa=, **agent_options)``, plus ``mirror=`` when ``mirror``) and
    the scheme fields it fixes (field -> the only value it takes; ``why`` says why)."""

    resolver: ResolverMode
    agent: str = "nodes.agent.stub:StubAgent"
    agent_options: Mapping[str, Any] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""
    mirror: bool = False  # the agent gets the run's local catalogue mirror (mirror=)

    def __post_init__(self) -> None:
        if self.resolver not in get_args(ResolverMode):
            raise ValueError(f"Mode.resolver: {self.resolver!r} is not a resolver behaviour "
                             f"({', '.join(get_args(ResolverMode))})")

    def load_agent(self) -> Callable[..., Any]:
        """The agent's class (its module imported now)."""
        module, name = self.agent.split(":")
        cls: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return cls


@dataclass(frozen=True)
class DnsStrategy:
    """One DNS client strategy: its kind, what it is and follows, its modes (the first is
    the default), the record sets it needs published (keys of :data:`RECORD_SETS`) and the
    engines that run it (None: every engine)."""

    kind: str
    summary: str
    spec: str
    modes: Mapping[str, Mode]
    publishes: tuple[str, ...] = ("tooldns",)
    engines: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.modes:
            raise ValueError(f"DnsStrategy({self.kind!r}): needs at least one mode")
        unknown = [r for r in self.publishes if r not in RECORD_SETS]
        if unknown:
            raise ValueError(f"DnsStrategy({self.kind!r}).publishes: unknown record sets "
                             f"{unknown} ({', '.join(RECORD_SETS)})")

    @property
    def default_mode(self) -> str:
        return next(iter(self.modes))

    def runs_on(self, engine: str) -> bool:
        return self.engines is None or engine in self.engines


_STOCK = "a stock recursive resolver following one CNAME chain"
_PLAIN = {"warm": False, "beam": 1, "search": "split", "merge": "auto",
          "send_embedding": False}
_DRAFT = ("the draft's client asks plain questions of a stock recursive resolver; the "
          "search is the agent's own")


def _draft(kind: str, summary: str, spec: str,
           modes: Mapping[str, str] | None = None) -> DnsStrategy:
    """A DNS-native draft's scheme: search a local mirror of the catalogue, then resolve
    the chosen agents with the draft's records (nodes.agent.drafts) through a stock
    resolver; the organisations' zones publish them. ``modes``: mode -> the draft's client
    (nodes.agent.drafts.DRAFTS) when the draft has variants (default: mirror -> kind)."""
    return DnsStrategy(kind, summary, spec, modes={
        mode: Mode("qname", agent="nodes.agent.pipeline:PipelineAgent",
                   agent_options={"draft": client}, fixed=_PLAIN, why=_DRAFT, mirror=True)
        for mode, client in (modes or {"mirror": kind}).items()},
        publishes=("orgzones",))


#: Every DNS client strategy by kind, in the order the docs list them.
STRATEGIES: dict[str, DnsStrategy] = {s.kind: s for s in (
    DnsStrategy(
        "tooldns", "ToolDNS: the resolver walks the .tools tree, each server refers to its "
        "top-K children for the intent", "seed 000 (ToolDNS) §3; intent in the QNAME: this "
        "testbed's deployable variant (docs/protocol.md)",
        modes={
            "aware": Mode("aware"),
            "strip": Mode("strip"),
            "pass-through": Mode("pass-through"),
            "qname": Mode("qname", agent_options={"style": "qname"},
                          fixed={"warm": False, "beam": 1, "search": "split",
                                 "merge": "auto", "send_embedding": False}, why=_STOCK),
        }),
    _draft("dns-aid", "DNS-AID: the organisation's _index._agents TXT, then the agent's "
           "SVCB at its name", "draft-mozleywilliams-dnsop-dnsaid-02 (records as its "
           "reference implementation dns-aid-core writes them)"),
    _draft("ans-v2", "ANS v2 in the DNS: _ans TXT, then the host's HTTPS record and what the "
           "verification tier requires (gold: TLSA and the _ans-badge TXT; silver: TLSA; "
           "bronze: nothing more)", "draft-narajala-courtney-ansv2-01 (the ANS registry's "
           "ans-txt profile)",
           modes={"gold": "ans-v2", "silver": "ans-v2-silver", "bronze": "ans-v2-bronze"}),
    _draft("dn-anr", "DN-ANR: the agent's _agent SVCB (version and protocol keys) and key "
           "TXT", "draft-cui-dns-native-agent-naming-resolution-01"),
    _draft("aid", "AID: one TXT at _agent._<proto>.<host> (v=aid1, URI, protocol)",
           "draft-nemethi-aid-agent-identity-discovery-00 (AID v1.2)"),
    _draft("dns-sd", "DNS-SD: PTR browse of the organisation's _<proto>._tcp, then the "
           "instance's SRV and TXT", "RFC 6763"),
)}


class _Modes(Mapping[str, tuple[str, ...]]):
    """Every mode some strategy runs in (``schemes[].mode`` choices, in catalogue order) ->
    the kinds that run in it; read when a scheme is validated, so a strategy added to the
    table brings its modes."""

    def __getitem__(self, mode: str) -> tuple[str, ...]:
        kinds = tuple(k for k, s in STRATEGIES.items() if mode in s.modes)
        if not kinds:
            raise KeyError(mode)
        return kinds

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(m for s in STRATEGIES.values() for m in s.modes))

    def __len__(self) -> int:
        return sum(1 for _ in self)


MODES: Mapping[str, tuple[str, ...]] = _Modes()
