"""The check plan of a recipe: which checks its ``rlgate:`` block declares, and running them.

One path for both entry points: ``rlgate check-run`` evaluates the whole plan; the
convergence and perf tiers parametrize over :attr:`GatePlan.checks` at collection time and
evaluate one :class:`PlannedCheck` per test. Planning only reads the recipe; evaluation only
reads the loaded inputs (:class:`GateInputs`).

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
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

from rlgate.checks.conditions import evaluate_condition
from rlgate.checks.convergence import (
    evaluate_agentic,
    evaluate_completion,
    evaluate_finite,
    evaluate_integrity,
    evaluate_reward_improvement,
    evaluate_reward_positive,
)
from rlgate.checks.perf import (
    build_band,
    compare_async_vs_sync,
    compare_to_baseline,
    evaluate_band_curve,
    evaluate_band_mean,
    perf_result,
    tier_for_metric,
)
from rlgate.checks.rollouts import evaluate_rollouts
from rlgate.core.errors import MetricsError, RecipeError, RlgateError
from rlgate.core.io import SCHEMA_VERSION
from rlgate.core.junit import JunitCase, JunitSuite, write_junit
from rlgate.core.results import CHECK_TIERS, Op, Outcome, Result, Tier
from rlgate.core.results import render_table as _render_results
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import BandMethod, GateSpec
from rlgate.runs.metrics import RunMetrics, load_run
from rlgate.runs.rollouts import ROLLOUT_CHECKS, RolloutReport, load_rollouts

__all__ = [
    "GateInputs",
    "GatePlan",
    "GateReport",
    "Need",
    "PlannedCheck",
    "RunDocument",
    "evaluate_check",
    "load_inputs",
    "load_plan",
    "plan_gate",
    "render_junit",
    "render_table",
    "run_gate",
]


class Need(Enum):
    """The input a check needs besides the run itself."""

    RUN = "run"
    BASELINE = "baseline"
    ROLLOUTS = "rollouts"
    BAND = "band"
    SYNC = "sync"


# Need -> the option that provides it (CLI spelling; pytest uses the same names).
NEED_OPTION = {
    Need.BASELINE: "--baseline",
    Need.ROLLOUTS: "--rollouts",
    Need.BAND: "--band-run (or rlgate.band.runs in the recipe; check-run: --db and promoted runs)",
    Need.SYNC: "--sync-run",
}


@dataclass(frozen=True, slots=True)
class PlannedCheck:
    """One check the recipe declares; ``skip`` says why it cannot run with this recipe."""

    name: str
    tier: Tier
    need: Need = Need.RUN
    metric: str | None = None
    reason: str = ""
    skip: str | None = None


@dataclass(frozen=True, slots=True)
class GatePlan:
    """A recipe's validated gate block, its run context and its planned checks."""

    recipe: str
    gate: GateSpec
    context: RunContext
    checks: tuple[PlannedCheck, ...]

    def for_tier(self, tier: Tier) -> list[PlannedCheck]:
        """The planned checks of one tier, in plan order."""
        return [c for c in self.checks if c.tier is tier]


@dataclass(frozen=True, slots=True)
class GateInputs:
    """Everything a plan is evaluated on.

    ``band_origin`` says where ``band_runs`` came from when they are not the runs given
    (``rlgate check-run --db``: the recipe's promoted runs in the history); with it, the
    band checks run even on fewer runs than the band's minimum, and say so as an ERROR.
    """

    run: RunMetrics
    baseline: RunMetrics | None = None
    rollouts: RolloutReport | None = None
    band_runs: tuple[RunMetrics, ...] = ()
    sync_run: RunMetrics | None = None
    band_origin: str | None = None

    def has(self, need: Need) -> bool:
        """Whether the input ``need`` was given."""
        return {
            Need.RUN: True,
            Need.BASELINE: self.baseline is not None,
            Need.ROLLOUTS: self.rollouts is not None,
            Need.BAND: bool(self.band_runs) or self.band_origin is not None,
            Need.SYNC: self.sync_run is not None,
        }[need]


