"""Triage: label each failing gate check of a candidate against the main branch's nightlies.

Pure: Results and recorded runs in, one :class:`TriageLabel` per failing or erroring gate
(non-informational) check of the candidate out; the store is read by the caller
(``Store.runs``). The rule (``docs/history.md``, "Triage"), in this order:

1. **infra**: every failing Result of the check is an ERROR whose evidence names an
   infrastructure cause (:attr:`rlgate.core.results.Result.infra_cause`: ``rlgate watch``'s
   signatures and stalled runs, the SWE coverage criteria over their infra error rate).
2. **flaky**: the check passed on a rerun (the candidate holds a PASS of it too, or a
   recorded run of the candidate's own code passed it), or its outcome flips between main
   nightlies of the same code at a rate of at least ``flaky_rate`` (:data:`FLAKY_RATE`)
   with at least :data:`MIN_FLIPS` flips. Same code: the same recipe hash, commits and
   versions (:func:`code_of`); a nightly with no recorded commits is no one's same code.
   A flip is two consecutive judged main nightlies of the same code that disagree, or one
   nightly whose runs disagree (a rerun).
3. **unknown**: no main nightly of the window judged the check (a new check, no history,
   or only infra errors), or the candidate names no recipe and several recipes' series
   match it: nothing shows the failure is not the candidate's.
4. **pre-existing**: it failed in every main nightly of the window that judged it.
5. **regression**: it passed on main in the window and fails now; ``first_failing`` is the
   first main nightly after its last pass that failed (main itself regressed there), else
   the candidate.

Everything is judged per **series** (:class:`SeriesKey`): one recipe, check, hardware and,
where a Result names them, the models it judged (the SWE gate's criteria,
``evidence.models``). Outcomes of other hardware or other models are other series: they
are never reruns, flips or history of the candidate's series. The candidate's series is
its recipe, the hardware it says (``hardware``, else its ``context``'s; None matches only
runs recorded without one) and the models its Results name (none matches only Results
naming none).

The **window** of a series is the last ``last`` nightlies of ``main_branch`` (runs grouped
by ``nightly_id``, else each run alone) that recorded a Result of it, before the
candidate when its ``context`` is given, never holding the candidate's own recordings
(:class:`CandidateIdentity`: its run ids, its nightly ids, and any run whose judged gate
Results are all the candidate's, value for value). With a baseline ``commit``
(:class:`~rlgate.history.model.CommitRef`, e.g. the merge base of a pull request) the
window is instead the last ``last`` nightlies, recorded at any time, whose recorded
commits hold that commit and whose code is the baseline's: its ``main_branch`` runs, and
runs of other branches with the same code as one of them (a release branch's rerun); other
branches' runs of that commit with other code (an experiment with another NeMo Gym commit)
are not the baseline. Only when ``main_branch`` never ran the commit do every branch's runs
of it count. "main" above then reads "the baseline commit", and a regression is a check
that passed on the baseline and fails on the candidate. A judged outcome is a
PASS, a FAIL or an ERROR without infrastructure cause; SKIPs and infra errors are not
judgements.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from rlgate.core.results import CHECK_TIERS, INFRA_CAUSE, MODELS, Outcome, Result, Tier
from rlgate.history.model import CommitRef, RecordedRun, RunContext, is_bisect, is_canary

__all__ = [
    "DEFAULT_LAST",
    "FLAKY_RATE",
    "MIN_FLIPS",
    "TABLE_HEADER",
    "CandidateIdentity",
    "CheckKey",
    "Label",
    "Mark",
    "SeriesKey",
    "TriageLabel",
    "code_of",
    "fingerprint",
    "label_rows",
    "marks_by_series",
    "models_of",
    "nightlies",
    "outcome_strip",
    "reference_name",
    "triage",
    "window",
]

#: Main nightlies a candidate is compared with, by default.
DEFAULT_LAST = 30
#: Flips per same-code transition from which a check is flaky (10 %: one flip in ten
#: consecutive same-code nightlies; a deterministic check flips only when its code changes).
FLAKY_RATE = 0.1
#: Fewest flips that make a check flaky (one flip alone may be one environment change).
MIN_FLIPS = 2


class Label(Enum):
    """What a failing gate check's history says about it."""

    REGRESSION = "regression"
    PRE_EXISTING = "pre-existing"
    FLAKY = "flaky"
    INFRA = "infra"
    UNKNOWN = "unknown"
    #: A passing check whose value changed inside its bound (``history.changes.drift_labels``):
    #: informational unless its recipe sets ``rlgate.block_on_drift``.
    DRIFT = "drift"
    #: an active quarantine entry holds the check (rlgate.history.quarantine): shown, no block
    QUARANTINED = "quarantined"


