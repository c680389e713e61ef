"""``rollouts:<bound>``: bounds on a NeMo Gym rollout JSONL (``ng_collect_rollouts`` output).

Field: ``rlgate.convergence.rollouts`` (planned when it is set; each check needs
``--rollouts``). The reader and per-rollout summaries are :mod:`rlgate.runs.rollouts`; here
each bound set becomes one check (see :data:`~rlgate.runs.rollouts.ROLLOUT_CHECKS`). The
block's ``tool_call_patterns``, ``thinking_tags`` and ``error_patterns`` say how the file is
read (:meth:`Rollouts.inputs`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import Field

from rlgate.checks.conditions import run_result
from rlgate.checks.registry import (
    CheckKind,
    GateInputs,
    InputDefaults,
    Need,
    PlannedCheck,
    register,
)
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel
from rlgate.runs.rollouts import (
    DEFAULT_ERROR_PATTERNS,
    DEFAULT_THINKING_TAGS,
    DEFAULT_TOOL_CALL_PATTERNS,
    ROLLOUT_CHECKS,
    FinalTurn,
    RolloutPatterns,
    RolloutReport,
)

__all__ = ["RolloutFields", "RolloutGateSpec", "evaluate_rollouts"]


class RolloutGateSpec(StrictModel):
    """Bounds on a NeMo Gym rollout JSONL (``ng_collect_rollouts`` output)."""

    max_turns_share: float | None = Field(None, ge=0.0, le=1.0)
    failed_call_rate: float | None = Field(None, ge=0.0, le=1.0)
    unparsed_tool_call_rate: float | None = Field(None, ge=0.0, le=1.0)
    malformed_reasoning_rate: float | None = Field(None, ge=0.0, le=1.0)
    empty_final_rate: float | None = Field(None, ge=0.0, le=1.0)
    truncated_final_rate: float | None = Field(None, ge=0.0, le=1.0)
    reward_mean_min: float | None = None
    invalid_rate: float = Field(0.0, ge=0.0, le=1.0)
    tool_call_patterns: tuple[str, ...] = DEFAULT_TOOL_CALL_PATTERNS
    thinking_tags: tuple[str, ...] = DEFAULT_THINKING_TAGS
    error_patterns: tuple[str, ...] = DEFAULT_ERROR_PATTERNS


class RolloutFields(StrictModel):
    """The field of ``rlgate.convergence`` the rollout checks read."""

    rollouts: RolloutGateSpec | None = None


def _share(report: RolloutReport, flag: Any) -> tuple[float, int]:
    hits = sum(1 for r in report.rollouts if flag(r))
    return hits / len(report.rollouts), hits


def evaluate_rollouts(
    name: str, report: RolloutReport, spec: RolloutGateSpec, ctx: RunContext
) -> Result:
    """One rollout bound by spec field name (see :data:`ROLLOUT_CHECKS`)."""
    check, n = f"rollouts:{name}", len(report.rollouts)
    limit = getattr(spec, name)
    op = Op.GE if name == "reward_mean_min" else Op.LE
    unit = {"reward_mean_min": "mean reward", "failed_call_rate": "share of calls"}.get(
        name, "share of rollouts"
    )

    def result(outcome: Outcome, value: float | None, message: str) -> Result:
        bound = f"{op.value} {limit:g}"
        return run_result(
            check, outcome, value, bound, message, None, op=op, threshold=limit, unit=unit
        )

    def done(value: float, detail: str) -> Result:
        ok = op.holds(value, limit)
        outcome = Outcome.PASS if ok else Outcome.FAIL
        return result(outcome, value, f"{ROLLOUT_CHECKS[name]} = {value:.4g} ({detail})")

    def error(detail: str) -> Result:
        return result(Outcome.ERROR, None, detail)

    if name == "failed_call_rate":
        calls = sum(r.function_calls for r in report.rollouts)
        if not calls:
            return error(f"no function calls in {n} rollouts: the rate is undefined")
        failed = [x for r in report.rollouts for x in r.failure_reasons]
        kinds = ", ".join(f"{k} {failed.count(k)}" for k in sorted(set(failed))) or "none"
        return done(len(failed) / calls, f"{len(failed)} of {calls} calls; {kinds}")
    if name == "reward_mean_min":
        rewards = [r for r in report.rollouts if r.reward is not None]
        if not rewards:
            return error(f"no rollout of {n} has a numeric reward")
        bad = next((r for r in rewards if not math.isfinite(r.reward or 0.0)), None)
        if bad is not None:
            return result(
                Outcome.FAIL,
                float("nan"),
                f"{ROLLOUT_CHECKS[name]}: non-finite reward {bad.reward} at line {bad.line}",
            )
        return done(float(np.mean([r.reward for r in rewards])), f"{len(rewards)} rewards")
    if name == "max_turns_share":
        if ctx.agent_max_turns is None:
            return error("agent_max_turns unknown (set it in the recipe or the gate block)")
        limit_turns = ctx.agent_max_turns
        value, hits = _share(report, lambda r: r.turns >= limit_turns)
        return done(value, f"{hits} of {n} at >= {limit_turns} turns")
    flags = {
        "invalid_rate": lambda r: r.schema_error is not None,
        "unparsed_tool_call_rate": lambda r: r.unparsed_tool_calls > 0,
        "malformed_reasoning_rate": lambda r: r.malformed_reasoning > 0,
        "empty_final_rate": lambda r: r.final_turn in (FinalTurn.EMPTY, FinalTurn.NONE),
        "truncated_final_rate": lambda r: r.final_turn is FinalTurn.TRUNCATED,
    }
    value, hits = _share(report, flags[name])
    first = next((r for r in report.rollouts if flags[name](r)), None)
    where = f"; first at line {first.line}" if first is not None else ""
    if name == "invalid_rate" and first is not None:
        where += f": {first.schema_error}"
    return done(value, f"{hits} of {n} rollouts{where}")


@register
class Rollouts(CheckKind[RolloutFields]):
    """One check per rollout bound set."""

    name = "rollouts"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 60

    def plan(self, spec: RolloutFields, context: RunContext) -> list[PlannedCheck]:
        """``rollouts:<field>`` for each bound set, in :data:`ROLLOUT_CHECKS` order."""
        bounds = spec.rollouts
        if bounds is None:
            return []
        return [
            self.check(f"rollouts:{n}", need=Need.ROLLOUTS, params=n)
            for n in ROLLOUT_CHECKS
            if getattr(bounds, n) is not None
        ]

    def evaluate(
        self, spec: RolloutFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The bound ``params`` names, over the rollouts given."""
        assert spec.rollouts is not None and inputs.rollouts is not None
        return evaluate_rollouts(check.params, inputs.rollouts, spec.rollouts, context)

    def inputs(self, spec: RolloutFields) -> InputDefaults:
        """The rollouts are read with the block's patterns."""
        b = spec.rollouts
        if b is None:
            return InputDefaults()
        patterns = RolloutPatterns(b.tool_call_patterns, b.thinking_tags, b.error_patterns)
        return InputDefaults(rollout_patterns=patterns)
