"""rlgate.runs.rollouts on NeMo Gym's own example rollout files (nemo-gym 0.7.0 as installed).

The ``example_rollouts*.jsonl`` files ship with nemo-gym and are what ``ng_collect_rollouts``
writes; responses are validated with nemo-gym's ``NeMoGymResponse``.
"""

from __future__ import annotations

import json
from pathlib import Path

import nemo_gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.checks.kinds.rollouts import RolloutGateSpec, evaluate_rollouts
from rlgate.core.errors import MetricsError
from rlgate.core.results import Outcome
from rlgate.recipe.facts import RunContext
from rlgate.runs.rollouts import ROLLOUT_CHECKS, FinalTurn, load_rollouts, summarize_rollout

SITE = Path(nemo_gym.__file__).resolve().parents[1]
MINI_SWE = SITE / "responses_api_agents" / "mini_swe_agent_2" / "data" / "example_rollouts.jsonl"
HERMES_SWE = (
    SITE / "responses_api_agents" / "anyswe_agent" / "data" / "example_rollouts_hermes.jsonl"
)
AVIARY = SITE / "environments" / "aviary_gsm8k" / "data" / "example_rollouts.jsonl"
SPEC = RolloutGateSpec(
    max_turns_share=0.3,
    failed_call_rate=0.2,
    unparsed_tool_call_rate=0.05,
    malformed_reasoning_rate=0.05,
    empty_final_rate=0.05,
    truncated_final_rate=0.1,
    reward_mean_min=0.1,
)


def real(path: Path) -> Path:
    if not path.is_file():
        pytest.fail(f"nemo-gym example rollouts missing: {path}", pytrace=False)
    return path


def row(output: list[dict], **response) -> dict:
    base = {
        "id": "r",
        "created_at": 0,
        "model": "m",
        "object": "response",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [{"type": "function", "name": "bash", "parameters": {}, "strict": False}],
    }
    return {"response": base | response, "reward": 1.0}


def call(i: int, args: str = '{"command": "ls"}', name: str = "bash") -> dict:
    return {
        "type": "function_call",
        "id": f"fc{i}",
        "call_id": f"c{i}",
        "name": name,
        "arguments": args,
    }


def out(i: int, text: str = "ok", **extra) -> dict:
    return {"type": "function_call_output", "call_id": f"c{i}", "output": text} | extra