def _convergence_checks(gate: GateSpec, ctx: RunContext) -> list[PlannedCheck]:
    conv = gate.convergence
    if conv is None:
        return []
    c = Tier.CONVERGENCE
    out = [
        PlannedCheck("data_integrity", c),
        PlannedCheck("completion", c, metric=conv.completion.metric),
    ]
    out += [PlannedCheck(n, c, metric=cond.tag, reason=r) for n, cond, r in conv.named_conditions()]
    if conv.reward is not None:
        out.append(PlannedCheck("reward_improvement", c, metric=conv.reward.metric))
        if conv.reward.require_positive_max:
            out.append(PlannedCheck("reward_max_positive", c, metric=conv.reward.metric))
    ag = conv.agentic
    if ag is not None:
        out += [PlannedCheck(f"finite:{t}", c, metric=t) for t in ag.finite]
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
            if name == "tool_call_failure_rate" and not ctx.tool_call_metrics_logged:
                skip = (
                    "train/invalid_tool_call_rate is only logged when grpo.invalid_tool_call_"
                    "advantage or grpo.malformed_thinking_advantage is set in the recipe"
                )
            out.append(PlannedCheck(name, c, metric=None, skip=skip))
    if conv.rollouts is not None:
        spec = conv.rollouts
        out += [
            PlannedCheck(f"rollouts:{n}", c, Need.ROLLOUTS)
            for n in ROLLOUT_CHECKS
            if getattr(spec, n) is not None
        ]
    return out


def plan_gate(gate: GateSpec, ctx: RunContext) -> GatePlan:
    """Every check the gate block declares, convergence first, then band, then perf."""
    checks = _convergence_checks(gate, ctx)
    if gate.band is not None:
        for metric, spec in gate.band.metrics.items():
            tier = tier_for_metric(metric)
            if spec.method in (BandMethod.CURVE, BandMethod.BOTH):
                checks.append(PlannedCheck(f"band_curve:{metric}", tier, Need.BAND, metric))
            if spec.method in (BandMethod.MEAN, BandMethod.BOTH):
                checks.append(PlannedCheck(f"band_mean:{metric}", tier, Need.BAND, metric))
    if gate.perf is not None:
        p = Tier.PERF
        checks += [PlannedCheck(f"perf:{m}", p, Need.BASELINE, m) for m in gate.perf.metrics]
        if gate.perf.async_vs_sync is not None:
            checks += [
                PlannedCheck(f"async_vs_sync:{m}", p, Need.SYNC, m)
                for m in gate.perf.async_vs_sync.metrics
            ]
    _require_gates(gate, ctx.recipe, checks)
    return GatePlan(ctx.recipe, gate, ctx, tuple(checks))


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
) -> GatePlan:
    """Load a recipe (``rlgate.recipe.load.load_recipe`` validates it) and plan its gate."""
    from rlgate.recipe.load import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    return plan_gate(recipe.gate, recipe.run_context(max_steps))


