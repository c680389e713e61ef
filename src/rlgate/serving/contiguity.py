"""Replay multi-turn agent loops and check token-prefix contiguity.

NeMo RL trains on one token sequence per rollout and asserts, turn by turn, that
the prompt of model call k+1 starts with the prompt of call k plus the tokens the
model generated ("Non-contiguous messages found!"). Whether that holds is decided
by the chat template, the tokenizer, the vLLM tool/reasoning parsers and the Gym
conversions together. :func:`replay` runs exactly that loop:

    render(messages) -> prompt ids -> the model's turn, written in the template's own
    format -> generated ids -> vLLM parsers -> (Gym: think wrapping, Responses items,
    back to Chat, history-reasoning preprocessing) -> vLLM message normalisation ->
    render(next messages) -> compare ids.

The model's turn is what the template itself renders for that assistant message,
so a divergence is never an artefact of an invented output format. Invariant:
nothing here is model-name specific; every behaviour comes from the real template,
tokenizer, parsers and nemo-gym code.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlgate.serving.gym import GymChatPath
from rlgate.serving.parsers import (
    ServedParsers,
    normalize_tool_call_arguments,
    template_content_format,
)
from rlgate.serving.templates import (
    THINK_CLOSE,
    THINK_OPEN,
    ChatTemplate,
    ThinkingMode,
    profile_template,
    render,
)

__all__ = [
    "SCENARIOS",
    "Call",
    "Divergence",
    "LoopContext",
    "LoopResult",
    "Scenario",
    "Turn",
    "assistant_reply",
    "model_output",
    "replay",
    "splice_prefix",
]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the model makes in a turn."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Turn:
    """One model call: what the model writes, then what the environment answers."""

    reasoning: str
    content: str
    calls: tuple[Call, ...] = ()
    user_after: str | None = None  # a user message the harness injects after the turn


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named agent trajectory shape."""

    name: str
    description: str
    turns: tuple[Turn, ...]