#: A check by name: its tier and name (a series adds recipe, hardware and models).
CheckKey = tuple[Tier, str]

_JUDGED = (Outcome.PASS, Outcome.FAIL, Outcome.ERROR)
_BAD = (Outcome.FAIL, Outcome.ERROR)


def models_of(result: Result) -> tuple[str, ...]:
    """The models a Result says it judged (``evidence.models``): ``(before, after)``, or ().

    A malformed entry is a series of its own (its JSON text), never "no models".
    """
    raw = result.evidence.get(MODELS)
    if raw is None:
        return ()
    if isinstance(raw, dict) and set(raw) == {"before", "after"}:
        before, after = raw["before"], raw["after"]
        if isinstance(before, str) and isinstance(after, str) and before and after:
            return (before, after)
    return (json.dumps(raw, sort_keys=True, default=str)[:200],)


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """One series of a check: the outcomes that are comparable from nightly to nightly.

    ``recipe`` (None only for a candidate's check that names none), ``tier`` and ``check``
    name the check; ``hardware`` the machine type its runs ran on (None: not recorded), for
    the tiers that run on it (:data:`~rlgate.core.results.CHECK_TIERS`: convergence, perf;
    the functional tier and the SWE gate's evaluation do not, so theirs is None);
    ``models`` the models its Results name (:func:`models_of`; () where none applies).
    """

    recipe: str | None
    tier: Tier
    check: str
    hardware: str | None = None
    models: tuple[str, ...] = ()

    @classmethod
    def of(cls, recipe: str | None, hardware: str | None, result: Result) -> SeriesKey:
        """The series ``result`` belongs to when run for ``recipe`` on ``hardware``."""
        where = hardware if result.tier in CHECK_TIERS else None
        return cls(recipe, result.tier, result.name, where, models_of(result))

    @property
    def check_key(self) -> CheckKey:
        """The check's tier and name."""
        return (self.tier, self.check)

    def matches(self, recorded: SeriesKey) -> bool:
        """Whether ``recorded`` is this (a candidate's) series.

        The same check, hardware and models, and the same recipe unless this one names none.
        """
        return (
            self.check_key == recorded.check_key
            and self.hardware == recorded.hardware
            and self.models == recorded.models
            and (self.recipe is None or self.recipe == recorded.recipe)
        )

    def describe(self) -> str:
        """``on 2n8g``, ``for models base -> trained``: the series, as reasons say it."""
        parts = []
        if self.tier in CHECK_TIERS:
            parts.append(f"on {self.hardware}" if self.hardware else "on unrecorded hardware")
        if len(self.models) == 2:
            parts.append(f"for models {self.models[0]} -> {self.models[1]}")
        elif self.models:
            parts.append(f"for models {self.models[0]}")
        elif self.tier is Tier.SWE_GATE:
            parts.append("for unnamed models")
        return ", ".join(parts) or "in its recipe"


def code_of(context: RunContext) -> tuple[Any, ...] | None:
    """What "the same code" means for flakiness: recipe hash, commits, versions (None: unknown)."""
    if not context.commits:
        return None
    return (
        context.recipe_sha256,
        tuple(sorted(context.commits.items())),
        tuple(sorted(context.versions.items())),
    )


def _judged(result: Result) -> bool:
    return result.outcome in _JUDGED and result.infra_cause is None


