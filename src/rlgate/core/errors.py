"""Exception hierarchy of rlgate.

Every error a user can cause or meet carries a user-facing ``str()`` that names
the input (recipe, key, metric, file), shows the offending value and says what
to do. The CLI turns these into messages and exit codes in one place
(``rlgate.cli.app``); the library never prints. A command over several inputs combines
their exit codes with :func:`worst_exit_code` (:data:`EXIT_ORDER`).
"""

from __future__ import annotations

__all__ = [
    "EXIT_ORDER",
    "EXIT_ORDER_TEXT",
    "ExitCode",
    "InfraError",
    "LaunchError",
    "MetricsError",
    "RecipeError",
    "RlgateError",
    "SweError",
    "worst_exit_code",
]

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit codes of the ``rlgate`` CLI."""

    OK = 0
    FAIL = 1  # a gate or check did not hold (regression, incompatibility)
    USAGE = 2  # bad arguments, unreadable or invalid input
    INFRA = 3  # the environment failed (no Docker daemon, cluster, harness crash)
    INTERNAL = 70  # a bug in rlgate itself (sysexits' EX_SOFTWARE); never a gate verdict


#: How a command over several inputs (``watch RUN...``, ``recipe check A B``) combines their
#: exit codes, worst first: a bug (nothing can be trusted), an input that could not be judged
#: at all, a failed gate, infrastructure or an incomplete result (rerun), all passed. A
#: failure is never hidden by an infra or incomplete result: a dead run (1) next to a
#: stalled one (3) is 1, not "rerun".
EXIT_ORDER = (ExitCode.INTERNAL, ExitCode.USAGE, ExitCode.FAIL, ExitCode.INFRA, ExitCode.OK)
#: :data:`EXIT_ORDER` as the commands' help says it.
EXIT_ORDER_TEXT = " > ".join(str(int(c)) for c in EXIT_ORDER)


def worst_exit_code(codes: Iterable[int]) -> int:
    """The combined exit code of several inputs: the first of :data:`EXIT_ORDER` among them.

    A code outside the order (130, interrupted) ranks worst; no code at all is 2 (usage).
    """
    rank = {int(c): i for i, c in enumerate(EXIT_ORDER)}
    return int(min(codes, key=lambda c: rank.get(int(c), -1), default=ExitCode.USAGE))


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
