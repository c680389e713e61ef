"""Pytest glue shared by the convergence and perf tiers.

One testcase per planned check (:mod:`rlgate.checks.plan`), parametrized at collection time
from ``--recipe``; inputs come from ``--run-dir``, ``--baseline``, ``--rollouts``,
``--max-steps`` (and ``--band-run`` / ``--sync-run`` when the plugin registers them).

Outcomes map onto pytest as the style guide says: PASS passes; FAIL is an assertion
failure in the test body; ERROR (missing metric, target step not reached, unreadable run)
is raised from a fixture, so JUnit writes ``<error>``; a check whose input option was not
given, or that the recipe's config cannot log, is skipped with a reason naming it.
Each evaluated check's :class:`~rlgate.core.results.Result` goes to JUnit through
``gate_record`` (its ``rlgate.*`` properties, plus ``rlgate.recipe``, ``rlgate.run_dir``
and the recipe's cluster shape as ``rlgate.hardware``).

One evaluation serves both outputs: with ``--rlgate-json FILE`` the session also writes the
``rlgate check-run --json`` document (:class:`~rlgate.checks.document.RunDocument`) of the
checks it evaluated and skipped, so a nightly job never evaluates a run twice.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from rlgate.checks.plan import (
    GateInputs,
    GatePlan,
    GateReport,
    Need,
    PlannedCheck,
    evaluate_check,
    load_inputs,
    load_plan,
    skip_reason,
    skipped_result,
)
from rlgate.core.errors import RlgateError
from rlgate.core.results import Outcome, Result, Tier

__all__ = [
    "cached_plan",
    "check_result",
    "gate_inputs",
    "gate_plan",
    "parametrize_checks",
    "write_tier_json",
]

# the Results this session evaluated, by check name (for --rlgate-json)
_EVALUATED = pytest.StashKey[dict[str, Result]]()


def _opt(config: pytest.Config, name: str) -> Any:
    return config.getoption(name, default=None)  # None when the plugin does not register it


@lru_cache(maxsize=8)
def cached_plan(recipe: str, max_steps: int | None) -> GatePlan:
    """The recipe's plan, loaded once per session (and by the plugin's output guard)."""
    return load_plan(recipe, max_steps=max_steps)


def _plan_from(config: pytest.Config) -> GatePlan | None:
    recipes = _opt(config, "recipe") or []
    if not recipes or _opt(config, "run_dir") is None:
        return None
    if len(recipes) > 1:
        raise pytest.UsageError("the convergence and perf tiers take exactly one --recipe")
    return cached_plan(str(recipes[0]), _opt(config, "max_steps"))  # RlgateError: bad recipe


def _given(config: pytest.Config, plan: GatePlan) -> Callable[[Need], bool]:
    band = bool(_opt(config, "band_run")) or bool(plan.inputs.band_runs)
    have = {
        Need.RUN: True,
        Need.BASELINE: _opt(config, "baseline") is not None,
        Need.ROLLOUTS: _opt(config, "rollouts") is not None,
        Need.BAND: band,
        Need.SYNC: _opt(config, "sync_run") is not None,
    }
    return have.__getitem__


def parametrize_checks(metafunc: pytest.Metafunc, tier: Tier) -> None:
    """Parametrize ``planned`` over the recipe's checks of ``tier`` (or one skip)."""
    if "planned" not in metafunc.fixturenames:
        return
    try:
        plan = _plan_from(metafunc.config)
    except RlgateError:  # reported by the gate_plan fixture, so JUnit shows it as <error>
        metafunc.parametrize("planned", [pytest.param(None, id="recipe_error")])
        return
    if plan is None:
        missing = [
            o
            for o, key in (("--run-dir", "run_dir"), ("--recipe", "recipe"))
            if not _opt(metafunc.config, key)
        ]
        reason = (
            f"the {tier.value} tier needs {' and '.join(missing)} (a NeMo RL run and its recipe)"
        )
        metafunc.parametrize(
            "planned", [pytest.param(None, id="no_run", marks=pytest.mark.skip(reason=reason))]
        )
        return
    checks = plan.for_tier(tier)
    if not checks:
        reason = f"recipe {plan.recipe} declares no {tier.value} checks (rlgate.{tier.value})"
        metafunc.parametrize(
            "planned", [pytest.param(None, id="no_checks", marks=pytest.mark.skip(reason=reason))]
        )
        return
    given = _given(metafunc.config, plan)
    params = []
    for check in checks:
        why = skip_reason(check, given)
        marks = [pytest.mark.skip(reason=why)] if why else []
        params.append(pytest.param(check, id=check.name, marks=marks))
    metafunc.parametrize("planned", params)


