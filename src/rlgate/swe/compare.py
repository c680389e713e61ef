"""Compare a before (base) arm with an after (trained) arm on SWE-bench: criteria and verdict.

Pure: records in, a :class:`SweComparison` out; no files, no Docker. Each gate criterion
is a :class:`~rlgate.core.results.Result` (tier ``swe_gate``); the verdict is the decision
over them and the statistics.

Invariants:

* Paired on the dataset universe: instance *i* of one arm is compared with
  instance *i* of the other, and the denominator is always ``universe.n``
  (missing, empty-patch, patch-failed and error instances count as not resolved).
* One run in each arm: exact two-sided McNemar on the discordant pairs, and a
  paired bootstrap CI of the difference. Several runs in either arm: the
  per-instance mean over runs, a paired sign-flip permutation test and a cluster
  bootstrap CI (an instance is resampled with all of its runs), plus mean ± SE of
  the resolve rate across runs.
* Verdict rule (``alpha``, margin ``M`` in pp, differences are after − before):

  - ``inconclusive`` when any input criterion errors: an arm's worst run has
    more infra errors (harness errors + classified infra faults + missing) than
    ``max_infra_error_rate``, the runs cover different instance sets, or a run
    was graded against other test labels than the dataset's (another revision);
  - ``improved`` when ``p <= alpha`` and the difference is positive;
  - ``regressed`` when ``p <= alpha``, the difference is negative and the 95 %
    CI lower bound is below ``-M`` (a drop shown to be smaller than ``M`` is
    tolerated);
  - ``no_significant_change`` otherwise.

* The statistics are computed and reported even when the verdict is
  inconclusive; an inconclusive comparison is never a pass or a fail.
* The flaky instances (an outcome that flips between runs of one arm,
  :mod:`rlgate.swe.flaky`) are reported; they never change the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rlgate.core.errors import SweError
from rlgate.core.results import INFRA_CAUSE, Op, Result, Tier, number_text
from rlgate.core.results import Outcome as CheckOutcome  # records.Outcome: an instance's
from rlgate.swe import stats
from rlgate.swe.flaky import Flakiness, find_flaky
from rlgate.swe.records import DatasetUniverse, Outcome, SweArm, SweRun, _examples

__all__ = [
    "MAX_RESAMPLES",
    "MAX_SEED",
    "MIN_RESAMPLES",
    "ArmSummary",
    "Criterion",
    "Flip",
    "GateOptions",
    "RepoBreakdown",
    "SweComparison",
    "Verdict",
    "compare_arms",
    "decide_verdict",
]

#: Bootstrap/permutation draws: the p-value resolution is 1/draws; the cost grows with
#: instances x draws (500 x 100,000 takes seconds).
MIN_RESAMPLES = 100
MAX_RESAMPLES = 100_000
#: Seeds of the resampling (numpy's 32-bit seed range).
MAX_SEED = 2**32 - 1

TEST_MCNEMAR = "exact_mcnemar"
TEST_SIGN_FLIP = "paired_sign_flip_permutation"
CI_PAIRED = "paired_bootstrap_percentile"
CI_CLUSTER = "cluster_bootstrap_percentile"


class Verdict(Enum):
    """The gate's decision."""

    IMPROVED = "improved"
    REGRESSED = "regressed"
    NO_SIGNIFICANT_CHANGE = "no_significant_change"
    INCONCLUSIVE = "inconclusive"


class Criterion(Enum):
    """One gate criterion = one JUnit testcase = one tier test."""

    COVERAGE_BEFORE = "coverage_before"
    COVERAGE_AFTER = "coverage_after"
    SAME_INSTANCE_SET = "same_instance_set"
    SAME_DATASET_REVISION = "same_dataset_revision"
    SIGNIFICANCE = "significance"


def _criterion(
    which: Criterion,
    outcome: CheckOutcome,
    value: float,
    threshold: float,
    message: str,
    *,
    op: Op,
    unit: str,
    evidence: dict[str, Any] | None = None,
) -> Result:
    """A criterion's Result: PASS held, FAIL a regression, ERROR infra/inputs (never a fail).

    Its ``bound`` is the threshold's number as text (``swe compare --json`` has always
    written a criterion's bound as that number).
    """
    return Result(
        name=which.value,
        tier=Tier.SWE_GATE,
        outcome=outcome,
        value=value,
        op=op,
        threshold=threshold,
        unit=unit,
        bound=number_text(threshold),
        message=message,
        evidence=evidence or {},
    )


