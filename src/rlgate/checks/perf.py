"""Perf tier statistics: steady-state windows, noise-aware baseline comparison, reference bands.

Pure: series in, a :class:`~rlgate.core.results.Result` out.

**Baseline comparison** (:func:`compare_to_baseline`). Step times and throughputs are
multiplicative and right-skewed (stragglers), so they are compared on the log scale:

* steady state = the logged steps after the first ``warmup_steps`` (compile, first refit);
* shift = Hodges–Lehmann estimate of ``log(candidate) - log(baseline)`` (median of all
  pairwise differences: robust to a straggler step, efficient for normal noise);
* noise = the *baseline's own* step-to-step SD of log values, s_b;
  SE(shift) = sqrt(pi/3) * s_b * sqrt(1/n_b + 1/n_c) (the HL estimator's asymptotic SE);
* tolerance = max(log(1 + min_effect), t_{1-alpha, n_b-1} * SE): a one-sided t bound, with
  ``min_effect`` as the floor below which no change is called a regression (a noiseless
  baseline would otherwise flag any change);
* FAIL when the shift in the worse direction exceeds the tolerance. Improvements pass.

Measured on the 18 real MLPerf Qwen3.5-397B runs (docs/convergence-and-perf.md): with
``warmup_steps=1, alpha=0.05, min_effect=0.30``, 0 of 180 same-batch-size seed-vs-seed
comparisons fail, and a 1.5x step time is caught in 88 of 90 pairs.

**Async vs sync** (:func:`compare_async_vs_sync`): the same shift, read as a speedup of the
async run over its sync twin; FAIL when the speedup is below ``min_speedup`` by more than
the tolerance.

**Reference band** (:func:`build_band`, MLPerf-RCP-like): N earlier good runs of the recipe
give, at every step they all logged, a one-sided prediction interval for one new run,
``mean ± t_{1-alpha, N-1} * sd * sqrt(1 + 1/N)``, and the same interval for the run-level
mean over those steps. ``curve`` fails when more than ``max_outside`` of the candidate's
steps leave the per-step interval on the bad side; ``mean`` fails when its mean does.
N >= 5 is required by default: the half-width is 8.0 SD at N=3, 5.1 at N=4 and 4.1 at N=5
(alpha 0.01); on the MLPerf runs fewer than 5 references miss a flattened reward (see
docs/convergence-and-perf.md for the leave-one-out table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from rlgate.checks.conditions import first_nonfinite
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.runs.metrics import MetricSeries

__all__ = [
    "Band",
    "Direction",
    "PerfComparison",
    "build_band",
    "compare_async_vs_sync",
    "compare_to_baseline",
    "evaluate_band_curve",
    "evaluate_band_mean",
    "hodges_lehmann",
    "steady_state",
    "tier_for_metric",
]


def _t_ppf(q: float, dof: int) -> float:
    """Student's t quantile (scipy imported here: ``recipe check`` imports this module)."""
    from scipy import stats

    return float(stats.t.ppf(q, dof))


_HL_SE = math.sqrt(math.pi / 3.0)


class Direction(Enum):
    """Which way is better for a metric."""

    LOWER = "lower"
    HIGHER = "higher"


_PERF_PREFIXES = ("timing/", "performance/")


def tier_for_metric(tag: str) -> Tier:
    """Band checks on timing/throughput tags belong to the perf tier, the rest to convergence."""
    return Tier.PERF if tag.startswith(_PERF_PREFIXES) else Tier.CONVERGENCE


def steady_state(series: MetricSeries, warmup_steps: int) -> MetricSeries:
    """Drop the first ``warmup_steps`` logged steps."""
    return MetricSeries(series.tag, series.steps[warmup_steps:], series.values[warmup_steps:])


def hodges_lehmann(a: np.ndarray, b: np.ndarray) -> float:
    """Median of all pairwise differences ``a_i - b_j`` (the two-sample HL shift)."""
    return float(np.median(np.subtract.outer(a, b)))