def msg(text: str, status: str = "completed") -> dict:
    return {
        "type": "message",
        "id": "m",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


class TestSummarizeRollout:
    def test_summarize_rollout_on_real_swe_agent_rollouts(self) -> None:
        report = load_rollouts(real(MINI_SWE), SPEC)
        first = report.rollouts[0]
        assert len(report.rollouts) == 5 and first.schema_error is None
        assert (first.turns, first.function_calls, first.failed_calls) == (5, 8, 0)
        # mini_swe_agent_2's text carries <think> in message content: NeMo RL counts it as malformed
        assert all(r.malformed_reasoning == r.turns for r in report.rollouts)
        assert report.summary()["reward"]["mean"] == pytest.approx(0.2)

    def test_summarize_rollout_counts_structured_tool_errors(self) -> None:
        report = load_rollouts(real(HERMES_SWE), SPEC)
        assert [r.failed_calls for r in report.rollouts] == [0, 1, 2, 1, 3]
        assert {x for r in report.rollouts for x in r.failure_reasons} == {"error_output"}

    def test_summarize_rollout_flags_schema_errors_of_nemo_gym_model(self) -> None:
        report = load_rollouts(real(AVIARY), SPEC)
        assert all(r.schema_error and "schema error" in r.schema_error for r in report.rollouts)

    @pytest.mark.parametrize(
        ("output", "reasons"),
        [
            pytest.param(
                [call(0, "{'command': 'ls'"), out(0), msg("done")],
                ("bad_arguments",),
                id="bad_json",
            ),
            pytest.param(
                [call(0, '["ls"]'), out(0), msg("done")], ("bad_arguments",), id="not_an_object"
            ),
            pytest.param(
                [call(0, name="python"), out(0), msg("done")], ("unknown_tool",), id="unknown_tool"
            ),
            pytest.param(
                [call(0), msg("x"), call(1), out(1), msg("done")], ("no_output",), id="unanswered"
            ),
            pytest.param(
                [call(0), out(0, '{"error": "boom"}'), msg("done")],
                ("error_output",),
                id="json_error",
            ),
            pytest.param(
                [call(0), out(0, "Error: no such file"), msg("done")],
                ("error_output",),
                id="error_text",
            ),
            pytest.param(
                [call(0), out(0, "ok", status="incomplete"), msg("done")],
                ("error_output",),
                id="incomplete",
            ),
            pytest.param(
                [call(0), out(0, "line\nError: x"), msg("done")], (), id="error_not_at_start"
            ),
            pytest.param([call(0), out(0), call(1)], (), id="final_turn_call"),
        ],
    )
    def test_summarize_rollout_failed_calls(
        self, output: list[dict], reasons: tuple[str, ...]
    ) -> None:
        assert summarize_rollout(row(output), 1, SPEC).failure_reasons == reasons

    @pytest.mark.parametrize(
        ("output", "response", "final"),
        [
            pytest.param([msg("done")], {}, FinalTurn.OK, id="ok"),
            pytest.param([msg("   ")], {}, FinalTurn.EMPTY, id="blank"),
            pytest.param(
                [
                    {
                        "type": "reasoning",
                        "id": "r",
                        "summary": [{"type": "summary_text", "text": "hm"}],
                    }
                ],
                {},
                FinalTurn.EMPTY,
                id="reasoning_only",
            ),
            pytest.param(
                [msg("do", status="incomplete")], {}, FinalTurn.TRUNCATED, id="incomplete_message"
            ),
            pytest.param(
                [msg("do")],
                {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
                FinalTurn.TRUNCATED,
                id="incomplete_response",
            ),
            pytest.param([], {}, FinalTurn.NONE, id="no_output"),
        ],
    )
    def test_summarize_rollout_final_turn(self, output, response, final: FinalTurn) -> None:
        assert summarize_rollout(row(output, **response), 1, SPEC).final_turn is final

    def test_summarize_rollout_markup_and_thinking_rules_follow_nemo_rl(self) -> None:
        summary = summarize_rollout(
            row(
                [
                    {
                        "type": "reasoning",
                        "id": "a",
                        "summary": [{"type": "summary_text", "text": "<think>a</think><think>"}],
                    },
                    {
                        "type": "reasoning",
                        "id": "b",
                        "summary": [{"type": "summary_text", "text": "<think>once"}],
                    },
                    msg("<tool_call>\n<function=bash>\n</function>\n</tool_call>"),
                ]
            ),
            1,
            SPEC,
        )
        assert summary.unparsed_tool_calls == 1 and summary.malformed_reasoning == 1

    def test_summarize_rollout_counts_turns_from_token_ids_when_present(self) -> None:
        items = [
            msg("a") | {"generation_token_ids": [1, 2]},
            call(0) | {"generation_token_ids": [3]},
            out(0),
            msg("b"),
        ]
        assert summarize_rollout(row(items), 1, SPEC).turns == 2


class TestLoadRollouts:
    def test_load_rollouts_drops_only_a_truncated_last_line(self, tmp_path: Path) -> None:
        lines = real(MINI_SWE).read_text().splitlines()
        path = tmp_path / "r.jsonl"
        path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:100])
        report = load_rollouts(path)
        assert len(report.rollouts) == 2 and "truncated last line" in report.warnings[0]

    @pytest.mark.parametrize(
        ("text", "match"),
        [
            pytest.param(
                '{"response": {}}\nnot json\n{"response": {}}\n',
                r"r.jsonl:2: not valid JSON",
                id="corrupt",
            ),
            pytest.param("[1]\n", "expected a JSON object", id="not_object"),
            pytest.param("\n\n", "no rollouts", id="empty"),
        ],
    )
    def test_load_rollouts_rejects_malformed_files(
        self, tmp_path: Path, text: str, match: str
    ) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text(text)
        with pytest.raises(MetricsError, match=match):
            load_rollouts(path)