# --- the candidate's own recordings ----------------------------------------------------------

#: A judged gate Result by content: tier, name, outcome, value (exact), message, models.
Fingerprint = tuple[str, str, str, str | None, str, tuple[str, ...]]


def fingerprint(result: Result) -> Fingerprint | None:
    """A judged gate Result's content (None for a SKIP or an informational Result)."""
    if result.informational or result.outcome is Outcome.SKIP:
        return None
    value = None if result.value is None else repr(float(result.value))
    tier, outcome = result.tier.value, result.outcome.value
    return (tier, result.name, outcome, value, result.message, models_of(result))


@dataclass(frozen=True, slots=True)
class CandidateIdentity:
    """What makes a recorded run the candidate's own recording: never history for it.

    A run is the candidate's when its run id is one of ``run_ids``, its nightly one of
    ``nightly_ids``, or every judged gate Result it holds (at least one) is one of the
    candidate's, value for value (``results``: :func:`fingerprint` -> the earliest time an
    input holding it says it was written, None when unstated), recorded no earlier than
    that time (a run recorded before the candidate existed is not its recording). The
    content rule grows with the candidate: adding a Result to it never makes a run it
    owned someone else's.
    """

    results: Mapping[Fingerprint, datetime | None] = field(default_factory=dict)
    run_ids: frozenset[str] = frozenset()
    nightly_ids: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        inputs: Iterable[tuple[Iterable[Result], datetime | None]],
        *,
        run_ids: Iterable[str] = (),
        nightly_ids: Iterable[str] = (),
    ) -> CandidateIdentity:
        """From the candidate's inputs: each one's Results and when it says it was written."""
        seen: dict[Fingerprint, datetime | None] = {}
        for results, when in inputs:
            for result in results:
                key = fingerprint(result)
                if key is None:
                    continue
                if key not in seen:
                    seen[key] = when
                else:  # the earliest, and None (unstated) before any time
                    prev = seen[key]
                    seen[key] = None if prev is None or when is None else min(prev, when)
        return cls(seen, frozenset(run_ids), frozenset(nightly_ids))

    def owns(self, run: RecordedRun) -> bool:
        """Whether ``run`` is one of the candidate's own recordings (class docstring)."""
        ctx = run.context
        if ctx.run_id in self.run_ids:
            return True
        if ctx.nightly_id is not None and ctx.nightly_id in self.nightly_ids:
            return True
        judged = 0
        for result in run.results:
            key = fingerprint(result)
            if key is None:
                continue
            if key not in self.results:
                return False
            when = self.results[key]
            if when is not None and ctx.recorded_at < when:
                return False
            judged += 1
        return judged > 0


# --- marks -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mark:
    """One nightly's outcome of one series (its runs' Results combined).

    ``outcome`` is PASS when every judged Result passed, else the first failing one's (FAIL
    or ERROR); an ERROR with ``infra`` set when only infra errors were recorded; SKIP when
    the check was skipped. ``mixed`` is True when the nightly's runs disagree (a rerun).
    """

    nightly: str
    recorded_at: datetime
    outcome: Outcome
    value: float | None
    code: tuple[Any, ...] | None
    run_ids: tuple[str, ...]
    infra: str | None = None
    mixed: bool = False

    @property
    def judged(self) -> bool:
        """True for a PASS, FAIL or non-infra ERROR."""
        return self.outcome in _JUDGED and self.infra is None

    @property
    def passed(self) -> bool:
        """True when the nightly passed the check (on at least one of its runs)."""
        return self.judged and (self.outcome is Outcome.PASS or self.mixed)

    def to_json(self) -> dict[str, Any]:
        """``{nightly, outcome, value, infra, mixed}`` (value None when not finite)."""
        value = self.value if self.value is not None and math.isfinite(self.value) else None
        return {
            "nightly": self.nightly,
            "outcome": self.outcome.value,
            "value": value,
            "infra": self.infra,
            "mixed": self.mixed,
        }