@dataclass(frozen=True, slots=True)
class PerfComparison:
    """A candidate-vs-baseline comparison on the log scale (``worse`` > 0 is worse)."""

    metric: str
    better: Direction
    ratio: float  # exp(HL shift): candidate / baseline in the metric's own units
    worse: float  # log-shift in the bad direction
    tolerance: float  # log tolerance
    noise: float  # baseline SD of log values per step
    n_candidate: int
    n_baseline: int
    candidate_median: float
    baseline_median: float
    steps: tuple[int, int]


def _prepare(series: MetricSeries, warmup: int, role: str) -> np.ndarray | str:
    steady = steady_state(series, warmup)
    if len(steady) < 3:
        return f"{role} has {len(steady)} steady-state step(s) after {warmup} warm-up; need >= 3"
    bad = first_nonfinite(steady.steps, steady.values)
    if bad is not None:
        return f"{role} has a non-finite value {bad}"
    if np.any(steady.values <= 0):
        step = int(steady.steps[np.flatnonzero(steady.values <= 0)[0]])
        return f"{role} has a non-positive value at step {step}"
    return np.log(steady.values)


def compare_to_baseline(
    candidate: MetricSeries,
    baseline: MetricSeries,
    *,
    better: Direction,
    warmup_steps: int,
    alpha: float,
    min_effect: float,
) -> PerfComparison | str:
    """Compare steady states (see the module docstring); a string explains why not."""
    lc = _prepare(candidate, warmup_steps, "candidate")
    if isinstance(lc, str):
        return lc
    lb = _prepare(baseline, warmup_steps, "baseline")
    if isinstance(lb, str):
        return lb
    shift = hodges_lehmann(lc, lb)
    noise = float(np.std(lb, ddof=1))
    se = _HL_SE * noise * math.sqrt(1.0 / lb.size + 1.0 / lc.size)
    tolerance = max(math.log1p(min_effect), _t_ppf(1.0 - alpha, lb.size - 1) * se)
    steps = steady_state(candidate, warmup_steps).steps
    return PerfComparison(
        metric=candidate.tag,
        better=better,
        ratio=math.exp(shift),
        worse=shift if better is Direction.LOWER else -shift,
        tolerance=tolerance,
        noise=noise,
        n_candidate=int(lc.size),
        n_baseline=int(lb.size),
        candidate_median=float(np.exp(np.median(lc))),
        baseline_median=float(np.exp(np.median(lb))),
        steps=(int(steps[0]), int(steps[-1])),
    )


def _perf(name: str, outcome: Outcome, value: float | None, message: str, metric: str, **kw: Any):
    return Result(
        name=name,
        tier=Tier.PERF,
        outcome=outcome,
        value=value,
        message=message,
        metric=metric,
        **kw,
    )


def perf_result(name: str, comparison: PerfComparison | str, metric: str) -> Result:
    """Turn a comparison into a perf-tier Result (value: the HL ratio to the baseline)."""
    if isinstance(comparison, str):
        message = f"{metric}: {comparison}"
        return _perf(name, Outcome.ERROR, None, message, metric, bound="?", unit="x baseline")
    c = comparison
    limit = math.exp(c.tolerance if c.better is Direction.LOWER else -c.tolerance)
    op = Op.LE if c.better is Direction.LOWER else Op.GE
    bound = f"{op.value} {limit:.4g}x baseline"
    ok = c.worse <= c.tolerance
    direction = "lower" if c.better is Direction.LOWER else "higher"
    message = (
        f"{metric}: steady-state steps {c.steps[0]}..{c.steps[1]}: candidate median "
        f"{c.candidate_median:.4g} vs baseline {c.baseline_median:.4g} (n={c.n_candidate} vs "
        f"{c.n_baseline}); HL ratio {c.ratio:.4g} ({direction} is better); tolerance "
        f"{math.expm1(c.tolerance):.1%} from baseline step-to-step noise {c.noise:.1%} (log SD)"
        + ("" if ok else " -- regression")
    )
    outcome = Outcome.PASS if ok else Outcome.FAIL
    return _perf(
        name,
        outcome,
        c.ratio,
        message,
        metric,
        op=op,
        threshold=limit,
        unit="x baseline",
        bound=bound,
    )