_SHELL = "run_shell"
SCENARIO_TOOLS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": _SHELL,
            "description": "Run a bash command in the repository sandbox.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the command"},
                    "timeout": {"type": "integer", "description": "seconds"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "str_replace_editor",
            "description": "Edit a file by replacing a unique string.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_str": {"type": "string"},
                    "new_str": {"type": "string"},
                },
                "required": ["path", "old_str", "new_str"],
            },
        },
    },
)
_EDIT = Call(
    "str_replace_editor",
    {"path": "/testbed/src/util.py", "old_str": "return a - b", "new_str": "return a + b"},
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "tool_loop",
            "one user request, then several reasoning + tool-call turns and a final answer",
            (
                Turn(
                    "I should look at the repository layout first.",
                    "",
                    (Call(_SHELL, {"command": "ls /testbed", "timeout": 30}),),
                ),
                Turn(
                    "The bug is in util.py; let me fix the operator.", "Fixing the bug.", (_EDIT,)
                ),
                Turn(
                    "Now run the tests to confirm.",
                    "",
                    (Call(_SHELL, {"command": "cd /testbed && pytest -q tests/test_util.py"}),),
                ),
                Turn("Tests pass, so I am done.", "The fix is applied and the tests pass."),
            ),
        ),
        Scenario(
            "user_nudge",
            "a turn without a tool call makes the harness inject a user message "
            "(OpenHands' fake user response), then the tool loop resumes",
            (
                Turn(
                    "Let me inspect the failing test.",
                    "",
                    (Call(_SHELL, {"command": "cat /testbed/tests/test_util.py"}),),
                ),
                Turn(
                    "I think I understand the issue.",
                    "I will now describe the plan.",
                    (),
                    "Please continue working on the task.",
                ),
                Turn("Apply the fix.", "", (_EDIT,)),
                Turn("Done.", "Finished."),
            ),
        ),
        Scenario(
            "parallel_calls",
            "one turn issues two tool calls answered by two consecutive tool messages",
            (
                Turn(
                    "Check both files at once.",
                    "",
                    (Call(_SHELL, {"command": "cat a.py"}), Call(_SHELL, {"command": "cat b.py"})),
                ),
                Turn("Both files read.", "Summary of both files."),
            ),
        ),
        Scenario(
            "empty_reasoning",
            "the model closes its think block immediately (empty reasoning) before a tool call",
            (
                Turn("", "", (Call(_SHELL, {"command": "git status"}),)),
                Turn("Clean tree; finish.", "Nothing to do."),
            ),
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where prompt k+1 stops extending prompt k + generation k."""

    turn: int
    position: int
    expected: tuple[int, ...]
    actual: tuple[int, ...]
    expected_text: str
    actual_text: str

    def describe(self) -> str:
        """One-line human description with the diverging tokens."""
        return (
            f"turn {self.turn + 1}->{self.turn + 2}: token {self.position} differs: expected "
            f"{list(self.expected)} {self.expected_text!r}, prompt has {list(self.actual)} "
            f"{self.actual_text!r}"
        )


@dataclass(frozen=True, slots=True)
class LoopResult:
    """Outcome of replaying one scenario."""

    scenario: str
    turns_checked: int
    divergence: Divergence | None
    splice_restores: bool | None  # NeMo RL's EOS-count splice would find its boundary
    problems: tuple[str, ...] = field(default=())

    @property
    def contiguous(self) -> bool:
        """True when every turn extended the previous prompt + generation exactly."""
        return self.divergence is None


@dataclass
class LoopContext:
    """Everything that shapes a rollout's tokens for one recipe."""

    tokenizer: Any
    template: ChatTemplate
    parsers: ServedParsers
    template_kwargs: dict[str, Any]
    gym: GymChatPath | None = None
    tools: Sequence[Mapping[str, Any]] = SCENARIO_TOOLS

    def __post_init__(self) -> None:
        self.thinking = profile_template(
            self.tokenizer, self.template, self.template_kwargs
        ).thinking
        self.content_format = template_content_format(self.template.text)

    def encode(self, text: str) -> list[int]:
        """Tokenize rendered text the way vLLM tokenizes a chat prompt."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def vllm_conversation(ctx: LoopContext, messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Normalise OpenAI-style messages as vLLM's ``parse_chat_messages`` does (text only)."""
    out = []
    for message in copy.deepcopy(list(messages)):
        msg = {"role": message["role"]}
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        if ctx.content_format == "openai" and message["role"] != "tool":
            msg["content"] = [{"type": "text", "text": content}] if content else []
        else:
            msg["content"] = content or ""
        if message["role"] == "assistant":
            if message.get("tool_calls") is not None:
                msg["tool_calls"] = list(message["tool_calls"])
            # vLLM reads only `reasoning` (0.16+) and copies it to `reasoning_content`.
            if message.get("reasoning") is not None:
                msg["reasoning"] = msg["reasoning_content"] = message["reasoning"]
        if message["role"] == "tool" and "tool_call_id" in message:
            msg["tool_call_id"] = message["tool_call_id"]
        out.append(msg)
    normalize_tool_call_arguments(out)
    return out


def _render(ctx: LoopContext, messages: Sequence[Mapping[str, Any]], gen: bool) -> str:
    conv = vllm_conversation(ctx, messages)
    return render(
        ctx.tokenizer,
        ctx.template,
        conv,
        ctx.tools,
        add_generation_prompt=gen,
        **ctx.template_kwargs,
    )


def _model_turn(ctx: LoopContext, messages: list[dict], turn: Turn, prompt: str) -> str:
    """The text the model emits for ``turn``: the template's own rendering of it.

    Normally that is the rendered turn minus the generation prompt. Some templates render
    a turn without the think block their generation prompt opened (e.g. for an empty
    reasoning); the model still closed that block, so its text is then the reasoning,
    ``</think>``, and the rest of the rendered turn.
    """
    reasoning = turn.reasoning if ctx.thinking is ThinkingMode.OPEN else None
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": c.name, "arguments": dict(c.arguments)},
        }
        for i, c in enumerate(turn.calls)
    ]
    assistant: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if calls:
        assistant["tool_calls"] = calls
    if reasoning is not None:
        assistant["reasoning"] = reasoning
    history = _render(ctx, messages, gen=False)
    generation_prompt = prompt[len(history) :]
    turn_text = _render(ctx, [*messages, assistant], gen=False)[len(history) :]
    if turn_text.startswith(generation_prompt):
        text = turn_text[len(generation_prompt) :]
    else:
        common = next(
            (
                i
                for i, (a, b) in enumerate(zip(turn_text, generation_prompt, strict=False))
                if a != b
            ),
            min(len(turn_text), len(generation_prompt)),
        )
        common = turn_text.rfind("\n", 0, common) + 1  # back off to a whole line (the header)
        body = turn_text[common:]
        if (
            ctx.thinking is ThinkingMode.OPEN
            and body.startswith(THINK_OPEN)
            and THINK_CLOSE in body
        ):
            body = body[body.index(THINK_CLOSE) + len(THINK_CLOSE) :].lstrip("\n")
        text = (
            f"{reasoning}\n{THINK_CLOSE}\n\n{body}" if ctx.thinking is ThinkingMode.OPEN else body
        )
    if ctx.thinking is ThinkingMode.NONE and text.startswith(THINK_OPEN) and THINK_CLOSE in text:
        # Templates shared with thinking models render an empty think block for the *last*
        # assistant turn; a model whose generation prompt opens no think block does not write it.
        text = text[text.index(THINK_CLOSE) + len(THINK_CLOSE) :].lstrip("\n")
    eos = ctx.tokenizer.eos_token
    if eos and eos in text:
        text = text[: text.index(eos) + len(eos)]
    return text