def _mark(
    nightly: str,
    when: datetime,
    results: Sequence[tuple[RunContext, Result]],
    cache: dict[str, tuple[Any, ...] | None],
) -> Mark:
    judged = [r for _, r in results if _judged(r)]
    for c, _ in results:
        if c.run_id not in cache:
            cache[c.run_id] = code_of(c)
    codes = {cache[c.run_id] for c, _ in results}
    code = codes.pop() if len(codes) == 1 else None
    runs = tuple(dict.fromkeys(c.run_id for c, _ in results))
    if judged:
        bad = [r for r in judged if r.outcome is not Outcome.PASS]
        shown = bad[0] if bad else judged[-1]
        mixed = bool(bad) and len(bad) < len(judged)
        return Mark(nightly, when, shown.outcome, shown.value, code, runs, mixed=mixed)
    infra = [r for _, r in results if r.infra_cause is not None]
    if infra:
        first = infra[0]
        return Mark(nightly, when, Outcome.ERROR, first.value, code, runs, infra=first.infra_cause)
    return Mark(nightly, when, Outcome.SKIP, None, code, runs)


def nightlies(runs: Iterable[RecordedRun]) -> list[tuple[str, list[RecordedRun]]]:
    """Runs grouped by nightly (``nightly_id``, else the run alone), oldest first."""
    groups: dict[str, list[RecordedRun]] = defaultdict(list)
    for run in runs:
        groups[run.context.nightly_id or run.context.run_id].append(run)
    return sorted(groups.items(), key=lambda kv: (min(r.context.recorded_at for r in kv[1]), kv[0]))


def window(
    history: Iterable[RecordedRun],
    *,
    main_branch: str = "main",
    last: int | None = DEFAULT_LAST,
    recipe: str | None = None,
    before: RunContext | None = None,
    commit: CommitRef | None = None,
    own: CandidateIdentity | None = None,
) -> list[tuple[str, list[RecordedRun]]]:
    """The last ``last`` nightlies of ``main_branch`` (oldest first; None: all of them).

    ``recipe``: only its runs. ``before``: only runs recorded before that context, and none
    of its nightly or run (a candidate is never compared with itself). ``commit``: the
    nightlies of that baseline commit instead, recorded at any time (the baseline's code does
    not change; ``before``'s nightly and run are still left out): its ``main_branch`` runs
    and other branches' runs of the same code (every branch's when main never ran it).
    ``own``: none of the candidate's own recordings (:class:`CandidateIdentity`). A canary
    branch's runs (``canary/...``) are in no window but one of that branch, and neither are a
    bisection's (``bisect/...``).
    """
    if last is not None and last < 1:
        raise ValueError(f"last must be at least 1, got {last}")
    kept = []
    for run in history:
        ctx = run.context
        if recipe is not None and ctx.recipe != recipe:
            continue
        if is_canary(ctx.branch) and ctx.branch != main_branch:
            continue  # a canary is only ever compared with its own branch (history.canary)
        if is_bisect(ctx.branch) and ctx.branch != main_branch:
            continue  # a bisection's steps are no baseline (their commits' code is on trial)
        if commit is not None:
            if not commit.matches(ctx.commits):
                continue
        elif ctx.branch != main_branch:
            continue
        if before is not None and (
            (commit is None and ctx.recorded_at >= before.recorded_at)
            or ctx.run_id == before.run_id
            or (before.nightly_id is not None and ctx.nightly_id == before.nightly_id)
        ):
            continue
        if own is not None and own.owns(run):
            continue
        kept.append(run)
    if commit is not None:
        kept = _baseline_code(kept, main_branch)
    groups = nightlies(kept)
    return groups if last is None else groups[-last:]


def _baseline_code(runs: list[RecordedRun], main_branch: str) -> list[RecordedRun]:
    """Of a baseline commit's runs, those of the baseline's code (:func:`window`)."""
    main = {code_of(r.context) for r in runs if r.context.branch == main_branch}
    if not main:
        return runs
    return [r for r in runs if r.context.branch == main_branch or code_of(r.context) in main]


