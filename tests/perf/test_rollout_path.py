"""Perf tier, rollout path: the CPU cost a long agent rollout pays per turn, on real components.

Run: ``pytest -m perf tests/perf/test_rollout_path.py --tokenizers DIR
[--benchmark-json out.json] [--junitxml out.xml]``. No run directory is needed: every recipe
that lists the perf tier (or each ``--recipe``) is served with its real tokenizer, template,
vLLM parsers and nemo-gym code, and a trajectory replayed from nemo-gym's shipped SWE
rollouts, sized by the recipe, goes through it (``rlgate.bench.rollout``).

* ``test_prompt_preparation``, ``test_gym_conversion``, ``test_parsing``: pytest-benchmark
  benchmarks, ``TIER_REPEATS`` rounds after an untimed warm-up; the numbers (totals, ratio,
  growth exponents, parser cost per token) go to ``benchmark.extra_info`` and JUnit.
* ``test_trajectory_fills_the_recipe_context``: the replayed trajectory is sized by the
  recipe (a sizing bug would make every number meaningless).
* ``test_rollout_metric_within_baseline[<recipe>-<metric>]``: one gate per metric against
  ``$RLGATE_ROLLOUT_BASELINES/<environment key>.json`` (e.g. the stored
  ``benchmarks/rollout_baselines``), tolerance from the baseline's measured noise. It is a
  CPU-time comparison, so it runs only where it is asked for (a dedicated perf runner sets
  ``RLGATE_ROLLOUT_BASELINES``); elsewhere, and without a baseline for this environment, the
  gate is skipped with the reason and how to record one. The default suite holds no timed
  assertion.

A recipe whose tokenizer cannot load offline is skipped with the reason (decided at
collection); a recipe or tokenizer that fails to load is an error of its tests.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rlgate.bench.gate import compare_metric, environment, environment_key, load_baseline
from rlgate.bench.parsing import ParseRun
from rlgate.bench.rollout import (
    TIER_REPEATS,
    BenchInputs,
    GymRun,
    PromptRun,
    bench_metrics,
    collect_bench,
    gym_pass,
    parse_pass,
    prepare_bench,
    prompt_pass,
    tier_config,
    tokenizer_unavailable,
    warm_up,
)
from rlgate.core.errors import MetricsError, RlgateError
from rlgate.core.results import Outcome
from rlgate.recipe.load import load_recipe, recipe_files, recipe_tiers
from rlgate.serving.setup import serving_setup

REPO = Path(__file__).resolve().parents[2]
BASELINE_ENV = "RLGATE_ROLLOUT_BASELINES"
OPT_IN_HINT = (
    f"the CPU-time gate runs on a dedicated perf runner: set {BASELINE_ENV}="
    "benchmarks/rollout_baselines (or a folder of your own baselines)"
)
RECORD_HINT = "record one with: python benchmarks/bench_rollout_path.py --record"
_load = functools.cache(load_recipe)  # collection loads each recipe once


def _selected(config: pytest.Config) -> list[Path]:
    chosen = config.getoption("recipe") or []
    if chosen:
        return [Path(p) for p in chosen]
    return [p for p in recipe_files(REPO / "recipes") if "perf" in recipe_tiers(p)]


def _recipe_params(config: pytest.Config) -> list[Any]:
    root = config.getoption("tokenizers")
    params = []
    for path in _selected(config):
        try:
            reason = tokenizer_unavailable(_load(path), root)
        except RlgateError:
            reason = None  # the fixture reports the broken recipe as an error
        marks = [pytest.mark.skip(reason=f"{path.stem}: {reason}")] if reason else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@dataclass(frozen=True, slots=True)
class GateCase:
    """One gated metric of one recipe, with its baseline samples (or why there are none)."""

    recipe_path: Path
    metric: str
    baseline: tuple[float, ...]
    error: str | None = None


def _gate_params(config: pytest.Config, recipes: list[Any]) -> list[Any]:
    folder = os.environ.get(BASELINE_ENV)
    if not folder:
        mark = pytest.mark.skip(reason=OPT_IN_HINT)
        return [pytest.param(GateCase(Path(), "", ()), id="not_requested", marks=mark)]
    env = environment()
    path = Path(folder) / f"{environment_key(env)}.json"
    try:
        baseline = load_baseline(path) if path.is_file() else None
        if baseline is not None:
            baseline.require_environment(env)
    except MetricsError as exc:
        case = GateCase(Path(), "baseline", (), error=str(exc))
        return [pytest.param(case, id="baseline_error")]
    params = []
    for param in recipes:
        recipe_path: Path = param.values[0]
        if param.marks:  # tokenizer unavailable: the benchmarks already say so
            continue
        stem = recipe_path.stem
        if baseline is None:
            why = f"no stored rollout-path baseline for this environment ({path.name}); "
            mark = pytest.mark.skip(reason=why + RECORD_HINT)
            params.append(
                pytest.param(GateCase(recipe_path, "", ()), id=f"{stem}-no_baseline", marks=mark)
            )
            continue
        try:
            entry = baseline.entry(stem, tier_config(_load(recipe_path)).as_dict())
        except RlgateError as exc:
            case = GateCase(recipe_path, "recipe", (), error=str(exc))
            params.append(pytest.param(case, id=f"{stem}-recipe_error"))
            continue
        if entry is None:
            why = f"{path.name} has no entry for {stem} at the tier configuration; "
            mark = pytest.mark.skip(reason=why + RECORD_HINT)
            params.append(
                pytest.param(GateCase(recipe_path, "", ()), id=f"{stem}-no_baseline", marks=mark)
            )
            continue
        for metric, samples in entry.metrics.items():
            case = GateCase(recipe_path, metric, samples)
            params.append(pytest.param(case, id=f"{stem}-{metric}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    recipes = _recipe_params(metafunc.config)
    if "rollout_recipe" in metafunc.fixturenames:
        metafunc.parametrize("rollout_recipe", recipes)
    if "gate_case" in metafunc.fixturenames:
        metafunc.parametrize("gate_case", _gate_params(metafunc.config, recipes))
    if "cli_recipe" in metafunc.fixturenames:  # one recipe is enough for the CLI
        usable = [p for p in recipes if not p.marks] or recipes[:1]
        metafunc.parametrize("cli_recipe", usable[:1])


# --- measurement (once per recipe per session) -------------------------------------------------

_INPUTS: dict[Path, BenchInputs | Exception] = {}
_RUNS: dict[Path, dict[str, list[Any]]] = {}


def _inputs(recipe_path: Path, config: pytest.Config) -> BenchInputs:
    if recipe_path not in _INPUTS:
        logging.getLogger("vllm").setLevel(logging.CRITICAL)
        try:
            recipe = load_recipe(recipe_path)
            setup = serving_setup(recipe, config.getoption("tokenizers"))
            inputs = prepare_bench(setup, tier_config(recipe))
            warm_up(inputs)
            _INPUTS[recipe_path] = inputs
        except Exception as exc:  # reported by every test of the recipe, computed once
            _INPUTS[recipe_path] = exc
    cached = _INPUTS[recipe_path]
    if isinstance(cached, Exception):
        raise cached
    return cached


@pytest.fixture
def inputs(rollout_recipe: Path, request: pytest.FixtureRequest) -> BenchInputs:
    """Prepared, warmed-up bench inputs of one recipe (errors here are test errors)."""
    return _inputs(rollout_recipe, request.config)


def _runs(recipe_path: Path, kind: str) -> list[Any]:
    return _RUNS.setdefault(recipe_path, {}).setdefault(kind, [])


def _measured(recipe_path: Path, config: pytest.Config) -> dict[str, tuple[float, ...]]:
    """Metric samples of a recipe: the benchmarks' rounds, or measured now if they did not run."""
    inputs = _inputs(recipe_path, config)
    passes = {"prompt": prompt_pass, "gym": gym_pass, "parse": parse_pass}
    for kind, measure in passes.items():
        runs = _runs(recipe_path, kind)
        while len(runs) < TIER_REPEATS:
            runs.append(measure(inputs))
    got = _RUNS[recipe_path]
    return bench_metrics(collect_bench(inputs, got["prompt"], got["gym"], got["parse"]))


