"""The check_metrics condition language (rlgate.recipe.conditions, never eval'd) and its reducers
(rlgate.checks.conditions).

The evaluator is cross-checked against ``reference_*`` below: a re-implementation written
from check_metrics' *documented* semantics (shared/reference/nemo-rl.md §1.5: steps are
1-indexed, ``range_end`` exclusive, ``0`` = through the last step, negative bounds count
from the end and are relative to the last step so resumed runs work, ``ratio_above`` counts
values >= the threshold, ``ignore_top_p`` drops the top fraction) -- not with the upstream
code, which cannot be imported here.
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgate.checks.conditions import evaluate_condition
from rlgate.core.errors import RecipeError
from rlgate.core.results import Outcome, Result, Tier
from rlgate.recipe.conditions import (
    ConditionSyntaxError,
    Op,
    Reducer,
    SeriesCall,
    StepIndex,
    parse_condition,
)
from rlgate.runs.metrics import (
    MetricSeries,
    RunMetrics,
    SourceKind,
    load_mlperf_log,
    to_metrics_json,
)

MLPERF = Path(
    os.environ.get(
        "RLGATE_MLPERF_DIR", Path(__file__).parents[3] / "shared" / "mlperf-qwen35-grpo-rcp"
    )
)


def make_run(data: dict[str, dict[int, float]]) -> RunMetrics:
    series = {
        tag: MetricSeries(
            tag,
            np.array(sorted(points), dtype=np.int64),
            np.array([points[s] for s in sorted(points)], dtype=float),
        )
        for tag, points in data.items()
    }
    return RunMetrics(Path("run"), SourceKind.METRICS_JSON, MappingProxyType(series))


# --- reference semantics (from the documentation, see the module docstring) ----------------


def reference_window(d: dict[str, float], start: int, end: int) -> list[float]:
    last = max(int(s) for s in d)
    lo = start if start >= 0 else last + 1 + start  # negative: counted back from the last step
    hi = end if end > 0 else last + 1 + end  # 0: through the last step (end is exclusive)
    return [v for s, v in d.items() if lo <= int(s) < hi]


def reference(func: str, d: dict[str, float], *args: float) -> float:
    if func == "min":
        return min(d.values())
    if func == "max":
        return max(d.values())
    if func == "ratio_above":
        vals = list(d.values())
        return sum(v >= args[0] for v in vals) / len(vals) if vals else 0.0
    start, end = (int(args[0]) if args else 1), (int(args[1]) if len(args) > 1 else 0)
    vals = reference_window(d, start, end)
    if func == "median":
        return statistics.median(vals)
    top_p = args[2] if len(args) > 2 else 0.0
    if top_p:
        keep = int(len(vals) * (1 - top_p))
        vals = sorted(vals)[: max(keep, 1)]
    return statistics.mean(vals)


# NeMo RL's real conditions (nemo-rl.md §1.7), as they appear in the suite scripts.
REAL_CONDITIONS = [
    (
        'median(data["train/token_mult_prob_error"]) < 1.1',
        Reducer.MEDIAN,
        "train/token_mult_prob_error",
    ),
    (
        "data['train/token_mult_prob_error']['$MAX_STEPS'] < 1.1",
        None,
        "train/token_mult_prob_error",
    ),
    ('mean(data["train/gen_kl_error"]) < 0.02', Reducer.MEAN, "train/gen_kl_error"),
    ('median(data["train/gen_kl_error"]) < 1.3', Reducer.MEDIAN, "train/gen_kl_error"),
    ('max(data["train/reward"]) > 0.0', Reducer.MAX, "train/reward"),
    ('mean(data["train/reward"]) > 0.50', Reducer.MEAN, "train/reward"),
    (
        'mean(data["timing/train/total_step_time"], -6, -1) < 300',
        Reducer.MEAN,
        "timing/train/total_step_time",
    ),
    ('data["train/token_mult_prob_error"]["10"] < 1.1', None, "train/token_mult_prob_error"),
    ('mean(data["train/grad_norm"], 2, 0) > 0.06', Reducer.MEAN, "train/grad_norm"),
    ('max(data["train/token_mult_prob_error"]) < 1.1', Reducer.MAX, "train/token_mult_prob_error"),
    ('data["train/reward"]["30"] > 0.43', None, "train/reward"),
    (
        'ratio_above(data["train/token_mult_prob_error"], 1.03) < 0.05',
        Reducer.RATIO_ABOVE,
        "train/token_mult_prob_error",
    ),
    ('min(data["refit/transfer/payloads"]) > 0', Reducer.MIN, "refit/transfer/payloads"),
    ('max(data["refit/delta/changed_pct"]) <= 5', Reducer.MAX, "refit/delta/changed_pct"),
    ('max(data["train/avg_trajectory_age"]) <= 2.0', Reducer.MAX, "train/avg_trajectory_age"),
    ('max(data["ray/node.0.gpu.0.mem_gb"]) < 70', Reducer.MAX, "ray/node.0.gpu.0.mem_gb"),
    (
        'data["train/mean_gen_tokens_per_sample"]["1"] > 2000',
        None,
        "train/mean_gen_tokens_per_sample",
    ),
    ('mean(data["train/loss"], ignore_top_p=0.05) < 1.5', Reducer.MEAN, "train/loss"),
]


class TestParseCondition:
    @pytest.mark.parametrize(
        ("text", "reducer", "tag"),
        REAL_CONDITIONS,
        ids=[f"real_{i}" for i in range(len(REAL_CONDITIONS))],
    )
    def test_parse_condition_accepts_nemo_rl_suite_conditions(
        self, text: str, reducer: Reducer | None, tag: str
    ) -> None:
        cond = parse_condition(text)
        assert cond.tag == tag
        if reducer is None:
            assert isinstance(cond.value, StepIndex)
        else:
            assert isinstance(cond.value, SeriesCall) and cond.value.reducer is reducer

    def test_parse_condition_reads_arguments_like_check_metrics(self) -> None:
        call = parse_condition(
            'mean(data["t"], -6, range_end=-1, ignore_top_p=0.05) >= -1e-3'
        ).value
        assert (call.range_start, call.range_end, call.ignore_top_p) == (-6, -1, 0.05)
        cond = parse_condition('ratio_above(data["t"], threshold=1.1) == 0')
        assert cond.value.above == 1.1 and cond.op is Op.EQ and cond.threshold == 0.0
        assert parse_condition('data["t"]["${MAX_STEPS}"] < 1').value.step is None

    @pytest.mark.parametrize(
        ("text", "column", "what"),
        [
            pytest.param('__import__("os").system("rm -rf /")', 1, "expected min/max", id="code"),
            pytest.param('median(data["t"]) < 1.1 and True', 25, "unexpected 'and'", id="and"),
            pytest.param("0.5 < 1", 1, "reads no metric", id="no_metric"),
            pytest.param('median(data["t"]) < 2 ** 3', 24, "expected a number", id="power"),
            pytest.param('abs(data["t"]["1"] < 1', 20, "expected ')'", id="unclosed"),
            pytest.param('median(data["t"]) < 1 < 2', 23, "unexpected '<'", id="chained"),
            pytest.param('medain(data["t"]) < 1', 1, "expected min/max", id="typo"),
            pytest.param(
                'median(data["t"], 1.5) < 1', 19, "range_start must be an integer", id="float_range"
            ),
            pytest.param(
                'median(data["t"], ignore_top_p=0.1) < 1', 19, "has no argument", id="bad_kwarg"
            ),
            pytest.param(
                'mean(data["t"], ignore_top_p=1.5) < 1', 17, "between 0.0 and 1.0", id="top_p"
            ),
            pytest.param('ratio_above(data["t"]) < 1', 1, "needs a threshold", id="no_threshold"),
            pytest.param('max(data["t"], 2) < 1', 16, "at most 0 extra", id="arity"),
            pytest.param('data["t"][10] < 1', 11, "quoted string", id="int_index"),
            pytest.param('data["t"]["$STEP"] < 1', 11, "unexpanded shell variable", id="shell_var"),
            pytest.param('median(data["t"]) <', 20, "expected a number", id="no_threshold_value"),
            pytest.param('median(data["t"]) ~ 1', 19, "unexpected character", id="bad_char"),
            pytest.param("median(data['t']) < 1 or 1", 23, "unexpected 'or'", id="or"),
        ],
    )
    def test_parse_condition_rejects_with_column(self, text: str, column: int, what: str) -> None:
        with pytest.raises(ConditionSyntaxError) as info:
            parse_condition(text)
        message = str(info.value)
        assert f"column {column}:" in message and what in message
        assert isinstance(info.value, RecipeError)  # a config error, exit code 2


class TestEvaluateCondition:
    RUN = make_run(
        {
            "train/token_mult_prob_error": {1: 1.01, 2: 1.02, 3: 1.2, 4: 1.03},
            "train/loss": {1: 0.5, 2: float("nan"), 3: 0.4, 4: 0.3},
            "ray/node.0.gpu.0.mem_gb": {0: 60.0, 10: 65.0, 20: 70.0},
        }
    )

    def evaluate(self, text: str, target: int | None = 4) -> Result:
        return evaluate_condition(parse_condition(text), self.RUN, name="c", target_step=target)

    def test_evaluate_condition_passes_and_fails_with_value(self) -> None:
        ok = self.evaluate('median(data["train/token_mult_prob_error"]) < 1.1')
        assert (
            ok.outcome is Outcome.PASS and ok.value == pytest.approx(1.025) and ok.bound == "< 1.1"
        )
        bad = self.evaluate('max(data["train/token_mult_prob_error"]) < 1.1')
        assert (
            bad.outcome is Outcome.FAIL
            and bad.value == pytest.approx(1.2)
            and "does not hold" in bad.message
        )
        assert ok.tier is Tier.CONVERGENCE

    def test_evaluate_condition_fails_on_nan_in_window_naming_the_step(self) -> None:
        res = self.evaluate('mean(data["train/loss"]) < 1')
        assert res.outcome is Outcome.FAIL and "nan at step 2" in res.message

    def test_evaluate_condition_ignores_nan_outside_the_window(self) -> None:
        assert self.evaluate('mean(data["train/loss"], 3, 0) < 1').outcome is Outcome.PASS

    @pytest.mark.parametrize(
        ("text", "target", "what"),
        [
            pytest.param('median(data["train/tmpe"]) < 1', 4, "not found", id="missing_metric"),
            pytest.param(
                'mean(data["train/loss"], 7, 9) < 1', 4, "empty window", id="empty_window"
            ),
            pytest.param('data["train/loss"]["9"] < 1', 4, "step 9 not logged", id="missing_step"),
            pytest.param(
                'data["train/loss"]["$MAX_STEPS"] < 1', None, "needs a target step", id="no_target"
            ),
            pytest.param(
                'mean(data["ray/node.0.gpu.0.mem_gb"], -2, 0) < 80', 4, "seconds", id="ray_window"
            ),
        ],
    )
    def test_evaluate_condition_errors_instead_of_passing(
        self, text: str, target: int | None, what: str
    ) -> None:
        res = self.evaluate(text, target)
        assert res.outcome is Outcome.ERROR and what in res.message and res.value is None

    def test_evaluate_condition_missing_metric_suggests_close_names(self) -> None:
        res = self.evaluate('median(data["train/token_mult_prob_eror"]) < 1')
        assert "did you mean 'train/token_mult_prob_error'" in res.message

    def test_evaluate_condition_uses_target_step_for_max_steps(self) -> None:
        res = self.evaluate("data['train/token_mult_prob_error']['$MAX_STEPS'] < 1.1")
        assert res.outcome is Outcome.PASS and res.value == pytest.approx(1.03)

    def test_evaluate_condition_allows_whole_series_on_gpu_monitor_tags(self) -> None:
        assert self.evaluate('max(data["ray/node.0.gpu.0.mem_gb"]) < 80').outcome is Outcome.PASS

    def test_check_result_to_json_keeps_json_valid_for_nan(self) -> None:
        res = self.evaluate('mean(data["train/loss"]) < 1')
        doc = res.to_json()
        assert doc["value"] == "nan" and doc["status"] == "fail" and doc["tier"] == "convergence"


steps_strategy = st.lists(st.integers(0, 60), min_size=1, max_size=30, unique=True)
values_strategy = st.floats(-1e3, 1e3, allow_nan=False)


class TestCheckMetricsSemantics:
    @settings(max_examples=300, deadline=None)
    @given(
        steps=steps_strategy,
        data=st.data(),
        func=st.sampled_from(["mean", "median"]),
        start=st.integers(-12, 12),
        end=st.integers(-12, 40),
        top_p=st.sampled_from([0.0, 0.1, 0.5, 0.99]),
    )
    def test_windowed_reducers_match_documented_semantics(
        self, steps, data, func, start, end, top_p
    ) -> None:
        values = data.draw(st.lists(values_strategy, min_size=len(steps), max_size=len(steps)))
        d = {str(s): v for s, v in zip(steps, values, strict=True)}
        run = make_run({"m": dict(zip(steps, values, strict=True))})
        args = f", {start}, {end}" + (f", ignore_top_p={top_p}" if func == "mean" and top_p else "")
        res = evaluate_condition(parse_condition(f'{func}(data["m"]{args}) < 0'), run, name="x")
        window = reference_window(d, start, end)
        if not window:
            assert res.outcome is Outcome.ERROR and "empty window" in res.message
            return
        expected = reference(func, d, start, end, top_p if func == "mean" else 0.0)
        assert res.value == pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert res.outcome is (Outcome.PASS if expected < 0 else Outcome.FAIL)

    @settings(max_examples=200, deadline=None)
    @given(
        steps=steps_strategy,
        data=st.data(),
        func=st.sampled_from(["min", "max", "ratio_above"]),
        thr=values_strategy,
    )
    def test_whole_series_reducers_match_documented_semantics(self, steps, data, func, thr) -> None:
        values = data.draw(st.lists(values_strategy, min_size=len(steps), max_size=len(steps)))
        assume(not math.isclose(thr, 0.0))
        d = {str(s): v for s, v in zip(steps, values, strict=True)}
        run = make_run({"m": dict(zip(steps, values, strict=True))})
        call = f'ratio_above(data["m"], {thr!r})' if func == "ratio_above" else f'{func}(data["m"])'
        res = evaluate_condition(parse_condition(f"{call} >= 0.5"), run, name="x")
        assert res.value == pytest.approx(reference(func, d, thr))

    def test_resumed_run_offsets_count_back_from_the_last_step(self) -> None:
        # A run resumed at step 11: steps 11..20 only. mean(-6, -1) is steps 15..19.
        run = make_run({"m": {s: float(s) for s in range(11, 21)}})
        res = evaluate_condition(parse_condition('mean(data["m"], -6, -1) < 100'), run, name="x")
        assert res.value == pytest.approx(17.0)


class TestRealConditionsOnRealRun:
    """check_metrics conditions on a real NeMo RL (MLPerf branch) run's metrics dict."""

    @pytest.fixture(scope="class")
    def real(self) -> tuple[RunMetrics, dict[str, dict[str, float]]]:
        path = MLPERF / "GBS256" / "seed_3.out"
        if not path.is_file():
            pytest.fail(
                f"MLPerf reference logs not found at {MLPERF} (set RLGATE_MLPERF_DIR)",
                pytrace=False,
            )
        run = load_mlperf_log(path)
        return run, to_metrics_json(run)

    @pytest.mark.parametrize(
        ("text", "status"),
        [
            pytest.param('max(data["train/reward"]) > 0.0', Outcome.PASS, id="reward_max_positive"),
            pytest.param('mean(data["train/reward"]) > 0.50', Outcome.FAIL, id="reward_mean_cispo"),
            pytest.param(
                'mean(data["timing/train/total_step_time"], -6, -1) < 300',
                Outcome.FAIL,
                id="step_time_tail",
            ),
            pytest.param(
                'mean(data["timing/train/total_step_time"], -6, -1) < 600',
                Outcome.PASS,
                id="step_time_tail_600",
            ),
            pytest.param(
                'mean(data["train/grad_norm"], 2, 0) > 0.06', Outcome.PASS, id="grad_norm_llama"
            ),
            pytest.param('data["train/reward"]["10"] > 0.43', Outcome.PASS, id="reward_at_10"),
            pytest.param(
                'data["train/reward"]["30"] > 0.43', Outcome.ERROR, id="reward_at_30_not_logged"
            ),
            pytest.param(
                'median(data["train/token_mult_prob_error"]) < 1.1',
                Outcome.ERROR,
                id="tmpe_not_logged",
            ),
            pytest.param(
                'ratio_above(data["timing/train/weight_sync"], 30) < 0.1',
                Outcome.PASS,
                id="ratio_above",
            ),
        ],
    )
    def test_real_condition_matches_reference(self, real, text: str, status: Outcome) -> None:
        run, data = real
        res = evaluate_condition(parse_condition(text), run, name="x", target_step=18)
        assert res.outcome is status, res.message
        cond = parse_condition(text)
        if status is not Outcome.ERROR and isinstance(cond.value, SeriesCall):
            call = cond.value
            args = (
                (call.above,)
                if call.reducer is Reducer.RATIO_ABOVE
                else (call.range_start, call.range_end, call.ignore_top_p)
            )
            assert res.value == pytest.approx(reference(call.reducer.value, data[call.tag], *args))
        elif status is not Outcome.ERROR:
            assert res.value == pytest.approx(data[cond.tag][str(cond.value.step)])