def marks_by_series(
    groups: Sequence[tuple[str, list[RecordedRun]]], keys: Iterable[CheckKey] | None = None
) -> dict[SeriesKey, list[Mark]]:
    """Per series of a gate check, its :class:`Mark` in each nightly that recorded it.

    Oldest first. A nightly's runs of one series are reruns (they make one mark); runs of
    another hardware or Results of other models are another series. ``keys``: only these
    checks (default: every gate check).
    """
    wanted = set(keys) if keys is not None else None
    out: dict[SeriesKey, list[Mark]] = defaultdict(list)
    codes: dict[str, tuple[Any, ...] | None] = {}
    for nightly, runs in groups:
        when = min(r.context.recorded_at for r in runs)
        per: dict[SeriesKey, list[tuple[RunContext, Result]]] = defaultdict(list)
        for run in runs:
            ctx = run.context
            for result in run.results:
                if result.informational:
                    continue
                if wanted is not None and (result.tier, result.name) not in wanted:
                    continue
                per[SeriesKey.of(ctx.recipe, ctx.hardware, result)].append((ctx, result))
        for key, results in per.items():
            out[key].append(_mark(nightly, when, results, codes))
    return dict(out)


def outcome_strip(marks: Sequence[Mark]) -> str:
    """The nightlies' outcomes as one character each, oldest first.

    ``.`` pass, ``F`` fail, ``E`` error, ``I`` infra error, ``M`` mixed (a rerun disagreed),
    ``-`` skipped.
    """
    chars = []
    for m in marks:
        if m.infra is not None:
            chars.append("I")
        elif m.mixed:
            chars.append("M")
        else:
            chars.append(
                {Outcome.PASS: ".", Outcome.FAIL: "F", Outcome.ERROR: "E", Outcome.SKIP: "-"}[
                    m.outcome
                ]
            )
    return "".join(chars)


def _flips(marks: Sequence[Mark]) -> tuple[int, int, list[str]]:
    """(flips, transitions, nightlies where it flipped) over same-code judged nightlies."""
    judged = [m for m in marks if m.judged]
    flips, transitions, where = 0, 0, []
    for m in judged:
        if m.mixed:
            flips, transitions = flips + 1, transitions + 1
            where.append(m.nightly)
    for a, b in itertools.pairwise(judged):
        if a.code is None or a.code != b.code:
            continue
        transitions += 1
        if (a.outcome is Outcome.PASS) != (b.outcome is Outcome.PASS):
            flips += 1
            where.append(b.nightly)
    return flips, transitions, where


