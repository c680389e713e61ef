"""Exception hierarchy of rlgate.

Every error a user can cause or meet carries a user-facing ``str()`` that names
the input (recipe, key, metric, file), shows the offending value and says what
to do. The CLI turns these into messages and exit codes in one place
(``rlgate.cli.app``); the library never prints.
"""

from __future__ import annotations

__all__ = [
    "ExitCode",
    "InfraError",
    "LaunchError",
    "MetricsError",
    "RecipeError",
    "RlgateError",
    "SweError",
]

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit codes of the ``rlgate`` CLI."""

    OK = 0
    FAIL = 1  # a gate or check did not hold (regression, incompatibility)
    USAGE = 2  # bad arguments, unreadable or invalid input
    INFRA = 3  # the environment failed (no Docker daemon, cluster, harness crash)
    INTERNAL = 70  # a bug in rlgate itself (sysexits' EX_SOFTWARE); never a gate verdict


class RlgateError(Exception):
    """Base class: a problem with the user's input or environment, not a bug."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class RecipeError(RlgateError):
    """A config/recipe cannot be loaded or is malformed (not merely incompatible)."""


class MetricsError(RlgateError):
    """Run logs are missing, corrupt, truncated or inconsistent."""


class SweError(RlgateError):
    """SWE-bench inputs are missing, malformed or inconsistent."""


class LaunchError(RlgateError):
    """A run could not be launched or followed."""


class InfraError(RlgateError):
    """The environment (Docker, Slurm, Ray, network) is unavailable or failed."""

    exit_code = ExitCode.INFRA
