"""``swe compare --exclude``: a reduced comparison shown beside the full one, never instead of it.

Pure: a full :class:`~rlgate.swe.compare.SweComparison` and its arms in, a
:class:`ReducedComparison` out. What ``--exclude`` accepts (repeatable, order kept,
duplicates dropped):

* ``known-broken``: every list bundled in ``data/swe_known_broken.json``
  (:mod:`rlgate.swe.known_broken`), each as ``known-broken:<list-id>``;
* ``known-broken:<list-id>``: one of those lists;
* ``flaky``: the instances that flip between runs of one arm (:mod:`rlgate.swe.flaky`),
  found in the runs compared and, with ``--db``, in the stored runs of the compared models
  (:mod:`rlgate.history.swe_flaky`); it needs an arm or a stored model with two runs.

Invariants:

* The reduced comparison is the same gate (:func:`~rlgate.swe.compare.compare_arms`, the same
  options and statistics) on the universe without the excluded ids: its denominator is the
  instances kept, its instance set is named from those ids (a subset of Verified is never
  called SWE-bench Verified).
* It never decides: the verdict, the exit code and the release report's rule stay the full
  comparison's. A reduced comparison the inputs or the stored history cannot form (no arm
  and no stored model with two runs for ``flaky``, exclusions that leave no instance, a
  reduced set the gate cannot compare) is an :class:`UnformedReduction` saying why, shown
  where the reduced comparison would be; only an ``--exclude`` value that is no exclusion
  is an error (exit 2, before any input is read). The known-broken lists are claims about
  other harness setups and the flaky set is selected from the very runs compared, so the
  reduced numbers are a diagnostic. To *gate* on fewer instances, pass a dataset holding
  only them (``--dataset``): that comparison then names itself a subset everywhere.
* An exclusion that names nothing in this universe is reported with 0 ids, not dropped.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from rlgate.core.errors import SweError
from rlgate.swe.compare import SweComparison, compare_arms
from rlgate.swe.flaky import MIN_RUNS, RULE, Flakiness
from rlgate.swe.known_broken import KNOWN_BROKEN_FILE, known_broken
from rlgate.swe.records import DatasetUniverse, SweArm, SweRun, _sha256_json

__all__ = [
    "FLAKY",
    "KNOWN_BROKEN",
    "ExcludedSet",
    "ReducedComparison",
    "UnformedReduction",
    "parse_exclusions",
    "reduce_comparison",
    "restrict_arm",
    "restrict_universe",
]

KNOWN_BROKEN = "known-broken"
FLAKY = "flaky"


def _hint() -> str:
    lists = ", ".join(item.name for item in known_broken())
    return (
        f"use {KNOWN_BROKEN} (every bundled list), {KNOWN_BROKEN}:<list-id> (one of: {lists}; "
        f"rlgate/data/{KNOWN_BROKEN_FILE.name}) or {FLAKY}; repeat --exclude for several"
    )


def parse_exclusions(specs: Sequence[str]) -> tuple[str, ...]:
    """The ``--exclude`` values expanded to ``known-broken:<list-id>`` labels and ``flaky``.

    Raises SweError (exit 2) naming the first value that is no exclusion or no bundled list.
    """
    names = [item.name for item in known_broken()]
    out: list[str] = []
    for spec in specs:
        kind, colon, list_id = spec.partition(":")
        if kind == KNOWN_BROKEN and not colon:
            labels = [f"{KNOWN_BROKEN}:{name}" for name in names]
        elif kind == KNOWN_BROKEN:
            if list_id not in names:
                raise SweError(
                    f"--exclude {spec!r:.120}: no bundled known-broken list {list_id!r:.80}",
                    hint=_hint(),
                )
            labels = [spec]
        elif spec == FLAKY:
            labels = [FLAKY]
        else:
            raise SweError(f"--exclude {spec!r:.120} is not an exclusion", hint=_hint())
        out += [label for label in labels if label not in out]
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ExcludedSet:
    """What one exclusion removed: its ids in this universe, and where the list comes from."""

    label: str  # known-broken:<list-id> or flaky
    ids: tuple[str, ...]  # sorted, all in the universe
    listed: int  # ids the exclusion names (a known-broken list may name ids not compared)
    source: str  # the list's published source, or the flaky rule


@dataclass(frozen=True, slots=True)
class ReducedComparison:
    """The full comparison's gate run again without the excluded instances (never gating)."""

    requested: tuple[str, ...]  # the --exclude values as given
    sets: tuple[ExcludedSet, ...]
    excluded: tuple[str, ...]  # sorted union of the sets' ids
    comparison: SweComparison