@pytest.fixture(scope="session")
def gate_plan(pytestconfig: pytest.Config) -> GatePlan:
    """The recipe's plan; an invalid recipe errors every test of the tier (setup)."""
    try:
        plan = _plan_from(pytestconfig)
    except RlgateError as exc:
        pytest.fail(f"rlgate: invalid recipe: {exc}", pytrace=False)
    if plan is None:  # pragma: no cover - parametrization skipped every test already
        pytest.fail("no --recipe/--run-dir", pytrace=False)
    return plan


@lru_cache(maxsize=4)
def _inputs(
    recipe: str,
    max_steps: int | None,
    run: str,
    baseline: str | None,
    rollouts: str | None,
    band: tuple[str, ...],
    sync: str | None,
) -> GateInputs:
    return load_inputs(
        cached_plan(recipe, max_steps),
        run,
        baseline=baseline,
        rollouts=rollouts,
        band_runs=band,
        sync_run=sync,
    )


def _given_paths(config: pytest.Config) -> dict[str, Any]:
    def path(name: str) -> str | None:
        value = _opt(config, name)
        return str(value) if value is not None else None

    return {
        "recipe": str(_opt(config, "recipe")[0]),
        "max_steps": _opt(config, "max_steps"),
        "run": str(_opt(config, "run_dir")),
        "baseline": path("baseline"),
        "rollouts": path("rollouts"),
        "band": tuple(str(p) for p in _opt(config, "band_run") or ()),
        "sync": path("sync_run"),
    }


@pytest.fixture(scope="session")
def gate_inputs(pytestconfig: pytest.Config, gate_plan: GatePlan) -> GateInputs:
    """Load the run and the optional inputs once; unreadable input errors every test."""
    try:
        return _inputs(*_given_paths(pytestconfig).values())
    except RlgateError as exc:
        pytest.fail(f"rlgate: cannot load the inputs: {exc}", pytrace=False)


@pytest.fixture
def check_result(
    request: pytest.FixtureRequest,
    planned: PlannedCheck,
    gate_plan: GatePlan,
    gate_inputs: GateInputs,
    gate_record: Callable[..., None],
) -> Result:
    """Evaluate one planned check; ERROR fails here (setup), so JUnit shows ``<error>``."""
    result = evaluate_check(gate_plan, planned, gate_inputs)
    # as check-run's JUnit states them (hardware, block_on_drift), for rlgate triage
    shape = gate_plan.context.cluster.shape
    facts = gate_plan.junit_facts(str(Path(gate_inputs.run.source)), shape)
    gate_record(result, **facts)
    request.config.stash.setdefault(_EVALUATED, {})[result.name] = result
    if result.outcome is Outcome.ERROR:
        pytest.fail(f"ERROR {result.name}: {result.message}", pytrace=False)
    return result


def write_tier_json(session: pytest.Session) -> None:
    """Write ``--rlgate-json``: the checks this session evaluated, and the ones it skipped.

    Written when at least one check was evaluated, as ``rlgate check-run --json`` would
    (it refuses a gate that judged nothing); never over one of the inputs.
    """
    from rlgate.core.io import write_json_atomic

    config = session.config
    evaluated = config.stash.get(_EVALUATED, {})
    if not evaluated:
        return
    plan = _plan_from(config)
    given = _given_paths(config)
    inputs = _inputs(*given.values())  # cached: loaded by the tests that evaluated
    selected = [
        item.callspec.params["planned"]
        for item in session.items
        if hasattr(item, "callspec") and item.callspec.params.get("planned") is not None
    ]
    has = _given(config, plan)
    results, skipped = [], []
    for check in (c for c in plan.checks if c in selected):
        if check.name in evaluated:
            results.append(evaluated[check.name])
        else:
            why = skip_reason(check, has) or f"{check.name} was not evaluated in this session"
            skipped.append(skipped_result(check, why))
    shape = plan.context.cluster.shape
    report = GateReport(plan, inputs, tuple(results), tuple(skipped), hardware=shape)
    paths = [p for k, p in given.items() if k not in ("max_steps", "band") and p]
    write_json_atomic(config.getoption("rlgate_json"), report.to_dict(), inputs=paths)
