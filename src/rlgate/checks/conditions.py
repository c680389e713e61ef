"""Evaluating parsed ``check_metrics`` conditions (:mod:`rlgate.recipe.conditions`) on a run.

Pure: records in, a :class:`~rlgate.core.results.Result` out; a regression is a result,
never an exception.

Step semantics are check_metrics' exactly: steps are 1-indexed; ``mean``/``median`` take
``range_start=1, range_end=0`` (``range_end`` exclusive, ``0`` = through the last step,
negative values count from the end) after adding the resume offset
``max_step - len(values)``; ``mean`` also takes ``ignore_top_p`` (drop the top fraction);
so the default window starts at step 1 and leaves a step-0 value out; ``min``/``max``/
``ratio_above`` take no window and use every value (step 0 too); ``ratio_above(d, thr)``
is the fraction of values ``>= thr``; typed checks add ``last`` (value at the last step);
``data["tag"]["N"]`` is the value logged at step N, and the string ``"$MAX_STEPS"``
(``"${MAX_STEPS}"``) — left unexpanded from a suite script — means the target step.

Outcomes (never a silent pass): missing metric, empty window, unlogged step, or a target
step not reached are ERROR; a NaN/inf inside the evaluated values is FAIL naming the step.
A :class:`~rlgate.recipe.conditions.Comparison` (arithmetic on a side) evaluates each
metric term as above and then the arithmetic in floating point as Python does; a division
by zero is ERROR, a non-finite side FAIL.
``ray/*`` GPU-monitor tags are indexed by seconds, so step windows and step indexes are
refused on them (ERROR); reducers without a window apply.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from rlgate.core.errors import MetricsError
from rlgate.core.results import Outcome, Result, Tier
from rlgate.recipe.conditions import (
    Abs,
    AnyCondition,
    Arith,
    Comparison,
    Condition,
    Expr,
    Neg,
    Number,
    Reducer,
    SeriesCall,
    StepIndex,
)
from rlgate.runs.metrics import MetricSeries, RunMetrics

__all__ = [
    "condition_result",
    "evaluate_condition",
    "first_nonfinite",
    "reduce_series",
    "run_result",
    "window_mask",
]


def window_mask(series: MetricSeries, range_start: int = 1, range_end: int = 0) -> np.ndarray:
    """Steps selected by check_metrics' ``(range_start, range_end)`` incl. the resume offset."""
    n = len(series)
    offset = int(series.steps.max()) - n  # steps that happened before a resume
    if range_start < 0:
        range_start += n + 1 + offset
    if range_end <= 0:
        range_end += n + 1 + offset
    return (series.steps >= range_start) & (series.steps < range_end)


def reduce_series(call: SeriesCall, values: np.ndarray) -> float:
    """Apply ``call``'s reducer to already-windowed, finite values (non-empty)."""
    if call.reducer is Reducer.MIN:
        return float(values.min())
    if call.reducer is Reducer.MAX:
        return float(values.max())
    if call.reducer is Reducer.LAST:
        return float(values[-1])
    if call.reducer is Reducer.RATIO_ABOVE:
        return float(np.count_nonzero(values >= call.above) / values.size)
    if call.reducer is Reducer.MEDIAN:
        return float(statistics.median(values.tolist()))
    vals = values
    if call.ignore_top_p > 0.0:
        ordered = np.sort(values)
        cutoff = int(len(ordered) * (1.0 - call.ignore_top_p))
        vals = ordered[:cutoff] if cutoff > 0 else ordered[:1]
    # statistics.mean, as check_metrics: the exact mean rounded once (np.mean's pairwise sum
    # can end one ulp off, and a mean equal to its bound then passes a strict comparison)
    return float(statistics.mean(vals.tolist()))


def condition_result(
    cond: Condition, name: str, tier: Tier, outcome: Outcome, value: float | None, message: str
) -> Result:
    """The Result of ``cond``: its comparison, and the unit of a ``ratio_above`` (a share)."""
    ratio = isinstance(cond.value, SeriesCall) and cond.value.reducer is Reducer.RATIO_ABOVE
    return Result(
        name=name,
        tier=tier,
        outcome=outcome,
        value=value,
        op=cond.op,
        threshold=cond.threshold,
        unit="share of values" if ratio else "",
        bound=cond.bound,
        message=message,
        metric=cond.tag,
    )


def run_result(
    name: str,
    outcome: Outcome,
    value: float | None,
    bound: str,
    message: str,
    metric: str | None,
    **comparison: Any,
) -> Result:
    """A convergence-tier Result; ``comparison``: ``op``, ``threshold``, ``unit``, ``evidence``."""
    return Result(
        name=name,
        tier=Tier.CONVERGENCE,
        outcome=outcome,
        value=value,
        bound=bound,
        message=message,
        metric=metric,
        **comparison,
    )


def first_nonfinite(steps: np.ndarray, values: np.ndarray) -> str | None:
    """``"nan at step 12"`` for the first non-finite value, else None."""
    bad = np.flatnonzero(~np.isfinite(values))
    if not bad.size:
        return None
    return f"{values[bad[0]]} at step {int(steps[bad[0]])}"


