"""``data_integrity``: steps never go backwards within one file of the run.

Planned whenever the recipe has an ``rlgate.convergence`` block; it reads no field of it.
"""

from __future__ import annotations

from rlgate.checks.conditions import run_result
from rlgate.checks.registry import CheckKind, GateInputs, PlannedCheck, register
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel
from rlgate.runs.metrics import RunMetrics

__all__ = ["IntegrityFields", "evaluate_integrity"]


class IntegrityFields(StrictModel):
    """No settings: the check runs on every convergence block."""


def evaluate_integrity(run: RunMetrics) -> Result:
    """Steps never go backwards within one file (a restart inside one file, or corruption)."""
    none = {"op": Op.EQ, "threshold": 0.0, "unit": "non-monotonic steps"}
    if not run.anomalies:
        note = (
            f"; {len(run.conflicts)} cross-file conflict(s), later file kept"
            if run.conflicts
            else ""
        )
        return run_result(
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
    return run_result(
        "data_integrity",
        Outcome.FAIL,
        float(len(run.anomalies)),
        "no non-monotonic steps",
        f"non-monotonic steps: {shown}",
        None,
        **none,
    )


@register
class Integrity(CheckKind[IntegrityFields]):
    """The run's own data is sound."""

    name = "integrity"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 10

    def plan(self, spec: IntegrityFields, context: RunContext) -> list[PlannedCheck]:
        """One check."""
        return [self.check("data_integrity")]

    def evaluate(
        self, spec: IntegrityFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The run's step order."""
        return evaluate_integrity(inputs.run)
