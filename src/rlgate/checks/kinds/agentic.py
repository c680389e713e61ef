"""Agentic health: bounds on NeMo RL's Gym rollout metrics, and finite loss / grad norm.

Field: ``rlgate.convergence.agentic`` (planned when it is set): ``finite:<tag>`` for each
tag of ``finite`` (every logged value finite), then one check per bound set:
``turns_mean``, ``max_turns_share``, ``truncation_rate``, ``natural_termination_rate``,
``total_tokens_max`` (``total_tokens_within_limit``) and ``tool_call_failure_rate``
(skipped when the recipe does not make NeMo RL log ``train/invalid_tool_call_rate``).
``agent_max_turns`` sets the run context's turn limit (else the training Gym agents').

``max_turns_share`` bounds the share of samples that hit ``agent_max_turns``. NeMo RL
logs only summaries of turns per sample, so the share is bounded *from below* by the
quantile tags: ``min`` >= max -> 100 %, ``median`` -> 50 %, ``p95`` -> 5 %, ``p99`` -> 1 %
(valid after NeMo RL's async averaging too, since every group value is <= the max).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from rlgate.checks.conditions import evaluate_condition, first_nonfinite, run_result, window_mask
from rlgate.checks.registry import CheckKind, GateInputs, PlannedCheck, register
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.conditions import Condition, Reducer, SeriesCall, Window
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import ContextOverrides, StrictModel
from rlgate.runs.metrics import RunMetrics

__all__ = ["AGENTIC_TAGS", "AgenticFields", "AgenticSpec", "evaluate_agentic", "evaluate_finite"]

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


class AgenticSpec(StrictModel):
    """Bounds on NeMo RL's Gym rollout metrics (``train/turns_per_sample/*`` …)."""

    window: Window = (1, 0)
    turns_mean: float | None = None
    max_turns_share: float | None = Field(None, ge=0.0, le=1.0)
    agent_max_turns: int | None = Field(None, gt=0)
    truncation_rate: float | None = Field(None, ge=0.0, le=1.0)
    natural_termination_rate: float | None = Field(None, ge=0.0, le=1.0)
    total_tokens_within_limit: bool = True
    tool_call_failure_rate: float | None = Field(None, ge=0.0, le=1.0)
    finite: tuple[str, ...] = ("train/loss", "train/grad_norm")


class AgenticFields(StrictModel):
    """The field of ``rlgate.convergence`` the agentic checks read."""

    agentic: AgenticSpec | None = None


def evaluate_agentic(name: str, spec: AgenticSpec, run: RunMetrics, ctx: RunContext) -> Result:
    """One agentic-health check by name (see :data:`AGENTIC_TAGS`)."""
    start, end = spec.window
    tag = AGENTIC_TAGS[name]
    if name == "max_turns_share":
        return _max_turns_share(spec, run, ctx)
    if name == "total_tokens_max":
        limit = ctx.token_limit
        if limit is None:
            return run_result(
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
        return run_result(
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
        return run_result(
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
        return run_result(name, Outcome.ERROR, None, bound, message, ref.tag, **share_of)
    share = np.zeros(steps.size)
    for tag, at_least in _SHARE_BOUNDS.items():
        if tag not in present:
            continue
        vals = np.array([present[tag].value_at(int(s)) for s in steps], dtype=float)
        if not np.all(np.isfinite(vals)):
            bad = steps[~np.isfinite(vals)][0]
            return run_result(
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
    return run_result(
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
        return run_result(name, Outcome.ERROR, None, "all finite", f"{tag} not logged", tag, **none)
    bad = first_nonfinite(series.steps, series.values)
    count = int(np.count_nonzero(~np.isfinite(series.values)))
    if bad is None:
        message = f"{tag}: {len(series)} values, all finite"
        return run_result(name, Outcome.PASS, 0.0, "all finite", message, tag, **none)
    return run_result(
        name,
        Outcome.FAIL,
        float(count),
        "all finite",
        f"{tag}: {count} non-finite value(s), first {bad}",
        tag,
        **none,
    )


_NOT_LOGGED = (
    "train/invalid_tool_call_rate is only logged when grpo.invalid_tool_call_"
    "advantage or grpo.malformed_thinking_advantage is set in the recipe"
)


@register
class Agentic(CheckKind[AgenticFields]):
    """Finite loss and grad norm, and the agentic bounds the recipe sets."""

    name = "agentic"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 50

    def plan(self, spec: AgenticFields, context: RunContext) -> list[PlannedCheck]:
        """``finite:<tag>`` per tag, then each bound set (``params``: what to evaluate)."""
        ag = spec.agentic
        if ag is None:
            return []
        out = [self.check(f"finite:{t}", metric=t, params=("finite", t)) for t in ag.finite]
        wanted = {
            "turns_mean": ag.turns_mean is not None,
            "max_turns_share": ag.max_turns_share is not None,
            "truncation_rate": ag.truncation_rate is not None,
            "natural_termination_rate": ag.natural_termination_rate is not None,
            "total_tokens_max": ag.total_tokens_within_limit,
            "tool_call_failure_rate": ag.tool_call_failure_rate is not None,
        }
        for name, on in wanted.items():
            if not on:
                continue
            skip = None
            if name == "tool_call_failure_rate" and not context.tool_call_metrics_logged:
                skip = _NOT_LOGGED
            out.append(self.check(name, skip=skip, params=("bound", name)))
        return out

    def evaluate(
        self, spec: AgenticFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """A finite check, or one bound, as ``params`` says."""
        assert spec.agentic is not None  # planned only when set
        what, name = check.params
        if what == "finite":
            return evaluate_finite(name, inputs.run)
        return evaluate_agentic(name, spec.agentic, inputs.run, context)

    def context(self, spec: AgenticFields) -> ContextOverrides:
        """``agent_max_turns``, when the block sets it."""
        turns = spec.agentic.agent_max_turns if spec.agentic is not None else None
        return {"agent_max_turns": turns} if turns else {}