@dataclass(frozen=True, slots=True)
class TriageLabel:
    """One failing gate check of the candidate, its label and the evidence behind it.

    ``candidate`` is the candidate's failing Result; ``hardware`` and ``models`` the rest of
    the candidate's series (:class:`SeriesKey`); ``history`` the series' marks in the main
    nightlies of its window (oldest first); ``first_failing`` names the first failing
    nightly of a regression (``"candidate"`` when main still passes it); ``last_passing``
    the last main nightly that passed it; ``flips``/``transitions`` the same-code flip count.
    """

    recipe: str | None
    check: str
    tier: Tier
    label: Label
    candidate: Result
    reason: str
    history: tuple[Mark, ...] = ()
    first_failing: str | None = None
    last_passing: str | None = None
    flips: int = 0
    transitions: int = 0
    rerun_passed: str | None = None
    window: tuple[str, ...] = field(default=())
    hardware: str | None = None
    models: tuple[str, ...] = ()
    block_drift: bool = False
    #: the active quarantine entry (a QuarantineState) when the label is QUARANTINED
    quarantine: Any = None

    @property
    def series(self) -> SeriesKey:
        """The candidate's series of the check."""
        return SeriesKey(self.recipe, self.tier, self.check, self.hardware, self.models)

    @property
    def flip_rate(self) -> float | None:
        """Flips per same-code transition (None without a transition)."""
        return self.flips / self.transitions if self.transitions else None

    @property
    def blocks(self) -> bool:
        """True for a label never waved through: regression, unknown (a drift: by its recipe)."""
        if self.label is Label.DRIFT:
            return self.block_drift
        return self.label in (Label.REGRESSION, Label.UNKNOWN)

    def candidate_text(self) -> str:
        """``FAIL 1.23`` (outcome and value) as the table shows the candidate."""
        value = self.candidate.value
        shown = "" if value is None else f" {value:.4g}"
        return f"{self.candidate.outcome.value.upper()}{shown}"

    def main_text(self) -> str:
        """``....FF 4/6 pass`` as the table shows main's nightlies (oldest first)."""
        judged = [m for m in self.history if m.judged]
        passed = sum(m.passed for m in judged)
        strip = outcome_strip(self.history) or "no nightly"
        return f"{strip} {passed}/{len(judged)} pass" if judged else strip

    def to_json(self) -> dict[str, Any]:
        """The label and its evidence as JSON (``rlgate triage --json``)."""
        cause = self.candidate.evidence.get(INFRA_CAUSE) if self.label is Label.INFRA else None
        value = self.candidate.value
        return {
            "recipe": self.recipe,
            "check": self.check,
            "tier": self.tier.value,
            "hardware": self.hardware,
            "models": list(self.models),
            "label": self.label.value,
            "blocks": self.blocks,
            "reason": self.reason,
            "candidate": {
                "outcome": self.candidate.outcome.value,
                "value": value if value is not None and math.isfinite(value) else None,
                "bound": self.candidate.bound,
                "message": self.candidate.message,
                "infra_cause": cause,
            },
            "first_failing": self.first_failing,
            "last_passing": self.last_passing,
            "flips": self.flips,
            "transitions": self.transitions,
            "flip_rate": self.flip_rate,
            "rerun_passed": self.rerun_passed,
            "main": self.main_text(),
            "nightlies": [m.to_json() for m in self.history],
            "quarantine": None if self.quarantine is None else self.quarantine.to_json(),
        }


def reference_name(main_branch: str, commit: CommitRef | None) -> str:
    """What the candidate is compared with, as the reasons say it (``main``, ``baseline X``)."""
    return f"baseline {commit}" if commit is not None else main_branch


def _value(mark: Mark) -> str:
    return "" if mark.value is None else f" ({mark.value:.4g})"


