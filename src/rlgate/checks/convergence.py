"""Run-health checks of the convergence tier: completion, reward, agentic health, integrity.

Pure functions from a :class:`~rlgate.runs.metrics.RunMetrics` (and the recipe's
:class:`~rlgate.recipe.facts.RunContext`) to :class:`~rlgate.core.results.Result`.
They never raise for bad data: a missing metric or an unreached target step is ERROR, a
regression FAIL.

* ``completion`` is the check NeMo RL's suite scripts skip: ``train/loss`` must have been
  logged at every step from 1 through the target step, judged on the latest attempt
  (:func:`rlgate.runs.metrics.run_progress`: a stray far step, a gap or a stale earlier
  ``exp_NNN`` never counts). A run that stopped early *because it hit its goal* passes:
  NeMo RL's ``grpo.stop_at_validation_metric/threshold`` early stop (the
  ``validation/<metric>`` value at the last step reached the threshold), or an MLPerf log
  whose ``run_stop`` status is ``success`` *and* whose last ``eval_accuracy`` is at least its
  own ``target_accuracy``. Any other MLPerf ``run_stop`` status is final: ERROR.
* ``reward_improvement`` tests that reward went up (default: one-sided OLS slope t-test over
  the run, never a single step); ``reward_max_positive`` is NeMo RL's
  ``max(data["train/reward"]) > 0``.
* ``max_turns_share`` bounds the share of samples that hit ``agent_max_turns``. NeMo RL
  logs only summaries of turns per sample, so the share is bounded *from below* by the
  quantile tags: ``min`` ≥ max → 100 %, ``median`` → 50 %, ``p95`` → 5 %, ``p99`` → 1 %
  (valid after NeMo RL's async averaging too, since every group value is ≤ the max).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from rlgate.checks.conditions import evaluate_condition, first_nonfinite, window_mask
from rlgate.core.resampling import bootstrap_means
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.conditions import Condition, Reducer, SeriesCall
from rlgate.recipe.facts import RunContext, is_finite_number
from rlgate.recipe.spec import AgenticSpec, CompletionSpec, RewardSpec, RewardTest
from rlgate.runs.metrics import MetricSeries, RunMetrics, SourceKind, run_progress

__all__ = [
    "AGENTIC_TAGS",
    "evaluate_agentic",
    "evaluate_completion",
    "evaluate_finite",
    "evaluate_integrity",
    "evaluate_reward_improvement",
    "evaluate_reward_positive",
]

_C = Tier.CONVERGENCE
TURNS = "train/turns_per_sample"
AGENTIC_TAGS = {
    "turns_mean": f"{TURNS}/mean",
    "truncation_rate": "train/truncation_rate",
    "natural_termination_rate": "train/natural_termination_rate",
    "tool_call_failure_rate": "train/invalid_tool_call_rate",
    "total_tokens_max": "train/total_tokens_per_sample/max",
    "max_turns_share": f"{TURNS}/median",
}
# quantile tag -> share of samples at or above it (NeMo RL's pct() and statistics.median)
_SHARE_BOUNDS = {
    f"{TURNS}/min": 1.0,
    f"{TURNS}/median": 0.5,
    f"{TURNS}/p95": 0.05,
    f"{TURNS}/p99": 0.01,
}


def _result(
    name: str,
    outcome: Outcome,
    value: float | None,
    bound: str,
    message: str,
    metric: str | None,
    **comparison: Any,
) -> Result:
    """A convergence Result; ``comparison``: ``op``, ``threshold``, ``unit``, ``evidence``."""
    return Result(
        name=name,
        tier=_C,
        outcome=outcome,
        value=value,
        bound=bound,
        message=message,
        metric=metric,
        **comparison,
    )


# --- completion ------------------------------------------------------------------------


def evaluate_completion(run: RunMetrics, ctx: RunContext, spec: CompletionSpec) -> Result:
    """The run reached its target step (or stopped early on its own success criterion).

    The step reached is :func:`~rlgate.runs.metrics.run_progress`'s: contiguous steps through
    the latest attempt's last step, so a stray far step, a gap, or a stale earlier attempt
    past a newer one's end never counts; gaps, restarts and stale steps are named in the
    message and in ``evidence``. An MLPerf log's ``run_stop`` is final: any status but
    ``success`` is an ERROR, and ``success`` must agree with the log's own numbers.
    """
    metric, target = spec.metric, ctx.target_step
    if target is None:
        return _result(
            "completion",
            Outcome.ERROR,
            None,
            ">= ?",
            "no target step: set grpo.max_num_steps, rlgate.convergence.target_step or --max-steps",
            metric,
            op=Op.GE,
            unit="step",
        )
    bound = f">= {target}"
    step = {"op": Op.GE, "threshold": float(target), "unit": "step"}
    mlperf = run.kind is SourceKind.MLPERF_LOG
    progress = run_progress(run, metric, run.metadata.get("eval_steps", ()) if mlperf else ())
    if progress is None:
        return _result(
            "completion",
            Outcome.ERROR,
            None,
            bound,
            f"{metric} not logged, so the step reached is unknown",
            metric,
            **step,
        )
    reached, detail = progress.reached, progress.describe()
    evidence: dict[str, Any] = {**progress.evidence(), "target": target}
    note = f"; {detail}" if detail else ""

    def done(outcome: Outcome, message: str) -> Result:
        return _result(
            "completion", outcome, reached, bound, message + note, metric, evidence=evidence, **step
        )

    status = run.metadata.get("run_status") if mlperf else None
    accuracy_ok, accuracy = _mlperf_accuracy(run) if mlperf else (False, "")
    if mlperf:
        evidence["mlperf"] = {"run_status": status, "accuracy": accuracy}
    if status is not None and status != "success":
        return done(
            Outcome.ERROR,
            f"MLPerf run_stop status={status} at step {reached} ({accuracy}): the run ended "
            "without reaching its target accuracy, which is final whatever steps follow",
        )
    if status == "success" and not accuracy_ok:
        return done(
            Outcome.ERROR,
            f"MLPerf run_stop status=success contradicts the log's own numbers: {accuracy} "
            "(mlperf_grpo_logging.py MlperfGrpoLogger.end_eval stops with success only when "
            "accuracy >= target_accuracy; force_success_status can override it)",
        )
    if reached >= target:
        return done(Outcome.PASS, f"reached step {reached} (target {target})")
    if not progress.gaps:
        early = _early_stop(run, ctx, reached, accuracy if status == "success" else None)
        if early is not None:
            return done(Outcome.PASS, early)
    return done(
        Outcome.ERROR,
        f"run stopped at step {reached}, target step {target} not reached "
        "(NeMo RL suite scripts skip their checks here and exit 0)",
    )


def _mlperf_accuracy(run: RunMetrics) -> tuple[bool, str]:
    """Whether the last ``eval_accuracy`` meets the log's own ``target_accuracy``, in words.

    The direction is MLPerf's for this benchmark and NeMo RL's MLPerf logger's
    (``mlperf_grpo_logging.py`` ``MlperfGrpoLogger.end_eval``: success when
    ``accuracy >= self.target_accuracy``).
    """
    hyper = run.metadata.get("hyperparameters") or {}
    target = hyper.get("target_accuracy")
    acc = run.series.get("validation/accuracy")
    if not is_finite_number(target):
        return False, f"the log has no usable target_accuracy (got {target!r})"
    if acc is None or not len(acc):
        return False, f"no eval_accuracy logged (target_accuracy {target:g})"
    value, step = float(acc.values[-1]), acc.last_step
    if not np.isfinite(value):
        return False, f"eval_accuracy {value} at step {step} (target_accuracy {target:g})"
    ok = value >= target
    return ok, (
        f"eval_accuracy {value:.4g} at step {step} {'>=' if ok else '<'} target_accuracy {target:g}"
    )


def _early_stop(
    run: RunMetrics, ctx: RunContext, reached: int, mlperf_success: str | None
) -> str | None:
    if mlperf_success is not None:
        return (
            f"stopped at step {reached} with MLPerf run_stop status=success before max_steps: "
            f"{mlperf_success}"
        )
    if ctx.stop_metric and ctx.stop_threshold is not None:
        val = run.series.get(f"validation/{ctx.stop_metric}")
        value = val.value_at(reached) if val is not None else None
        if value is not None and np.isfinite(value) and value >= ctx.stop_threshold:
            return (
                f"stopped early at step {reached}: validation/{ctx.stop_metric} = "
                f"{value:.4g} >= {ctx.stop_threshold} at that step "
                "(grpo.stop_at_validation_threshold; grpo.py exits at the end of the step "
                "whose validation reaches it)"
            )
    return None


# --- reward ----------------------------------------------------------------------------


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
    """Reward went up over the run (a statistical test, :class:`~rlgate.recipe.spec.RewardTest`)."""
    name, metric = "reward_improvement", spec.metric
    bound = f"one-sided p < {spec.alpha:g} and gain >= {spec.min_improvement:g}"
    gain = {"op": Op.GE, "threshold": spec.min_improvement, "unit": "gain"}
    series = run.series.get(metric)
    if series is None or len(series) < 3:
        have = "not logged" if series is None else f"only {len(series)} step(s)"
        message = f"{metric}: {have}; need >= 3"
        return _result(name, Outcome.ERROR, None, bound, message, metric, **gain)
    bad = first_nonfinite(series.steps, series.values)
    if bad is not None:
        message = f"{metric}: non-finite {bad}"
        return _result(name, Outcome.FAIL, float("nan"), bound, message, metric, **gain)
    test = _trend(series, spec) if spec.test is RewardTest.TREND else _late_vs_early(series, spec)
    if isinstance(test, str):
        return _result(name, Outcome.ERROR, None, bound, f"{metric}: {test}", metric, **gain)
    ok = test.p < spec.alpha and test.gain >= spec.min_improvement
    message = f"{metric}: {test.how}" + ("" if ok else " -- no significant improvement")
    outcome = Outcome.PASS if ok else Outcome.FAIL
    evidence = {"p_value": test.p, "alpha": spec.alpha, "test": spec.test.value}
    return _result(name, outcome, test.gain, bound, message, metric, evidence=evidence, **gain)


def evaluate_reward_positive(spec: RewardSpec, run: RunMetrics) -> Result:
    """NeMo RL's ``max(data["train/reward"]) > 0``."""
    cond = Condition(SeriesCall(Reducer.MAX, spec.metric), Op.GT, 0.0)
    return evaluate_condition(cond, run, name="reward_max_positive")


