"""A tool call written before ``</think>``: recovered, lost in the reasoning, or left in content.

Qwen3.5 models sometimes write a tool call before closing their reasoning (reported upstream
against vLLM's qwen3 reasoning parser: the call ends up in ``reasoning_content`` and is never
executed). For every recipe whose served generation prompt opens a think block, the served
template's own reasoning + tool-call turn is rewritten with the call in front of ``</think>``
(closed after the call, or never closed) and parsed by the recipe's real vLLM reasoning + tool
parser pair, non-streaming and token by token. The call must come back in ``tool_calls``.

Where it does not, the recipe documents it in ``rlgate.functional.known_limitations``
(``check: round_trip`` for non-streaming, ``check: streaming``; ``scenario``: the shape) with the
exact server response in the reason: a strict xfail. A reason that no longer quotes what the
server returns fails, and ``rlgate recipe check`` warns exactly for the recipes that document it.
"""

from __future__ import annotations

import pytest

from rlgate.checks.recipe import check_recipe
from rlgate.checks.registry import load_recipe
from rlgate.checks.served import TOOL_CALL_IN_THINK_SHAPES, tool_call_in_reasoning
from rlgate.core.observations import encode_observation
from rlgate.core.resources import RECIPES
from rlgate.recipe.findings import Severity
from rlgate.recipe.load import functional_gate
from rlgate.serving.contiguity import Turn, model_output
from rlgate.serving.parsers import ServedParsers
from rlgate.serving.setup import serving_setup
from rlgate.serving.templates import ThinkingMode

QWEN3_THINKING = (
    RECIPES / "grpo-qwen3-30ba3b-thinking-2507-16n8g-megatron-tp4pp2cp4ep8-async1off-gym-swe.yaml"
)

CODE = "tool-call-in-reasoning"
CHECKS = {False: "round_trip", True: "streaming"}


def _outcomes(setup) -> dict[tuple[str, bool], object]:
    return {(o.shape, o.streaming): o for o in tool_call_in_reasoning(setup)}


def _documented(setup) -> dict[tuple[str, str], str]:
    return {
        (lim.check, lim.scenario): lim.reason
        for lim in functional_gate(setup.recipe).known_limitations
        if lim.scenario in TOOL_CALL_IN_THINK_SHAPES
    }


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("streaming", [False, True], ids=["non_streaming", "streaming"])
@pytest.mark.parametrize("shape", list(TOOL_CALL_IN_THINK_SHAPES))
def test_tool_call_written_before_think_close_reaches_the_agent(
    setup, shape, streaming, known_limitation, gate_record
):
    thinking = setup.profile().thinking
    gate_record(recipe=setup.recipe.name, shape=shape, streaming=streaming)
    if thinking is not ThinkingMode.OPEN:
        gate_record(outcome="not applicable")
        pytest.skip(
            f"thinking is {thinking.value} in the served generation prompt: the model is not "
            "inside a think block, so there is no '</think>' to write a call before"
        )
    outcome = _outcomes(setup)[(shape, streaming)]
    gate_record(
        outcome=outcome.verdict,
        observed=outcome.observed(),
        reasoning_parser=setup.reasoning_parser,
        tool_parser=setup.tool_parser,
    )
    mode = "streaming" if streaming else "non_streaming"
    calls = [{"name": name, "arguments": args} for name, args in outcome.calls]
    parsed = {
        "tool_calls": calls,
        "content": outcome.content,
        "reasoning_content": outcome.reasoning,
    }
    gate_record(observation=encode_observation({mode: parsed, "verdict": outcome.verdict}))
    check = CHECKS[streaming]
    reason = _documented(setup).get((check, shape))
    if reason is not None and _words(outcome.observed()) not in _words(reason):
        pytest.fail(
            f"documented limitation ({check}, {shape}) is stale: the server now returns "
            f"{outcome.observed()} (verdict {outcome.verdict}); documented: {reason}",
            pytrace=False,
        )
    known_limitation(check, shape)
    assert outcome.verdict == "recovered", (
        f"{outcome.verdict}: the model wrote {outcome.text!r} and the server returned "
        f"{outcome.observed()}"
    )


def test_recipe_check_warns_exactly_when_the_recipe_documents_a_lost_call(setup, gate_record):
    findings = [f for f in check_recipe(setup.recipe, None, setup).findings if f.code == CODE]
    documented = _documented(setup)
    gate_record(recipe=setup.recipe.name, documented=len(documented))
    if setup.profile().thinking is not ThinkingMode.OPEN:
        assert not findings, [str(f) for f in findings]
        return
    assert len(findings) == 1, [str(f) for f in findings]
    (finding,) = findings
    if documented:
        assert finding.severity is Severity.WARNING, str(finding)
        assert repr(setup.reasoning_parser) in finding.message, finding.message
        quoted = [
            o for o in _outcomes(setup).values() if _words(o.observed()) in _words(finding.message)
        ]
        assert quoted, finding.message
    else:
        assert finding.severity is Severity.INFO, str(finding)
        assert "is recovered by" in finding.message, finding.message


def test_streaming_leaves_the_stop_token_out_of_the_text(setup):
    """vLLM's detokenizer drops the EOS that ends a generation; so must the streaming replay.

    Otherwise a streamed answer carries the EOS text (``<|im_end|>``) and every streaming
    observation above would differ from what the server returns.
    """
    ctx = setup.loop_context(through_gym=False)
    text, ids = model_output(ctx, Turn("Done thinking.", "All tests pass now."))
    assert ids[-1] == setup.tokenizer.eos_token_id, "the turn ends on the EOS"
    parsers = setup.parsers()
    eager, stream = parsers.parse(text, None, ids), parsers.parse_streaming(ids, None, [])
    eos = setup.tokenizer.eos_token
    assert eos not in (stream.content or "") + (stream.reasoning or ""), stream
    assert (stream.content or "").strip() == (eager.content or "").strip() == "All tests pass now."


def test_outcomes_tell_recovered_lost_in_content_and_dropped_apart(tokenizers_root):
    """The verdicts on real parser pairs over Qwen3-Thinking-2507's hermes-JSON turn.

    The served pair (hermes + deepseek_r1) loses the call in the reasoning; qwen3 as reasoning
    parser recovers it; an XML tool parser on JSON calls leaves it in the content when not
    streaming and drops it when streaming.
    """
    setup = serving_setup(load_recipe(QWEN3_THINKING), tokenizers_root)

    def verdicts(tool: str, reasoning: str) -> dict[tuple[str, str], str]:
        parsers = ServedParsers(setup.tokenizer, tool, reasoning, setup.effective_kwargs)
        return {(o.shape, o.mode): o.verdict for o in tool_call_in_reasoning(setup, parsers)}

    served = verdicts("hermes", "deepseek_r1")
    assert len(served) == 4 and set(served.values()) == {"lost"}, served
    assert set(verdicts("hermes", "qwen3").values()) == {"recovered"}
    xml = verdicts("qwen3_xml", "qwen3")
    assert xml[("call_then_think_close", "non-streaming")] == "in_content", xml
    assert xml[("call_then_think_close", "streaming")] == "dropped", xml