def model_output(
    ctx: LoopContext, turn: Turn, messages: Sequence[Mapping[str, Any]] | None = None
) -> tuple[str, list[int]]:
    """The text (without the EOS) and token ids a model served with ``ctx`` writes for ``turn``."""
    msgs = [dict(m) for m in messages] if messages else list(_DEFAULT_OPENING)
    prompt = _render(ctx, msgs, gen=True)
    text = _model_turn(ctx, msgs, turn, prompt)
    ids = ctx.encode(text)
    eos = ctx.tokenizer.eos_token or ""
    return (text[: -len(eos)] if eos and text.endswith(eos) else text), ids


def _check_parse(turn: Turn, parsed: Any, thinking: ThinkingMode) -> list[str]:
    problems = []
    got = [(c.name, c.arguments) for c in parsed.calls]
    want = [(c.name, dict(c.arguments)) for c in turn.calls]
    if got != want:
        problems.append(f"parsed tool calls {got} != the calls the model wrote {want}")
    if thinking is ThinkingMode.OPEN and turn.reasoning.strip() != (parsed.reasoning or "").strip():
        problems.append(f"parsed reasoning {parsed.reasoning!r} != {turn.reasoning!r}")
    return problems


def _first_divergence(
    turn: int, expected: list[int], actual: list[int], ctx: LoopContext
) -> Divergence | None:
    for pos, want in enumerate(expected):
        if pos >= len(actual) or actual[pos] != want:
            lo = max(0, pos - 3)
            exp, act = tuple(expected[lo : pos + 4]), tuple(actual[lo : pos + 4])
            return Divergence(
                turn,
                pos,
                exp,
                act,
                ctx.tokenizer.decode(list(exp)),
                ctx.tokenizer.decode(list(act)),
            )
    return None


