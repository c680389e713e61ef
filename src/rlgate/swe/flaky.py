"""Flaky SWE-bench instances: outcomes that flip between repeated runs of the same model.

Pure: runs in, a :class:`Flakiness` out. The rule (:data:`RULE`):

* an arm is one model; its runs (seeds, Gym repeats) are repeated evaluations of it;
* in each arm with at least :data:`MIN_RUNS` runs, an instance is **flaky** when the
  model resolved it in at least one run and was graded *not resolved* (unresolved, empty
  patch, patch failed) in at least one other;
* infra outcomes (harness error, classified infra fault, missing) are not a measurement of
  the model and never make a flip: an instance resolved once and errored once is not flaky;
* the flaky set of a comparison is the union over its arms. An arm with one run cannot
  show a flip: it is reported as not measured, never as "no flaky instance".

The runs are those of one comparison (:func:`find_flaky`) or any runs given as outcome maps
(:func:`flaky_runs`: the stored history of a model, ``rlgate history flaky``).

Flakiness is derived from the runs themselves, so excluding flaky instances conditions the
comparison on its own data; :mod:`rlgate.swe.exclude` therefore shows that reduced
comparison beside the full one and never lets it decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rlgate.swe.records import INFRA_OUTCOMES, Outcome, SweArm

__all__ = [
    "MIN_RUNS",
    "RULE",
    "Flakiness",
    "FlakyInstance",
    "find_flaky",
    "flaky_runs",
    "flips",
]

#: Runs of one model needed before a flip can be seen.
MIN_RUNS = 2
RULE = (
    "flaky: resolved in at least one run and graded not resolved in at least one other run "
    f"of the same arm (model); infra outcomes (error, infra, missing) never make a flip; "
    f"an arm needs at least {MIN_RUNS} runs to be measured"
)


def flips(outcomes: Iterable[Outcome]) -> bool:
    """True when one instance's outcomes over runs of one model hold both verdicts.

    Infra outcomes are left out: only graded outcomes (resolved or not) can flip.
    """
    graded = {o is Outcome.RESOLVED for o in outcomes if o not in INFRA_OUTCOMES}
    return len(graded) == 2


@dataclass(frozen=True, slots=True)
class FlakyInstance:
    """One instance that flipped in one arm: how many of its graded runs resolved it."""

    instance_id: str
    arm: str
    resolved: int
    graded: int


@dataclass(frozen=True, slots=True)
class Flakiness:
    """The flaky instances of a comparison, and which arms could show them."""

    measured: tuple[str, ...]  # arms with >= MIN_RUNS runs
    unmeasured: tuple[str, ...]  # arms with fewer runs: flips cannot be seen there
    instances: tuple[FlakyInstance, ...]  # sorted by arm order, then id

    @property
    def ids(self) -> tuple[str, ...]:
        """Sorted ids flaky in any arm."""
        return tuple(sorted({f.instance_id for f in self.instances}))

    def in_arm(self, arm: str) -> tuple[str, ...]:
        """Sorted ids flaky in ``arm``."""
        return tuple(sorted(f.instance_id for f in self.instances if f.arm == arm))

    def arms_by_id(self) -> dict[str, tuple[str, ...]]:
        """``{instance_id: arms in which it flipped}`` for the flaky instances."""
        out: dict[str, tuple[str, ...]] = {}
        for f in self.instances:
            out[f.instance_id] = (*out.get(f.instance_id, ()), f.arm)
        return out


def flaky_runs(
    arms: Mapping[str, Sequence[Mapping[str, Outcome]]], ids: Iterable[str] | None = None
) -> Flakiness:
    """Apply :data:`RULE` to runs given as outcome maps: ``{arm: [{instance_id: outcome}]}``.

    An instance a run does not hold was not graded in it. ``ids``: only these instances
    (default: every instance some run holds). Arms keep their order; instances are sorted.
    """
    wanted = None if ids is None else set(ids)
    measured, unmeasured, found = [], [], []
    for arm, runs in arms.items():
        if len(runs) < MIN_RUNS:
            unmeasured.append(arm)
            continue
        measured.append(arm)
        resolved: dict[str, int] = {}
        graded: dict[str, int] = {}
        for run in runs:
            for iid, outcome in run.items():
                if outcome in INFRA_OUTCOMES or (wanted is not None and iid not in wanted):
                    continue
                graded[iid] = graded.get(iid, 0) + 1
                resolved[iid] = resolved.get(iid, 0) + (outcome is Outcome.RESOLVED)
        for iid in sorted(graded):
            if 0 < resolved[iid] < graded[iid]:
                found.append(FlakyInstance(iid, arm, resolved[iid], graded[iid]))
    return Flakiness(tuple(measured), tuple(unmeasured), tuple(found))


def find_flaky(arms: Sequence[SweArm], ids: Sequence[str]) -> Flakiness:
    """Apply :data:`RULE` (what :func:`flips` says of one instance) to every id in every arm."""
    return flaky_runs(
        {arm.name: [{i: run.outcomes[i].outcome for i in ids} for run in arm.runs] for arm in arms}
    )