def compare_async_vs_sync(
    async_run: MetricSeries,
    sync_run: MetricSeries,
    *,
    better: Direction,
    warmup_steps: int,
    alpha: float,
    min_speedup: float,
) -> Result:
    """The async run is at least ``min_speedup`` x the sync run (within noise)."""
    name, metric = f"async_vs_sync:{async_run.tag}", async_run.tag
    cmp = compare_to_baseline(
        async_run, sync_run, better=better, warmup_steps=warmup_steps, alpha=alpha, min_effect=0.0
    )
    bound = f">= {min_speedup:g}x sync"
    rule = {"op": Op.GE, "threshold": min_speedup, "unit": "x sync", "bound": bound}
    if isinstance(cmp, str):
        return _perf(name, Outcome.ERROR, None, f"{metric}: {cmp}", metric, **rule)
    speedup = math.exp(-cmp.worse)  # > 1 when async is better
    ok = math.log(speedup) >= math.log(min_speedup) - cmp.tolerance
    message = (
        f"{metric}: async/sync speedup {speedup:.3g}x (async median {cmp.candidate_median:.4g}"
        f" vs sync {cmp.baseline_median:.4g}); required {min_speedup:g}x within noise "
        f"{math.expm1(cmp.tolerance):.1%}" + ("" if ok else " -- async is not faster enough")
    )
    return _perf(name, Outcome.PASS if ok else Outcome.FAIL, speedup, message, metric, **rule)


# --- reference band ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Band:
    """Per-step prediction band of N reference runs (steps they all logged)."""

    metric: str
    steps: np.ndarray
    values: np.ndarray  # (N, len(steps)) reference values
    alpha: float

    @property
    def n_runs(self) -> int:
        """Number of reference runs."""
        return int(self.values.shape[0])

    @property
    def factor(self) -> float:
        """Prediction-interval half-width in SDs: t_{1-alpha, N-1} * sqrt(1 + 1/N)."""
        n = self.n_runs
        return _t_ppf(1.0 - self.alpha, n - 1) * math.sqrt(1.0 + 1.0 / n)

    def interval(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) per-step bounds for the given step columns."""
        vals = self.values[:, columns]
        mean, sd = vals.mean(axis=0), vals.std(axis=0, ddof=1)
        return mean - self.factor * sd, mean + self.factor * sd


def build_band(
    references: Sequence[MetricSeries], *, alpha: float, warmup_steps: int, min_runs: int
) -> Band | str:
    """Band from reference runs; a string explains why it cannot be built."""
    if len(references) < min_runs:
        return f"the band needs >= {min_runs} reference runs, got {len(references)}"
    metric = references[0].tag
    common = steady_state(references[0], warmup_steps).steps
    for ref in references[1:]:
        common = np.intersect1d(common, steady_state(ref, warmup_steps).steps)
    if common.size < 2:
        return f"reference runs share {common.size} step(s) of {metric}; need >= 2"
    rows = []
    for i, ref in enumerate(references):
        vals = np.array([ref.value_at(int(s)) for s in common], dtype=float)
        bad = first_nonfinite(common, vals)
        if bad is not None:
            return f"reference run #{i + 1} has a non-finite {metric}: {bad}"
        rows.append(vals)
    return Band(metric, common, np.vstack(rows), alpha)


def _overlap(
    band: Band | str, candidate: MetricSeries | None, metric: str
) -> tuple[np.ndarray, np.ndarray] | str:
    """The band's columns the candidate logged and its values there, else why not (an ERROR)."""
    if isinstance(band, str):
        return band
    if candidate is None:
        return f"{metric} not logged by the candidate"
    cols = np.flatnonzero(np.isin(band.steps, candidate.steps))
    if cols.size < 2:
        return f"candidate shares {cols.size} step(s) with the band; need >= 2"
    vals = np.array([candidate.value_at(int(s)) for s in band.steps[cols]], dtype=float)
    return cols, vals


