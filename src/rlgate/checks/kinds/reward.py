"""``reward_improvement`` and ``reward_max_positive``: reward went up, and is not all zero.

``reward_improvement`` tests that reward went up (default: one-sided OLS slope t-test over
the run, never a single step; or late vs early windows by Mann-Whitney or a bootstrap of
the means); ``reward_max_positive`` is NeMo RL's ``max(data["train/reward"]) > 0``.
Field: ``rlgate.convergence.reward`` (planned when it is set).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from pydantic import Field

from rlgate.checks.conditions import evaluate_condition, first_nonfinite, run_result, window_mask
from rlgate.checks.registry import CheckKind, GateInputs, PlannedCheck, register
from rlgate.core.resampling import bootstrap_means
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.conditions import Condition, Reducer, SeriesCall, Window
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel
from rlgate.runs.metrics import MetricSeries, RunMetrics

__all__ = [
    "RewardFields",
    "RewardSpec",
    "RewardTest",
    "evaluate_reward_improvement",
    "evaluate_reward_positive",
]


class RewardTest(Enum):
    """How reward improvement is tested."""

    TREND = "trend"  # one-sided OLS slope t-test over the window
    MANNWHITNEY = "mannwhitney"  # late window > early window, rank test
    BOOTSTRAP = "bootstrap"  # mean(late) - mean(early), percentile bootstrap


class RewardSpec(StrictModel):
    """Reward must improve over the run and must not be all zero."""

    metric: str = "train/reward"
    test: RewardTest = RewardTest.TREND
    window: Window = (1, 0)
    early: Window | None = None
    late: Window | None = None
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    min_improvement: float = 0.0
    require_positive_max: bool = True


class RewardFields(StrictModel):
    """The field of ``rlgate.convergence`` the reward checks read."""

    reward: RewardSpec | None = None


def _windows(series: MetricSeries, spec: RewardSpec) -> tuple[np.ndarray, np.ndarray] | str:
    if spec.early is not None and spec.late is not None:
        early = series.values[window_mask(series, *spec.early)]
        late = series.values[window_mask(series, *spec.late)]
    else:  # first and last third of the logged steps
        k = max(2, len(series) // 3)
        early, late = series.values[:k], series.values[-k:]
    if early.size < 2 or late.size < 2:
        return f"early/late windows need >= 2 steps each (got {early.size} and {late.size})"
    return early, late


@dataclass(frozen=True, slots=True)
class _Improvement:
    gain: float
    p: float
    how: str


def _trend(series: MetricSeries, spec: RewardSpec) -> _Improvement | str:
    mask = window_mask(series, *spec.window)
    steps, values = series.steps[mask], series.values[mask]
    if values.size < 3:
        return f"window {list(spec.window)} holds {values.size} step(s); need >= 3"
    if np.ptp(values) == 0:
        return _Improvement(0.0, 1.0, f"constant ({values[0]:g})")
    from scipy import stats  # here: ``recipe check`` discovers this kind, never evaluates it

    fit = stats.linregress(steps, values, alternative="greater")
    gain = float(fit.slope * (steps[-1] - steps[0]))
    how = (
        f"OLS trend over steps {steps[0]}..{steps[-1]}: slope {fit.slope:.4g}/step, "
        f"gain {gain:.4g}, one-sided p = {fit.pvalue:.3g}"
    )
    return _Improvement(gain, float(fit.pvalue), how)


def _late_vs_early(series: MetricSeries, spec: RewardSpec) -> _Improvement | str:
    windows = _windows(series, spec)
    if isinstance(windows, str):
        return windows
    early, late = windows
    gain = float(late.mean() - early.mean())
    if spec.test is RewardTest.MANNWHITNEY:
        from scipy import stats

        p = float(stats.mannwhitneyu(late, early, alternative="greater").pvalue)
    else:
        rng = np.random.default_rng(0)  # fixed: the gate must be reproducible
        late_means = bootstrap_means(late, 10_000, rng)
        early_means = bootstrap_means(early, 10_000, rng)
        p = float(np.mean(late_means - early_means <= 0.0))
    how = (
        f"late mean {late.mean():.4g} vs early mean {early.mean():.4g} "
        f"({late.size} vs {early.size} steps): gain {gain:.4g}, "
        f"{spec.test.value} one-sided p = {p:.3g}"
    )
    return _Improvement(gain, p, how)


def evaluate_reward_improvement(spec: RewardSpec, run: RunMetrics) -> Result:
    """Reward went up over the run (a statistical test, :class:`RewardTest`)."""
    name, metric = "reward_improvement", spec.metric
    bound = f"one-sided p < {spec.alpha:g} and gain >= {spec.min_improvement:g}"
    gain = {"op": Op.GE, "threshold": spec.min_improvement, "unit": "gain"}
    series = run.series.get(metric)
    if series is None or len(series) < 3:
        have = "not logged" if series is None else f"only {len(series)} step(s)"
        message = f"{metric}: {have}; need >= 3"
        return run_result(name, Outcome.ERROR, None, bound, message, metric, **gain)
    bad = first_nonfinite(series.steps, series.values)
    if bad is not None:
        message = f"{metric}: non-finite {bad}"
        return run_result(name, Outcome.FAIL, float("nan"), bound, message, metric, **gain)
    test = _trend(series, spec) if spec.test is RewardTest.TREND else _late_vs_early(series, spec)
    if isinstance(test, str):
        return run_result(name, Outcome.ERROR, None, bound, f"{metric}: {test}", metric, **gain)
    ok = test.p < spec.alpha and test.gain >= spec.min_improvement
    message = f"{metric}: {test.how}" + ("" if ok else " -- no significant improvement")
    outcome = Outcome.PASS if ok else Outcome.FAIL
    evidence = {"p_value": test.p, "alpha": spec.alpha, "test": spec.test.value}
    return run_result(name, outcome, test.gain, bound, message, metric, evidence=evidence, **gain)


def evaluate_reward_positive(spec: RewardSpec, run: RunMetrics) -> Result:
    """NeMo RL's ``max(data["train/reward"]) > 0``."""
    cond = Condition(SeriesCall(Reducer.MAX, spec.metric), Op.GT, 0.0)
    return evaluate_condition(cond, run, name="reward_max_positive")


@register
class Reward(CheckKind[RewardFields]):
    """Reward improved, and its maximum is positive."""

    name = "reward"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 40

    def plan(self, spec: RewardFields, context: RunContext) -> list[PlannedCheck]:
        """``reward_improvement``, then ``reward_max_positive`` unless turned off."""
        reward = spec.reward
        if reward is None:
            return []
        out = [self.check("reward_improvement", metric=reward.metric, params="improvement")]
        if reward.require_positive_max:
            out.append(self.check("reward_max_positive", metric=reward.metric, params="positive"))
        return out

    def evaluate(
        self, spec: RewardFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The test ``params`` names on the run's reward."""
        assert spec.reward is not None  # planned only when set
        if check.params == "improvement":
            return evaluate_reward_improvement(spec.reward, inputs.run)
        return evaluate_reward_positive(spec.reward, inputs.run)
