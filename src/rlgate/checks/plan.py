"""The check plan of a recipe: which checks its ``rlgate:`` block declares, and running them.

One path for both entry points: ``rlgate check-run`` evaluates the whole plan; the
convergence and perf tiers parametrize over :attr:`GatePlan.checks` at collection time and
evaluate one :class:`PlannedCheck` per test. Planning only reads the recipe; evaluation only
reads the loaded inputs (:class:`GateInputs`). What is planned and how it is evaluated is each
check kind's (:mod:`rlgate.checks.registry`): this module knows none of them by name.

A planned check that cannot run is never silently dropped: it is *skipped with a reason*
(an input option not given — the reason names the option — or a metric the recipe's
config does not log), and reported as such by both entry points.

A gate with nothing to check never passes: a recipe that declares no check at all, or lists
a tier in ``rlgate.tiers`` without a check of it, is a RecipeError when planned; a
``run_gate`` for tiers without checks, or in which every check is skipped, raises instead of
reporting "0 passed".
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgate.checks.document import RunDocument
from rlgate.checks.registry import (
    NEED_OPTION,
    GateInputs,
    InputDefaults,
    Need,
    PlannedCheck,
    get_kind,
    kinds,
    parse_gate,
)
from rlgate.core.errors import MetricsError, RecipeError, RlgateError
from rlgate.core.junit import JunitCase, JunitSuite, write_junit
from rlgate.core.results import CHECK_TIERS, Outcome, Result, Tier
from rlgate.core.results import render_table as _render_results
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import GateSpec
from rlgate.runs.metrics import load_run
from rlgate.runs.rollouts import load_rollouts

__all__ = [
    "GateInputs",
    "GatePlan",
    "GateReport",
    "Need",
    "PlannedCheck",
    "evaluate_check",
    "load_inputs",
    "load_plan",
    "plan_gate",
    "render_junit",
    "render_table",
    "run_gate",
]


@dataclass(frozen=True, slots=True)
class GatePlan:
    """A recipe's validated gate block, its run context and its planned checks.

    ``inputs`` is what the block says about the optional inputs (reference runs, how
    rollouts are read), from the kinds that read them.
    """

    recipe: str
    gate: GateSpec
    context: RunContext
    checks: tuple[PlannedCheck, ...]
    inputs: InputDefaults = field(default_factory=InputDefaults)

    def for_tier(self, tier: Tier) -> list[PlannedCheck]:
        """The planned checks of one tier, in plan order."""
        return [c for c in self.checks if c.tier is tier]

    def junit_facts(self, run_dir: str, hardware: str | None) -> dict[str, object]:
        """The recipe's facts each gate testcase records (``rlgate.recipe``, ...).

        ``rlgate.block_on_drift`` only when the recipe sets it (triage and the report read
        an absent one as false).
        """
        facts: dict[str, object] = {"recipe": self.recipe, "run_dir": run_dir}
        if hardware is not None:
            facts["hardware"] = hardware
        if self.gate.block_on_drift:
            facts["block_on_drift"] = True
        return facts


def plan_gate(gate: GateSpec, ctx: RunContext, *, require_gates: bool = True) -> GatePlan:
    """Every check the gate block declares: each registered kind's, in the kinds' order.

    A kind plans when the block has its section. ``gate`` is validated with the kinds'
    schema first unless it already was (``Recipe.gate`` from ``registry.load_recipe``).
    ``require_gates=False`` plans a recipe that declares none (a functional-only recipe the
    report states facts from) instead of refusing it.
    """
    gate = parse_gate(gate, recipe=ctx.recipe)
    checks: list[PlannedCheck] = []
    inputs = InputDefaults()
    for kind in kinds():
        spec = getattr(gate, kind.section)
        if spec is not None:
            checks += kind.plan(spec, ctx)
            inputs = inputs.merged(kind.inputs(spec))
    if require_gates:
        _require_gates(gate, ctx.recipe, checks)
    return GatePlan(ctx.recipe, gate, ctx, tuple(checks), inputs)


def _require_gates(gate: GateSpec, recipe: str, checks: Sequence[PlannedCheck]) -> None:
    """A gate with nothing to check must never pass: no checks, or a listed tier without any."""
    if not checks:
        raise RecipeError(
            f"recipe {recipe} declares no gates: its rlgate: block has no convergence, perf "
            "or band checks, so a run cannot be judged against it (nothing would pass as "
            "'0 passed')",
            hint="add rlgate.convergence (completion and data integrity at least) and/or "
            "rlgate.perf with a --baseline; the schema is in docs/convergence-and-perf.md",
        )
    listed = gate.tiers if isinstance(gate.tiers, list | tuple) else ()
    for tier in CHECK_TIERS:
        if tier.value in listed and not any(c.tier is tier for c in checks):
            raise RecipeError(
                f"recipe {recipe} lists {tier.value} in rlgate.tiers but declares no "
                f"{tier.value} checks",
                hint=f"add rlgate.{tier.value} (docs/convergence-and-perf.md) or drop "
                f"{tier.value} from rlgate.tiers",
            )


def load_plan(
    recipe_path: str | os.PathLike[str],
    *,
    max_steps: int | None = None,
    overrides: Sequence[str] = (),
    conditions: Sequence[str] = (),
) -> GatePlan:
    """Load a recipe (``rlgate.checks.registry.load_recipe`` validates it) and plan its gate.

    ``conditions`` (``check-run --condition``: NeMo RL ``check_metrics.py`` conditions) are
    added to the gate's ``rlgate.convergence.checks``; a plain NeMo RL config without an
    ``rlgate:`` block then gets a convergence block (completion, data integrity and them).
    """
    from rlgate.checks.kinds.check_metrics import with_conditions
    from rlgate.checks.registry import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    gate = with_conditions(recipe.gate, conditions, reason="--condition")
    return plan_gate(gate, recipe.run_context(max_steps))


def band_run_paths(plan: GatePlan, given: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """Reference runs: ``given`` if any, else the gate's ``band.runs`` (globs, recipe-relative)."""
    if given:
        return [Path(p) for p in given]
    paths: list[Path] = []
    for pattern in plan.inputs.band_runs:
        full = Path(os.path.expandvars(pattern)).expanduser()
        full = full if full.is_absolute() else plan.context.base_dir / full
        matches = sorted(glob.glob(str(full)))
        if not matches:
            raise MetricsError(
                f"rlgate.band.runs entry {pattern!r} matches nothing (looked for {full})"
            )
        paths += [Path(m) for m in matches]
    return paths