@dataclass(frozen=True, slots=True)
class GateOptions:
    """Thresholds of the SWE gate."""

    alpha: float = 0.05
    margin_pp: float = 0.0
    max_infra_error_rate: float = 0.05
    n_resamples: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise SweError(f"alpha must be in (0, 1), got {self.alpha}")
        if not (self.margin_pp >= 0.0 and math.isfinite(self.margin_pp)):
            raise SweError(f"margin_pp must be a finite number >= 0, got {self.margin_pp}")
        if not 0.0 <= self.max_infra_error_rate <= 1.0:
            raise SweError(
                f"max_infra_error_rate must be in [0, 1], got {self.max_infra_error_rate}"
            )
        if not MIN_RESAMPLES <= self.n_resamples <= MAX_RESAMPLES:
            raise SweError(
                f"n_resamples must be in {MIN_RESAMPLES:,}..{MAX_RESAMPLES:,}, "
                f"got {self.n_resamples:,}"
            )
        if not 0 <= self.seed <= MAX_SEED:
            raise SweError(f"seed must be in 0..{MAX_SEED:,}, got {self.seed}")


@dataclass(frozen=True, slots=True)
class ArmSummary:
    """One arm scored on the universe."""

    name: str
    runs: tuple[SweRun, ...]
    resolved: tuple[int, ...]
    rate: float
    rate_se: float | None
    instance_mean: NDArray[np.float64]

    def counts(self, outcome: Outcome) -> tuple[int, ...]:
        """Per-run number of instances with ``outcome``."""
        return tuple(run.count(outcome) for run in self.runs)

    @property
    def worst_run(self) -> SweRun:
        """The run with the highest infra error rate."""
        return max(self.runs, key=lambda r: r.infra_error_rate)


@dataclass(frozen=True, slots=True)
class RepoBreakdown:
    """Resolved counts (mean over runs) and flips for one repository."""

    repo: str
    n: int
    before_resolved: float
    after_resolved: float
    gained: int
    lost: int

    @property
    def delta_pp(self) -> float:
        """Difference of resolve rates within the repository, in pp."""
        return 100.0 * (self.after_resolved - self.before_resolved) / self.n


@dataclass(frozen=True, slots=True)
class Flip:
    """An instance whose (mean) resolved value differs between the arms."""

    instance_id: str
    repo: str
    before: float
    after: float

    @property
    def gained(self) -> bool:
        """True when the after arm resolves it more often."""
        return self.after > self.before


@dataclass(frozen=True, slots=True)
class SweComparison:
    """Everything the gate decided and why."""

    universe: DatasetUniverse
    options: GateOptions
    before: ArmSummary
    after: ArmSummary
    delta_pp: float
    p_value: float
    ci95_pp: tuple[float, float]
    test: str
    ci_method: str
    lost: int
    gained: int
    verdict: Verdict
    reasons: tuple[str, ...]
    criteria: tuple[Result, ...]
    per_repo: tuple[RepoBreakdown, ...]
    flips: tuple[Flip, ...]
    flaky: Flakiness  # instances flipping between runs of one arm (rlgate.swe.flaky)

    def criterion(self, which: Criterion) -> Result:
        """The result of one criterion."""
        return next(c for c in self.criteria if c.name == which.value)


def _summarise(arm: SweArm, universe: DatasetUniverse) -> ArmSummary:
    if not arm.runs:
        raise SweError(f"the {arm.name} arm has no runs")
    matrix = np.vstack([run.resolved_vector(universe.ids) for run in arm.runs]).astype(float)
    resolved = tuple(int(v) for v in matrix.sum(axis=1))
    rate = stats.mean_se(np.asarray(resolved, dtype=float) / universe.n)
    return ArmSummary(arm.name, arm.runs, resolved, rate.mean, rate.se, matrix.mean(axis=0))


_SHARE = {"op": Op.LE, "unit": "share of instances"}
_NONE = {"op": Op.EQ, "unit": "instances"}


