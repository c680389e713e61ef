"""SWE-style agent trajectories for the rollout-path bench, replayed from real rollouts.

The source is the set of real agent rollouts on SWE-bench Verified that nemo-gym ships
(``responses_api_agents/swe_agents/data/example_opecode.jsonl``: the agent's system
prompt, its tools, and per model call the reasoning, text, tool calls and tool outputs).
:func:`build_trajectory` replays those model calls in file order for one served setup:

* each call is written in the served template's own format
  (:func:`rlgate.serving.contiguity.model_output`) and parsed back with the served vLLM parsers;
  a call whose tool calls do not round-trip is skipped (the functional tier reports why);
* tool outputs are cut (whole lines) so that every turn adds about
  ``(max_total_sequence_length - opening) / agent_max_turns`` tokens, i.e. a trajectory of
  ``agent_max_turns`` calls fills the recipe's context (:func:`trajectory_spec`); a short
  output leaves its slack to later turns.

Invariants: the text is real (no generated filler), the format is the template's, and the
assistant messages in the history are what vLLM's parsers return for that text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rlgate.bench.limits import MAX_TURNS
from rlgate.core.errors import RecipeError, RlgateError
from rlgate.recipe.load import Recipe
from rlgate.serving.contiguity import (
    Call,
    LoopContext,
    Turn,
    assistant_reply,
    model_output,
    vllm_conversation,
)
from rlgate.serving.gym import GymServer, gym_servers
from rlgate.serving.templates import ThinkingMode, render

__all__ = [
    "SWE_ROLLOUTS",
    "ModelCall",
    "SourceStep",
    "SuffixRenderer",
    "SweSource",
    "Trajectory",
    "TrajectorySpec",
    "agent_servers",
    "build_trajectory",
    "fit_text",
    "load_swe_source",
    "round_trips",
    "trajectory_spec",
]

log = logging.getLogger(__name__)

# Real opencode rollouts on SWE-bench Verified shipped inside nemo-gym 0.7.0.
SWE_ROLLOUTS = "responses_api_agents/swe_agents/data/example_opecode.jsonl"
_MIN_OUTPUT_TOKENS = 16  # a tool output is never cut below its first line (~16 tokens)


@dataclass(frozen=True, slots=True)
class SourceStep:
    """One model call of a real rollout and the tool outputs it got back."""

    reasoning: str
    content: str
    calls: tuple[Call, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SweSource:
    """The opening, tools and every model call of the shipped rollouts, in file order."""

    path: Path
    system: str
    user: str
    tools: tuple[dict[str, Any], ...]
    steps: tuple[SourceStep, ...]


def _text(value: Any) -> str:
    """Gym stores outputs/summaries JSON-encoded once more; decode that layer if present."""
    if isinstance(value, str) and value.startswith(("[", '"')):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return value
    if isinstance(value, list):
        return "\n".join(
            _text(v.get("text", "")) if isinstance(v, Mapping) else str(v) for v in value
        )
    return value if isinstance(value, str) else json.dumps(value)


def _steps(output: Sequence[Mapping[str, Any]]) -> list[SourceStep]:
    steps: list[SourceStep] = []
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[Call] = []
    outputs: list[str] = []

    def flush() -> None:
        if calls and len(outputs) == len(calls):
            steps.append(
                SourceStep("\n".join(reasoning), "\n".join(content), tuple(calls), tuple(outputs))
            )
        for buffer in (reasoning, content, calls, outputs):
            buffer.clear()

    for item in output:
        kind = item.get("type")
        if kind != "function_call_output" and outputs:
            flush()
        if kind == "reasoning":
            reasoning.append(_text(item.get("summary")).strip())
        elif kind == "message":
            content.append(_text(item.get("content")).strip())
        elif kind == "function_call":
            try:
                args = json.loads(item.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = None
            if not isinstance(args, dict):
                outputs.append("")  # unparseable call: make the step fail the count check
                continue
            calls.append(Call(str(item.get("name")), args))
        elif kind == "function_call_output":
            outputs.append(_text(item.get("output")).rstrip())
    flush()
    return steps


def _chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if "function" in tool:
        return dict(tool)
    fn = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
    return {"type": "function", "function": fn}


@cache
def load_swe_source(path: str | None = None) -> SweSource:
    """Read the shipped SWE rollouts (default: nemo-gym's ``SWE_ROLLOUTS``).

    Raises:
        RlgateError: the file is missing, not JSONL, or holds no usable model call.
    """
    from rlgate.serving.gym import gym_package_root

    file = Path(path) if path else gym_package_root() / SWE_ROLLOUTS
    if not file.is_file():
        raise RlgateError(
            f"SWE rollouts not found: {file}",
            hint="the rollout-path bench replays nemo-gym 0.7.0's shipped swe_agents rollouts; "
            "install nemo-gym (see README) or pass a rollouts JSONL of the same shape",
        )
    steps: list[SourceStep] = []
    opening: dict[str, Any] | None = None
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            params, output = row["responses_create_params"], row["response"]["output"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise RlgateError(f"{file}:{number}: not a Gym rollout record ({exc})") from exc
        opening = opening or params
        steps += _steps(output)
    roles = {m.get("role"): m.get("content") for m in (opening or {}).get("input", [])}
    if (
        not steps
        or not isinstance(roles.get("system"), str)
        or not isinstance(roles.get("user"), str)
    ):
        raise RlgateError(f"{file}: no rollout with a system prompt, a user task and tool calls")
    tools = tuple(_chat_tool(t) for t in (opening or {}).get("tools") or ())
    return SweSource(file, roles["system"], roles["user"], tools, tuple(steps))


# --- trajectory ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrajectorySpec:
    """How long a trajectory is, from the recipe.

    Attributes:
        recipe: recipe name.
        turns: model calls generated (<= ``max_turns``).
        max_turns: the largest ``agent_max_turns`` of the recipe's Gym agents.
        max_total_tokens: ``policy.max_total_sequence_length``.
    """

    recipe: str
    turns: int
    max_turns: int
    max_total_tokens: int


def agent_servers(recipe: Recipe) -> list[GymServer]:
    """The recipe's Gym agent servers (merged with nemo-gym's YAML defaults)."""
    nemo_gym = recipe.facts.env.gym
    if nemo_gym is None:
        return []
    return [s for s in gym_servers(nemo_gym) if s.server_type == "responses_api_agents"]


def trajectory_spec(recipe: Recipe, turns: int | None = None) -> TrajectorySpec:
    """Size a trajectory by the recipe (``agent_max_turns``, ``max_total_sequence_length``).

    Raises:
        RecipeError: the recipe has no Gym agent turn limit or no sequence length.
        RlgateError: ``turns`` is outside ``2..agent_max_turns`` or above
            :data:`rlgate.bench.limits.MAX_TURNS` (also when ``agent_max_turns`` is and
            ``turns`` is not given).
    """
    limits = [s.config.get("agent_max_turns") for s in agent_servers(recipe)]
    limits = [t for t in limits if isinstance(t, int) and not isinstance(t, bool) and t > 0]
    total = recipe.facts.policy.max_total_sequence_length
    if not limits:
        raise RecipeError(
            f"{recipe.name}: no Gym agent sets agent_max_turns "
            "(env.nemo_gym.<agent>.responses_api_agents.<impl>.agent_max_turns)",
            hint="the rollout-path bench sizes trajectories by the agent's turn limit",
        )
    if total is None:
        raise RecipeError(
            f"{recipe.name}: policy.max_total_sequence_length must be a positive integer, "
            "got none (absent, null or an unresolved interpolation)"
        )
    max_turns = max(limits)
    if turns is None and max_turns > MAX_TURNS:
        raise RlgateError(
            f"{recipe.name}: agent_max_turns={max_turns:,}; the bench replays at most "
            f"{MAX_TURNS:,} turns",
            hint=f"pass --turns N (2..{MAX_TURNS:,})",
        )
    if turns is not None and not 2 <= turns <= min(max_turns, MAX_TURNS):
        raise RlgateError(
            f"{recipe.name}: turns must be between 2 and agent_max_turns={max_turns}, got {turns}"
        )
    return TrajectorySpec(recipe.name, turns or max_turns, max_turns, total)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call: what the model wrote, what vLLM returned, what the tools answered."""

    text: str
    gen_ids: tuple[int, ...]
    reply: dict[str, Any]
    tool_messages: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A replayable agent trajectory for one served setup."""

    spec: TrajectorySpec
    opening: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    calls: tuple[ModelCall, ...]
    prompt_tokens: tuple[int, ...]  # prompt length at each call, counted incrementally
    total_tokens: int  # after the last call and its tool outputs
    skipped_steps: int  # source steps whose calls do not round-trip through the parsers

    @property
    def prelude_tokens(self) -> int:
        """Tokens of the first prompt (system prompt, tools, task)."""
        return self.prompt_tokens[0]


class SuffixRenderer:
    """Render only new messages, as a token-in-token-out server would.

    The template renders ``anchor + new`` (a three-message anchor ending in an assistant
    tool call); everything after the anchor's EOS is the text the new messages add.
    """

    def __init__(self, ctx: LoopContext) -> None:
        self._ctx = ctx
        self._anchor = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "a", "arguments": "{}"}}
                ],
            },
        ]
        base = self._render(self._anchor, gen=False)
        eos = ctx.tokenizer.eos_token or ""
        if not eos or eos not in base:
            raise RecipeError("the served template writes no EOS after an assistant turn")
        self._cut = base.rindex(eos) + len(eos)
        self._prefix = base[: self._cut]

    def _render(self, messages: Sequence[Mapping[str, Any]], *, gen: bool) -> str:
        conv = vllm_conversation(self._ctx, messages)
        kwargs = self._ctx.template_kwargs
        return render(
            self._ctx.tokenizer, self._ctx.template, conv, add_generation_prompt=gen, **kwargs
        )

    def suffix(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Text the template adds for ``messages`` plus the generation prompt."""
        text = self._render([*self._anchor, *messages], gen=True)
        if not text.startswith(self._prefix):
            raise RecipeError("the served template re-renders earlier turns when messages follow")
        return text[self._cut :]