# --- benchmarks --------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _metrics(inputs: BenchInputs, **runs: list[Any]) -> dict[str, float]:
    bench = collect_bench(
        inputs, runs.get("prompt", []), runs.get("gym", []), runs.get("parse", [])
    )
    return {name: _median(list(samples)) for name, samples in bench_metrics(bench).items()}


class _Rounds:
    """What runs when pytest-benchmark is not loaded: the same rounds, no statistics table."""

    def __init__(self) -> None:
        self.extra_info: dict[str, Any] = {}

    def pedantic(self, target: Any, *, rounds: int = 1, **_: Any) -> None:
        for _ in range(rounds):
            target()


@pytest.fixture
def bench(request: pytest.FixtureRequest) -> Any:
    """pytest-benchmark's ``benchmark`` fixture when the plugin is loaded, else plain rounds."""
    try:
        return request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:
        return _Rounds()


def _record(bench: Any, gate_record: Any, facts: dict[str, Any]) -> None:
    bench.extra_info.update(facts)
    gate_record(**facts)


@pytest.mark.benchmark  # informational: never the perf tier's gate check
def test_prompt_preparation(
    rollout_recipe: Path, inputs: BenchInputs, bench: Any, gate_record: Any
) -> None:
    runs: list[PromptRun] = _runs(rollout_recipe, "prompt")
    runs.clear()
    bench.pedantic(lambda: runs.append(prompt_pass(inputs)), rounds=TIER_REPEATS)
    metrics = _metrics(inputs, prompt=runs)
    full = _median([sum(r.full_ms) for r in runs]) / 1e3
    incremental = _median([sum(r.incremental_ms) for r in runs]) / 1e3
    facts = {
        "recipe": rollout_recipe.stem,
        "turns": len(inputs.trajectory.calls),
        "final_prompt_tokens": runs[0].prompt_tokens[-1],
        "full_total_s": full,
        "incremental_total_s": incremental,
        "ratio": full / incremental,
        "full_exponent": metrics["prompt.full_exponent"],
        "incremental_exponent": metrics["prompt.incremental_exponent"],
        "full_us_per_token": metrics["prompt.full_us_per_token"],
        "mismatched_turns": len(runs[0].mismatched_turns),
    }
    _record(bench, gate_record, facts)