# --- agentic health ----------------------------------------------------------------------


def evaluate_agentic(name: str, spec: AgenticSpec, run: RunMetrics, ctx: RunContext) -> Result:
    """One agentic-health check by name (see :data:`AGENTIC_TAGS`)."""
    start, end = spec.window
    tag = AGENTIC_TAGS[name]
    if name == "max_turns_share":
        return _max_turns_share(spec, run, ctx)
    if name == "total_tokens_max":
        limit = ctx.token_limit
        if limit is None:
            return _result(
                name,
                Outcome.ERROR,
                None,
                "<= ?",
                "no token limit in the recipe "
                "(policy.max_total_sequence_length / vllm_cfg.max_model_len)",
                tag,
                op=Op.LE,
            )
        cond = Condition(SeriesCall(Reducer.MAX, tag, start, end), Op.LE, float(limit))
    else:
        reducer_op = {
            "turns_mean": (Op.LE, spec.turns_mean),
            "truncation_rate": (Op.LE, spec.truncation_rate),
            "natural_termination_rate": (Op.GE, spec.natural_termination_rate),
            "tool_call_failure_rate": (Op.LE, spec.tool_call_failure_rate),
        }[name]
        op, bound = reducer_op
        assert bound is not None  # planned only when set
        cond = Condition(SeriesCall(Reducer.MEAN, tag, start, end), op, float(bound))
    return evaluate_condition(cond, run, name=name)


