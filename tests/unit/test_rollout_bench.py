"""Unit tests of rlgate.bench.rollout: sizing by the recipe, cluster shape, the gated numbers.

The timed paths themselves run in the perf tier (tests/perf/test_rollout_path.py, real
tokenizers); here the pure parts are checked on the real recipes and on one real
measurement (``rollout_measured``), never on timings taken during the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgate.bench.gate import compare_metrics
from rlgate.bench.rollout import (
    TIER_PARSER_LENGTHS,
    BenchConfig,
    ClusterShape,
    bench_config,
    bench_metrics,
    cluster_shape,
    growth_exponent,
    tier_config,
    tokenizer_unavailable,
)
from rlgate.core.errors import RecipeError, RlgateError
from rlgate.core.results import Outcome
from rlgate.recipe.load import load_recipe

from .helpers.rollout_measured import (
    GYM_MS,
    INCREMENTAL_MS,
    PROMPT_TOKENS,
    RENDER_MS,
    STREAMING_US,
    TOKENIZE_MS,
    measured_bench,
    parse_run,
)

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"
LONG = (
    RECIPES / "grpo-qwen3.5-35ba3b-16n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking-long.yaml"
)
THINKING = RECIPES / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
MLPERF = RECIPES / "reference" / "grpo-qwen3.5-397ba17b-64n4g-megatron-async-r2egym-mlperf.yaml"


class TestGrowthExponent:
    def test_growth_exponent_of_a_constant_cost_per_call_is_one(self):
        assert growth_exponent([2.5] * 50) == pytest.approx(1.0)

    def test_growth_exponent_of_a_cost_growing_with_the_turn_is_near_two(self):
        """Re-tokenizing a history that grows by a fixed amount per turn is quadratic."""
        assert 1.85 < growth_exponent([float(k) for k in range(1, 201)]) < 2.0

    def test_growth_exponent_of_the_measured_full_path(self):
        """A 9.4k-token opening dominates the first 24 turns: between linear and quadratic."""
        full = [r + t for r, t in zip(RENDER_MS, TOKENIZE_MS, strict=True)]
        assert 1.1 < growth_exponent(full) < 1.35
        assert 0.85 < growth_exponent(INCREMENTAL_MS[1:]) < 1.05


class TestBenchMetrics:
    def test_bench_metrics_names_every_gated_number(self):
        metrics = bench_metrics(measured_bench())
        lengths = [f"@{n}" for n in TIER_PARSER_LENGTHS]
        expected = {
            "prompt.full_exponent",
            "prompt.incremental_exponent",
            "prompt.full_us_per_token",
            "prompt.incremental_us_per_token",
            "gym.exponent",
            "gym.us_per_token",
            "parser.streaming_exponent",
            "parser.one_shot_exponent",
            *(f"parser.streaming_us_per_token{n}" for n in lengths),
            *(f"parser.one_shot_us_per_token{n}" for n in lengths),
        }
        assert set(metrics) == expected
        assert all(len(v) == 1 for v in metrics.values())

    def test_bench_metrics_costs_per_token(self):
        metrics = bench_metrics(measured_bench())
        full = sum(RENDER_MS) + sum(TOKENIZE_MS)
        assert metrics["prompt.full_us_per_token"][0] == pytest.approx(
            1e3 * full / sum(PROMPT_TOKENS)
        )
        added = PROMPT_TOKENS[-1] - PROMPT_TOKENS[0]
        assert metrics["prompt.incremental_us_per_token"][0] == pytest.approx(
            1e3 * sum(INCREMENTAL_MS[1:]) / added
        )
        assert metrics["gym.us_per_token"][0] == pytest.approx(
            1e3 * sum(GYM_MS) / sum(PROMPT_TOKENS[1:])
        )
        assert metrics["parser.streaming_us_per_token@1024"][0] == pytest.approx(STREAMING_US[2])

    def test_bench_metrics_one_sample_per_pass(self):
        metrics = bench_metrics(measured_bench(passes=3))
        assert all(len(v) == 3 for v in metrics.values())

    def test_bench_metrics_without_gym_has_no_gym_numbers(self):
        metrics = bench_metrics(measured_bench(gym=False))
        assert not any(name.startswith("gym.") for name in metrics)

    def test_bench_metrics_one_parser_length_fits_no_exponent(self):
        bench = measured_bench()
        run = parse_run()
        single = type(run)(run.tokens[:1], run.streaming_s[:1], run.one_shot_s[:1])
        config = BenchConfig(24, 100, 65536, (256,))
        one = type(bench)(**{**_fields(bench), "config": config, "parse_runs": (single,)})
        metrics = bench_metrics(one)
        assert "parser.streaming_exponent" not in metrics
        assert "parser.streaming_us_per_token@256" in metrics

    def test_bench_metrics_a_slower_path_fails_the_gate_against_the_measurement(self):
        """The measured numbers gate themselves: unchanged passes, 2x slower parsing fails."""
        baseline = bench_metrics(measured_bench(passes=3))
        slow = measured_bench(passes=3)
        slow = type(slow)(**{**_fields(slow), "parse_runs": (parse_run(2.0),) * 3})
        same = compare_metrics(bench_metrics(measured_bench(passes=3)), baseline)
        assert {v.outcome for v in same} == {Outcome.PASS}
        failed = {v.metric for v in compare_metrics(bench_metrics(slow), baseline)
                  if v.outcome is Outcome.FAIL}  # fmt: skip
        assert failed == {
            f"parser.{kind}_us_per_token@{n}"
            for kind in ("streaming", "one_shot")
            for n in TIER_PARSER_LENGTHS
        }


def _fields(bench):
    return {name: getattr(bench, name) for name in bench.__dataclass_fields__}


class TestBenchConfig:
    def test_bench_config_is_sized_by_the_recipe(self):
        config = bench_config(load_recipe(LONG))
        assert config == BenchConfig(200, 200, 131072, (1024, 4096, 16384))
        assert config.as_dict() == {
            "turns": 200,
            "agent_max_turns": 200,
            "max_total_sequence_length": 131072,
            "parser_lengths": [1024, 4096, 16384],
        }

    def test_bench_config_overrides_change_the_size(self):
        recipe = load_recipe(THINKING, ["policy.max_total_sequence_length=32768"])
        assert bench_config(recipe).max_total_tokens == 32768

    def test_tier_config_caps_turns_by_the_recipe(self):
        assert tier_config(load_recipe(THINKING)).turns == 24
        assert tier_config(load_recipe(MLPERF)).max_turns == 30

    @pytest.mark.parametrize(
        ("turns", "match"),
        [
            pytest.param(1, "between 2 and agent_max_turns=200, got 1", id="one_turn"),
            pytest.param(201, "between 2 and agent_max_turns=200, got 201", id="too_many"),
        ],
    )
    def test_bench_config_rejects_turns_outside_the_recipe(self, turns, match):
        with pytest.raises(RlgateError, match=match):
            bench_config(load_recipe(LONG), turns)

    @pytest.mark.parametrize(
        "lengths",
        [
            pytest.param((), id="none"),
            pytest.param((32, 1024), id="too_short"),
            pytest.param((1024, 1024), id="duplicate"),
        ],
    )
    def test_bench_config_rejects_bad_parser_lengths(self, lengths):
        with pytest.raises(RecipeError, match="parser lengths"):
            bench_config(load_recipe(LONG), None, lengths)

    def test_bench_config_without_a_gym_agent_is_an_error(self):
        recipe = load_recipe(THINKING, ["env.should_use_nemo_gym=false"])
        with pytest.raises(RecipeError, match="no Gym agent sets agent_max_turns"):
            bench_config(recipe)


class TestClusterShape:
    @pytest.mark.parametrize(
        ("path", "shape"),
        [
            pytest.param(LONG, ClusterShape(256, 768, 16), id="long_16_nodes"),
            pytest.param(THINKING, ClusterShape(64, 768, 4), id="thinking_4_nodes"),
            pytest.param(MLPERF, ClusterShape(256, 256, 24), id="mlperf_reference"),
        ],
    )
    def test_cluster_shape_reads_rollouts_concurrency_and_servers(self, path, shape):
        assert cluster_shape(load_recipe(path)) == shape


class TestTokenizerUnavailable:
    def test_tokenizer_unavailable_offline_names_the_missing_folder(self, tmp_path, monkeypatch):
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
        reason = tokenizer_unavailable(load_recipe(MLPERF), tmp_path)
        assert reason is not None and "qwen3.5-397b-a17b/" in reason

    def test_tokenizer_unavailable_is_none_with_a_local_folder(self, tmp_path, monkeypatch):
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        (tmp_path / "qwen3.5-397b-a17b").mkdir()
        assert tokenizer_unavailable(load_recipe(MLPERF), tmp_path) is None

    def test_tokenizer_unavailable_is_none_when_the_hub_is_reachable(self, tmp_path, monkeypatch):
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        assert tokenizer_unavailable(load_recipe(MLPERF), tmp_path) is None
