"""The result records every check returns: outcome, tier, value, bound, message, evidence."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["CheckResult", "Status", "Tier"]


class Status(Enum):
    """Outcome of one check."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"


class Tier(Enum):
    """The suite tier a check belongs to."""

    CONVERGENCE = "convergence"
    PERF = "perf"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome, as the CLI JSON and JUnit report it."""

    name: str
    tier: Tier
    status: Status
    value: float | None
    bound: str
    message: str
    metric: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{name, tier, status, value, bound, message, metric, evidence}``."""
        value = self.value
        if value is not None and not math.isfinite(value):
            value = str(value)  # keep the JSON valid; nan/inf are shown, not dropped
        return {
            "name": self.name,
            "tier": self.tier.value,
            "status": self.status.value,
            "value": value,
            "bound": self.bound,
            "message": self.message,
            "metric": self.metric,
            "evidence": dict(self.evidence),
        }
