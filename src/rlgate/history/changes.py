"""Change points in each check's value series over the nightlies (``rlgate history changes``).

Pure: recorded runs in (``Store.runs``, every row already read by :mod:`rlgate.history.rows`),
one :class:`SeriesChanges` per (recipe, check, hardware, models) series out. A series is the
check's **value** (not its pass/fail) in each nightly of ``main_branch`` that judged it
(:func:`rlgate.history.triage.marks_by_series`: a nightly's reruns make one mark), oldest
first. Change points are found by Apache Otava's E-Divisive with a Student's t-test
significance step (``otava.analysis.compute_change_points``, Fleming et al., ICPE 2023,
the algorithm MongoDB's Daly et al. put on CI series): a change point is kept when the
t-test of the values between its neighbours has a p-value below ``max_pvalue`` and the
relative change of the means exceeds ``min_magnitude`` (:data:`MIN_MAGNITUDE`).

Values the test cannot compare are left out of the series, each with its reason
(:attr:`SeriesChanges.skipped`): a nightly with no value, an infrastructure error or a
skip (no judgement), a value that is not finite (NaN, inf: a corrupt or hand-edited row),
and one larger in magnitude than :data:`MAX_ABS` (its square overflows the t-test). A
series with fewer than ``min_points`` values says so (:attr:`SeriesChanges.status`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlgate.core.results import Outcome, Result
from rlgate.history.model import RecordedRun, RunContext
from rlgate.history.triage import (
    DEFAULT_LAST,
    CandidateIdentity,
    Label,
    Mark,
    SeriesKey,
    TriageLabel,
    marks_by_series,
    window,
)

#: Otava's defaults: significance of a change point, its sliding window (nightlies).
MAX_PVALUE = 0.001
WINDOW = 50
#: Smallest relative change of the means reported (otava's ``min_magnitude``; its default is
#: 0): a shift below 1 % of the level is measurement jitter, not a change worth a commit.
MIN_MAGNITUDE = 0.01
#: Fewest values a series needs (three on each side of one change).
MIN_POINTS = 6
#: Largest magnitude compared: beyond it a value's square overflows a float.
MAX_ABS = 1e150


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """One change in a series: from nightly ``index`` on, the values differ.

    ``nightly`` the first nightly of the new level, ``previous`` the nightly before it;
    ``commits_before``/``commits_after`` their recorded commits (the commit range is
    ``before..after`` per checkout); ``mean_before``/``mean_after`` the means of the values
    between the neighbouring change points; ``pvalue`` the t-test's.
    """

    index: int
    nightly: str
    previous: str
    commits_before: dict[str, str]
    commits_after: dict[str, str]
    mean_before: float
    mean_after: float
    pvalue: float

    @property
    def absolute(self) -> float:
        """``mean_after - mean_before``."""
        return self.mean_after - self.mean_before

    @property
    def relative(self) -> float | None:
        """The change relative to ``mean_before`` (None when that is 0)."""
        return self.absolute / abs(self.mean_before) if self.mean_before else None

    def commit_range(self) -> str:
        """``nemo_rl 1a2b3c4..5d6e7f8`` per checkout that changed (or ``same commits``)."""
        names = sorted(set(self.commits_before) | set(self.commits_after))
        parts = [
            f"{n} {self.commits_before.get(n, '?')[:12]}..{self.commits_after.get(n, '?')[:12]}"
            for n in names
            if self.commits_before.get(n) != self.commits_after.get(n)
        ]
        return ", ".join(parts) if parts else "same commits"

    def to_json(self) -> dict[str, Any]:
        """The change point as JSON (``history changes --json``)."""
        return {
            "nightly": self.nightly,
            "previous": self.previous,
            "index": self.index,
            "commits_before": self.commits_before,
            "commits_after": self.commits_after,
            "mean_before": self.mean_before,
            "mean_after": self.mean_after,
            "absolute": self.absolute,
            "relative": self.relative,
            "pvalue": self.pvalue,
        }


@dataclass(frozen=True, slots=True)
class SeriesChanges:
    """One series' values and change points, or why it has none to show."""

    key: SeriesKey
    nightlies: tuple[str, ...]
    values: tuple[float, ...]
    changes: tuple[ChangePoint, ...] = ()
    skipped: tuple[tuple[str, str], ...] = field(default=())
    min_points: int = MIN_POINTS

    @property
    def measured(self) -> bool:
        """True when the series had enough values to look for change points."""
        return len(self.values) >= self.min_points

    @property
    def status(self) -> str:
        """``2 change point(s)``, ``no change point`` or ``too few values (4 of 6 needed)``."""
        if not self.measured:
            return f"too few values ({len(self.values)} of {self.min_points} needed)"
        return f"{len(self.changes)} change point(s)" if self.changes else "no change point"

    def to_json(self) -> dict[str, Any]:
        """The series as JSON."""
        return {
            "recipe": self.key.recipe,
            "tier": self.key.tier.value,
            "check": self.key.check,
            "hardware": self.key.hardware,
            "models": list(self.key.models),
            "points": len(self.values),
            "measured": self.measured,
            "status": self.status,
            "changes": [c.to_json() for c in self.changes],
            "skipped": [{"nightly": n, "reason": r} for n, r in self.skipped],
        }