@pytest.mark.benchmark  # informational: never the perf tier's gate check
def test_gym_conversion(
    rollout_recipe: Path, inputs: BenchInputs, bench: Any, gate_record: Any
) -> None:
    if inputs.gym is None:
        pytest.skip(f"{rollout_recipe.stem} does not use NeMo Gym (env.should_use_nemo_gym)")
    runs: list[GymRun] = _runs(rollout_recipe, "gym")
    runs.clear()
    bench.pedantic(lambda: runs.append(gym_pass(inputs)), rounds=TIER_REPEATS)
    metrics = _metrics(inputs, gym=runs)
    facts = {
        "recipe": rollout_recipe.stem,
        "gym_total_s": _median([sum(r.ms) for r in runs]) / 1e3,
        "gym_exponent": metrics["gym.exponent"],
        "gym_us_per_token": metrics["gym.us_per_token"],
    }
    _record(bench, gate_record, facts)


@pytest.mark.benchmark  # informational: never the perf tier's gate check
def test_parsing(rollout_recipe: Path, inputs: BenchInputs, bench: Any, gate_record: Any) -> None:
    runs: list[ParseRun] = _runs(rollout_recipe, "parse")
    runs.clear()
    bench.pedantic(lambda: runs.append(parse_pass(inputs)), rounds=TIER_REPEATS)
    metrics = _metrics(inputs, parse=runs)
    facts: dict[str, Any] = {"recipe": rollout_recipe.stem}
    facts.update({name.removeprefix("parser."): value for name, value in metrics.items()})
    _record(bench, gate_record, facts)