def _coverage(summary: ArmSummary, which: Criterion, options: GateOptions) -> Result:
    run = summary.worst_run
    rate, bound = run.infra_error_rate, options.max_infra_error_rate
    detail = (
        f"{run.count(Outcome.ERROR)} harness errors, {run.count(Outcome.INFRA)} infra faults, "
        f"{run.count(Outcome.MISSING)} missing of {len(run.outcomes)}"
    )
    if rate > bound:
        return _criterion(
            which,
            CheckOutcome.ERROR,
            rate,
            bound,
            f"{summary.name} run {run.label}: infra error rate {rate:.1%} ({detail}) exceeds "
            f"the allowed {bound:.1%}; rerun the failed instances before comparing",
            evidence={INFRA_CAUSE: {"reason": "swe_infra_errors", "detail": detail}},
            **_SHARE,
        )
    return _criterion(
        which,
        CheckOutcome.PASS,
        rate,
        bound,
        f"{summary.name}: worst infra error rate {rate:.1%} ({detail}) <= {bound:.1%}",
        **_SHARE,
    )


def _same_scope(runs: list[SweRun]) -> Result:
    known = [(run, run.scope) for run in runs if run.scope is not None]
    for run, scope in known[1:]:
        ref, ref_scope = known[0]
        if scope != ref_scope:
            only_ref, only_run = ref_scope - scope, scope - ref_scope
            return _criterion(
                Criterion.SAME_INSTANCE_SET,
                CheckOutcome.ERROR,
                float(len(only_ref) + len(only_run)),
                0.0,
                f"runs cover different instance sets: {ref.label} has {len(ref_scope)} ids, "
                f"{run.label} has {len(scope)}; only in the first: "
                f"{_examples(only_ref) or 'none'}; only in the second: "
                f"{_examples(only_run) or 'none'}",
                **_NONE,
            )
    note = "" if len(known) == len(runs) else " (log directories do not state their scope)"
    return _criterion(
        Criterion.SAME_INSTANCE_SET,
        CheckOutcome.PASS,
        0.0,
        0.0,
        f"{len(known)} run(s) with a stated instance set agree{note}",
        **_NONE,
    )


def _same_revision(runs: list[SweRun], universe: DatasetUniverse) -> Result:
    bad = [r for r in runs if r.label_mismatch]
    if bad:
        parts = [
            f"{r.label}: {len(r.label_mismatch)} instance(s) ({_examples(r.label_mismatch)})"
            for r in bad
        ]
        return _criterion(
            Criterion.SAME_DATASET_REVISION,
            CheckOutcome.ERROR,
            float(sum(len(r.label_mismatch) for r in bad)),
            0.0,
            "graded against other FAIL_TO_PASS/PASS_TO_PASS labels than the dataset "
            f"{universe.source} (sha256 {universe.file_sha256 or universe.ids_sha256}), i.e. a "
            f"different dataset revision: {'; '.join(parts)}",
            **_NONE,
        )
    checked = "" if universe.labels else " (the dataset has no test labels: not checked)"
    return _criterion(
        Criterion.SAME_DATASET_REVISION,
        CheckOutcome.PASS,
        0.0,
        0.0,
        f"no run contradicts the dataset's test labels{checked}",
        **_NONE,
    )


def _test(
    before: ArmSummary, after: ArmSummary, options: GateOptions
) -> tuple[float, tuple[float, float], str, str]:
    diffs = after.instance_mean - before.instance_mean
    lo, hi = stats.paired_bootstrap_ci(diffs, n_resamples=options.n_resamples, seed=options.seed)
    ci = (100.0 * lo, 100.0 * hi)
    if len(before.runs) == 1 and len(after.runs) == 1:
        b, c = stats.discordant_counts(before.instance_mean > 0.5, after.instance_mean > 0.5)
        return stats.mcnemar_exact(b, c), ci, TEST_MCNEMAR, CI_PAIRED
    p = stats.paired_sign_flip_test(diffs, n_resamples=options.n_resamples, seed=options.seed)
    return p, ci, TEST_SIGN_FLIP, CI_CLUSTER


def decide_verdict(
    delta_pp: float, p: float, ci: tuple[float, float], test: str, options: GateOptions
) -> tuple[Verdict, str]:
    """The gate's one verdict rule from the numbers (the report re-applies it to check a JSON)."""
    stat = f"delta = {delta_pp:+.2f} pp, {test} p = {p:.3g}, 95% CI [{ci[0]:+.2f}, {ci[1]:+.2f}] pp"
    if p <= options.alpha and delta_pp > 0:
        return Verdict.IMPROVED, f"{stat}: improved (p <= alpha = {options.alpha})"
    if p <= options.alpha and delta_pp < 0:
        if ci[0] < -options.margin_pp:
            return Verdict.REGRESSED, f"{stat}: regressed (p <= alpha = {options.alpha})"
        return (
            Verdict.NO_SIGNIFICANT_CHANGE,
            f"{stat}: a significant drop, but the CI lower bound is within the tolerated "
            f"margin of {options.margin_pp} pp",
        )
    why = f"{stat}: no significant change (p > alpha = {options.alpha})"
    return Verdict.NO_SIGNIFICANT_CHANGE, why


