"""The HTTP registry baselines a scheme may name (``schemes[].kind``): each kind's summary,
the document it follows and its builder, ``(RegistryInputs) -> (application, token)``,
imported on first use (:func:`sim.build.registries.build_registry` calls it)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class RegistryEntry:
    """One registry kind: ``builder`` is ``"module:function"``, a
    :data:`sim.build.registries.RegistryBuilder`."""

    name: str
    summary: str  # one line for the docs and --help
    spec: str  # the document (and version) the application follows
    builder: str
    #: who ranks the candidates: the registry's search, or the client over what it fetched
    ranks: Literal["registry", "client"] = "registry"

    def load(self) -> Callable[..., Any]:
        """The builder (its module imported now)."""
        module, function = self.builder.split(":")
        build: Callable[..., Any] = getattr(importlib.import_module(module), function)
        return build


#: Every registry kind by name, in the order the docs list them.
REGISTRIES: dict[str, RegistryEntry] = {e.name: e for e in (
    RegistryEntry("agentdns", "AgentDNS: a central registry searched over HTTP with bearer "
                  "tokens", "AgentDNS (Cui et al., 2025), as the ToolDNS paper describes it",
                  "sim.build.registries:agentdns_app"),
    RegistryEntry("ans-v0", "ANS v0 (superseded): capability search, signed answers under "
                  "the registry's certificate", "draft-narajala-ans-00 (expired; superseded "
                  "by draft-narajala-courtney-ansv2: kind ans-v2)",
                  "sim.build.registries:ans_app", ranks="client"),
    RegistryEntry("mcp-registry", "MCP Registry: the official registry's server listing, "
                  "searched by name substring; the client ranks what it lists",
                  "modelcontextprotocol/registry API v0.1 (OpenAPI 2025-12-01)",
                  "sim.build.registries:mcp_registry_app", ranks="client"),
)}