def round_trips(turn: Turn, parsed: Any, thinking: ThinkingMode) -> bool:
    """Whether the parsed output carries exactly the turn's calls (and its reasoning)."""
    calls = [(c.name, c.arguments) for c in parsed.calls]
    if calls != [(c.name, dict(c.arguments)) for c in turn.calls]:
        return False
    return thinking is not ThinkingMode.OPEN or (parsed.reasoning or "").strip() == turn.reasoning


def fit_text(text: str, limit: int, encode: Any) -> str:
    """The head of ``text`` holding at most ``limit`` tokens (``encode``), cut at a line end.

    A single line longer than the limit is cut inside the line; nothing is ever padded.
    """
    limit = max(limit, _MIN_OUTPUT_TOKENS)
    n = len(encode(text))
    while n > limit:
        cut = text[: max(1, len(text) * limit // n)]
        text = cut[: cut.rfind("\n")] if "\n" in cut[1:] else cut
        n = len(encode(text))
    return text


def _opening(ctx: LoopContext, source: SweSource) -> tuple[tuple[dict[str, Any], ...], int]:
    """The first prompt's messages (system prompt, task) and its token count."""
    opening = (
        {"role": "system", "content": source.system},
        {"role": "user", "content": source.user},
    )
    conv = vllm_conversation(ctx, opening)
    kwargs = ctx.template_kwargs
    prompt = render(
        ctx.tokenizer, ctx.template, conv, source.tools, add_generation_prompt=True, **kwargs
    )
    return opening, len(ctx.encode(prompt))


def build_trajectory(ctx: LoopContext, spec: TrajectorySpec, source: SweSource) -> Trajectory:
    """Replay the source's model calls through ``ctx`` until ``spec.turns`` calls exist.

    Tool outputs are cut so that every turn adds about ``(max_total_tokens - prelude) /
    max_turns`` tokens (short outputs leave their slack to later turns).
    """
    ctx.tools = source.tools
    opening, prelude = _opening(ctx, source)
    budget = (spec.max_total_tokens - prelude) / spec.max_turns
    if budget < 2 * _MIN_OUTPUT_TOKENS:
        raise RecipeError(
            f"{spec.recipe}: max_total_sequence_length {spec.max_total_tokens} leaves "
            f"{budget:.0f} tokens per turn after a {prelude}-token opening"
        )
    suffixer = SuffixRenderer(ctx)
    overhead = len(ctx.encode(suffixer.suffix([{"role": "tool", "content": ""}])))
    calls: list[ModelCall] = []
    sizes = [prelude]
    skipped, carry, index = 0, 0.0, 0
    while len(calls) < spec.turns:
        if skipped > len(source.steps):
            raise RecipeError(f"{spec.recipe}: the served parsers recover too few source turns")
        step = source.steps[index % len(source.steps)]
        index += 1
        turn = Turn(step.reasoning, step.content, step.calls)
        text, ids = model_output(ctx, turn)
        parsed = ctx.parsers.parse(text, source.tools, ids)
        if not round_trips(turn, parsed, ctx.thinking):
            skipped += 1
            continue
        k = len(calls)
        allowance = budget + carry - len(ids) - overhead * len(step.outputs)
        share = int(allowance / len(step.outputs))
        tool_messages = tuple(
            {
                "role": "tool",
                "tool_call_id": f"call_{k}_{i}",
                "content": fit_text(out, share, ctx.encode),
            }
            for i, out in enumerate(step.outputs)
        )
        added = len(ids) + len(ctx.encode(suffixer.suffix(tool_messages)))
        carry += budget - added
        sizes.append(sizes[-1] + added)
        calls.append(ModelCall(text, tuple(ids), assistant_reply(k, parsed), tool_messages))
    log.debug("%s: %d turns built, %d source steps skipped", spec.recipe, len(calls), skipped)
    return Trajectory(
        spec, opening, source.tools, tuple(calls), tuple(sizes[:-1]), sizes[-1], skipped
    )
