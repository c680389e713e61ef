"""The history's typed records: what a recorded run was, and what the store gives back.

Plain pydantic models (no SQLAlchemy): :class:`RunContext` is what a recorded run was;
:class:`RecordedRun` a run with its :class:`~rlgate.core.results.Result` records, as read
back. Results are never re-declared here.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlgate.core.results import Result

__all__ = ["RecordedRun", "RunContext"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RunContext(BaseModel):
    """What a recorded run was: recipe, branch, commits, versions, hardware, nightly, time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    recipe: str
    recipe_sha256: str | None = None
    branch: str | None = None
    commits: dict[str, str] = {}
    versions: dict[str, str] = {}
    hardware: str | None = None
    nightly_id: str | None = None
    recorded_at: datetime = Field(default_factory=_utc_now)
    label: str | None = None

    @field_validator("recorded_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class RecordedRun(BaseModel):
    """A run as the store gives it back: its context, its Results, whether it is promoted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context: RunContext
    results: list[Result]
    promoted: bool = False
