"""Rollout bounds (``rlgate.convergence.rollouts``) over a read rollout file.

The reader and per-rollout summaries are :mod:`rlgate.runs.rollouts`; here each bound of
the recipe's :class:`~rlgate.recipe.spec.RolloutGateSpec` becomes one check result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import RolloutGateSpec
from rlgate.runs.rollouts import (
    ROLLOUT_CHECKS,
    FinalTurn,
    RolloutReport,
)

__all__ = ["evaluate_rollouts"]


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
        return Result(
            name=check,
            tier=Tier.CONVERGENCE,
            outcome=outcome,
            value=value,
            op=op,
            threshold=limit,
            unit=unit,
            bound=f"{op.value} {limit:g}",
            message=message,
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
