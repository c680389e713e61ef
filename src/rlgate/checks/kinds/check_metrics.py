"""``rlgate.convergence.checks``: NeMo RL ``check_metrics`` conditions and typed checks.

Each entry is either a condition accepted verbatim (``{condition: 'median(data["x"]) <
1.1', name, reason}``, parsed by :mod:`rlgate.recipe.conditions`, never ``eval``'d) or a typed
check (``{name, metric, reducer, op, threshold, window, above, ignore_top_p, reason}``) that
becomes the same condition AST. Both are validated at load (a syntax error names the column)
and evaluated by :func:`rlgate.checks.conditions.evaluate_condition`; names are unique
(``condition_<i>`` when a condition has none).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from rlgate.checks.conditions import evaluate_condition
from rlgate.checks.registry import CheckKind, GateInputs, PlannedCheck, register
from rlgate.core.results import Result, Tier
from rlgate.recipe.conditions import (
    AnyCondition,
    Condition,
    ConditionSyntaxError,
    Op,
    Reducer,
    SeriesCall,
    Window,
    parse_condition,
)
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import GateSpec, StrictModel

__all__ = ["CheckSpec", "ConditionCheckSpec", "ConditionFields", "with_conditions"]


class CheckSpec(StrictModel):
    """A typed check: ``reducer(metric over window) op threshold``."""

    name: str
    metric: str
    reducer: Reducer
    op: Op
    threshold: float
    window: Window | None = None
    above: float | None = None
    ignore_top_p: float = Field(0.0, ge=0.0, le=1.0)
    reason: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> CheckSpec:
        if (self.reducer is Reducer.RATIO_ABOVE) != (self.above is not None):
            raise ValueError("'above' is required for reducer ratio_above and only for it")
        if self.ignore_top_p and self.reducer is not Reducer.MEAN:
            raise ValueError("ignore_top_p applies to reducer mean only")
        return self

    def to_condition(self) -> Condition:
        """The equivalent condition AST."""
        start, end = self.window or (1, 0)
        call = SeriesCall(self.reducer, self.metric, start, end, self.ignore_top_p, self.above)
        return Condition(call, self.op, self.threshold, call.describe())


class ConditionCheckSpec(StrictModel):
    """A NeMo RL ``check_metrics.py`` condition, accepted verbatim."""

    condition: str
    name: str | None = None
    reason: str = ""

    @field_validator("condition")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            parse_condition(value)
        except ConditionSyntaxError as exc:  # pydantic reports ValueErrors with the location
            raise ValueError(str(exc)) from None
        return value

    def to_condition(self) -> AnyCondition:
        """The parsed condition AST."""
        return parse_condition(self.condition)


def _entry_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "condition" if "condition" in value else "typed"
    return "condition" if isinstance(value, ConditionCheckSpec) else "typed"


AnyCheck = Annotated[
    Annotated[CheckSpec, Tag("typed")] | Annotated[ConditionCheckSpec, Tag("condition")],
    Discriminator(_entry_kind),
]


class ConditionFields(StrictModel):
    """The field of ``rlgate.convergence`` these checks read: ``checks``."""

    checks: tuple[AnyCheck, ...] = ()

    @model_validator(mode="after")
    def _unique_names(self) -> ConditionFields:
        seen: set[str] = set()
        for i, check in enumerate(self.checks):
            name = check.name or f"condition_{i + 1}"
            if name in seen:
                raise ValueError(f"duplicate check name {name!r}")
            seen.add(name)
        return self

    def named_conditions(self) -> list[tuple[str, AnyCondition, str]]:
        """``(name, condition, reason)`` for every declared check, in order."""
        return [
            (c.name or f"condition_{i + 1}", c.to_condition(), c.reason)
            for i, c in enumerate(self.checks)
        ]


@register
class CheckMetrics(CheckKind[ConditionFields]):
    """One check per declared condition."""

    name = "check_metrics"
    tier = Tier.CONVERGENCE
    section = "convergence"
    order = 30

    def plan(self, spec: ConditionFields, context: RunContext) -> list[PlannedCheck]:
        """The declared conditions, in order (the condition is the check's ``params``)."""
        return [
            self.check(name, metric=cond.tag, reason=reason, params=cond)
            for name, cond, reason in spec.named_conditions()
        ]

    def evaluate(
        self, spec: ConditionFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The condition over the run (``$MAX_STEPS`` is the target step)."""
        return evaluate_condition(
            check.params, inputs.run, name=check.name, target_step=context.target_step
        )


def with_conditions(gate: GateSpec, conditions: Sequence[str], *, reason: str) -> GateSpec:
    """``gate`` with ``conditions`` appended to ``rlgate.convergence.checks``.

    A gate without a convergence block gets one (so completion and data integrity are
    judged too); the section is validated again (syntax, unique names: ``condition_<i>``).
    """
    if not conditions:
        return gate
    field = type(gate).model_fields["convergence"]
    model = next(
        a for a in typing.get_args(field.annotation) or (field.annotation,) if a is not type(None)
    )
    section = gate.convergence
    raw = section.model_dump(exclude_unset=True) if section is not None else {}
    raw["checks"] = [
        *raw.get("checks", ()),
        *({"condition": c, "reason": reason} for c in conditions),
    ]
    try:
        updated = model.model_validate(raw)
    except ValidationError as exc:
        details = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise ConditionSyntaxError(f"--condition: {details}") from None
    return gate.model_copy(update={"convergence": updated})
