"""Dotted-field overrides (``--set namespace.tools=50``, sweep grids): :func:`set_dotted`
writes one value into a scenario's dumped data, which is then validated again; the field
is named in errors shortened (:func:`sim.errors.shown`)."""

from __future__ import annotations

from typing import Any

from sim.errors import did_you_mean, shown


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.0.c`` in nested dicts/lists; new keys are left for validation to judge."""
    parts = dotted.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            names = [x.get("name") for x in node if isinstance(x, dict)]
            if part in names:  # a scheme (or any named item) by its name
                part = str(names.index(part))
            if not (part.isdigit() and int(part) < len(node)):
                raise ValueError(f"{shown(dotted)} is not a field of the scenario"
                                 + did_you_mean(part, [str(n) for n in names if n]))
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last and (part in node or parts[i - 1:i] == ["params"]):  # params is free-form
                node[part] = value
            elif isinstance(node.get(part), dict | list):
                node = node[part]
            else:
                raise ValueError(f"{shown(dotted)} is not a field of the scenario"
                                 + did_you_mean(part, node))
        else:
            raise ValueError(f"{shown(dotted)} is not a field of the scenario")