def evaluate_band_curve(
    band: Band | str, candidate: MetricSeries | None, *, better: Direction, max_outside: float
) -> Result:
    """Fraction of the candidate's steps outside the per-step band (on the bad side)."""
    metric = band.metric if isinstance(band, Band) else (candidate.tag if candidate else "?")
    name, bound = f"band_curve:{metric}", f"outside <= {max_outside:.0%} of steps"
    rule = {"op": Op.LE, "threshold": max_outside, "unit": "share of steps", "bound": bound}

    def result(outcome: Outcome, value: float | None, message: str) -> Result:
        return Result(
            name=name,
            tier=tier_for_metric(metric),
            outcome=outcome,
            value=value,
            message=message,
            metric=metric,
            **rule,
        )

    overlap = _overlap(band, candidate, metric)
    if isinstance(overlap, str):
        return result(Outcome.ERROR, None, overlap)
    assert isinstance(band, Band)
    cols, vals = overlap
    bad = first_nonfinite(band.steps[cols], vals)
    if bad is not None:
        return result(Outcome.FAIL, float("nan"), f"{metric}: non-finite {bad}")
    lower, upper = band.interval(cols)
    out = vals < lower if better is Direction.HIGHER else vals > upper
    frac = float(out.mean())
    where = ", ".join(str(int(s)) for s in band.steps[cols][out][:8])
    ok = frac <= max_outside
    message = (
        f"{metric}: {int(out.sum())}/{out.size} steps outside the {band.n_runs}-run band "
        f"({'below' if better is Direction.HIGHER else 'above'})"
        + (f" at steps {where}" if where else "")
    )
    return result(Outcome.PASS if ok else Outcome.FAIL, frac, message)


def evaluate_band_mean(
    band: Band | str, candidate: MetricSeries | None, *, better: Direction
) -> Result:
    """The candidate's mean over the shared steps against the reference runs' means.

    Its value and threshold are run means (``unit`` ``run mean``), not values of the metric
    at a step: a plot of the metric does not draw the prediction bound.
    """
    metric = band.metric if isinstance(band, Band) else (candidate.tag if candidate else "?")
    name = f"band_mean:{metric}"
    op = Op.GE if better is Direction.HIGHER else Op.LE

    def result(outcome: Outcome, value: float | None, message: str, **rule: Any) -> Result:
        return Result(
            name=name,
            tier=tier_for_metric(metric),
            outcome=outcome,
            value=value,
            op=op,
            unit="run mean",
            message=message,
            metric=metric,
            **({"bound": "?"} | rule),
        )

    overlap = _overlap(band, candidate, metric)
    if isinstance(overlap, str):
        return result(Outcome.ERROR, None, overlap)
    assert isinstance(band, Band)
    cols, vals = overlap
    bad = first_nonfinite(band.steps[cols], vals)
    if bad is not None:
        return result(Outcome.FAIL, float("nan"), f"{metric}: non-finite {bad}")
    means = band.values[:, cols].mean(axis=1)
    center, sd = float(means.mean()), float(means.std(ddof=1))
    mean = float(vals.mean())
    if better is Direction.HIGHER:
        limit = center - band.factor * sd
        ok, bound = mean >= limit, f">= {limit:.4g}"
    else:
        limit = center + band.factor * sd
        ok, bound = mean <= limit, f"<= {limit:.4g}"
    message = (
        f"{metric}: mean over steps {band.steps[cols][0]}..{band.steps[cols][-1]} = {mean:.4g};"
        f" {band.n_runs} reference runs {center:.4g} ± {sd:.3g} (SD), one-sided "
        f"{1 - band.alpha:.0%} prediction bound {limit:.4g}"
    )
    outcome = Outcome.PASS if ok else Outcome.FAIL
    return result(outcome, mean, message, threshold=limit, bound=bound)
