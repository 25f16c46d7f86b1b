"""The base of every section: unknown keys are refused (a typo must never silently fall back to a
default), a loaded config is frozen, and defaults are validated like written values."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
