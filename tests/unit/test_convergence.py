"""rlgate.convergence: completion, reward improvement, agentic health and data integrity.

Real inputs where they exist (the MLPerf runs, event files from SummaryWriter); small
explicit series where a property is easier to see that way.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from rlgate.checks.kinds.agentic import AgenticSpec, evaluate_agentic, evaluate_finite
from rlgate.checks.kinds.completion import CompletionSpec, evaluate_completion
from rlgate.checks.kinds.integrity import evaluate_integrity
from rlgate.checks.kinds.reward import (
    RewardSpec,
    RewardTest,
    evaluate_reward_improvement,
    evaluate_reward_positive,
)
from rlgate.core.results import Outcome
from rlgate.recipe.facts import RunContext
from rlgate.runs.metrics import MetricSeries, RunMetrics, SourceKind, StepAnomaly
from rlgate.testing.perturb import flatten_series

from .helpers.mlperf_runs import BATCH_SIZES, SEEDS, mlperf_plan, mlperf_run

TURNS = "train/turns_per_sample"


def make_run(data: dict[str, list[float] | dict[int, float]], **kw) -> RunMetrics:
    series = {}
    for tag, points in data.items():
        pts = points if isinstance(points, dict) else dict(enumerate(points, start=1))
        series[tag] = MetricSeries(
            tag, np.array(sorted(pts), np.int64), np.array([pts[s] for s in sorted(pts)], float)
        )
    return RunMetrics(
        Path("run"), kw.pop("kind", SourceKind.METRICS_JSON), MappingProxyType(series), **kw
    )


CTX = RunContext(
    "r", target_step=10, agent_max_turns=50, max_total_sequence_length=1000, max_model_len=2000
)


class TestCompletion:
    def test_completion_passes_when_the_target_step_is_reached(self) -> None:
        res = evaluate_completion(make_run({"train/loss": [0.1] * 10}), CTX, CompletionSpec())
        assert res.outcome is Outcome.PASS and res.value == 10
        assert res.bound == ">= 10" and res.message == "reached step 10 (target 10)"

    def test_completion_errors_when_the_run_stopped_early(self) -> None:
        """NeMo RL's suite scripts skip their checks and exit 0 here; rlgate must not."""
        res = evaluate_completion(make_run({"train/loss": [0.1] * 6}), CTX, CompletionSpec())
        assert (
            res.outcome is Outcome.ERROR
            and "stopped at step 6, target step 10 not reached" in res.message
        )

    def test_completion_ignores_gpu_monitor_seconds(self) -> None:
        run = make_run(
            {"train/loss": [0.1] * 6, "ray/node.0.gpu.0.util": {0: 1.0, 600: 1.0, 6000: 1.0}}
        )
        assert evaluate_completion(run, CTX, CompletionSpec()).outcome is Outcome.ERROR

    def test_completion_accepts_nemo_rl_validation_early_stop(self) -> None:
        ctx = RunContext("r", target_step=10, stop_metric="pass_k", stop_threshold=0.69)
        run = make_run({"train/loss": [0.1] * 6, "validation/pass_k": {0: 0.5, 6: 0.7}})
        res = evaluate_completion(run, ctx, CompletionSpec())
        assert res.outcome is Outcome.PASS and "validation/pass_k = 0.7 >= 0.69" in res.message
        assert res.message.startswith("stop threshold reached at step 6 (early stop, max 10): ")
        assert (res.value, res.threshold, res.bound) == (6, 10, "early stop on success")
        below = make_run({"train/loss": [0.1] * 6, "validation/pass_k": {0: 0.5, 6: 0.6}})
        assert evaluate_completion(below, ctx, CompletionSpec()).outcome is Outcome.ERROR

    @pytest.mark.parametrize("gbs", BATCH_SIZES, ids=[f"gbs{g}" for g in BATCH_SIZES])
    def test_completion_accepts_every_mlperf_run_stopped_on_success(self, gbs: int) -> None:
        plan = mlperf_plan(gbs)
        for seed in SEEDS:
            res = evaluate_completion(mlperf_run(gbs, seed), plan.context, CompletionSpec())
            assert res.outcome is Outcome.PASS and "run_stop status=success" in res.message
            reached, target = int(res.value), plan.context.target_step
            if reached < target:
                said = f"target accuracy reached at step {reached} (early stop, max {target}): "
                assert res.message.startswith(said) and res.bound == "early stop on success"
            else:
                assert res.bound == f">= {target}", res.message

    def test_completion_errors_on_an_aborted_mlperf_run(self) -> None:
        # the evaluation at step 7 proves step 7 was trained (its train stats are not logged)
        run = make_run(
            {"train/loss": [0.1] * 6},
            kind=SourceKind.MLPERF_LOG,
            metadata={"run_status": "aborted", "eval_steps": (7,)},
        )
        res = evaluate_completion(run, CTX, CompletionSpec())
        assert res.outcome is Outcome.ERROR and "status=aborted" in res.message and res.value == 7

    def test_completion_without_target_or_metric_is_an_error(self) -> None:
        run = make_run({"train/loss": [0.1] * 10})
        assert evaluate_completion(run, RunContext("r"), CompletionSpec()).outcome is Outcome.ERROR
        assert evaluate_completion(make_run({}), CTX, CompletionSpec()).outcome is Outcome.ERROR