def splice_prefix(
    eos_id: int, model_prefix: list[int], template_prefix: list[int], template: list[int]
) -> list[int] | None:
    """NeMo RL's EOS-count splice (``replace_prefix_tokens``), or None when it cannot find its cut.

    Keeps the exact earlier tokens up to (excluding) their final EOS and resumes the
    template at the N-th EOS, N being the EOS count of the template's own prefix.
    """
    cut_end = len(model_prefix) - (1 if model_prefix and model_prefix[-1] == eos_id else 0)
    needed, seen = template_prefix.count(eos_id), 0
    for pos, tid in enumerate(template):
        if tid == eos_id:
            seen += 1
            if seen == needed:
                return model_prefix[:cut_end] + template[pos:]
    return None


def assistant_reply(turn: int, parsed: Any) -> dict[str, Any]:
    """The chat message vLLM's server returns for a parsed generation (call ids by turn)."""
    return {
        "role": "assistant",
        "content": parsed.content,
        "reasoning": parsed.reasoning,
        "tool_calls": [
            {
                "id": f"call_{turn}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments},
            }
            for i, c in enumerate(parsed.calls)
        ]
        or None,
    }


def _tool_result(call: Call, index: int) -> str:
    return f"[{call.name} #{index}]\nREADME.md\nsetup.py\nsrc/"


_DEFAULT_OPENING: tuple[dict[str, Any], ...] = (
    {"role": "system", "content": "You are a software engineering agent working in /testbed."},
    {"role": "user", "content": "The test tests/test_util.py::test_add fails. Fix it."},
)


def replay(ctx: LoopContext, scenario: Scenario) -> LoopResult:
    """Replay ``scenario`` and return the first token divergence (if any)."""
    messages: list[dict[str, Any]] = [dict(m) for m in _DEFAULT_OPENING]
    items: list[Any] = [{**m, "type": "message"} for m in messages]
    problems: list[str] = []
    splice_ok: bool | None = None
    prev: list[int] | None = None
    for k, turn in enumerate(scenario.turns):
        prompt = _render(ctx, messages, gen=True)
        prompt_ids = ctx.encode(prompt)
        if prev is not None:
            div = _first_divergence(k - 1, prev, prompt_ids, ctx)
            if div is not None:
                return LoopResult(scenario.name, k, div, splice_ok, tuple(problems))
        text = _model_turn(ctx, messages, turn, prompt)
        gen_ids = ctx.encode(text)
        eos = ctx.tokenizer.eos_token or ""
        parsed = ctx.parsers.parse(
            text[: -len(eos)] if eos and text.endswith(eos) else text, ctx.tools, gen_ids
        )
        problems += [f"turn {k + 1}: {p}" for p in _check_parse(turn, parsed, ctx.thinking)]
        reply = assistant_reply(k, parsed)
        results = [
            {"role": "tool", "tool_call_id": f"call_{k}_{i}", "content": _tool_result(c, i)}
            for i, c in enumerate(parsed.calls)
        ]
        nudge = [{"role": "user", "content": turn.user_after}] if turn.user_after else []
        if ctx.gym is not None:
            items += ctx.gym.response_items(reply)
            items += [
                {
                    "type": "function_call_output",
                    "call_id": r["tool_call_id"],
                    "output": r["content"],
                }
                for r in results
            ]
            items += [{**m, "type": "message"} for m in nudge]
            messages = ctx.gym.vllm_messages(items, ctx.tools)
        else:
            messages = [
                *messages,
                {k2: v for k2, v in reply.items() if v is not None},
                *results,
                *nudge,
            ]
        prev = prompt_ids + gen_ids
        if k + 1 < len(scenario.turns):
            history = messages[
                : max(i for i, m in enumerate(messages) if m["role"] == "assistant") + 1
            ]
            template_prefix = ctx.encode(_render(ctx, history, gen=False))
            nxt = ctx.encode(_render(ctx, messages, gen=True))
            splice_ok = (splice_ok is not False) and splice_prefix(
                ctx.tokenizer.eos_token_id, prev, template_prefix, nxt
            ) is not None
    return LoopResult(scenario.name, len(scenario.turns), None, splice_ok, tuple(problems))
