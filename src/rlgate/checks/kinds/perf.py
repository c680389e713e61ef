"""``perf:<metric>``: the run's steady state against a baseline run's, within its noise.

Section: ``rlgate.perf`` (planned when it is set; each check needs ``--baseline``). The
statistics (Hodges-Lehmann shift on the log scale, tolerance from the baseline's own
step-to-step noise, ``min_effect`` floor) are :mod:`rlgate.checks.perf`'s.
"""

from __future__ import annotations

from pydantic import Field

from rlgate.checks.perf import Direction, compare_to_baseline, perf_result
from rlgate.checks.registry import CheckKind, GateInputs, Need, PlannedCheck, register
from rlgate.core.results import Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel

__all__ = ["PerfSpec"]


class PerfSpec(StrictModel):
    """The ``rlgate.perf`` block (see :mod:`rlgate.checks.perf` for the statistics)."""

    warmup_steps: int = Field(3, ge=0)
    alpha: float = Field(0.01, gt=0.0, lt=0.5)
    min_effect: float = Field(0.05, ge=0.0)
    metrics: dict[str, Direction] = Field(
        default_factory=lambda: {
            "timing/train/total_step_time": Direction.LOWER,
            "performance/tokens_per_sec_per_gpu": Direction.HIGHER,
        }
    )


@register
class Perf(CheckKind[PerfSpec]):
    """One baseline comparison per metric."""

    name = "perf"
    tier = Tier.PERF
    section = "perf"
    order = 80

    def plan(self, spec: PerfSpec, context: RunContext) -> list[PlannedCheck]:
        """``perf:<metric>`` per metric."""
        return [self.check(f"perf:{m}", need=Need.BASELINE, metric=m) for m in spec.metrics]

    def evaluate(
        self, spec: PerfSpec, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The run's steady state against the baseline's."""
        metric, baseline = check.metric, inputs.baseline
        assert metric is not None and baseline is not None
        cand, base = inputs.run.series.get(metric), baseline.series.get(metric)
        if cand is None or base is None:
            who = "the run" if cand is None else f"the baseline {baseline.source}"
            return self.error(check, f"{who} does not log {metric}", unit="x baseline")
        cmp = compare_to_baseline(
            cand,
            base,
            better=spec.metrics[metric],
            warmup_steps=spec.warmup_steps,
            alpha=spec.alpha,
            min_effect=spec.min_effect,
        )
        return perf_result(check.name, cmp, metric)
