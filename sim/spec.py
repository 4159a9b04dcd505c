"""The base of every scenario and evaluation file model (frozen, unknown keys rejected) and
its unit of time."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Seconds = Annotated[float, Field(ge=0, description="seconds")]


class Spec(BaseModel):
    """A frozen model that rejects unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)
