"""rlgate.recipe.spec and facts: the rlgate block validated, the run context from the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlgate.checks.kinds.band import BandMethod
from rlgate.checks.kinds.reward import RewardTest
from rlgate.checks.perf import Direction
from rlgate.checks.registry import parse_gate
from rlgate.core.errors import RecipeError
from rlgate.recipe.conditions import Op, Reducer, StepIndex
from rlgate.recipe.facts import context_from_config
from rlgate.recipe.load import load_recipe

from .helpers.mlperf_runs import RECIPE


def raw_gate(path: Path = RECIPE) -> dict:
    return yaml.safe_load(path.read_text())["rlgate"]


class TestParseGate:
    def test_parse_gate_accepts_the_reference_recipe(self) -> None:
        gate = parse_gate(raw_gate(), recipe="ref")
        conv = gate.convergence
        assert conv is not None and conv.reward is not None and conv.reward.test is RewardTest.TREND
        names = [name for name, _, _ in conv.named_conditions()]
        assert names == ["weight_sync_median", "weight_sync_trimmed_mean"]
        assert (
            gate.band is not None and gate.band.metrics["train/reward"].method is BandMethod.CURVE
        )
        assert (
            gate.perf is not None
            and gate.perf.metrics["timing/train/total_step_time"] is Direction.LOWER
        )

    def test_parse_gate_reads_the_functional_tier_keys(self) -> None:
        gate = parse_gate(
            {
                "tiers": ["functional"],
                "expect": "reject",
                "reject_reasons": ["x"],
                "functional": {"expect": "reject", "reject_codes": ["unknown-parser"]},
            },
            recipe="r",
        )
        assert gate.convergence is None and gate.perf is None
        assert gate.tiers == ("functional",)
        assert gate.functional.expect == "reject"
        assert gate.functional.reject_codes == ("unknown-parser",)

    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            pytest.param(
                {"functional": {"anything": {"goes": 1}}},
                "rlgate.functional.anything: unknown key",
                id="functional_unknown_key",
            ),
            pytest.param(
                {"functional": {"expect": "maybe"}},
                "rlgate.functional.expect: Input should be 'pass' or 'reject' (got 'maybe')",
                id="functional_expect",
            ),
            pytest.param(
                {"tiers": ["functional", "speed"]},
                "rlgate.tiers[1]: Input should be 'functional', 'convergence', 'perf' or "
                "'swe_gate' (got 'speed')",
                id="unknown_tier",
            ),
        ],
    )
    def test_parse_gate_validates_the_functional_tier_keys(self, raw, expected) -> None:
        """They used to be accepted unchecked here and validated only where a tier read them."""
        with pytest.raises(RecipeError) as info:
            parse_gate(raw, recipe="r")
        assert expected in str(info.value)

    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            pytest.param(
                {"convergence": {"chekcs": []}},
                "rlgate.convergence.chekcs: unknown key; did you mean 'checks'?",
                id="typo_block",
            ),
            pytest.param(
                {"perf": {"warmup": 3}},
                "rlgate.perf.warmup: unknown key; did you mean 'warmup_steps'?",
                id="typo_perf",
            ),
            pytest.param(
                {
                    "convergence": {
                        "checks": [
                            {
                                "name": "a",
                                "metric": "m",
                                "reducer": "median",
                                "op": "<",
                                "treshold": 1,
                            }
                        ]
                    }
                },
                "rlgate.convergence.checks[0].treshold: unknown key; did you mean 'threshold'?",
                id="typo_check",
            ),
            pytest.param(
                {
                    "convergence": {
                        "checks": [
                            {
                                "name": "a",
                                "metric": "m",
                                "reducer": "medain",
                                "op": "<",
                                "threshold": 1,
                            }
                        ]
                    }
                },
                "rlgate.convergence.checks[0].reducer: Input should be",
                id="bad_reducer",
            ),
            pytest.param(
                {
                    "convergence": {
                        "checks": [
                            {
                                "name": "a",
                                "metric": "m",
                                "reducer": "ratio_above",
                                "op": "<",
                                "threshold": 1,
                            }
                        ]
                    }
                },
                "'above' is required for reducer ratio_above",
                id="ratio_above_threshold",
            ),
            pytest.param(
                {"convergence": {"checks": [{"condition": "median(data['m']) < 1 and 1"}]}},
                "rlgate.convergence.checks[0].condition: condition",
                id="bad_condition",
            ),
            pytest.param(
                {
                    "convergence": {
                        "checks": [
                            {"name": "a", "condition": "max(data['m']) < 1"},
                            {"name": "a", "condition": "min(data['m']) > 0"},
                        ]
                    }
                },
                "duplicate check name 'a'",
                id="duplicate",
            ),
            pytest.param(
                {"band": {"metrics": ["train/reward"]}},
                "give each band metric a direction",
                id="band_list",
            ),
            pytest.param(
                {"band": {"min_runs": 2}},
                "rlgate.band.min_runs: Input should be greater than or equal to 3",
                id="band_min_runs",
            ),
        ],
    )
    def test_parse_gate_reports_every_problem_with_its_location(
        self, raw: dict, expected: str
    ) -> None:
        with pytest.raises(RecipeError) as info:
            parse_gate(raw, recipe="r")
        assert expected in str(info.value) and str(info.value).startswith(
            "recipe r: invalid rlgate block"
        )

    def test_parse_gate_rejects_a_non_mapping(self) -> None:
        with pytest.raises(RecipeError, match="rlgate must be a mapping"):
            parse_gate(["convergence"], recipe="r")  # type: ignore[arg-type]

    def test_typed_and_condition_checks_become_the_same_ast(self) -> None:
        gate = parse_gate(
            {
                "convergence": {
                    "checks": [
                        {
                            "name": "t",
                            "metric": "train/x",
                            "reducer": "mean",
                            "op": "<",
                            "threshold": 2,
                            "window": [-6, -1],
                        },
                        {"name": "c", "condition": 'mean(data["train/x"], -6, -1) < 2'},
                        {"name": "l", "condition": "data['train/x']['$MAX_STEPS'] < 2"},
                    ]
                }
            },
            recipe="r",
        )
        (_, typed, _), (_, cond, _), (_, last, _) = gate.convergence.named_conditions()
        assert typed.value == cond.value and typed.op is cond.op is Op.LT
        assert typed.value.reducer is Reducer.MEAN and isinstance(last.value, StepIndex)


class TestContextFromConfig:
    def test_context_from_the_reference_recipe(self) -> None:
        recipe = load_recipe(RECIPE)
        ctx = context_from_config(recipe.config, recipe=recipe.name, gate=parse_gate(recipe.gate))
        assert ctx.target_step == 30 and ctx.agent_max_turns == 30 and ctx.num_gpus == 256
        assert ctx.max_total_sequence_length == ctx.max_model_len == ctx.token_limit == 65536
        assert (ctx.stop_metric, ctx.stop_threshold) == ("pass_k", 0.69)
        assert not ctx.tool_call_metrics_logged

    def test_context_target_step_precedence(self) -> None:
        config = {"grpo": {"max_num_steps": 30}}
        gate = parse_gate({"convergence": {"target_step": 20}})
        assert context_from_config(config, recipe="r", gate=gate).target_step == 20
        assert context_from_config(config, recipe="r", gate=gate, max_steps=7).target_step == 7
        assert context_from_config(config, recipe="r", gate=parse_gate({})).target_step == 30

    @pytest.mark.parametrize(
        ("config", "max_steps", "match"),
        [
            pytest.param({"grpo": {"max_num_steps": 30}}, 0, "--max-steps must be", id="cli_zero"),
            pytest.param({"grpo": {"max_num_steps": 30}}, -3, "--max-steps must be", id="cli_neg"),
            pytest.param({"grpo": {"max_num_steps": 0}}, None, "= 0 is not a positive", id="cfg0"),
            pytest.param({"grpo": {"max_num_steps": -5}}, None, "= -5 is not a pos", id="cfg_neg"),
        ],
    )
    def test_context_refuses_a_non_positive_target_step(self, config, max_steps, match) -> None:
        """--max-steps 0 used to be ignored (falsy) and a 0 target passed any run."""
        with pytest.raises(RecipeError, match=match):
            context_from_config(config, recipe="r", gate=parse_gate({}), max_steps=max_steps)

    def test_context_prefers_the_training_agent_and_skips_unresolved_values(self) -> None:
        config = {
            "env": {
                "nemo_gym": {
                    "swe_agents_val": {
                        "responses_api_agents": {"swe_agents": {"agent_max_turns": 200}}
                    },
                    "swe_agents_train": {
                        "responses_api_agents": {"swe_agents": {"agent_max_turns": 100}}
                    },
                }
            },
            "policy": {
                "max_total_sequence_length": "${oc.env:SEQ}",
                "generation": {"vllm_cfg": {"max_model_len": 8192}},
            },
            "grpo": {"invalid_tool_call_advantage": -5.0},
        }
        ctx = context_from_config(config, recipe="r", gate=parse_gate({}))
        assert ctx.agent_max_turns == 100 and ctx.max_total_sequence_length is None
        assert ctx.token_limit == 8192 and ctx.tool_call_metrics_logged

    def test_context_agentic_override_wins(self) -> None:
        gate = parse_gate({"convergence": {"agentic": {"agent_max_turns": 12}}})
        assert context_from_config({}, recipe="r", gate=gate).agent_max_turns == 12
