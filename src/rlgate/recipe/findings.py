"""The result record of config validation: one ``Finding`` per problem, with a severity.

``rlgate recipe check`` exits 1 when any finding is an ``ERROR``; ``WARNING`` and
``INFO`` findings are reported but never fail the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Finding", "Severity"]


class Severity(Enum):
    """How bad a finding is."""

    ERROR = "error"  # the run will fail, train on wrong tokens, or silently do something else
    WARNING = "warning"  # accepted but ignored, or risky; worth a look
    INFO = "info"  # a measured fact worth reporting (e.g. the template's tool-call format)


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (or fact) about a config, with the key it concerns."""

    code: str  # stable machine-readable id, e.g. "unknown-key", "tool-parser-mismatch"
    severity: Severity
    key: str  # dotted config path the finding is about ("" for the whole config)
    message: str

    def as_dict(self) -> dict[str, str]:
        """Plain JSON form."""
        return {
            "code": self.code,
            "severity": self.severity.value,
            "key": self.key,
            "message": self.message,
        }

    def __str__(self) -> str:
        where = f" [{self.key}]" if self.key else ""
        return f"{self.severity.value.upper()} {self.code}{where}: {self.message}"