def _select(
    value: SeriesCall | StepIndex, series: MetricSeries, target_step: int | None
) -> tuple[np.ndarray, np.ndarray] | str:
    """The (steps, values) a metric term reads, or why there are none (an ERROR)."""
    span = f"logged steps {series.steps[0]}..{series.last_step}"
    stepwise = isinstance(value, StepIndex) or not value.default_window
    if series.time_indexed and (stepwise or value.reducer is Reducer.LAST):
        return (
            f"{value.tag!r} is indexed by seconds since the GPU monitor started, not by "
            "training step; use a whole-series reducer"
        )
    if isinstance(value, StepIndex):
        step = value.step if value.step is not None else target_step
        if step is None:
            return "$MAX_STEPS needs a target step (grpo.max_num_steps or --max-steps)"
        found = series.value_at(step)
        if found is None:
            return f"step {step} not logged ({span})"
        return np.array([step]), np.array([found])
    if value.all_values:
        return series.steps, series.values
    mask = window_mask(series, value.range_start, value.range_end)
    if not mask.any():
        return f"empty window ({span})"
    return series.steps[mask], series.values[mask]


def evaluate_condition(
    cond: AnyCondition,
    run: RunMetrics,
    *,
    name: str,
    tier: Tier = Tier.CONVERGENCE,
    target_step: int | None = None,
) -> Result:
    """Evaluate one condition on ``run`` (PASS / FAIL / ERROR, never raises for data)."""
    if isinstance(cond, Comparison):
        return _evaluate_comparison(cond, run, name, tier, target_step)
    expr = cond.value.describe()
    value = _term(cond.value, run, target_step)
    if isinstance(value, _Stop):
        outcome, message = value.outcome, f"{expr}: {value.message}"
        found = float("nan") if outcome is Outcome.FAIL else None
        return condition_result(cond, name, tier, outcome, found, message)
    ok = cond.op.holds(value, cond.threshold)
    message = f"{expr} = {value:.6g} {cond.bound}" + ("" if ok else " does not hold")
    outcome = Outcome.PASS if ok else Outcome.FAIL
    return condition_result(cond, name, tier, outcome, value, message)


class _Stop(Exception):
    """Why a term has no value: ERROR (missing data) or FAIL (a non-finite value)."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome, self.message = outcome, message


def _term(value: SeriesCall | StepIndex, run: RunMetrics, target_step: int | None) -> float | _Stop:
    """One metric term's value, or why it has none."""
    try:
        series = run.get(value.tag)
    except MetricsError as exc:
        return _Stop(Outcome.ERROR, str(exc))
    if not len(series):
        return _Stop(Outcome.ERROR, f"metric {value.tag!r} has no values")
    selected = _select(value, series, target_step)
    if isinstance(selected, str):
        return _Stop(Outcome.ERROR, selected)
    steps, values = selected
    bad = first_nonfinite(steps, values)
    if bad is not None:
        return _Stop(Outcome.FAIL, f"non-finite value {bad}")
    return float(values[0]) if isinstance(value, StepIndex) else reduce_series(value, values)


def _expr(expr: Expr, run: RunMetrics, target_step: int | None) -> float:
    """An expression tree's value (raises :class:`_Stop`)."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, SeriesCall | StepIndex):
        value = _term(expr, run, target_step)
        if isinstance(value, _Stop):
            raise _Stop(value.outcome, f"{expr.describe()}: {value.message}")
        return value
    if isinstance(expr, Neg):
        return -_expr(expr.operand, run, target_step)
    if isinstance(expr, Abs):
        return abs(_expr(expr.operand, run, target_step))
    assert isinstance(expr, Arith)
    left, right = _expr(expr.left, run, target_step), _expr(expr.right, run, target_step)
    if expr.op == "+":
        return left + right
    if expr.op == "-":
        return left - right
    if expr.op == "*":
        return left * right
    if right == 0.0:
        raise _Stop(Outcome.ERROR, f"{expr.describe()}: division by zero")
    return left / right


def _evaluate_comparison(
    cond: Comparison, run: RunMetrics, name: str, tier: Tier, target_step: int | None
) -> Result:
    common = {"name": name, "tier": tier, "op": cond.op, "bound": cond.bound, "metric": cond.tag}
    try:
        left = _expr(cond.left, run, target_step)
        right = _expr(cond.right, run, target_step)
    except _Stop as stop:
        value = float("nan") if stop.outcome is Outcome.FAIL else None
        return Result(outcome=stop.outcome, value=value, message=stop.message, **common)
    shown = f"{cond.left.describe()} = {left:.6g} {cond.op.value} {right:.6g}"
    if not (math.isfinite(left) and math.isfinite(right)):
        message = f"{shown}: a side is not finite"
        return Result(outcome=Outcome.FAIL, value=left, threshold=right, message=message, **common)
    ok = cond.op.holds(left, right)
    message = f"{shown} (= {cond.right.describe()})" + ("" if ok else " does not hold")
    outcome = Outcome.PASS if ok else Outcome.FAIL
    return Result(outcome=outcome, value=left, threshold=right, message=message, **common)