@dataclass(frozen=True, slots=True)
class UnformedReduction:
    """A reduced comparison ``--exclude`` asked for that could not be formed, and why.

    ``sets``: the exclusions that could be listed (empty when one of them could not be).
    Reported beside the full comparison like a reduced one; never an exit code.
    """

    requested: tuple[str, ...]
    reason: str
    sets: tuple[ExcludedSet, ...] = ()


def restrict_universe(universe: DatasetUniverse, drop: frozenset[str]) -> DatasetUniverse:
    """``universe`` without ``drop``, its ids (and labels) hash recomputed.

    ``file_sha256`` still pins the dataset file the instances were read from.
    """
    ids = tuple(i for i in universe.ids if i not in drop)
    labels = {i: v for i, v in universe.labels.items() if i not in drop}
    labels_doc = {i: [sorted(f), sorted(p)] for i, (f, p) in labels.items()}
    return dataclasses.replace(
        universe,
        ids=ids,
        repos={i: universe.repos[i] for i in ids},
        labels=labels,
        ids_sha256=hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        labels_sha256=_sha256_json(labels_doc) if len(labels) == len(ids) else None,
    )


def _restrict_run(run: SweRun, drop: frozenset[str]) -> SweRun:
    return dataclasses.replace(
        run,
        outcomes={i: o for i, o in run.outcomes.items() if i not in drop},
        scope=None if run.scope is None else run.scope - drop,
        label_mismatch=tuple(i for i in run.label_mismatch if i not in drop),
    )


def restrict_arm(arm: SweArm, drop: frozenset[str]) -> SweArm:
    """``arm`` with every run's outcomes, scope and label mismatches without ``drop``."""
    return SweArm(arm.name, tuple(_restrict_run(run, drop) for run in arm.runs))


def _sets(
    labels: Sequence[str], full: SweComparison, history: Flakiness | None = None
) -> tuple[list[ExcludedSet], str]:
    """The excluded sets, and why they cannot all be formed ("" when they can)."""
    in_universe = set(full.universe.ids)
    lists = {f"{KNOWN_BROKEN}:{item.name}": item for item in known_broken()}
    stored = history if history is not None and history.measured else None
    out = []
    for label in labels:
        if label == FLAKY:
            if not full.flaky.measured and stored is None:
                where = (
                    "nor does the history hold 2 runs of a compared model"
                    if history is not None
                    else "and no history was given (--db)"
                )
                return [], (
                    f"{FLAKY}: every arm has fewer than {MIN_RUNS} runs, {where}, so no "
                    "instance can be seen to flip between runs of one model"
                )
            listed = set(full.flaky.ids)
            source = RULE
            if stored is not None:
                listed |= set(stored.ids)
                source += (
                    f"; over the runs compared and the stored runs of {', '.join(stored.measured)}"
                )
            ids = tuple(sorted(listed & in_universe))
            out.append(ExcludedSet(FLAKY, ids, len(listed), source))
        else:
            item = lists[label]
            ids = tuple(sorted(item.ids & in_universe))
            out.append(ExcludedSet(label, ids, len(item.ids), item.source))
    return out, ""


def reduce_comparison(
    full: SweComparison,
    before: SweArm,
    after: SweArm,
    requested: Sequence[str],
    history: Flakiness | None = None,
) -> ReducedComparison | UnformedReduction:
    """Compare ``before`` and ``after`` again without the instances ``requested`` excludes.

    ``full`` is :func:`~rlgate.swe.compare.compare_arms` of the same arms: its universe,
    options and flaky instances are used. ``history``: the flaky instances of the compared
    models in their stored runs (``swe compare --db``), added to ``flaky``. Nothing
    excluded: the reduced comparison is the full one. What cannot be formed (module
    docstring) is an :class:`UnformedReduction`; a value that is no exclusion raises
    SweError (:func:`parse_exclusions`).
    """
    wanted = tuple(requested)
    sets, why = _sets(parse_exclusions(requested), full, history)
    if why:
        return UnformedReduction(wanted, why)
    drop = frozenset().union(*(s.ids for s in sets))
    comparison = full
    if drop:
        if len(drop) == full.universe.n:
            return UnformedReduction(
                wanted,
                f"the exclusions remove all {full.universe.n} instances of the dataset "
                f"{full.universe.source}; nothing is left to compare",
                tuple(sets),
            )
        universe = restrict_universe(full.universe, drop)
        try:
            comparison = compare_arms(
                restrict_arm(before, drop), restrict_arm(after, drop), universe, full.options
            )
        except SweError as exc:
            reason = f"the {universe.n} instances left cannot be compared: {exc.message}"
            return UnformedReduction(wanted, reason, tuple(sets))
    return ReducedComparison(wanted, tuple(sets), tuple(sorted(drop)), comparison)
