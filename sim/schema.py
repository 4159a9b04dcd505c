"""The scenario schema for people and tools: JSON Schema and a Markdown field reference.

Both are generated from the pydantic models in :mod:`sim.scenario` (and
:mod:`sim.evalspec` for evaluation files), so they cannot drift from what a run accepts.
``tooldns schema`` prints them; ``docs/scenario-reference.md`` is this module's output,
checked by the tests.

    python3 -m sim.cli schema > scenario.schema.json          # editors: yaml-language-server
    python3 -m sim.cli schema --markdown > docs/scenario-reference.md
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from sim.choices import field_choices
from sim.evalspec import EvalScenario
from sim.scenario import Scenario

MODELS: dict[str, type[BaseModel]] = {"scenario": Scenario, "eval": EvalScenario}


def json_schema(kind: str = "scenario") -> dict:
    """JSON Schema (draft 2020-12) of a scenario or evaluation file."""
    schema = MODELS[kind].model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", "ToolDNS " + kind)
    return schema


def _type_name(annotation: Any) -> str:
    """A short readable type: ``int``, ``seconds``, ``'a' | 'b'``, ``list of X`` ..."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(repr(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        parts = [a for a in get_args(annotation) if a is not type(None)]
        name = " \\| ".join(_type_name(a) for a in parts)
        return f"{name} or null" if len(parts) < len(get_args(annotation)) else name
    if origin in (tuple, list):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map {_type_name(key)} → {_type_name(value)}"
    if get_origin(annotation) is not None and hasattr(annotation, "__metadata__"):
        return _type_name(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation))


def _field_type(field: Any) -> str:
    """The field's readable type; a :class:`OneOf` field lists its table's keys."""
    choices = field_choices(field)
    return " \\| ".join(repr(c) for c in choices) if choices else _type_name(field.annotation)


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(see section)"
    if isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
        return json.dumps([v.model_dump(mode="json", exclude_defaults=True) for v in value])
    return f"`{json.dumps(value if not isinstance(value, tuple) else list(value))}`"


def _constraints(field: Any) -> str:
    out = []
    for m in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"),
                           ("min_length", "length ≥"), ("pattern", "matches")):
            if (v := getattr(m, attr, None)) is not None:
                out.append(f"{sign} {v}" if attr != "pattern" else f"{sign} `{v}`")
    return ", ".join(out)


def _models(root: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    """Every model reachable from ``root`` with the dotted path of its first use."""
    seen: dict[type[BaseModel], str] = {root: ""}
    order = [root]
    for model in order:
        for name, field in model.model_fields.items():
            for inner in _inner_models(field.annotation):
                if inner not in seen:
                    many = get_origin(field.annotation) is tuple or any(
                        get_origin(a) is tuple for a in get_args(field.annotation))
                    prefix = f"{seen[model]}." if seen[model] else ""
                    seen[inner] = f"{prefix}{name}" + ("[]" if many else "")
                    order.append(inner)
    return [(seen[m], m) for m in order]


def _inner_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in get_args(annotation) for m in _inner_models(a)]


def _literal_values(field: Any) -> list[str]:
    return field_choices(field) or [str(a) for a in get_args(field.annotation)]


def markdown_reference(kind: str = "scenario") -> str:
    """A Markdown reference of every field: path, type, default, constraints, meaning."""
    root = MODELS[kind]
    lines = [f"# {'Scenario' if kind == 'scenario' else 'Evaluation'} file reference", "",
             "Generated from the pydantic models by `tooldns schema --markdown"
             + (" --eval" if kind == "eval" else "") + "`; do not edit by hand. "
             "**Times are seconds, sizes bytes, rates per second** unless a field says "
             "otherwise; time fields also take unit strings (`10ms`, `2s`, `1.5 min`). "
             "Unknown keys are errors (with a suggestion); `tooldns validate FILE` runs "
             "the checks `run` runs, and a suspicious bare number (a 10 s link delay) is "
             "an error unless `--allow-units`.", ""]
    models = _models(root)
    paths = [path for path, _ in models]
    for path, model in models:
        title = path or ("scenario (top level)" if kind == "scenario" else "eval file")
        if paths.count(path) > 1 and "kind" in model.model_fields:  # a member of a union
            title += f" (kind {' or '.join(_literal_values(model.model_fields['kind']))})"
        lines += [f'<a id="{model.__name__.lower()}"></a>', f"## `{title}`", ""]
        if model.__doc__ and model is not root:
            lines += [" ".join(model.__doc__.split()), ""]
        lines += ["| field | type | default | constraints | meaning |",
                  "|---|---|---|---|---|"]
        for name, field in model.model_fields.items():
            desc = (field.description or "").replace("|", "\\|")
            lines.append(f"| `{name}` | {_field_type(field)} | {_default(field)} | "
                         f"{_constraints(field)} | {desc} |")
        lines.append("")
    return "\n".join(lines)
