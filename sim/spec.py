"""The base of every scenario and evaluation file model (frozen, unknown keys rejected), its
unit of time, its seeds and the values a sweep grid may take."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

Seconds = Annotated[float, Field(ge=0, description="seconds")]

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


class Spec(BaseModel):
    """A frozen model that rejects unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)