def _max_turns_share(spec: AgenticSpec, run: RunMetrics, ctx: RunContext) -> Result:
    name, bound_value = "max_turns_share", spec.max_turns_share
    bound = f"<= {bound_value:g}" if bound_value is not None else "<= ?"
    share_of = {"op": Op.LE, "threshold": bound_value, "unit": "share of samples"}
    limit = ctx.agent_max_turns
    if limit is None:
        return _result(
            name,
            Outcome.ERROR,
            None,
            bound,
            "agent_max_turns unknown: set it under "
            "env.nemo_gym.<server>.responses_api_agents.swe_agents or "
            "rlgate.convergence.agentic.agent_max_turns",
            f"{TURNS}/*",
            **share_of,
        )
    present = {t: s for t in _SHARE_BOUNDS if (s := run.series.get(t)) is not None and len(s)}
    if not present:
        return _result(
            name,
            Outcome.ERROR,
            None,
            bound,
            f"none of {sorted(_SHARE_BOUNDS)} is logged",
            f"{TURNS}/*",
            **share_of,
        )
    ref = next(iter(present.values()))
    steps = ref.steps[window_mask(ref, *spec.window)]
    if not steps.size:
        message = f"empty window {list(spec.window)}"
        return _result(name, Outcome.ERROR, None, bound, message, ref.tag, **share_of)
    share = np.zeros(steps.size)
    for tag, at_least in _SHARE_BOUNDS.items():
        if tag not in present:
            continue
        vals = np.array([present[tag].value_at(int(s)) for s in steps], dtype=float)
        if not np.all(np.isfinite(vals)):
            bad = steps[~np.isfinite(vals)][0]
            return _result(
                name,
                Outcome.FAIL,
                float("nan"),
                bound,
                f"{tag} is missing or non-finite at step {bad}",
                tag,
                **share_of,
            )
        share = np.where(vals >= limit, np.maximum(share, at_least), share)
    value = float(share.mean())
    ok = bound_value is not None and value <= bound_value
    return _result(
        name,
        Outcome.PASS if ok else Outcome.FAIL,
        value,
        bound,
        f"share of samples at agent_max_turns={limit} (lower bound from "
        f"{', '.join(t.rsplit('/', 1)[1] for t in present)}) averaged over "
        f"{steps.size} steps = {value:.3g}",
        f"{TURNS}/*",
        **share_of,
    )


