"""NeMo Gym's Responses <-> Chat conversions on Gym's own shipped trajectories.

Inputs are the ``example_rollouts.jsonl`` files inside the nemo-gym 0.7.0 wheel (real Gym
output with reasoning, function calls and tool outputs). They go through nemo-gym's real
converter and vLLM model-server preprocessing to the chat messages vLLM receives, back to
Responses items, and through every recipe's served template: no reasoning and no call may
be lost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgate.serving.gym import GymChatPath, gym_package_root
from rlgate.serving.templates import render

TRAINING_MODEL = {"return_token_id_information": True, "uses_reasoning_parser": True}
ROLLOUT_FILES = [
    "resources_servers/single_step_tool_use_with_argument_comparison/data/example_rollouts.jsonl",
    "resources_servers/deepswe/data/example_rollouts.jsonl",
]


def _trajectories() -> list[tuple[str, list[dict], list[dict]]]:
    out = []
    for rel in ROLLOUT_FILES:
        path = gym_package_root() / rel
        if not path.is_file():
            raise FileNotFoundError(f"nemo-gym example data missing: {path}")
        for i, line in enumerate(path.read_text().splitlines()):
            row = json.loads(line)
            items = list(row["responses_create_params"]["input"]) + list(row["response"]["output"])
            out.append(
                (
                    f"{Path(rel).parts[1]}-{i}",
                    items,
                    row["responses_create_params"].get("tools") or [],
                )
            )
    return out


TRAJECTORIES = _trajectories()
IDS = [t[0] for t in TRAJECTORIES]


def _expected(items: list[dict]) -> tuple[list[str], list[tuple[str, object]], list[str]]:
    reasoning = [s["text"] for i in items if i.get("type") == "reasoning" for s in i["summary"]]
    calls = [
        (i["name"], json.loads(i["arguments"])) for i in items if i.get("type") == "function_call"
    ]
    outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
    return reasoning, calls, outputs


@pytest.mark.parametrize(("name", "items", "tools"), TRAJECTORIES, ids=IDS)
class TestGymRoundTrip:
    def test_responses_to_chat_keeps_reasoning_calls_and_outputs(self, name, items, tools):
        reasoning, calls, outputs = _expected(items)
        assert reasoning or calls, "fixture has nothing to check"
        messages = GymChatPath(TRAINING_MODEL).vllm_messages(items, tools)
        got_reasoning = [
            m.get("reasoning") for m in messages if m["role"] == "assistant" and m.get("reasoning")
        ]
        got_calls = [
            (tc["function"]["name"], json.loads(tc["function"]["arguments"]))
            for m in messages
            if m["role"] == "assistant"
            for tc in m.get("tool_calls") or []
        ]
        got_outputs = [m["content"] for m in messages if m["role"] == "tool"]
        assert [r.strip() for r in got_reasoning] == [r.strip() for r in reasoning]
        assert got_calls == calls
        assert got_outputs == outputs
        for m in messages:
            assert "<think>" not in str(m.get("content") or ""), "reasoning left in content"

    def test_chat_back_to_responses_items_is_lossless(self, name, items, tools):
        path = GymChatPath(TRAINING_MODEL)
        messages = path.vllm_messages(items, tools)
        for m in messages:
            if m.get("reasoning"):
                m["content"] = f"<think>{m['reasoning']}</think>{m.get('content') or ''}"
                m.pop("reasoning", None), m.pop("reasoning_content", None)
        back = [
            i.model_dump(exclude_none=True)
            for i in path.converter.chat_completions_messages_to_responses_items(messages)
        ]
        assert _expected(back) == _expected(items)


@pytest.mark.parametrize(
    ("name", "items", "tools"), TRAJECTORIES[:1] + TRAJECTORIES[-1:], ids=IDS[:1] + IDS[-1:]
)
def test_served_template_renders_gym_history(setup, name, items, tools):
    """Every recipe's template renders Gym's history: its calls, and reasoning when it thinks."""
    path = GymChatPath(setup.gym_model.config if setup.gym_model else TRAINING_MODEL)
    messages = path.vllm_messages(items, tools)
    from rlgate.serving.contiguity import vllm_conversation

    ctx = setup.loop_context(through_gym=False)
    chat_tools = [
        {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in tools
    ]
    text = render(
        setup.tokenizer,
        setup.template,
        vllm_conversation(ctx, messages),
        chat_tools or None,
        add_generation_prompt=True,
        **setup.template_kwargs,
    )
    reasoning, calls, outputs = _expected(items)
    for call_name, _ in calls:
        assert call_name in text
    for out in outputs:
        assert out.strip()[:200] in text
    if setup.profile().keeps_reasoning_in_tool_loop and reasoning:
        assert reasoning[0].strip()[:200] in text, "the template dropped Gym's reasoning"