class TestEvaluateRollouts:
    def test_evaluate_rollouts_bounds_on_real_rollouts(self) -> None:
        report = load_rollouts(real(HERMES_SWE), SPEC)
        ctx = RunContext("r", agent_max_turns=30)
        results = {n: evaluate_rollouts(n, report, SPEC, ctx) for n in ROLLOUT_CHECKS}
        assert {n for n, r in results.items() if r.outcome is not Outcome.PASS} == set()
        assert results["failed_call_rate"].value == pytest.approx(7 / 68)

    def test_evaluate_rollouts_errors_instead_of_vacuous_rates(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text(json.dumps(row([msg("hi")]) | {"reward": None}) + "\n")
        report = load_rollouts(path)
        ctx = RunContext("r")
        assert evaluate_rollouts("failed_call_rate", report, SPEC, ctx).outcome is Outcome.ERROR
        assert evaluate_rollouts("reward_mean_min", report, SPEC, ctx).outcome is Outcome.ERROR
        assert evaluate_rollouts("max_turns_share", report, SPEC, ctx).outcome is Outcome.ERROR

    def test_evaluate_rollouts_invalid_rate_names_the_first_bad_line(self) -> None:
        res = evaluate_rollouts(
            "invalid_rate", load_rollouts(real(AVIARY), SPEC), SPEC, RunContext("r")
        )
        assert res.outcome is Outcome.FAIL and "first at line 1" in res.message


class TestHostileRollouts:
    def test_a_complete_but_corrupt_last_line_is_an_error_not_a_silent_drop(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text(json.dumps(row([msg("hi")])) + "\n" + '{"response": \n')
        with pytest.raises(MetricsError, match=r"r\.jsonl:2: not valid JSON"):
            load_rollouts(path)

    def test_invalid_utf8_is_refused_naming_file_and_line(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        good = json.dumps(row([msg("hi")])).encode()
        path.write_bytes(good + b"\n" + good[:30] + b"\xff\xfe" + good[30:] + b"\n" + good + b"\n")
        with pytest.raises(MetricsError, match=r"r\.jsonl:2: not UTF-8 text \(byte 30 of the line"):
            load_rollouts(path)

    def test_a_torn_multibyte_last_line_is_dropped_with_a_warning(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        good = json.dumps(row([msg("héllo")]), ensure_ascii=False).encode()
        path.write_bytes(good + b"\n" + good[: good.index("é".encode()) + 1])
        report = load_rollouts(path)
        assert len(report.rollouts) == 1 and "r.jsonl:2: truncated last line" in report.warnings[0]

    def test_deeply_nested_lines_are_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text('{"response": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
        with pytest.raises(MetricsError, match=r"r\.jsonl:1: JSON nested too deeply"):
            load_rollouts(path)

    def test_a_non_finite_reward_fails_the_mean_reward_naming_the_line(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "r.jsonl"
        rows = [row([msg("a")]), row([msg("b")]) | {"reward": 1e400}, row([msg("c")])]
        rows[2]["reward"] = 10**400
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        report = load_rollouts(path)
        res = evaluate_rollouts("reward_mean_min", report, SPEC, RunContext("r"))
        assert res.outcome is Outcome.FAIL and "non-finite reward inf at line 2" in res.message
        assert report.summary()["reward"]["non_finite"] == 2

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def test_summarize_rollout_never_raises_on_any_json_object(self, data) -> None:
        keys = st.sampled_from(
            ["type", "role", "status", "call_id", "name", "arguments", "output", "content",
             "summary", "text", "tools", "generation_token_ids", "incomplete_details", "error",
             "success", "reward", "_ng_task_index", "response", "id"]
        )  # fmt: skip
        leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
        words = ["function_call", "function_call_output", "message", "reasoning", "assistant",
                 "incomplete", "<tool_call>", "Error"]  # fmt: skip
        leaves |= st.sampled_from(words)
        values = st.recursive(
            leaves,
            lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=5),
            max_leaves=30,
        )
        item = st.dictionaries(keys, values, max_size=6)
        response = st.fixed_dictionaries(
            {"output": st.lists(item | values, max_size=6)},
            optional={"tools": st.lists(item | values, max_size=3), "status": values},
        )
        rollout = data.draw(
            st.fixed_dictionaries({"response": response | values}, optional={"reward": values})
        )
        summary = summarize_rollout(rollout, 1, SPEC)
        assert summary.line == 1 and summary.turns >= 0 and summary.failed_calls >= 0