def _label_one(
    key: SeriesKey,
    results: Sequence[Result],
    marks: Sequence[Mark],
    *,
    code: tuple[Any, ...] | None,
    flaky_rate: float,
    ref: str = "main",
    unmatched: str = "",
) -> TriageLabel | None:
    """``unmatched``: why no recorded series could be compared (an UNKNOWN's reason)."""
    failing = [r for r in results if r.outcome in (Outcome.FAIL, Outcome.ERROR)]
    if not failing:
        return None
    shown = next((r for r in failing if r.infra_cause is None), failing[0])
    base: dict[str, Any] = {"recipe": key.recipe, "check": key.check, "tier": key.tier}
    base |= {"candidate": shown, "hardware": key.hardware, "models": key.models}
    base |= {"history": tuple(marks), "window": tuple(m.nightly for m in marks)}
    if all(r.infra_cause is not None for r in failing):
        causes = sorted({r.infra_cause or "" for r in failing})
        reason = f"ERROR with an infrastructure cause: {', '.join(causes)}"
        return TriageLabel(label=Label.INFRA, reason=reason, **base)
    flips, transitions, where = _flips(marks)
    if any(r.outcome is Outcome.PASS for r in results):
        reason = "failed, then passed on a rerun in the candidate"
        return TriageLabel(
            label=Label.FLAKY, reason=reason, flips=flips, transitions=transitions,
            rerun_passed="candidate", **base,
        )  # fmt: skip
    same = next((m for m in reversed(marks) if code and m.code == code and m.passed), None)
    if same is not None:
        reason = f"passed on a rerun of the same code: nightly {same.nightly}{_value(same)}"
        return TriageLabel(
            label=Label.FLAKY, reason=reason, flips=flips, transitions=transitions,
            rerun_passed=same.nightly, **base,
        )  # fmt: skip
    if flips >= MIN_FLIPS and flips / transitions >= flaky_rate:
        reason = (
            f"outcome flipped {flips} times in {transitions} same-code transitions on {ref} "
            f"({flips / transitions:.0%} >= {flaky_rate:.0%}; at {', '.join(where[:5])})"
        )
        return TriageLabel(
            label=Label.FLAKY, reason=reason, flips=flips, transitions=transitions, **base
        )
    judged = [m for m in marks if m.judged]
    stats = {"flips": flips, "transitions": transitions}
    if not judged:
        if unmatched:
            reason = unmatched
        elif marks:
            reason = (
                f"no {ref} nightly of the last {len(marks)} that recorded it {key.describe()} "
                "judged it (skipped or infra errors): cannot be excused"
            )
        else:
            reason = f"no {ref} nightly recorded it {key.describe()}: cannot be excused"
        return TriageLabel(label=Label.UNKNOWN, reason=reason, **stats, **base)
    passes = [m for m in judged if m.passed]
    if not passes:
        reason = (
            f"fails on {ref} too: failed in all {len(judged)} {ref} nightlies that ran it, "
            f"since {judged[0].nightly}{_value(judged[0])} at least"
        )
        return TriageLabel(
            label=Label.PRE_EXISTING, reason=reason, first_failing=judged[0].nightly,
            **stats, **base,
        )  # fmt: skip
    last_pass = passes[-1]
    after = judged[judged.index(last_pass) + 1 :]
    if after:
        first = after[0]
        reason = (
            f"passed on {ref} in {last_pass.nightly}{_value(last_pass)}; {ref} fails since "
            f"{first.nightly}{_value(first)} ({len(after)} nightlies)"
        )
        first_failing = first.nightly
    else:
        reason = f"{ref} passes it (last: {last_pass.nightly}{_value(last_pass)}); fails now"
        first_failing = "candidate"
    return TriageLabel(
        label=Label.REGRESSION, reason=reason, first_failing=first_failing,
        last_passing=last_pass.nightly, **stats, **base,
    )  # fmt: skip


def _unmatched(
    key: SeriesKey, matching: Sequence[SeriesKey], others: Sequence[SeriesKey], ref: str
) -> str:
    """Why a candidate series has no history to compare with ("" when it has one)."""
    if len(matching) > 1:
        recipes = ", ".join(sorted({s.recipe or "" for s in matching}))
        return (
            f"the candidate names no recipe and {ref} nightlies of {len(matching)} recipes "
            f"ran it {key.describe()} ({recipes}): their series are never pooled, so "
            "nothing can vouch for it"
        )
    if not matching and others:
        seen = "; ".join(sorted({s.describe() for s in others})[:3])
        return (
            f"no {ref} nightly ran it {key.describe()} (only {seen}): other hardware and "
            "other models are other series"
        )
    return ""


