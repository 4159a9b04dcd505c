"""The base of every scenario and evaluation file model (frozen, unknown keys rejected), its
unit of time (seconds, or a string with a unit: ``10ms``, ``2 s``, ``1.5 min``), its seeds,
the values a sweep grid may take, and paths (no control characters: :func:`printable`)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
)

#: the units a time may be written in (as Shadow accepts them), in seconds
TIME_UNITS: dict[str, float] = {
    **dict.fromkeys(("ns", "nanosecond", "nanoseconds"), 1e-9),
    **dict.fromkeys(("us", "µs", "μs", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86_400.0),
}
UNITS_TEXT = "ns, us, ms, s, min, h, d"  # as named in messages
_TIME = re.compile(r"\s*([+-]?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|[+-]?\.[0-9]+)\s*(\S*)\s*")


def parse_seconds(value: Any) -> Any:
    """A time written with a unit (``"10ms"``, ``"2 s"``, ``"500us"``, ``"1.5 min"``) as
    seconds; numbers (and anything else) are left for the number check. ValueError for a
    string that is neither a number nor a number with a known unit."""
    if not isinstance(value, str) or len(value) > 40:
        return value
    match = _TIME.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a time: write seconds (0.010) or a number with "
                         f"a unit ({UNITS_TEXT}, e.g. '10ms')")
    number, unit = float(match[1]), match[2]
    if not unit:
        return number
    scale = TIME_UNITS.get(unit) or TIME_UNITS.get(unit.lower())
    if scale is None:
        raise ValueError(f"{value!r}: unknown unit {unit!r}; times are seconds (0.010) or a "
                         f"number with a unit: {UNITS_TEXT} (e.g. '10ms' is 0.010)")
    # a division by 1000 (not a product with 0.001) makes '10ms' exactly 0.010
    return number / round(1 / scale) if scale < 1 else number * scale




def _time_schema(number: dict[str, Any]) -> WithJsonSchema:
    """A time's JSON Schema: the number, or a string with a unit."""
    return WithJsonSchema({"anyOf": [number, {"type": "string", "pattern": _TIME.pattern}],
                           "description": f"seconds, or a number with a unit ({UNITS_TEXT})"})


#: a time: seconds ≥ 0, or a string with a unit (stored as seconds)
Seconds = Annotated[float, BeforeValidator(parse_seconds), Field(ge=0),
                    _time_schema({"type": "number", "minimum": 0})]
#: a time that must be more than 0 (timeouts, intervals)
PositiveSeconds = Annotated[float, BeforeValidator(parse_seconds), Field(gt=0),
                            _time_schema({"type": "number", "exclusiveMinimum": 0})]
#: a whole number of seconds (TTLs), or a string with a unit that makes one
WholeSeconds = Annotated[int, BeforeValidator(parse_seconds), Field(ge=0),
                         _time_schema({"type": "integer", "minimum": 0})]

#: every consumer of a seed accepts it: numpy's generators take any integer ≥ 0,
#: scikit-learn's ``random_state`` (numpy RandomState) below 2^32, results store int64
Seed = Annotated[int, Field(ge=0, lt=2**32)]

GRID_VALUE_DEPTH = 3  # a scalar, or lists/mappings of them nested this deep at most
GRID_VALUE_ITEMS = 1_000  # items (scalars, lists, mappings) in one grid value


def _grid_value(value: Any) -> Any:
    """A sweep grid value: a scalar (number, string, boolean, null), or a list or mapping of
    them nested at most :data:`GRID_VALUE_DEPTH` deep, :data:`GRID_VALUE_ITEMS` items."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        item, depth = stack.pop()
        items += 1
        if items > GRID_VALUE_ITEMS:
            raise ValueError(f"a grid value holds at most {GRID_VALUE_ITEMS:,} items")
        if item is None or isinstance(item, bool | int | float | str):
            continue
        if isinstance(item, list | tuple):
            children = list(item)
        elif isinstance(item, dict) and all(isinstance(k, str) for k in item):
            children = list(item.values())
        else:
            raise ValueError(f"a grid value is a number, string, boolean or null, or a list "
                             f"or mapping (string keys) of them; got {type(item).__name__}")
        if children and depth >= GRID_VALUE_DEPTH:
            raise ValueError(f"a grid value nests lists and mappings at most "
                             f"{GRID_VALUE_DEPTH - 1} deep")
        stack.extend((child, depth + 1) for child in children)
    return value


GridValue = Annotated[Any, BeforeValidator(_grid_value), WithJsonSchema(
    {"description": "a number, string, boolean or null, or a list or mapping of them "
                    f"(nested at most {GRID_VALUE_DEPTH - 1} deep, {GRID_VALUE_ITEMS} items)"})]


#: C0 controls, DEL and C1 controls: never printed raw (a terminal acts on ESC, CSI, ...)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str, keep: str = "") -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``), but
    those in ``keep``: safe to print to a terminal."""
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else repr(m[0])[1:-1], text)


def path_problem(value: str) -> str | None:
    """What is wrong with a path given in a file or on the command line: a control character
    (NUL cannot be in a path at all; a newline or ESC would reach the terminal)."""
    if found := _CONTROL.search(value):
        shown = printable(value if len(value) <= 60 else value[:60] + "...")
        return (f"control character {printable(found[0])} in '{shown}': a path may not hold "
                f"control characters (NUL, newline, tab, ESC, ...)")
    return None


def _path_text(value: str) -> str:
    if problem := path_problem(value):
        raise ValueError(problem)
    return value


#: a path (file or folder) named in a scenario file
PathText = Annotated[str, AfterValidator(_path_text)]


class Spec(BaseModel):
    """A frozen model that rejects unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)
