"""Unit tests of rlgate.bench.trajectory: reading nemo-gym's shipped SWE rollouts, sizing.

Replaying a trajectory through a served template needs a tokenizer and runs in the perf
tier (tests/perf/test_rollout_path.py); here: the real rollout file, malformed copies of
it, the recipe sizing, and the pure text cutting.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgate.bench.trajectory import (
    SWE_ROLLOUTS,
    TrajectorySpec,
    agent_servers,
    fit_text,
    load_swe_source,
    trajectory_spec,
)
from rlgate.core.errors import RecipeError, RlgateError
from rlgate.recipe.load import load_recipe
from rlgate.serving.gym import gym_package_root

REPO = Path(__file__).resolve().parents[2]
THINKING = (
    REPO
    / "recipes"
    / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
)


@pytest.fixture(scope="module")
def source():
    return load_swe_source()


def _rows() -> list[dict]:
    text = (gym_package_root() / SWE_ROLLOUTS).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()[:2]]


class TestLoadSweSource:
    def test_load_swe_source_reads_the_shipped_rollouts(self, source):
        assert source.system.startswith("You are OpenCode")
        assert "<issue_description>" in source.user
        names = [t["function"]["name"] for t in source.tools]
        assert names == ["bash", "read", "glob", "grep", "edit", "write", "todowrite"]
        assert len(source.steps) > 500  # ten rollouts of 43-106 model calls each

    def test_load_swe_source_every_call_has_its_output(self, source):
        assert all(len(step.outputs) == len(step.calls) >= 1 for step in source.steps)
        assert all(isinstance(c.arguments, dict) for step in source.steps for c in step.calls)

    def test_load_swe_source_decodes_gym_double_encoding(self, source):
        """Gym stores tool outputs as JSON strings inside the JSON: the text is decoded once."""
        first = source.steps[0]
        assert first.calls[0].name == "grep"
        assert first.outputs[0].startswith("Found 30 matches\n/testbed/django/utils/dateparse.py")
        assert first.reasoning.startswith("Let me start by exploring the codebase")

    def test_load_swe_source_corrupt_line_names_the_line(self, tmp_path):
        rows = _rows()
        path = tmp_path / "rollouts.jsonl"
        path.write_text(json.dumps(rows[0]) + "\n{not json\n", encoding="utf-8")
        with pytest.raises(RlgateError, match=r"rollouts.jsonl:2: not a Gym rollout record"):
            load_swe_source(str(path))

    def test_load_swe_source_without_tool_calls_is_an_error(self, tmp_path):
        row = _rows()[0]
        row["response"]["output"] = [o for o in row["response"]["output"] if o["type"] == "message"]
        path = tmp_path / "rollouts.jsonl"
        path.write_text(json.dumps(row) + "\n", encoding="utf-8")
        with pytest.raises(RlgateError, match="no rollout with a system prompt"):
            load_swe_source(str(path))

    def test_load_swe_source_drops_a_call_with_unparseable_arguments(self, tmp_path):
        row = _rows()[0]
        calls = [o for o in row["response"]["output"] if o["type"] == "function_call"]
        calls[0]["arguments"] = '{"pattern": '  # truncated JSON
        path = tmp_path / "rollouts.jsonl"
        path.write_text(json.dumps(row) + "\n", encoding="utf-8")
        steps = load_swe_source(str(path)).steps
        assert steps[0].calls[0].name == "read"  # the grep step is gone, not half-parsed
        assert len(steps) == len(calls) - 1

    def test_load_swe_source_missing_file_gives_a_hint(self, tmp_path):
        with pytest.raises(RlgateError, match="SWE rollouts not found") as info:
            load_swe_source(str(tmp_path / "absent.jsonl"))
        assert "nemo-gym" in str(info.value)


class TestTrajectorySpec:
    def test_trajectory_spec_reads_the_agent_turn_limit(self):
        recipe = load_recipe(THINKING)
        assert trajectory_spec(recipe) == TrajectorySpec(recipe.name, 100, 100, 65536)
        assert trajectory_spec(recipe, 24).turns == 24

    def test_trajectory_spec_takes_the_largest_agent_limit(self):
        recipe = load_recipe(
            THINKING,
            ["env.nemo_gym.swe_agents_val.responses_api_agents.swe_agents.agent_max_turns=150"],
        )
        assert trajectory_spec(recipe).max_turns == 150

    def test_agent_servers_are_the_swe_agents(self):
        servers = agent_servers(load_recipe(THINKING))
        assert {(s.instance, s.implementation) for s in servers} == {
            ("swe_agents_train", "swe_agents"),
            ("swe_agents_val", "swe_agents"),
        }

    def test_trajectory_spec_rejects_a_missing_sequence_length(self):
        recipe = load_recipe(THINKING, ["~policy.max_total_sequence_length"])
        with pytest.raises(RecipeError, match="max_total_sequence_length must be a positive"):
            trajectory_spec(recipe)


def _words(text: str) -> list[str]:
    return text.split()


class TestFitText:
    def test_fit_text_keeps_text_under_the_limit(self):
        text = "\n".join(f"line {i} a b c" for i in range(100))  # 5 words per line
        assert fit_text(text, 1000, _words) == text

    def test_fit_text_cuts_at_a_line_end(self):
        text = "\n".join(f"line {i} a b c" for i in range(100))
        cut = fit_text(text, 52, _words)
        assert len(_words(cut)) <= 52
        assert text.startswith(cut + "\n")

    def test_fit_text_never_goes_below_one_short_line(self):
        text = "\n".join(f"line {i} a b c" for i in range(100))
        assert len(_words(fit_text(text, 0, _words))) >= 5

    def test_fit_text_cuts_inside_a_single_long_line(self):
        text = " ".join(["w"] * 500)
        assert len(_words(fit_text(text, 40, _words))) <= 40
