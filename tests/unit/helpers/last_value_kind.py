"""A check kind that rlgate does not ship: the last logged value of a metric under a ceiling.

It is defined here only, with the registry's public API, to show that a kind is one module:
``rlgate.convergence.last_value: {metric, max}`` in a recipe, one check ``last_value:<metric>``.
Registered for a ``with`` block by ``registered(LastValue)``, or, loaded as a pytest plugin
(``-p tests.unit.helpers.last_value_kind``), at ``pytest_configure``.
"""

from __future__ import annotations

import math

import pytest

from rlgate.checks.registry import CheckKind, GateInputs, PlannedCheck, register
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel


class LastValueSpec(StrictModel):
    metric: str
    max: float


class LastValueFields(StrictModel):
    last_value: LastValueSpec | None = None


class LastValue(CheckKind[LastValueFields]):
    name = "last_value"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 55

    def plan(self, spec: LastValueFields, context: RunContext) -> list[PlannedCheck]:
        if spec.last_value is None:
            return []
        metric = spec.last_value.metric
        return [self.check(f"last_value:{metric}", metric=metric)]

    def evaluate(
        self, spec: LastValueFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        assert spec.last_value is not None and check.metric is not None
        series = inputs.run.series.get(check.metric)
        if series is None or not len(series):
            return self.error(check, f"{check.metric} not logged", op=Op.LE)
        value, ceiling = float(series.values[-1]), spec.last_value.max
        ok = math.isfinite(value) and value <= ceiling
        return Result(
            name=check.name,
            tier=check.tier,
            outcome=Outcome.PASS if ok else Outcome.FAIL,
            value=value,
            op=Op.LE,
            threshold=ceiling,
            metric=check.metric,
            message=f"{check.metric} at step {series.last_step} = {value:.6g}",
        )


def pytest_configure(config: pytest.Config) -> None:
    register(LastValue)