def evaluate_finite(tag: str, run: RunMetrics) -> Result:
    """Every logged value of ``tag`` is finite (NaN loss / grad norm is a FAIL)."""
    name = f"finite:{tag}"
    none = {"op": Op.EQ, "threshold": 0.0, "unit": "non-finite values"}
    series = run.series.get(tag)
    if series is None or not len(series):
        return _result(name, Outcome.ERROR, None, "all finite", f"{tag} not logged", tag, **none)
    bad = first_nonfinite(series.steps, series.values)
    count = int(np.count_nonzero(~np.isfinite(series.values)))
    if bad is None:
        message = f"{tag}: {len(series)} values, all finite"
        return _result(name, Outcome.PASS, 0.0, "all finite", message, tag, **none)
    return _result(
        name,
        Outcome.FAIL,
        float(count),
        "all finite",
        f"{tag}: {count} non-finite value(s), first {bad}",
        tag,
        **none,
    )


def evaluate_integrity(run: RunMetrics) -> Result:
    """Steps never go backwards within one file (a restart inside one file, or corruption)."""
    none = {"op": Op.EQ, "threshold": 0.0, "unit": "non-monotonic steps"}
    if not run.anomalies:
        note = (
            f"; {len(run.conflicts)} cross-file conflict(s), later file kept"
            if run.conflicts
            else ""
        )
        return _result(
            "data_integrity",
            Outcome.PASS,
            0.0,
            "no non-monotonic steps",
            f"{len(run.files)} file(s), steps monotonic{note}",
            None,
            **none,
        )
    shown = "; ".join(
        f"{a.tag}: step {a.step} after {a.previous_step} in {a.source}" for a in run.anomalies[:3]
    )
    return _result(
        "data_integrity",
        Outcome.FAIL,
        float(len(run.anomalies)),
        "no non-monotonic steps",
        f"non-monotonic steps: {shown}",
        None,
        **none,
    )
