"""The canary's state machine: a testcase's states on two stacks, and what the change means.

One definition, used by the comparison that classifies (:mod:`rlgate.canary.compare`) and by
the validation of its JSON document (:class:`rlgate.report.canary_section.CanaryDoc`), so a
document whose kinds or regression flags disagree with its own states is refused by the very
rules that produced it (pure; nothing of rlgate).
"""

from __future__ import annotations

import enum

__all__ = ["RECIPE_BROKEN", "Kind", "State", "classify", "recipe_regressed"]


class State(enum.StrEnum):
    """How one testcase ended in one stack."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"
    XFAIL = "xfail"  # a strict (or plain) expected failure that failed as expected
    XPASS_STRICT = "xpass-strict"  # a strict xfail that passed: pytest reports a failure


class Kind(enum.StrEnum):
    """What a change means."""

    NEWLY_FAILING = "newly-failing"
    NEWLY_PASSING = "newly-passing"
    LIMITATION_LIFTED = "limitation-lifted"
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"


def classify(pinned: State | None, candidate: State | None) -> Kind | None:
    """The kind of change from ``pinned`` to ``candidate`` (None: a side only), None if none.

    Newly failing: passed on the pin, fails, errors or strictly xpasses on the candidate;
    newly passing: failed or errored on the pin, passes on the candidate; limitation lifted:
    a strict xfail on the pin that strictly xpasses on the candidate; added/removed: one side
    only; anything else that differs is ``changed``. No change (equal states, or no side at
    all) is None.
    """
    if pinned is None or candidate is None:
        if pinned is None and candidate is None:
            return None
        return Kind.ADDED if pinned is None else Kind.REMOVED
    if pinned is candidate:
        return None
    bad = (State.FAIL, State.ERROR)
    if candidate is State.XPASS_STRICT and pinned in (State.XFAIL, State.XPASS_STRICT):
        return Kind.LIMITATION_LIFTED if pinned is State.XFAIL else Kind.CHANGED
    if pinned is State.PASS and candidate in (*bad, State.XPASS_STRICT):
        return Kind.NEWLY_FAILING
    if pinned in bad and candidate is State.PASS:
        return Kind.NEWLY_PASSING
    return Kind.CHANGED


#: ``recipe check`` verdicts that are a regression on the candidate of a recipe compatible
#: on the pin.
RECIPE_BROKEN = ("incompatible", "invalid", "error")


def recipe_regressed(pinned: str, candidate: str) -> bool:
    """True when a recipe ``compatible`` on the pin is not on the candidate (a regression)."""
    return pinned == "compatible" and candidate in RECIPE_BROKEN
