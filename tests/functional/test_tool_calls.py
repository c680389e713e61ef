"""Tool calls and reasoning round trips: the served template writes, the served parsers read.

For every recipe: a call written in the served template's own format (what the policy was
trained to emit) must come back from vLLM's real tool/reasoning parsers with the same name
and arguments, typed per the tool schema, both non-streaming and token by token.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.core.observations import encode_observation, token_digest
from rlgate.serving.contiguity import Call, Turn, model_output
from rlgate.serving.observe import parsed_observation
from rlgate.serving.templates import ThinkingMode

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Replace text in a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "new_text": {"type": "string"},
                    "line": {"type": "integer"},
                    "options": {"type": "object"},
                },
                "required": ["path", "new_text"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
]

CASES = {
    "plain": [Call("run_shell", {"command": "ls -la /testbed"})],
    "typed_int_and_object": [
        Call(
            "edit_file",
            {
                "path": "a.py",
                "new_text": "x = 1",
                "line": 12,
                "options": {"dry_run": False, "tags": ["a", "b"]},
            },
        )
    ],
    "quotes_and_newlines": [
        Call("edit_file", {"path": "src/q.py", "new_text": 'print("it\'s")\nreturn {"k": [1, 2]}'})
    ],
    "unicode": [Call("edit_file", {"path": "docs/ü.md", "new_text": "Grüße — 你好 🚀"})],
    "two_calls": [
        Call("run_shell", {"command": "cat a.py"}),
        Call("run_shell", {"command": "cat b.py"}),
    ],
}


def _ctx(setup):
    ctx = setup.loop_context(through_gym=False)
    ctx.tools = TOOLS
    return ctx


def _check(setup, calls, reasoning="Plan the edit.", record=None):
    ctx = _ctx(setup)
    turn = Turn(reasoning, "", tuple(calls))
    text, ids = model_output(ctx, turn)
    parsers = setup.parsers()
    eager = parsers.parse(text, TOOLS, ids)
    stream = parsers.parse_streaming(ids, TOOLS, ctx.encode(""))
    if record is not None:  # before the asserts: a failing testcase shows what came back too
        observed = {
            "non_streaming": parsed_observation(eager),
            "streaming": parsed_observation(stream),
        }
        observed["model_output_ids"] = token_digest(ids)
        record(observation=encode_observation(observed))
    want = [(c.name, dict(c.arguments)) for c in calls]
    assert [(c.name, c.arguments) for c in eager.calls] == want, f"non-streaming parse of {text!r}"
    assert [(c.name, c.arguments) for c in stream.calls] == want, f"streaming parse of {text!r}"
    assert (eager.content or "").strip() == (stream.content or "").strip()
    return ctx, eager, stream


class TestToolCallRoundTrip:
    @pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
    def test_calls_round_trip_through_served_parsers(self, setup, case, gate_record):
        _check(setup, CASES[case], record=gate_record)
        gate_record(recipe=setup.recipe.name, tool_parser=setup.tool_parser)


class TestReasoningRoundTrip:
    def test_reasoning_is_split_from_the_call(self, setup, gate_record):
        ctx, eager, stream = _check(
            setup, CASES["plain"], reasoning="The bug is in util.py.", record=gate_record
        )
        gate_record(thinking=ctx.thinking.value, reasoning_parser=setup.reasoning_parser)
        if ctx.thinking is ThinkingMode.OPEN:
            assert (eager.reasoning or "").strip() == "The bug is in util.py."
            assert (stream.reasoning or "").strip() == "The bug is in util.py."
        else:
            assert not eager.reasoning and not stream.reasoning, "thinking is off: no reasoning"

    def test_answer_without_call_stays_content(self, setup, gate_record):
        ctx = _ctx(setup)
        text, ids = model_output(ctx, Turn("Done thinking.", "All tests pass now."))
        parsed = setup.parsers().parse(text, TOOLS, ids)
        observed = {
            "non_streaming": parsed_observation(parsed),
            "model_output_ids": token_digest(ids),
        }
        gate_record(observation=encode_observation(observed))
        assert not parsed.calls
        assert (parsed.content or "").strip() == "All tests pass now."
        assert "</think>" not in (parsed.content or ""), "malformed thinking left in content"


# Module level: hypothesis refuses class methods reused across parametrized instances.
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.text(string.ascii_letters + string.digits + "/._-", min_size=1, max_size=30),
    body=st.text(
        st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="<>")
        | st.sampled_from(['"', "'", "\\", "{", "}", "\n"]),
        min_size=1,
        max_size=60,
    )
    .map(str.strip)
    .filter(bool),
    line=st.integers(min_value=-(2**31), max_value=2**31),
    options=st.dictionaries(
        st.text(string.ascii_lowercase, min_size=1, max_size=8),
        st.one_of(
            st.integers(-1000, 1000),
            st.text(string.ascii_letters + " ", max_size=10),
            st.lists(st.integers(0, 9), max_size=3),
        ),
        max_size=3,
    ),
)
def test_typed_arguments_round_trip(setup, path, body, line, options):
    _check(
        setup,
        [Call("edit_file", {"path": path, "new_text": body, "line": line, "options": options})],
    )