class TestRewardImprovement:
    @pytest.mark.parametrize("gbs", BATCH_SIZES, ids=[f"gbs{g}" for g in BATCH_SIZES])
    def test_reward_improvement_passes_every_mlperf_run_and_fails_it_flattened(
        self, gbs: int
    ) -> None:
        spec = mlperf_plan(gbs).gate.convergence.reward
        for seed in SEEDS:
            run = mlperf_run(gbs, seed)
            assert evaluate_reward_improvement(spec, run).outcome is Outcome.PASS
            assert (
                evaluate_reward_improvement(spec, flatten_series(run, "train/reward")).outcome
                is Outcome.FAIL
            )

    @pytest.mark.parametrize("test", list(RewardTest), ids=[t.value for t in RewardTest])
    def test_reward_improvement_tests_detect_a_rise_and_reject_noise(
        self, test: RewardTest
    ) -> None:
        rng = np.random.default_rng(0)
        rising = make_run(
            {"train/reward": list(0.2 + 0.01 * np.arange(30) + rng.normal(0, 0.02, 30))}
        )
        flat = make_run({"train/reward": list(0.3 + rng.normal(0, 0.02, 30))})
        spec = RewardSpec(test=test, min_improvement=0.05)
        assert evaluate_reward_improvement(spec, rising).outcome is Outcome.PASS
        assert evaluate_reward_improvement(spec, flat).outcome is Outcome.FAIL

    def test_reward_improvement_requires_the_minimum_gain(self) -> None:
        run = make_run({"train/reward": list(0.3 + 0.001 * np.arange(40))})  # significant but tiny
        res = evaluate_reward_improvement(RewardSpec(min_improvement=0.05), run)
        assert res.outcome is Outcome.FAIL and res.value == pytest.approx(0.039)

    @pytest.mark.parametrize(
        ("values", "status", "what"),
        [
            pytest.param([0.3, 0.4], Outcome.ERROR, "need >= 3", id="too_short"),
            pytest.param([0.3, float("nan"), 0.4, 0.5], Outcome.FAIL, "nan at step 2", id="nan"),
            pytest.param([0.3] * 10, Outcome.FAIL, "constant", id="constant"),
        ],
    )
    def test_reward_improvement_never_passes_unusable_series(
        self, values, status: Outcome, what: str
    ) -> None:
        res = evaluate_reward_improvement(RewardSpec(), make_run({"train/reward": values}))
        assert res.outcome is status and what in res.message

    def test_reward_max_positive_is_nemo_rl_condition(self) -> None:
        assert (
            evaluate_reward_positive(RewardSpec(), make_run({"train/reward": [0.0] * 5})).outcome
            is Outcome.FAIL
        )
        assert (
            evaluate_reward_positive(RewardSpec(), make_run({"train/reward": [0.0, 0.1]})).outcome
            is Outcome.PASS
        )