def _why_not(mark: Mark) -> str | None:
    """Why ``mark``'s value is left out of the series (None: it is compared)."""
    if mark.infra is not None:
        return "infrastructure error (no judgement)"
    if not mark.judged:
        return f"{mark.outcome.value} (no judgement)"
    if mark.value is None:
        return "no value recorded"
    if not math.isfinite(mark.value):
        return f"value {mark.value} is not a finite number"
    if abs(mark.value) > MAX_ABS:
        return f"value {mark.value:.3g} is beyond ±{MAX_ABS:.0e} (not comparable)"
    return None


def detect(
    values: Sequence[float],
    *,
    max_pvalue: float = MAX_PVALUE,
    window_len: int = WINDOW,
    min_magnitude: float = MIN_MAGNITUDE,
) -> list[tuple[int, float, float, float]]:
    """Otava's change points of ``values``: ``(index, mean_before, mean_after, pvalue)``.

    ``index`` is the first value of the new level. The values must be finite.
    """
    from otava.analysis import TTestSignificanceTester, compute_change_points

    series = [float(v) for v in values]
    spread = max(series) - min(series)
    if spread <= 1e-9 * max(1.0, max(abs(v) for v in series)):
        return []  # constant (a count, a 0/1 rate): nothing to split, and no t-test to run
    # A plain list: otava's detector slices its sliding windows only out of a non-ndarray.
    # Its t-tests warn on segments of equal values (zero variance); such a p-value is NaN.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        found, _weak = compute_change_points(
            series, window_len=window_len, max_pvalue=max_pvalue, min_magnitude=min_magnitude
        )
        # otava's merge step refreshes the stats of the points after a removed one, not of the
        # one before it: the stats are recomputed here over the final segments, as its split
        # step does (``TTestSignificanceTester.change_point``).
        tester = TTestSignificanceTester(max_pvalue)
        intervals = tester.get_intervals(found)
        found = [tester.change_point(cp.to_candidate(), series, intervals) for cp in found]
    out = []
    for cp in found:
        row = (float(cp.stats.mean_1), float(cp.stats.mean_2), float(cp.stats.pvalue))
        if all(math.isfinite(x) for x in row):
            out.append((int(cp.index), *row))
    return out


def find_changes(
    history: Sequence[RecordedRun],
    *,
    recipe: str | None = None,
    check: str | None = None,
    main_branch: str = "main",
    max_pvalue: float = MAX_PVALUE,
    window_len: int = WINDOW,
    min_points: int = MIN_POINTS,
    min_magnitude: float = MIN_MAGNITUDE,
) -> list[SeriesChanges]:
    """Per series of a gate check (``recipe``/``check``: only those), its change points."""
    groups = window(history, main_branch=main_branch, last=None, recipe=recipe)
    return changes_in(
        groups, check=check, max_pvalue=max_pvalue, window_len=window_len,
        min_points=min_points, min_magnitude=min_magnitude,
    )  # fmt: skip


def changes_in(
    groups: Sequence[tuple[str, list[RecordedRun]]],
    *,
    check: str | None = None,
    max_pvalue: float = MAX_PVALUE,
    window_len: int = WINDOW,
    min_points: int = MIN_POINTS,
    min_magnitude: float = MIN_MAGNITUDE,
) -> list[SeriesChanges]:
    """:func:`find_changes` over nightlies already grouped (``triage.window``), oldest first."""
    if not 0.0 < max_pvalue < 1.0:
        raise ValueError(f"max_pvalue must be in (0, 1), got {max_pvalue}")
    if min_points < 3:
        raise ValueError(f"min_points must be at least 3, got {min_points}")
    commits = {r.context.run_id: dict(r.context.commits) for _, runs in groups for r in runs}
    out = []
    for key, marks in sorted(
        marks_by_series(groups).items(),
        key=lambda kv: (kv[0].recipe or "", kv[0].tier.value, kv[0].check, str(kv[0].hardware)),
    ):
        if check is not None and key.check != check:
            continue
        kept: list[Mark] = []
        skipped = []
        for mark in marks:
            why = _why_not(mark)
            if why is None:
                kept.append(mark)
            else:
                skipped.append((mark.nightly, why))
        values = tuple(float(m.value) for m in kept if m.value is not None)
        found = []
        if len(values) >= min_points:
            for index, before, after, pvalue in detect(
                values, max_pvalue=max_pvalue, window_len=window_len, min_magnitude=min_magnitude
            ):
                prev, this = kept[index - 1], kept[index]
                found.append(
                    ChangePoint(
                        index=index,
                        nightly=this.nightly,
                        previous=prev.nightly,
                        commits_before=commits.get(prev.run_ids[0], {}),
                        commits_after=commits.get(this.run_ids[0], {}),
                        mean_before=before,
                        mean_after=after,
                        pvalue=pvalue,
                    )
                )
        nightly_ids = tuple(m.nightly for m in kept)
        series = SeriesChanges(key, nightly_ids, values, tuple(found), tuple(skipped), min_points)
        out.append(series)
    return out


