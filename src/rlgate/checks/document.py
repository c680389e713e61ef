"""The check-run document: what ``rlgate check-run --json`` writes and ``rlgate report`` reads.

A record only (pydantic and :class:`~rlgate.core.results.Result`): readers of the document
(the report, ``rlgate triage``) import it without the check kinds, the metric readers or
SciPy, which :mod:`rlgate.checks.plan` (its writer) needs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

from rlgate.core.io import SCHEMA_VERSION
from rlgate.core.results import Result
from rlgate.core.validate import LineText

__all__ = ["RunDocument"]

_Text = Annotated[StrictStr, Field(min_length=1)]
_Count = Annotated[int, Field(ge=0, strict=True)]


class RunDocument(BaseModel):
    """``rlgate check-run --json`` (and the convergence/perf tiers' ``--rlgate-json``).

    Written by :meth:`GateReport.document`, read back by ``rlgate report`` with the same
    model: ``{schema_version, recipe, run, hardware, source_kind, target_step, passed, checks,
    skipped, warnings, files, rollouts[, block_on_drift]}``; ``checks`` are the evaluated
    checks' Results,
    ``skipped`` the skipped ones' (each also with ``reason``, its message); ``hardware``
    the run's hardware as the history records it (``4n8g``; None when unknown, and in
    documents written before it). Strict: no string or boolean read as a number.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    schema_version: Annotated[int, Field(strict=True)] = SCHEMA_VERSION
    recipe: _Text
    run: _Text
    hardware: Annotated[LineText, Field(min_length=1, max_length=200)] | None = None
    source_kind: StrictStr | None = None
    target_step: _Count | None = None
    passed: StrictBool
    checks: tuple[Result, ...]
    skipped: tuple[Result, ...] = ()
    warnings: tuple[StrictStr, ...] = ()
    files: tuple[StrictStr, ...] = ()
    rollouts: dict[str, Any] | None = None
    #: the recipe's ``rlgate.block_on_drift`` (written only when true)
    block_on_drift: StrictBool = False

    @field_validator("skipped", mode="before")
    @classmethod
    def _skip_entries(cls, value: Any) -> Any:
        """``{name, tier, reason}`` entries (every version wrote these keys) are SKIP Results."""
        if not isinstance(value, list | tuple):
            return value
        return [
            {"status": "skip", "message": item.get("reason", ""), **item}
            if isinstance(item, dict)
            else item
            for item in value
        ]

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``schema_version`` first, as ``core.io.write_json_atomic`` adds it)."""
        doc = self.model_dump(mode="json", exclude={"schema_version"})
        doc["skipped"] = [{**s, "reason": s["message"]} for s in doc["skipped"]]
        if not doc["block_on_drift"]:
            del doc["block_on_drift"]
        return doc