def triage(
    candidate: Sequence[Result],
    history: Sequence[RecordedRun],
    *,
    main_branch: str = "main",
    last: int = DEFAULT_LAST,
    flaky_rate: float = FLAKY_RATE,
    recipe: str | None = None,
    context: RunContext | None = None,
    commit: CommitRef | None = None,
    hardware: str | None = None,
    own: CandidateIdentity | None = None,
) -> list[TriageLabel]:
    """Label every failing or erroring gate check of ``candidate`` (module docstring).

    Args:
        candidate: the candidate's Results (informational ones are ignored; a check given
            more than once is a rerun).
        history: recorded runs (any branch, any order), e.g. ``Store.runs(...)``.
        main_branch: the branch whose nightlies the candidate is compared with.
        last: how many of its nightlies, per series.
        flaky_rate: flips per same-code transition from which a check is flaky.
        recipe: the candidate's recipe: only its runs count (None: every recipe's runs of
            the same check, e.g. the SWE gate's criteria, which name no recipe; the series
            of two recipes are never pooled).
        context: the candidate's own context, when it was recorded: its code (a rerun of
            the same code that passed makes the check flaky), its time (later runs, its
            nightly and itself are left out) and its hardware. Its recipe is not a filter:
            ``recipe`` is.
        commit: a baseline commit: compare with its nightlies (:func:`window`) instead of the
            last ``last`` nightlies of ``main_branch``.
        hardware: the hardware the candidate ran on (default: ``context``'s; None: it
            says none, and only runs recorded without one are its series).
        own: what identifies the candidate's own recordings (default: ``candidate``'s
            Results as one input of unstated time).
    """
    if not 0.0 < flaky_rate <= 1.0:
        raise ValueError(f"flaky_rate must be in (0, 1], got {flaky_rate}")
    if last < 1:
        raise ValueError(f"last must be at least 1, got {last}")
    if hardware is None and context is not None:
        hardware = context.hardware
    per: dict[SeriesKey, list[Result]] = defaultdict(list)
    for result in candidate:
        if not result.informational:
            per[SeriesKey.of(recipe, hardware, result)].append(result)
    failing = [k for k, rs in per.items() if any(r.outcome in _BAD for r in rs)]
    if not failing:
        return []
    identity = own if own is not None else CandidateIdentity.of([(candidate, None)])
    groups = window(
        history, main_branch=main_branch, last=None, recipe=recipe, before=context,
        commit=commit, own=identity,
    )  # fmt: skip
    marks = marks_by_series(groups, {k.check_key for k in failing})
    by_check: dict[CheckKey, list[SeriesKey]] = defaultdict(list)
    for series in marks:
        by_check[series.check_key].append(series)
    code = code_of(context) if context is not None else None
    ref = reference_name(main_branch, commit)
    labels = []
    for key in failing:
        recorded = by_check.get(key.check_key, [])
        matching = [s for s in recorded if key.matches(s)]
        others = [s for s in recorded if not key.matches(s)]
        unmatched = _unmatched(key, matching, others, ref)
        series_marks = marks[matching[0]][-last:] if len(matching) == 1 else []
        label = _label_one(
            key, per[key], series_marks, code=code, flaky_rate=flaky_rate, ref=ref,
            unmatched=unmatched,
        )  # fmt: skip
        if label is not None:
            labels.append(label)
    return labels


#: The table's columns, like the hand-written tables of NeMo RL's vLLM-upgrade PRs.
TABLE_HEADER = ("check", "candidate", "main last N", "label", "evidence")
_ORDER = {
    Label.REGRESSION: 0,
    Label.UNKNOWN: 1,
    Label.FLAKY: 2,
    Label.INFRA: 3,
    Label.PRE_EXISTING: 4,
    Label.DRIFT: 5,
    Label.QUARANTINED: 6,
}


def _series_text(lb: TriageLabel) -> str:
    return f" [{lb.series.describe()}]"


def label_rows(labels: Sequence[TriageLabel]) -> tuple[tuple[str, ...], ...]:
    """Table rows (:data:`TABLE_HEADER`), regressions first.

    The recipe is named when several are labelled, the series (hardware, models) when one
    check is labelled in several series.
    """
    ordered = sorted(labels, key=lambda lb: (_ORDER[lb.label], lb.tier.value, lb.check))
    several = len({lb.recipe for lb in labels}) > 1
    count: dict[tuple[str | None, Tier, str], int] = defaultdict(int)
    for lb in labels:
        count[(lb.recipe, lb.tier, lb.check)] += 1
    return tuple(
        (
            f"{lb.tier.value}: {lb.check}"
            + (f" ({lb.recipe})" if several and lb.recipe else "")
            + (_series_text(lb) if count[(lb.recipe, lb.tier, lb.check)] > 1 else ""),
            lb.candidate_text(),
            lb.main_text(),
            lb.label.value + (" (blocks)" if lb.label is Label.DRIFT and lb.blocks else ""),
            lb.reason,
        )
        for lb in ordered
    )
