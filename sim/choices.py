"""A string field whose allowed values are the keys of a table (:class:`OneOf`).

The engine of a scenario and the kind of a registry scheme are named in one table each
(:data:`sim.catalog.engines.ENGINES`, :data:`sim.build.registries.REGISTRIES`); a field
annotated ``Annotated[str, OneOf(TABLE)]`` accepts exactly the table's keys at validation
time, fails like a ``Literal`` does (``literal_error``, "Input should be 'a' or 'b'") and
lists the keys as the JSON schema's ``enum``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema


def expected(choices: list[str]) -> str:
    """The choices as pydantic's ``Literal`` errors list them: ``'a', 'b' or 'c'``."""
    quoted = [repr(c) for c in choices]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


@dataclass(frozen=True)
class OneOf:
    """Field metadata: the value must be a key of ``table`` (read when validating)."""

    table: Mapping[str, object]

    def choices(self) -> list[str]:
        return list(self.table)

    def _check(self, value: str) -> str:
        if value not in self.table:
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": expected(self.choices())})
        return value

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), "enum": self.choices()}


def field_choices(field: FieldInfo) -> list[str]:
    """The keys of a field's :class:`OneOf` table; empty when it has none."""
    return next((m.choices() for m in field.metadata if isinstance(m, OneOf)), [])
