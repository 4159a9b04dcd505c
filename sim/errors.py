"""Scenario errors: :class:`ScenarioError` and its messages.

:func:`format_errors` turns a pydantic ``ValidationError`` into one line per problem,
``FILE: dotted.field: problem``, with a did-you-mean (:func:`did_you_mean`) for unknown
fields and choices; values in messages go through :func:`shown` (bounded length and work,
whatever the value).
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from sim.choices import field_choices
from sim.schemes import (
    SCHEME_KIND_ERROR,
    SCHEME_TAGS,
    DnsScheme,
    RegistryScheme,
    foreign_field,
    scheme_kinds,
)


class ScenarioError(ValueError):
    """A scenario file is unusable; the message names the file, the field and the problem."""


class _Short(reprlib.Repr):
    """reprlib with small bounds; integers too long for ``repr`` (over 4,300 digits) are
    described, not written."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 3, width, width, width
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 6

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 1000:  # ~301 digits; str() of over 4,300 raises ValueError
            return f"<an integer of about {round(x.bit_length() * 0.30103)} digits>"
        return super().repr_int(x, level)


def shown(value: object, width: int = 60) -> str:
    """``repr(value)`` for a message line: at most about ``width`` characters, and bounded
    work even for huge or deeply shared values (a YAML alias bomb, a 10^6-digit integer)."""
    text = _Short(width).repr(value)
    return text if len(text) <= width + 20 else text[:width] + "..."


def in_file(file: str, message: str) -> str:
    """``message`` with each line naming ``file`` first (``FILE: field: problem``) unless it
    already does: build-time errors name the field, not the file."""
    prefix = f"{file}: "
    return "\n".join(line if line.startswith(prefix) else prefix + line
                     for line in message.splitlines() or [""])


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X | None``, ``tuple[X, ...]``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (model := _model_of(arg)) is not None:
            return model
    return None


def _literals(annotation: Any) -> list[str]:
    """The allowed strings of a ``Literal`` inside an annotation."""
    if get_origin(annotation) is Literal:
        return [a for a in get_args(annotation) if isinstance(a, str)]
    return [v for arg in get_args(annotation) for v in _literals(arg)]


def _choices(field: FieldInfo | None) -> list[str]:
    """The allowed strings of a field: its ``OneOf`` table or its ``Literal``."""
    if field is None:
        return []
    return field_choices(field) or _literals(field.annotation)


def _field_at(loc: Sequence[str | int], root: type[BaseModel]) -> tuple[
        type[BaseModel] | None, FieldInfo | None]:
    """The model holding the field at ``loc`` (list indices skipped) and the field (None
    when ``loc`` leaves the models)."""
    model: type[BaseModel] | None = root
    field: FieldInfo | None = None
    for i, part in enumerate(loc):
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            continue
        if part in SCHEME_TAGS and model is DnsScheme:  # the member of the scheme union
            model = DnsScheme if part == "dns" else RegistryScheme
            continue
        if model is None or part not in model.model_fields:
            return (model, None) if i == len(loc) - 1 else (None, None)
        field = model.model_fields[part]
        if i < len(loc) - 1:
            model = _model_of(field.annotation)
    return model, field


def _as_meant(err: ErrorDetails) -> list[ErrorDetails]:
    """The other problems of a scheme whose ``kind`` is unknown, judged as the kind it is
    closest to (none without a close one), so that one pass names them all."""
    given = err["input"]
    close = difflib.get_close_matches(str(given.get("kind")), scheme_kinds(), n=1, cutoff=0.6)
    if not close:
        return []
    tag, model = ("dns", DnsScheme) if close[0] == "tooldns" else ("registry", RegistryScheme)
    try:
        model.model_validate({**given, "kind": close[0]})
    except ValidationError as exc:
        return [{**e, "loc": (*err["loc"], tag, *e["loc"])} for e in exc.errors()]
    return []


def format_errors(path: Path | str, exc: ValidationError, root: type[BaseModel]) -> str:
    """One line per problem of validating ``root``: ``FILE: dotted.field: problem``."""
    lines = []
    pending = exc.errors()
    while pending:
        err = pending.pop(0)
        raw = err["loc"]
        loc = [str(x) for i, x in enumerate(raw)  # without the scheme union's member tag
               if not (x in SCHEME_TAGS and i >= 2 and raw[i - 2] == "schemes")]
        msg = err["msg"]
        kind = err["type"]
        given = err.get("input")
        if kind == "extra_forbidden":
            model, _ = _field_at(raw, root)
            foreign = foreign_field(model, loc[-1]) if model is not None else None
            msg = foreign or "unknown field" + (did_you_mean(loc[-1], model.model_fields)
                                                if model is not None else "")
        elif kind == SCHEME_KIND_ERROR and isinstance(given, dict):
            pending[:0] = _as_meant(err)  # its other problems come next
            loc.append("kind")
            msg += f" (got {shown(given.get('kind'))})" + did_you_mean(
                str(given.get("kind")), scheme_kinds())
        elif kind == "missing":
            msg = "required field is missing"
        elif kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            field, sep, rest = msg.partition(": ")
            if sep and field.isidentifier():  # our validators name the field they judge
                loc.append(field)
                msg = rest
        if kind not in ("extra_forbidden", "missing", "value_error") and not isinstance(
                given, dict | list):
            msg += f" (got {shown(given)})"
        if kind == "literal_error" and isinstance(given, str):
            msg += did_you_mean(given, _choices(_field_at(err["loc"], root)[1]))
        lines.append(f"{path}: {'.'.join(loc) or '(top level)'}: {msg}")
    return "\n".join(lines)