def band_run_paths(plan: GatePlan, given: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """Reference runs: ``given`` if any, else the gate's ``band.runs`` (globs, recipe-relative)."""
    if given:
        return [Path(p) for p in given]
    if plan.gate.band is None:
        return []
    paths: list[Path] = []
    for pattern in plan.gate.band.runs:
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
    conv = plan.gate.convergence
    spec = conv.rollouts if conv is not None else None
    needs_band = any(c.need is Need.BAND for c in plan.checks)
    return GateInputs(
        run=load_run(run),
        baseline=load_run(baseline) if baseline is not None else None,
        rollouts=load_rollouts(rollouts, spec) if rollouts is not None else None,
        band_runs=tuple(load_run(p) for p in band_run_paths(plan, band_runs)) if needs_band else (),
        sync_run=load_run(sync_run) if sync_run is not None else None,
    )


def _error(check: PlannedCheck, message: str, **comparison: Any) -> Result:
    """The ERROR of a check whose input lacks what it needs (the value is unknown)."""
    return Result(
        name=check.name,
        tier=check.tier,
        outcome=Outcome.ERROR,
        message=message,
        metric=check.metric,
        **({"bound": "?"} | comparison),
    )


def _band(plan: GatePlan, check: PlannedCheck, inputs: GateInputs) -> Result:
    band_spec = plan.gate.band
    assert band_spec is not None and check.metric is not None
    metric, spec = check.metric, band_spec.metrics[check.metric]
    refs = []
    for ref in inputs.band_runs:
        series = ref.series.get(metric)
        if series is None:
            return _error(check, f"reference run {ref.source} does not log {metric}")
        refs.append(series)
    band = build_band(
        refs,
        alpha=band_spec.alpha,
        warmup_steps=band_spec.warmup_steps,
        min_runs=band_spec.min_runs,
    )
    origin = inputs.band_origin or f"{len(refs)} run(s) given"
    if isinstance(band, str):  # e.g. fewer runs than the minimum: the checks say it (ERROR)
        band = f"{band} ({origin})"
    candidate = inputs.run.series.get(metric)
    if check.name.startswith("band_curve:"):
        result = evaluate_band_curve(
            band, candidate, better=spec.better, max_outside=band_spec.max_outside
        )
    else:
        result = evaluate_band_mean(band, candidate, better=spec.better)
    sources = {"band_runs": len(refs), "band_min_runs": band_spec.min_runs, "band_source": origin}
    return result.model_copy(update={"evidence": {**result.evidence, **sources}})


def _perf(plan: GatePlan, check: PlannedCheck, inputs: GateInputs) -> Result:
    perf = plan.gate.perf
    assert perf is not None and check.metric is not None
    metric = check.metric
    if check.need is Need.SYNC:
        assert perf.async_vs_sync is not None and inputs.sync_run is not None
        better = perf.async_vs_sync.metrics[metric]
        pair = (inputs.run.series.get(metric), inputs.sync_run.series.get(metric))
        if pair[0] is None or pair[1] is None:
            who = "the run" if pair[0] is None else "the sync run"
            return _error(check, f"{who} does not log {metric}", op=Op.GE, unit="x sync")
        return compare_async_vs_sync(
            pair[0],
            pair[1],
            better=better,
            warmup_steps=perf.warmup_steps,
            alpha=perf.alpha,
            min_speedup=perf.async_vs_sync.min_speedup,
        )
    assert inputs.baseline is not None
    cand, base = inputs.run.series.get(metric), inputs.baseline.series.get(metric)
    if cand is None or base is None:
        who = "the run" if cand is None else f"the baseline {inputs.baseline.source}"
        return _error(check, f"{who} does not log {metric}", unit="x baseline")
    cmp = compare_to_baseline(
        cand,
        base,
        better=perf.metrics[metric],
        warmup_steps=perf.warmup_steps,
        alpha=perf.alpha,
        min_effect=perf.min_effect,
    )
    return perf_result(check.name, cmp, metric)


def _convergence(plan: GatePlan, check: PlannedCheck, inputs: GateInputs) -> Result:
    conv, ctx, run = plan.gate.convergence, plan.context, inputs.run
    assert conv is not None
    name = check.name
    if name == "data_integrity":
        return evaluate_integrity(run)
    if name == "completion":
        return evaluate_completion(run, ctx, conv.completion)
    if name in ("reward_improvement", "reward_max_positive"):
        assert conv.reward is not None
        fn = (
            evaluate_reward_improvement
            if name == "reward_improvement"
            else evaluate_reward_positive
        )
        return fn(conv.reward, run)
    if name.startswith("finite:"):
        return evaluate_finite(name.removeprefix("finite:"), run)
    if name.startswith("rollouts:"):
        assert conv.rollouts is not None and inputs.rollouts is not None
        return evaluate_rollouts(
            name.removeprefix("rollouts:"), inputs.rollouts, conv.rollouts, ctx
        )
    for cname, cond, _ in conv.named_conditions():
        if cname == name:
            return evaluate_condition(cond, run, name=name, target_step=ctx.target_step)
    assert conv.agentic is not None
    return evaluate_agentic(name, conv.agentic, run, ctx)


def evaluate_check(plan: GatePlan, check: PlannedCheck, inputs: GateInputs) -> Result:
    """Evaluate one planned check (its input must be present; see :meth:`GateInputs.has`)."""
    if check.need is Need.BAND:
        return _band(plan, check, inputs)
    if check.need in (Need.BASELINE, Need.SYNC):
        return _perf(plan, check, inputs)
    return _convergence(plan, check, inputs)


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


_Text = Annotated[StrictStr, Field(min_length=1)]
_Count = Annotated[int, Field(ge=0, strict=True)]


class RunDocument(BaseModel):
    """``rlgate check-run --json`` (and the convergence/perf tiers' ``--rlgate-json``).

    Written by :meth:`GateReport.document`, read back by ``rlgate report`` with the same
    model: ``{schema_version, recipe, run, source_kind, target_step, passed, checks,
    skipped, warnings, files, rollouts}``; ``checks`` are the evaluated checks' Results,
    ``skipped`` the skipped ones' (each also with ``reason``, its message). Strict: no
    string or boolean read as a number.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    schema_version: Annotated[int, Field(strict=True)] = SCHEMA_VERSION
    recipe: _Text
    run: _Text
    source_kind: StrictStr | None = None
    target_step: _Count | None = None
    passed: StrictBool
    checks: tuple[Result, ...]
    skipped: tuple[Result, ...] = ()
    warnings: tuple[StrictStr, ...] = ()
    files: tuple[StrictStr, ...] = ()
    rollouts: dict[str, Any] | None = None

    @field_validator("skipped", mode="before")
    @classmethod
    def _skip_entries(cls, value: Any) -> Any:
        """``{name, tier, reason}`` entries (every version wrote these keys) are SKIP Results."""
        if not isinstance(value, list | tuple):
            return value
        return [
            {"status": "skip", "message": item.get("reason", ""), **item}
            if isinstance(item, dict)
            else item
            for item in value
        ]

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``schema_version`` first, as ``core.io.write_json_atomic`` adds it)."""
        doc = self.model_dump(mode="json", exclude={"schema_version"})
        doc["skipped"] = [{**s, "reason": s["message"]} for s in doc["skipped"]]
        return doc


@dataclass(frozen=True, slots=True)
class GateReport:
    """Results of a whole plan on one set of inputs: evaluated checks, then skipped ones."""

    plan: GatePlan
    inputs: GateInputs
    results: tuple[Result, ...]
    skipped: tuple[Result, ...] = ()

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
            source_kind=run.kind.value,
            target_step=self.plan.context.target_step,
            passed=self.passed,
            checks=self.results,
            skipped=self.skipped,
            warnings=tuple(self.warnings),
            files=tuple(str(f) for f in run.files),
            rollouts=self.inputs.rollouts.summary() if self.inputs.rollouts else None,
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
    and ``rlgate.run_dir``; each warning is a suite property ``rlgate.warning``. Names,
    messages and values may come from untrusted input: :mod:`rlgate.core.junit` writes them
    XML-safe, control characters visible.
    """
    recipe, run_dir = report.plan.recipe, str(report.inputs.run.source)
    cases = [
        JunitCase.of(
            r,
            classname=f"rlgate.{r.tier.value}.{recipe}",
            facts={"recipe": recipe, "run_dir": run_dir},
        )
        for r in (*report.results, *report.skipped)
    ]
    suite = JunitSuite.of(
        f"rlgate.check-run.{recipe}", cases, [("rlgate.warning", w) for w in report.warnings]
    )
    return write_junit([suite])