def _per_repo(
    universe: DatasetUniverse, before: ArmSummary, after: ArmSummary
) -> tuple[RepoBreakdown, ...]:
    repos = np.asarray([universe.repos[i] for i in universe.ids])
    rows = []
    for repo in sorted(set(repos.tolist())):
        mask = repos == repo
        b, a = before.instance_mean[mask], after.instance_mean[mask]
        rows.append(
            RepoBreakdown(
                repo,
                int(mask.sum()),
                float(b.sum()),
                float(a.sum()),
                int(np.count_nonzero(a > b)),
                int(np.count_nonzero(a < b)),
            )
        )
    return tuple(rows)


def _flips(universe: DatasetUniverse, before: ArmSummary, after: ArmSummary) -> tuple[Flip, ...]:
    idx = np.flatnonzero(before.instance_mean != after.instance_mean)
    return tuple(
        Flip(
            universe.ids[i],
            universe.repos[universe.ids[i]],
            float(before.instance_mean[i]),
            float(after.instance_mean[i]),
        )
        for i in idx
    )


def compare_arms(
    before: SweArm,
    after: SweArm,
    universe: DatasetUniverse,
    options: GateOptions | None = None,
) -> SweComparison:
    """Score both arms on the universe, check the input criteria and decide the verdict."""
    options = options or GateOptions()
    b_sum, a_sum = _summarise(before, universe), _summarise(after, universe)
    runs = [*before.runs, *after.runs]
    inputs = [
        _coverage(b_sum, Criterion.COVERAGE_BEFORE, options),
        _coverage(a_sum, Criterion.COVERAGE_AFTER, options),
        _same_scope(runs),
        _same_revision(runs, universe),
    ]
    delta_pp = 100.0 * (a_sum.rate - b_sum.rate)
    p, ci, test, ci_method = _test(b_sum, a_sum, options)
    errors = [c for c in inputs if c.outcome is CheckOutcome.ERROR]
    verdict, why = decide_verdict(delta_pp, p, ci, test, options)
    infra: dict[str, Any] = {}
    if errors:
        verdict = Verdict.INCONCLUSIVE
        reasons = tuple(c.message for c in errors)
        outcome, message = CheckOutcome.ERROR, "inconclusive, not judged: " + " | ".join(reasons)
        if all(c.infra_cause for c in errors):  # not judged only because of the infrastructure
            detail = ", ".join(c.name for c in errors)
            infra = {INFRA_CAUSE: {"reason": "swe_infra_errors", "detail": detail}}
    else:
        reasons = (why,)
        outcome = CheckOutcome.FAIL if verdict is Verdict.REGRESSED else CheckOutcome.PASS
        message = why
    # the numbers the verdict rule decides on, so a reader can apply it again
    evidence = {
        "verdict": verdict.value,
        "delta_pp": delta_pp,
        "ci95_low_pp": ci[0],
        "ci95_high_pp": ci[1],
        "test": test,
        "margin_pp": options.margin_pp,
        **infra,
    }
    significance = _criterion(
        Criterion.SIGNIFICANCE,
        outcome,
        p,
        options.alpha,
        message,
        op=Op.LE,
        unit="p-value",
        evidence=evidence,
    )
    lost = int(np.count_nonzero(a_sum.instance_mean < b_sum.instance_mean))
    gained = int(np.count_nonzero(a_sum.instance_mean > b_sum.instance_mean))
    return SweComparison(
        universe=universe,
        options=options,
        before=b_sum,
        after=a_sum,
        delta_pp=delta_pp,
        p_value=p,
        ci95_pp=ci,
        test=test,
        ci_method=ci_method,
        lost=lost,
        gained=gained,
        verdict=verdict,
        reasons=reasons,
        criteria=(*inputs, significance),
        per_repo=_per_repo(universe, b_sum, a_sum),
        flips=_flips(universe, b_sum, a_sum),
        flaky=find_flaky((before, after), universe.ids),
    )