def load_inputs(
    plan: GatePlan,
    run: str | os.PathLike[str],
    *,
    baseline: str | os.PathLike[str] | None = None,
    rollouts: str | os.PathLike[str] | None = None,
    band_runs: Sequence[str | os.PathLike[str]] = (),
    sync_run: str | os.PathLike[str] | None = None,
) -> GateInputs:
    """Load the run and the optional inputs (MetricsError on unreadable input)."""
    needs_band = any(c.need is Need.BAND for c in plan.checks)
    patterns = plan.inputs.rollout_patterns
    return GateInputs(
        run=load_run(run),
        baseline=load_run(baseline) if baseline is not None else None,
        rollouts=load_rollouts(rollouts, patterns) if rollouts is not None else None,
        band_runs=tuple(load_run(p) for p in band_run_paths(plan, band_runs)) if needs_band else (),
        sync_run=load_run(sync_run) if sync_run is not None else None,
    )


def evaluate_check(plan: GatePlan, check: PlannedCheck, inputs: GateInputs) -> Result:
    """Evaluate one planned check by its kind (its input must be there: :meth:`GateInputs.has`)."""
    kind = get_kind(check.kind)
    return kind.evaluate(getattr(plan.gate, kind.section), check, inputs, plan.context)


def skip_reason(check: PlannedCheck, inputs_has: Callable[[Need], bool]) -> str | None:
    """Why ``check`` is skipped (plan-time reason or a missing input option), else None."""
    if check.skip:
        return check.skip
    if not inputs_has(check.need):
        return f"{check.name} needs {NEED_OPTION[check.need]}"
    return None


def skipped_result(check: PlannedCheck, reason: str) -> Result:
    """A planned check that did not run, as a SKIP Result naming why."""
    return Result(
        name=check.name, tier=check.tier, outcome=Outcome.SKIP, message=reason, metric=check.metric
    )


