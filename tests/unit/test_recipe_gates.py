"""The shipped recipes' convergence/perf bounds, exercised on the fault-injection corpus.

The corpus (rlgate.testing.corpus) is written with the TensorBoard writer using NeMo RL's tag
names. Gated with the *target* recipe's own bounds, the healthy run must pass and each fault
the recipe is meant to catch must fail exactly the checks named for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgate.checks.plan import load_inputs, load_plan, run_gate
from rlgate.core.results import Outcome
from rlgate.recipe.load import recipe_files, recipe_tiers
from rlgate.testing.corpus import Fault

from .helpers.corpus_build import corpus

REPO = Path(__file__).resolve().parents[2]
TARGET = (
    REPO / "recipes/grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
)

# With the target recipe (20 steps, agent_max_turns 100) the corpus runs (50 steps, 40 turns)
# exercise these bounds; step time and tokens/s are compared with the corpus baseline. A +20%
# step time also lowers the E2E tokens/s (same tokens, longer step), so both fire.
STEP, TOK = "perf:timing/train/total_step_time", "perf:performance/tokens_per_sec_per_gpu"
EXPECTED = {
    Fault.HEALTHY: set(),
    Fault.HEALTHY_NOISE: set(),
    Fault.RESUMED: set(),
    Fault.LOGPROB_DRIFT: {"logprob_error_median", "logprob_error_last", "logprob_error_spikes"},
    Fault.REWARD_FLAT: {"reward_improvement"},
    Fault.NAN_LOSS: {"finite:train/loss"},
    Fault.TRUNCATION_RUNAWAY: {"truncation_rate"},
    Fault.TOOL_CALLS_IN_REASONING: {"tool_call_failure_rate"},
    Fault.MALFORMED_THINKING: {"malformed_thinking_rate_mean"},
    Fault.STEP_TIME_UP: {STEP, TOK},
    Fault.TOKENS_DOWN: {TOK, "perf:performance/generation_tokens_per_sec_per_gpu"},
}
# Faults that depend on the run's size: gated with the recipe sized like the corpus run.
SIZED = {
    Fault.STOPPED_EARLY: ({"max_steps": 50}, {"completion"}),
    Fault.TURNS_AT_MAX: (
        {
            "overrides": [
                "env.nemo_gym.swe_agents_train.responses_api_agents.swe_agents.agent_max_turns=40"
            ]
        },
        {"max_turns_share"},
    ),
}


def _not_passing(fault: Fault, **plan_kwargs) -> set[str]:
    c = corpus()
    plan = load_plan(TARGET, **plan_kwargs)
    report = run_gate(plan, load_inputs(plan, c.runs[fault], baseline=c.baseline))
    assert len(report.results) >= 15, "the target recipe's checks were not evaluated"
    return {r.name for r in report.results if r.outcome is not Outcome.PASS}


class TestTargetRecipeBounds:
    @pytest.mark.parametrize("fault", list(EXPECTED), ids=[f.value for f in EXPECTED])
    def test_target_recipe_fails_exactly_the_checks_named_for_the_fault(self, fault):
        assert _not_passing(fault) == EXPECTED[fault]

    @pytest.mark.parametrize("fault", list(SIZED), ids=[f.value for f in SIZED])
    def test_target_recipe_sized_like_the_run_catches_it(self, fault):
        kwargs, want = SIZED[fault]
        assert _not_passing(fault, **kwargs) == want


class TestRecipeCoverage:
    def test_every_recipe_declares_its_tiers_and_gate_blocks(self):
        """A ratchet: each recipe is in some tier, and tiers it claims have their gate blocks."""
        from rlgate.checks.registry import load_recipe

        for path in recipe_files(REPO / "recipes"):
            tiers = recipe_tiers(path)
            assert tiers, path
            gate = load_recipe(path).gate
            for tier in ("convergence", "perf"):
                if tier in tiers:
                    assert getattr(gate, tier), (
                        f"{path.name} lists {tier} but has no rlgate.{tier} block"
                    )