def test_trajectory_fills_the_recipe_context(rollout_recipe: Path, inputs: BenchInputs) -> None:
    """Every turn adds about (max_total_sequence_length - opening) / agent_max_turns tokens.

    The replayed trajectory must be sized by the recipe: ``turns`` of its ``agent_max_turns``
    fill the same share of ``max_total_sequence_length`` (within one turn's budget), and a
    full-length trajectory would never exceed it.
    """
    traj, config = inputs.trajectory, inputs.config
    per_turn = (config.max_total_tokens - traj.prelude_tokens) / config.max_turns
    expected = traj.prelude_tokens + per_turn * config.turns
    assert len(traj.calls) == config.turns
    assert abs(traj.total_tokens - expected) <= per_turn, (
        f"{rollout_recipe.stem}: {config.turns} turns hold {traj.total_tokens} tokens, "
        f"expected {expected:.0f} +- {per_turn:.0f} "
        f"(max_total_sequence_length {config.max_total_tokens}, agent_max_turns "
        f"{config.max_turns}, opening {traj.prelude_tokens})"
    )


def test_parser_outputs_have_their_target_length(rollout_recipe: Path, inputs: BenchInputs) -> None:
    """The parser bench's outputs are the configured lengths (costs per token are per length)."""
    got = [len(ids) for _, ids in inputs.parser_outputs]
    for target, n in zip(inputs.config.parser_lengths, got, strict=True):
        assert abs(n - target) <= max(8, target // 50), (
            f"{rollout_recipe.stem}: parser outputs have {got} tokens, configured "
            f"{list(inputs.config.parser_lengths)}"
        )


# --- the regression gate --------------------------------------------------------------------------


@pytest.fixture
def current_samples(gate_case: GateCase, request: pytest.FixtureRequest) -> tuple[float, ...]:
    """This run's samples of the gated metric; a broken baseline or missing metric errors."""
    if gate_case.error is not None:
        pytest.fail(f"rlgate: {gate_case.error}", pytrace=False)
    metrics = _measured(gate_case.recipe_path, request.config)
    if gate_case.metric not in metrics:
        pytest.fail(
            f"rlgate: {gate_case.recipe_path.stem}: metric {gate_case.metric!r} of the baseline "
            f"was not measured (measured: {sorted(metrics)})",
            pytrace=False,
        )
    return metrics[gate_case.metric]


def test_rollout_metric_within_baseline(
    gate_case: GateCase, current_samples: tuple[float, ...], gate_record: Any
) -> None:
    result = compare_metric(gate_case.metric, current_samples, gate_case.baseline).result()
    gate_record(result, recipe=gate_case.recipe_path.stem)
    if result.outcome is Outcome.FAIL:
        pytest.fail(f"{gate_case.recipe_path.stem}: {result.message}", pytrace=False)


# --- the CLI, end to end -----------------------------------------------------------------------


def test_cli_bench_rollout_writes_json_and_gates_on_it(
    cli_recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture, pytestconfig: pytest.Config
) -> None:
    """``rlgate bench rollout`` measures, writes a JSON that is a baseline of its own
    configuration, and fails (exit 1, with the numbers) against a baseline ten times faster
    than this machine."""
    from rlgate.cli.app import main

    first = tmp_path / "first.json"
    args = ["bench", "rollout", "--recipe", str(cli_recipe), "--turns", "4"]
    args += ["--parser-lengths", "128", "256", "--repeats", "2"]
    args += ["--tokenizers", str(pytestconfig.getoption("tokenizers"))]
    assert main([*args, "--json", str(first)]) == 0
    summary = json.loads(first.read_text(encoding="utf-8"))
    assert summary["turns"] == 4 and len(summary["full_ms"]) == 4
    assert set(summary["parser_us_per_token"]) == {"128", "256"}
    fast = dict(summary)
    fast["metrics"] = {
        k: v if k.endswith("exponent") else [x / 10 for x in v]
        for k, v in summary["metrics"].items()
    }
    baseline = tmp_path / "fast.json"
    baseline.write_text(json.dumps(fast), encoding="utf-8")
    capsys.readouterr()
    gated = tmp_path / "gated.json"
    assert main([*args, "--baseline", str(baseline), "--json", str(gated)]) == 1
    out = capsys.readouterr().out
    assert "prompt.full_us_per_token:" in out and "-> FAIL" in out
    rows = {row["metric"]: row for row in json.loads(gated.read_text(encoding="utf-8"))["gate"]}
    assert rows["prompt.full_us_per_token"]["verdict"] == "fail"
