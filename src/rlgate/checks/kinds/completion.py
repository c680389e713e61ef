"""``completion``: the run reached its target step (or stopped early on its own success).

The check NeMo RL's suite scripts skip: ``train/loss`` (``rlgate.convergence.completion.metric``)
must have been logged at every step from 1 through the target step, judged on the latest
attempt (:func:`rlgate.runs.metrics.run_progress`: a stray far step, a gap or a stale earlier
``exp_NNN`` never counts). A run that stopped early *because it hit its goal* passes: NeMo RL's
``grpo.stop_at_validation_metric/threshold`` early stop (the ``validation/<metric>`` value at
the last step reached the threshold), or an MLPerf log whose ``run_stop`` status is
``success`` *and* whose last ``eval_accuracy`` is at least its own ``target_accuracy``. Any
other MLPerf ``run_stop`` status is final: ERROR.

Fields: ``rlgate.convergence.target_step`` (sets the run context's target step; else
``grpo.max_num_steps``; ``--max-steps`` wins) and ``rlgate.convergence.completion``.
Planned whenever the recipe has an ``rlgate.convergence`` block.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from rlgate.checks.conditions import run_result
from rlgate.checks.registry import CheckKind, GateInputs, PlannedCheck, register
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.facts import RunContext, is_finite_number
from rlgate.recipe.spec import ContextOverrides, StrictModel
from rlgate.runs.metrics import RunMetrics, SourceKind, run_progress

__all__ = ["EARLY_STOP_BOUND", "CompletionFields", "CompletionSpec", "evaluate_completion"]

#: The bound an early-stop PASS shows instead of ``>= <max steps>`` (its value, op and
#: threshold stay the step reached, ``>=``, the max steps: the rule is "reach it or stop early
#: on success").
EARLY_STOP_BOUND = "early stop on success"


class CompletionSpec(StrictModel):
    """Which tag's last step counts as the step the run reached."""

    metric: str = "train/loss"


class CompletionFields(StrictModel):
    """The fields of ``rlgate.convergence`` the completion check reads."""

    target_step: int | None = Field(None, gt=0)
    completion: CompletionSpec = CompletionSpec()


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
        return run_result(
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
        return run_result(
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

    def done(outcome: Outcome, message: str, shown: str = bound) -> Result:
        return run_result(
            "completion", outcome, reached, shown, message + note, metric, evidence=evidence, **step
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
            # value, op and threshold stay the step reached, >= the max steps; what passed
            # is the early stop, so the bound and the message say so (not "18 >= 30")
            return done(
                Outcome.PASS,
                f"{early[0]} at step {reached} (early stop, max {target}): {early[1]}",
                EARLY_STOP_BOUND,
            )
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
) -> tuple[str, str] | None:
    """What the run reached when it stopped early on success, and the evidence, else None."""
    if mlperf_success is not None:
        return "target accuracy reached", f"MLPerf run_stop status=success, {mlperf_success}"
    if ctx.stop_metric and ctx.stop_threshold is not None:
        val = run.series.get(f"validation/{ctx.stop_metric}")
        value = val.value_at(reached) if val is not None else None
        if value is not None and np.isfinite(value) and value >= ctx.stop_threshold:
            return "stop threshold reached", (
                f"validation/{ctx.stop_metric} = {value:.4g} >= {ctx.stop_threshold} at that "
                "step (grpo.stop_at_validation_threshold; grpo.py exits at the end of the step "
                "whose validation reaches it)"
            )
    return None


@register
class Completion(CheckKind[CompletionFields]):
    """The run reached its target step."""

    name = "completion"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 20

    def plan(self, spec: CompletionFields, context: RunContext) -> list[PlannedCheck]:
        """One check, on the completion metric."""
        return [self.check("completion", metric=spec.completion.metric)]

    def evaluate(
        self, spec: CompletionFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The step the run reached against the target step."""
        return evaluate_completion(inputs.run, context, spec.completion)

    def context(self, spec: CompletionFields) -> ContextOverrides:
        """``target_step``, when the block sets it."""
        return {"target_step": spec.target_step} if spec.target_step else {}
