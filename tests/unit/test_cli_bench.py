"""``rlgate bench rollout``: bad input is refused with exit 2 before anything is measured.

The measuring path runs end to end in the perf tier
(tests/perf/test_rollout_path.py::test_cli_bench_rollout_writes_json_and_gates_on_it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgate.bench.gate import environment
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
        assert "must be >= 1" in capsys.readouterr().err