class TestAgentic:
    def quantiles(
        self, median: float, p95: float, p99: float, minimum: float = 3.0, n: int = 10
    ) -> dict:
        return {
            f"{TURNS}/min": [minimum] * n,
            f"{TURNS}/median": [median] * n,
            f"{TURNS}/p95": [p95] * n,
            f"{TURNS}/p99": [p99] * n,
        }

    @pytest.mark.parametrize(
        ("median", "p95", "p99", "share"),
        [(20, 40, 47, 0.0), (20, 40, 50, 0.01), (20, 50, 50, 0.05), (50, 50, 50, 0.5)],
        ids=["none_at_max", "p99_at_max", "p95_at_max", "median_at_max"],
    )
    def test_max_turns_share_is_a_lower_bound_from_quantiles(self, median, p95, p99, share) -> None:
        run = make_run(self.quantiles(median, p95, p99))
        res = evaluate_agentic("max_turns_share", AgenticSpec(max_turns_share=0.3), run, CTX)
        assert res.value == pytest.approx(share)
        assert res.outcome is (Outcome.FAIL if share > 0.3 else Outcome.PASS)

    def test_max_turns_share_without_agent_max_turns_is_an_error(self) -> None:
        run = make_run(self.quantiles(20, 40, 47))
        res = evaluate_agentic(
            "max_turns_share", AgenticSpec(max_turns_share=0.3), run, RunContext("r")
        )
        assert res.outcome is Outcome.ERROR and "agent_max_turns unknown" in res.message

    @pytest.mark.parametrize(
        ("name", "tag", "values", "spec", "status"),
        [
            pytest.param(
                "truncation_rate",
                "train/truncation_rate",
                [0.01, 0.3],
                {"truncation_rate": 0.1},
                Outcome.FAIL,
                id="truncation",
            ),
            pytest.param(
                "natural_termination_rate",
                "train/natural_termination_rate",
                [0.99, 0.97],
                {"natural_termination_rate": 0.9},
                Outcome.PASS,
                id="natural",
            ),
            pytest.param(
                "turns_mean",
                f"{TURNS}/mean",
                [48.0, 49.0],
                {"turns_mean": 40},
                Outcome.FAIL,
                id="turns",
            ),
            pytest.param(
                "tool_call_failure_rate",
                "train/invalid_tool_call_rate",
                [0.01, 0.02],
                {"tool_call_failure_rate": 0.05},
                Outcome.PASS,
                id="tool_calls",
            ),
            pytest.param(
                "total_tokens_max",
                "train/total_tokens_per_sample/max",
                [900.0, 1001.0],
                {},
                Outcome.FAIL,
                id="tokens_over_limit",
            ),
        ],
    )
    def test_agentic_bounds(self, name, tag, values, spec, status) -> None:
        res = evaluate_agentic(name, AgenticSpec(**spec), make_run({tag: values}), CTX)
        assert res.outcome is status, res.message

    def test_total_tokens_max_without_limits_is_an_error(self) -> None:
        run = make_run({"train/total_tokens_per_sample/max": [10.0]})
        assert (
            evaluate_agentic("total_tokens_max", AgenticSpec(), run, RunContext("r")).outcome
            is Outcome.ERROR
        )


class TestFiniteAndIntegrity:
    def test_finite_fails_on_nan_loss_naming_the_step(self) -> None:
        res = evaluate_finite(
            "train/loss", make_run({"train/loss": [0.1, float("inf"), float("nan")]})
        )
        assert res.outcome is Outcome.FAIL and res.value == 2 and "inf at step 2" in res.message

    def test_finite_errors_when_the_metric_is_missing(self) -> None:
        assert evaluate_finite("train/loss", make_run({})).outcome is Outcome.ERROR

    def test_integrity_fails_on_steps_going_backwards(self) -> None:
        run = make_run({"train/loss": [0.1]}, anomalies=(StepAnomaly("train/loss", "f", 3, 9),))
        res = evaluate_integrity(run)
        assert res.outcome is Outcome.FAIL and "step 3 after 9" in res.message
        assert evaluate_integrity(make_run({"train/loss": [0.1]})).outcome is Outcome.PASS