def drift_labels(
    candidate: Sequence[Result],
    history: Sequence[RecordedRun],
    *,
    recipe: str | None,
    hardware: str | None = None,
    context: RunContext | None = None,
    main_branch: str = "main",
    last: int = DEFAULT_LAST,
    block: bool = False,
    own: CandidateIdentity | None = None,
) -> list[TriageLabel]:
    """Label ``drift`` each passing gate check of ``candidate`` whose value changed in bound.

    The series is the check's values in the last ``last`` main nightlies before the candidate
    (:func:`rlgate.history.triage.window`) and the candidate's value. Its latest change point
    (:func:`detect`) is a drift when every nightly from it on passed the check, the candidate
    too: the value moved and the bound did not see it. ``block``: the recipe's
    ``rlgate.block_on_drift`` (the label then blocks, :attr:`TriageLabel.blocks`).
    ``own``: the candidate's own recordings, never its history (``triage.window``).

    Raises:
        ImportError: otava is not installed (``ci/install.sh``).
    """
    if hardware is None and context is not None:
        hardware = context.hardware
    groups = window(
        history, main_branch=main_branch, last=last, recipe=recipe, before=context, own=own
    )
    marks = marks_by_series(groups)
    commits = {r.context.run_id: dict(r.context.commits) for _, runs in groups for r in runs}
    ids = tuple(n for n, _ in groups)
    mine = dict(context.commits) if context is not None else {}
    out = []
    for r in candidate:
        if r.informational or r.outcome is not Outcome.PASS or r.value is None:
            continue
        key = SeriesKey.of(recipe, hardware, r)
        series = next((m for k, m in marks.items() if key.matches(k)), [])
        kept = [m for m in series if _why_not(m) is None]
        if any(m.outcome is not Outcome.PASS for m in series if m.judged):
            continue  # a failure on main is triage's own business, not a drift
        if not math.isfinite(r.value) or abs(r.value) > MAX_ABS or len(kept) + 1 < MIN_POINTS:
            continue
        values = [float(m.value) for m in kept if m.value is not None] + [float(r.value)]
        found = detect(values)
        if not found:
            continue
        index, before, after, pvalue = found[-1]
        nightly = kept[index].nightly if index < len(kept) else "candidate"
        after_commits = commits.get(kept[index].run_ids[0], {}) if index < len(kept) else mine
        change = ChangePoint(
            index, nightly, kept[index - 1].nightly,
            commits.get(kept[index - 1].run_ids[0], {}), after_commits, before, after, pvalue,
        )  # fmt: skip
        bound = f" {r.bound}" if r.bound else ""
        reason = (
            f"value moved {change.mean_before:.4g} -> {change.mean_after:.4g} "
            f"({_pct(change.relative)}) at {change.nightly} ({change.commit_range()}), "
            f"p = {change.pvalue:.2g}; still inside its bound{bound}"
        )
        label = TriageLabel(
            recipe=recipe, check=r.name, tier=r.tier, label=Label.DRIFT, candidate=r,
            reason=reason, history=tuple(series), window=ids, hardware=key.hardware,
            models=key.models, block_drift=block,
        )  # fmt: skip
        out.append(label)
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f} %"


def render_changes(series: Sequence[SeriesChanges], shown: str, *, max_pvalue: float) -> str:
    """``history changes`` as text: one line per series, one per change point, skips counted.

    Every recorded name goes through :func:`rlgate.core.text.one_line` (terminal-safe).
    """
    from rlgate.core.text import one_line

    out = [one_line(f"change points in {shown} (E-Divisive, otava; p < {max_pvalue:g})")]
    for s in series:
        k = s.key
        name = f"{k.recipe}  {k.tier.value}: {k.check} [{k.describe()}]"
        out.append(one_line(f"  {name}: {len(s.values)} nightlies, {s.status}"))
        for c in s.changes:
            out.append(
                one_line(
                    f"    at {c.nightly} (after {c.previous}; {c.commit_range()}): "
                    f"{c.mean_before:.6g} -> {c.mean_after:.6g} ({_pct(c.relative)}, "
                    f"{c.absolute:+.4g}), p = {c.pvalue:.2g}"
                )
            )
        if s.skipped:
            reasons: dict[str, list[str]] = {}
            for nightly, why in s.skipped:
                reasons.setdefault(why, []).append(nightly)
            for why, where in reasons.items():
                shown_where = ", ".join(where[:3]) + (", ..." if len(where) > 3 else "")
                out.append(one_line(f"    skipped {len(where)}: {why} ({shown_where})"))
    return "\n".join(out) + "\n"