@dataclass(frozen=True, slots=True)
class GateReport:
    """Results of a whole plan on one set of inputs: evaluated checks, then skipped ones."""

    plan: GatePlan
    inputs: GateInputs
    results: tuple[Result, ...]
    skipped: tuple[Result, ...] = ()
    #: the hardware the run ran on, as the history records it (``4n8g``), when known
    hardware: str | None = None

    @property
    def passed(self) -> bool:
        """True when checks were evaluated and every one passed (skips do not fail it)."""
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def warnings(self) -> list[str]:
        """Notes on the inputs that changed nothing silently: the run's, then the rollouts'."""
        rollouts = self.inputs.rollouts.warnings if self.inputs.rollouts is not None else ()
        return [*self.inputs.run.warnings, *rollouts]

    def document(self) -> RunDocument:
        """The ``check-run --json`` document."""
        run = self.inputs.run
        return RunDocument(
            recipe=self.plan.recipe,
            run=str(run.source),
            hardware=self.hardware,
            source_kind=run.kind.value,
            target_step=self.plan.context.target_step,
            passed=self.passed,
            checks=self.results,
            skipped=self.skipped,
            warnings=tuple(self.warnings),
            files=tuple(str(f) for f in run.files),
            rollouts=self.inputs.rollouts.summary() if self.inputs.rollouts else None,
            block_on_drift=self.plan.gate.block_on_drift,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON document for ``rlgate check-run --json`` (:class:`RunDocument`)."""
        return self.document().to_json()


def run_gate(plan: GatePlan, inputs: GateInputs, tiers: Sequence[Tier] = CHECK_TIERS) -> GateReport:
    """Evaluate every planned check of ``tiers`` that has its inputs.

    Raises:
        RecipeError: the recipe declares no check of ``tiers``.
        RlgateError: every such check is skipped (an input it needs was not given), so
            nothing would be evaluated: a gate that judged nothing must not pass.
    """
    chosen = [c for c in plan.checks if c.tier in tiers]
    if not chosen:
        names = " or ".join(t.value for t in tiers)
        raise RecipeError(
            f"recipe {plan.recipe} declares no {names} checks",
            hint="choose another --tier, or add the tier's block to the recipe's rlgate: block",
        )
    skipped = [(c, why) for c in chosen if (why := skip_reason(c, inputs.has)) is not None]
    if len(skipped) == len(chosen):
        reasons = sorted({why for _, why in skipped})
        raise RlgateError(
            f"nothing to evaluate: all {len(chosen)} planned check(s) of recipe {plan.recipe} "
            f"were skipped ({'; '.join(reasons[:4])}{'; ...' if len(reasons) > 4 else ''})",
            hint="give the inputs those checks need (e.g. --baseline for the perf tier)",
        )
    dropped = {id(c) for c, _ in skipped}
    results = [evaluate_check(plan, c, inputs) for c in chosen if id(c) not in dropped]
    return GateReport(
        plan, inputs, tuple(results), tuple(skipped_result(c, why) for c, why in skipped)
    )


# --- rendering (text for the terminal, JUnit XML for CI): the one model's renderers ---------


def render_table(report: GateReport) -> str:
    """One line per check (evaluated, then skipped), after the run and its warnings."""
    head = [f"rlgate check-run: recipe {report.plan.recipe}, run {report.inputs.run.source}"]
    head += [f"  warning: {w}" for w in report.warnings]
    return _render_results([*report.results, *report.skipped], head)


def render_junit(report: GateReport) -> str:
    """JUnit XML: one testcase per check (skipped ones too), its Result as ``rlgate.*``.

    Classnames are ``rlgate.<tier>.<recipe>``; each testcase also records ``rlgate.recipe``
    and ``rlgate.run_dir`` (and ``rlgate.hardware`` when known, ``rlgate.block_on_drift``
    when the recipe sets it: :meth:`GatePlan.junit_facts`); each warning is a suite
    property ``rlgate.warning``. Names,
    messages and values may come from untrusted input: :mod:`rlgate.core.junit` writes them
    XML-safe, control characters visible.
    """
    recipe, run_dir = report.plan.recipe, str(report.inputs.run.source)
    facts = report.plan.junit_facts(run_dir, report.hardware)
    cases = [
        JunitCase.of(r, classname=f"rlgate.{r.tier.value}.{recipe}", facts=facts)
        for r in (*report.results, *report.skipped)
    ]
    suite = JunitSuite.of(
        f"rlgate.check-run.{recipe}", cases, [("rlgate.warning", w) for w in report.warnings]
    )
    return write_junit([suite])
