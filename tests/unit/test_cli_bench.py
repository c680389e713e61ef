"""``rlgate bench rollout``: bad input is refused with exit 2 before anything is measured.

The measuring path runs end to end in the perf tier
(tests/perf/test_rollout_path.py::test_cli_bench_rollout_writes_json_and_gates_on_it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgate.bench.gate import environment
from rlgate.bench.limits import MAX_PARSER_LENGTHS, MAX_PARSER_TOKENS, MAX_REPEATS, MAX_TURNS
from rlgate.cli.app import main

REPO = Path(__file__).resolve().parents[2]
LONG = str(
    REPO
    / "recipes"
    / "grpo-qwen3.5-35ba3b-16n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking-long.yaml"
)


def _bench(*args: str) -> list[str]:
    return ["bench", "rollout", "--recipe", LONG, *args]


class TestBenchRolloutCli:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            pytest.param(["--turns", "1"], "between 2 and agent_max_turns=200", id="one_turn"),
            pytest.param(["--turns", "500"], "got 500", id="too_many_turns"),
            pytest.param(["--parser-lengths", "10"], "parser lengths", id="tiny_parser_output"),
            pytest.param(["--override", "nope.key=1"], "cannot apply overrides", id="bad_override"),
        ],
    )
    def test_bench_rollout_rejects_bad_input(self, args, message, capsys):
        assert main(_bench(*args)) == 2
        assert message in capsys.readouterr().err

    def test_bench_rollout_missing_baseline_file(self, tmp_path, capsys):
        assert main(_bench("--baseline", str(tmp_path / "absent.json"))) == 2
        assert "cannot read baseline" in capsys.readouterr().err

    def test_bench_rollout_refuses_a_baseline_of_another_environment(self, tmp_path, capsys):
        env = {**environment(), "vllm": "0.29.0"}
        path = tmp_path / "other.json"
        payload = {"environment": env, "recipe": "r", "config": {}, "metrics": {"m": [1.0]}}
        path.write_text(json.dumps(payload), encoding="utf-8")
        assert main(_bench("--baseline", str(path))) == 2
        err = capsys.readouterr().err
        assert "vllm: baseline '0.29.0' vs here '0.25.1'" in err
        assert "bench_rollout_path.py --record" in err

    def test_bench_rollout_baseline_without_this_configuration(self, tmp_path, capsys):
        path = tmp_path / "other.json"
        config = {"turns": 24}
        payload = {
            "environment": environment(),
            "recipe": "x",
            "config": config,
            "metrics": {"m": [1.0]},
        }
        path.write_text(json.dumps(payload), encoding="utf-8")
        assert main(_bench("--baseline", str(path))) == 2
        assert "has no entry for" in capsys.readouterr().err

    def test_bench_rollout_repeats_must_be_positive(self, capsys):
        with pytest.raises(SystemExit) as info:
            main(_bench("--repeats", "0"))
        assert info.value.code == 2
        assert "argument --repeats: 0 is outside 1..20" in capsys.readouterr().err


class TestBenchRolloutBounds:
    """Counts that ask for days of CPU are refused by the parser (exit 2), before any work."""

    @pytest.mark.parametrize(
        ("args", "bound"),
        [
            pytest.param(["--repeats", "1000000000"], f"1..{MAX_REPEATS}", id="repeats"),
            pytest.param(["--turns", "1000000000"], f"1..{MAX_TURNS:,}", id="turns"),
            pytest.param(
                ["--parser-lengths", "1024", "1000000000"],
                f"1..{MAX_PARSER_TOKENS:,}",
                id="parser_length",
            ),
        ],
    )
    def test_the_parser_refuses_counts_beyond_their_bound(self, capsys, args, bound) -> None:
        with pytest.raises(SystemExit) as info:
            main(_bench(*args))
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {args[0]}" in err and f"is outside {bound}" in err, err

    def test_at_most_so_many_parser_lengths(self, capsys) -> None:
        lengths = [str(64 * (k + 1)) for k in range(MAX_PARSER_LENGTHS + 1)]
        assert main(_bench("--parser-lengths", *lengths)) == 2
        assert f"at most {MAX_PARSER_LENGTHS} parser lengths" in capsys.readouterr().err

    def test_a_recipe_whose_agent_turns_exceed_the_bound_needs_turns(self, capsys) -> None:
        key = "env.nemo_gym.swe_agents_train.responses_api_agents.swe_agents.agent_max_turns"
        assert main(_bench("--override", f"{key}=1000000000")) == 2
        err = capsys.readouterr().err
        assert f"at most {MAX_TURNS:,} turns" in err and "--turns" in err, err

    def test_the_bounds_are_documented(self) -> None:
        doc = (REPO / "docs" / "rollout-path.md").read_text()
        for bound in (MAX_REPEATS, MAX_TURNS, MAX_PARSER_TOKENS, MAX_PARSER_LENGTHS):
            assert f"{bound:,}" in doc or str(bound) in doc
