"""Recipe checks measured on the served chat path (:class:`~rlgate.serving.setup.ServingSetup`).

Each ``check_*`` renders probe conversations with the served template and tokenizer and
parses them back with the served vLLM parsers: data format vs tool-call format, thinking
kwargs and history thinking, parser pairs, a tool call written before ``</think>``, the
turn budget and token contiguity. They return :class:`~rlgate.recipe.findings.Finding`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlgate.checks.recipe_rules import SOURCES
from rlgate.core.errors import RecipeError
from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import functional_gate, get_path
from rlgate.serving.contiguity import (
    SCENARIOS,
    Call,
    Turn,
    model_output,
)
from rlgate.serving.parsers import ServedParsers
from rlgate.serving.setup import (
    ServingSetup,
)
from rlgate.serving.templates import (
    PROBE_TOOLS,
    SERVING_KWARGS,
    ThinkingMode,
    ToolCallFormat,
)

__all__ = ["check_budget", "check_contiguity", "check_data", "check_parsers", "check_thinking"]


ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


_XML_PARSERS, _JSON_PARSERS = ("qwen3_coder", "qwen3_xml"), ("hermes",)


_FORMAT_NAMES = {ToolCallFormat.XML: "XML (<function=...>)", ToolCallFormat.JSON: "JSON (hermes)"}


def _agent_turns(setup: ServingSetup) -> int | None:
    turns = [
        s.config.get("agent_max_turns")
        for s in setup.servers
        if s.server_type == "responses_api_agents"
    ]
    turns = [t for t in turns if isinstance(t, int)]
    return max(turns) if turns else None


def check_budget(setup: ServingSetup) -> list[Finding]:
    """Turn budget: max_total_sequence_length / agent turns vs the template's per-turn cost.

    (The config-only length checks are ``rlgate.checks.recipe_rules.check_lengths``.)
    """
    out: list[Finding] = []
    total = setup.recipe.facts.policy.max_total_sequence_length
    turns = _agent_turns(setup)
    if total is not None and turns:
        # Measured: tokens one minimal tool turn (call + response) adds with this template.
        from rlgate.serving.contiguity import SCENARIO_TOOLS

        ctx = setup.loop_context(through_gym=False)
        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "run_shell", "arguments": {"command": "ls"}},
                }
            ],
        }
        tool = {"role": "tool", "tool_call_id": "c", "content": "x"}
        from rlgate.serving.templates import render

        one = len(
            ctx.encode(
                render(ctx.tokenizer, ctx.template, base, SCENARIO_TOOLS, **ctx.template_kwargs)
            )
        )
        two = len(
            ctx.encode(
                render(
                    ctx.tokenizer,
                    ctx.template,
                    [*base, call, tool],
                    SCENARIO_TOOLS,
                    **ctx.template_kwargs,
                )
            )
        )
        overhead = two - one
        per_turn = total / turns
        msg = (
            f"{turns} agent turns in {total} tokens leaves {per_turn:.0f} tokens per turn; the "
            f"template alone spends {overhead} tokens on a minimal tool turn"
        )
        if per_turn < 4 * overhead or per_turn < 256:
            out.append(
                Finding(
                    "budget-turns",
                    WARNING,
                    "policy.max_total_sequence_length",
                    msg + ": trajectories will hit the length limit (truncation_rate) long before "
                    "agent_max_turns",
                )
            )
        else:
            out.append(Finding("budget-turns", INFO, "policy.max_total_sequence_length", msg))
    return out


def _probe_model_output(setup: ServingSetup) -> tuple[str, Any]:
    """What a model served with this template writes for one reasoning + tool-call turn."""
    ctx = setup.loop_context(through_gym=False)
    ctx.tools = PROBE_TOOLS
    turn = Turn(
        "Inspect the tree first.",
        "",
        (Call("rlgate_probe_tool", {"command": "ls -la /testbed", "count": 3}),),
    )
    text, _ = model_output(ctx, turn)
    return text, ctx


def _parses_calls(setup: ServingSetup, text: str, tool_parser: str | None) -> bool:
    parsed = ServedParsers(
        setup.tokenizer, tool_parser, setup.reasoning_parser, setup.effective_kwargs
    ).parse(text, PROBE_TOOLS)
    return [c.name for c in parsed.calls] == ["rlgate_probe_tool"] and parsed.calls[
        0
    ].arguments == {"command": "ls -la /testbed", "count": 3}


def check_parsers(setup: ServingSetup) -> list[Finding]:
    """Tool and reasoning parsers against what the served template makes the model write."""
    out, profile = [], setup.profile()
    fmt, key = profile.tool_format, f"{SERVING_KWARGS}.tool_parser"
    out.append(
        Finding(
            "template-profile",
            INFO,
            SERVING_KWARGS,
            f"served template ({setup.template.source}, sha256 {setup.template.sha256[:12]}): "
            f"tool calls {fmt.value}, thinking {profile.thinking.value}, generation prompt "
            f"{profile.generation_prompt!r}",
        )
    )
    text, _ = _probe_model_output(setup)
    parsed = setup.parsers().parse(text, PROBE_TOOLS)
    if setup.tool_parser is None:
        if setup.servers:
            out.append(
                Finding(
                    "no-tool-parser",
                    ERROR,
                    key,
                    f"no tool_parser: the model's {_FORMAT_NAMES.get(fmt, fmt.value)} tool "
                    "calls stay in the message text and the agent sees no calls",
                )
            )
    elif not _parses_calls(setup, text, setup.tool_parser):
        working = [p for p in (*_XML_PARSERS, *_JSON_PARSERS) if _parses_calls(setup, text, p)]
        fix = f" Parsers that do: {', '.join(working)}." if working else ""
        out.append(
            Finding(
                "tool-parser-mismatch",
                ERROR,
                key,
                f"tool_parser {setup.tool_parser!r} cannot parse the tool calls this template "
                f"writes ({_FORMAT_NAMES.get(fmt, fmt.value)}), e.g. {profile.call_text[:120]!r}; "
                "they would be left in the message text (Gym counts them as invalid tool "
                f"calls).{fix}",
            )
        )
    rkey = f"{SERVING_KWARGS}.reasoning_parser"
    gym_rp = setup.gym_model.config.get("uses_reasoning_parser", True) if setup.gym_model else None
    if profile.thinking is ThinkingMode.OPEN:
        if setup.reasoning_parser is None:
            out.append(
                Finding(
                    "reasoning-not-parsed",
                    ERROR,
                    rkey,
                    "the template opens <think> in the generation prompt but no reasoning_parser "
                    "is set: reasoning and '</think>' land in the content (malformed thinking, "
                    "broken tool-call parsing)",
                )
            )
        elif "Inspect the tree first." not in (parsed.reasoning or ""):
            out.append(
                Finding(
                    "reasoning-parser-mismatch",
                    ERROR,
                    rkey,
                    f"reasoning_parser {setup.reasoning_parser!r} does not recover the reasoning "
                    f"this template makes the model write (got reasoning={parsed.reasoning!r}); "
                    f"kwargs seen by the parser: {setup.effective_kwargs}",
                )
            )
    elif setup.reasoning_parser and parsed.reasoning:
        out.append(
            Finding(
                "reasoning-parser-swallows-content",
                ERROR,
                rkey,
                f"thinking is {profile.thinking.value} in the served template, but "
                "reasoning_parser "
                f"{setup.reasoning_parser!r} turns the model's answer into reasoning "
                f"({parsed.reasoning[:80]!r}); "
                "the content and tool calls are lost",
            )
        )
    if gym_rp is False and setup.reasoning_parser:
        out.append(
            Finding(
                "gym-reasoning-parser",
                ERROR,
                f"env.nemo_gym.{setup.gym_model.instance}",
                "Gym's policy model sets uses_reasoning_parser: false while vLLM runs a reasoning "
                "parser: nemo-gym's VLLMModel.chat_completions "
                "(responses_api_models/vllm_model/app.py) asserts on every response with "
                "reasoning",
            )
        )
    return out


def check_thinking(setup: ServingSetup) -> list[Finding]:
    """Thinking kwargs and history-thinking truncation in multi-turn agent recipes."""
    out, profile = [], setup.profile()
    for name, value in setup.ignored_kwargs.items():
        sev = (
            ERROR
            if name == "enable_thinking"
            and value is False
            and profile.thinking is ThinkingMode.OPEN
            else WARNING
        )
        out.append(
            Finding(
                "template-ignores-kwarg",
                sev,
                f"{SERVING_KWARGS}.default_chat_template_kwargs",
                f"chat_template_kwargs {name}={value!r}: the served template never reads {name!r}, "
                "so vLLM drops it (vllm/renderers/hf.py::resolve_chat_template_kwargs)"
                + (" and thinking stays on" if sev is ERROR else ""),
            )
        )
    if setup.effective_kwargs.get("truncate_history_thinking") is True:
        out.append(
            Finding(
                "truncate-history-thinking",
                ERROR,
                f"{SERVING_KWARGS}.default_chat_template_kwargs",
                "truncate_history_thinking: true breaks the rollout token contract "
                "(NVIDIA-NeMo/RL#3931): "
                "training must see the reasoning generation saw",
            )
        )
    out += _think_token_ids(setup)
    multi_turn = bool(setup.servers) and (_agent_turns(setup) or 2) > 1
    if setup.gym_model is not None and profile.thinking is ThinkingMode.OPEN:
        gcfg = setup.gym_model.config
        where = f"env.nemo_gym.{setup.gym_model.instance}.responses_api_models.vllm_model"
        if gcfg.get("uses_interleaved_reasoning") is False:
            out.append(
                Finding(
                    "gym-drops-history-reasoning",
                    ERROR,
                    where,
                    "uses_interleaved_reasoning: false drops every earlier turn's reasoning "
                    "before it reaches vLLM (nemo-gym's "
                    "VLLMModel._preprocess_chat_completion_create_params)",
                )
            )
        if gcfg.get("reasoning_field") == "reasoning_content":
            out.append(
                Finding(
                    "gym-reasoning-field",
                    ERROR,
                    where,
                    "reasoning_field: reasoning_content - vLLM reads only `reasoning` from "
                    "history messages (vllm/entrypoints/chat_utils.py::"
                    "_parse_chat_message_content), so history reasoning is dropped",
                )
            )
    if (
        multi_turn
        and profile.thinking is not ThinkingMode.NONE
        and not profile.keeps_reasoning_after_new_user_turn
    ):
        sev = ERROR if profile.thinking is ThinkingMode.OPEN else WARNING
        out.append(
            Finding(
                "history-thinking-dropped",
                sev,
                f"{SERVING_KWARGS}.chat_template",
                f"the served template ({setup.template.source}) drops earlier turns' <think> "
                "blocks once a new user message arrives (harness nudges, multi-turn agents); "
                "the next prompt no longer extends the generated tokens: NeMo RL asserts "
                "'Non-contiguous messages found' (nemo_rl/environments/nemo_gym.py::"
                "NemoGym._postprocess_nemo_gym_to_nemo_rl_result). Serve a thinking-preserving "
                "template",
            )
        )
    return out


def check_contiguity(setup: ServingSetup) -> list[Finding]:
    """Replay agent loops through template, parsers and Gym; report token divergences."""
    if not setup.servers:
        return []
    out = []
    for name in setup.scenarios():
        scenario = SCENARIOS[name]
        try:
            result = setup.replay(name)
        except RecipeError as exc:  # the Gym path itself refuses the conversation
            out.append(
                Finding(
                    f"round-trip-{name}", ERROR, SERVING_KWARGS, f"{scenario.description}: {exc}"
                )
            )
            continue
        if result.problems:
            detail = "; ".join(result.problems[:3])
            out.append(
                Finding(
                    f"round-trip-{scenario.name}",
                    ERROR,
                    SERVING_KWARGS,
                    f"{scenario.description}: {detail}",
                )
            )
        if result.divergence is not None:
            splice = (
                "NeMo RL's EOS-count splice (nemo_rl/models/generation/openai_server_utils.py::"
                "replace_prefix_tokens) can restore the prefix when the agent echoes token ids"
                if result.splice_restores
                else "NeMo RL's EOS-count splice (openai_server_utils.py::replace_prefix_tokens) "
                "cannot find its boundary"
            )
            out.append(
                Finding(
                    f"non-contiguous-{scenario.name}",
                    WARNING,
                    SERVING_KWARGS,
                    f"{scenario.description}: {result.divergence.describe()} ({splice})",
                )
            )
    return out


_DATA_FORMAT = {"xml": ToolCallFormat.XML, "json": ToolCallFormat.JSON}


def check_data(setup: ServingSetup) -> list[Finding]:
    """What the training data expects (declared in the recipe) vs what is served."""
    gate, out = functional_gate(setup.recipe), []
    profile = setup.profile()
    if (
        gate.data_tool_format is not None
        and _DATA_FORMAT[gate.data_tool_format] is not profile.tool_format
    ):
        want = _FORMAT_NAMES[_DATA_FORMAT[gate.data_tool_format]]
        out.append(
            Finding(
                "data-tool-format-mismatch",
                ERROR,
                f"{SERVING_KWARGS}.tool_parser",
                f"the data expects {want} tool calls (rlgate.functional.data_tool_format: "
                f"{gate.data_tool_format}) but the served template ({setup.template.source}) "
                f"writes {_FORMAT_NAMES.get(profile.tool_format, profile.tool_format.value)} "
                f"calls and the server parses them with tool_parser {setup.tool_parser!r}: "
                "the policy is trained on a tool-call format the data never shows",
            )
        )
    if gate.data_reasoning and profile.thinking is not ThinkingMode.OPEN:
        kw = setup.effective_kwargs.get("enable_thinking")
        out.append(
            Finding(
                "data-reasoning-without-thinking",
                ERROR,
                f"{SERVING_KWARGS}.default_chat_template_kwargs",
                "the data expects reasoning (rlgate.functional.data_reasoning: true) but "
                f"thinking is {profile.thinking.value} in the served template "
                f"(enable_thinking={kw!r}, "
                f"reasoning_parser={setup.reasoning_parser!r}): the model is never asked to "
                "reason",
            )
        )
    return out


# How a model can write a tool call before closing its reasoning (Qwen3.5 does both; upstream
# reports: the call ends up in reasoning_content). Keys are the functional tier's scenario ids.
TOOL_CALL_IN_THINK_SHAPES: dict[str, str] = {
    "call_then_think_close": "the call, then '</think>'",
    "call_without_think_close": "the call, and '</think>' never written",
}


_THINKING_PARSERS = ("qwen3", "deepseek_r1")  # alternatives tried when the served pair fails


_PROBE_CALL = Call("rlgate_probe_tool", {"command": "ls -la /testbed", "count": 3})  # as probed


@dataclass(frozen=True, slots=True)
class ReasoningCallOutcome:
    """What the served parsers return for a tool call written inside the reasoning.

    ``verdict``: ``recovered`` (the call in tool_calls, no markup left in text), ``duplicated``
    (in tool_calls and its markup also left in text), ``garbled`` (a different call parsed),
    ``in_content`` (markup left in content: Gym never executes it), ``lost`` (only in
    reasoning_content) or ``dropped`` (nowhere).
    """

    shape: str
    streaming: bool
    verdict: str
    text: str  # what the model wrote (the EOS that ends the turn not shown)
    reasoning: str | None
    content: str | None
    calls: tuple[tuple[str, Any], ...]

    @property
    def mode(self) -> str:
        """``streaming`` or ``non-streaming``."""
        return "streaming" if self.streaming else "non-streaming"

    def observed(self) -> str:
        """The server's response in one line (what a known limitation's reason quotes)."""
        return (
            f"tool_calls={list(self.calls)} content={self.content!r} reasoning={self.reasoning!r}"
        )


def _call_verdict(parsed: Any, want: Call) -> str:
    got = [(c.name, c.arguments) for c in parsed.calls]
    left = [t for t in (parsed.content, parsed.reasoning) if t and want.name in t]
    if got == [(want.name, dict(want.arguments))]:
        return "duplicated" if left else "recovered"
    if got:
        return "garbled"
    if parsed.content and want.name in parsed.content:
        return "in_content"
    return "lost" if left else "dropped"


def tool_call_in_reasoning(
    setup: ServingSetup, parsers: ServedParsers | None = None
) -> list[ReasoningCallOutcome]:
    """Parse a turn whose tool call is written before ``</think>``, as the chat server would.

    The turn is the served template's own reasoning + tool-call turn with the call moved in
    front of ``</think>`` (each of :data:`TOOL_CALL_IN_THINK_SHAPES`), parsed by the served
    reasoning + tool parser pair (or ``parsers``), non-streaming and token by token. Empty
    when the served generation prompt does not open a think block, or when no tool parser is
    served and no ``parsers`` are given.
    """
    from rlgate.serving.templates import THINK_CLOSE

    if setup.profile().thinking is not ThinkingMode.OPEN:
        return []
    if parsers is None:
        if setup.tool_parser is None:
            return []
        parsers = setup.parsers()
    text, ctx = _probe_model_output(setup)
    head, closed, call = text.partition(THINK_CLOSE)
    if not closed or _PROBE_CALL.name not in call:
        return []
    # The template's own pieces: reasoning, its newline(s) before </think>, the call block.
    reasoning = head.rstrip("\n")
    gap, call = head[len(reasoning) :], call.lstrip("\n")
    texts = {
        "call_then_think_close": f"{reasoning}{gap}{call}{gap}{THINK_CLOSE}",
        "call_without_think_close": f"{reasoning}{gap}{call}",
    }
    eos = setup.tokenizer.eos_token_id
    out = []
    for shape, written in texts.items():
        ids = ctx.encode(written) + ([eos] if eos is not None else [])
        for streaming in (False, True):
            parsed = (
                parsers.parse_streaming(ids, PROBE_TOOLS, [])
                if streaming
                else parsers.parse(written, PROBE_TOOLS, ids)
            )
            out.append(
                ReasoningCallOutcome(
                    shape,
                    streaming,
                    _call_verdict(parsed, _PROBE_CALL),
                    written,
                    parsed.reasoning,
                    parsed.content,
                    tuple((c.name, c.arguments) for c in parsed.calls),
                )
            )
    return out


def check_tool_call_in_reasoning(setup: ServingSetup) -> list[Finding]:
    """Warn when a tool call the model writes before ``</think>`` never reaches the agent."""
    outcomes = tool_call_in_reasoning(setup)
    if not outcomes:
        return []
    key = f"{SERVING_KWARGS}.reasoning_parser"
    pair = f"reasoning_parser {setup.reasoning_parser!r} + tool_parser {setup.tool_parser!r}"
    bad = [o for o in outcomes if o.verdict != "recovered"]
    if not bad:
        return [
            Finding(
                "tool-call-in-reasoning",
                INFO,
                key,
                f"a tool call written before '</think>' (closed after it or never) is recovered "
                f"by {pair}, streaming and non-streaming",
            )
        ]
    working = []
    for name in _THINKING_PARSERS:
        if name == setup.reasoning_parser:
            continue
        alt = ServedParsers(setup.tokenizer, setup.tool_parser, name, setup.effective_kwargs)
        normal = alt.parse(_probe_model_output(setup)[0], PROBE_TOOLS)
        if (
            _call_verdict(normal, _PROBE_CALL) == "recovered"
            and "Inspect the tree first." in (normal.reasoning or "")
            and all(o.verdict == "recovered" for o in tool_call_in_reasoning(setup, alt))
        ):
            working.append(name)
    verdicts = {o.verdict for o in bad}
    cases = (
        f"{bad[0].verdict} in every case: both shapes, streaming and non-streaming"
        if len(bad) == len(outcomes) and len(verdicts) == 1
        else "; ".join(f"{o.shape} ({o.mode}): {o.verdict}" for o in bad)
    )
    fix = f" Reasoning parsers that recover it: {', '.join(working)}." if working else ""
    return [
        Finding(
            "tool-call-in-reasoning",
            WARNING,
            key,
            f"a tool call the model writes before '</think>' does not come back as a clean tool "
            f"call with {pair} ({cases}); e.g. the server returns {bad[0].observed()}. NeMo RL "
            "counts such a turn in train/invalid_tool_call_rate only when the markup is in the "
            "turn's last output item (nemo_rl/environments/nemo_gym.py::"
            f"_detect_invalid_tool_call_and_malformed_thinking).{fix}",
        )
    ]


DEFAULT_THINKING_TAGS = ("<think>", "</think>")  # nemo_rl/environments/nemo_gym.py


def _think_token_ids(setup: ServingSetup) -> list[Finding]:
    """The malformed-think-tag penalty left with one think token id (the tokenizer decides).

    ``resolve_reward_penalty_config`` (``rollouts.py``) infers an id ``token_ids`` does not
    give only when its tag (``env.nemo_gym.thinking_tags``, else ``<think>``/``</think>``) is
    one token; with the other id given, ``apply_reward_penalties`` then raises at the first
    rollout.
    """
    cfg = setup.recipe.config
    if not (
        get_path(cfg, "env.should_use_nemo_gym") is True
        and get_path(cfg, "reward_penalties.penalize_malformed_think_tag")
    ):
        return []
    ids = get_path(cfg, "reward_penalties.token_ids")
    ids = ids if isinstance(ids, dict) else {}
    given = {k: ids.get(k) is not None for k in ("think_open", "think_close")}
    if given["think_open"] == given["think_close"]:
        return []  # both given, or neither (then both are inferred or both stay unset)
    tags = get_path(cfg, "env.nemo_gym.thinking_tags") or DEFAULT_THINKING_TAGS
    missing = "think_close" if given["think_open"] else "think_open"
    tag = None
    if isinstance(tags, list | tuple) and len(tags) >= 2:
        tag = tags[1] if missing == "think_close" else tags[0]
        if isinstance(tag, str) and len(setup.tokenizer.encode(tag, add_special_tokens=False)) == 1:
            return []  # inferred
    src = SOURCES["think-token-ids"][0]
    what = f"tag {tag!r} is not one token of {setup.tokenizer_source}" if tag else "no tag"
    return [
        Finding(
            "think-token-ids",
            ERROR,
            f"reward_penalties.token_ids.{missing}",
            f"penalize_malformed_think_tag with token_ids.{missing} unset and its {what}: "
            f"{src.where} {src.says} {src.cites!r}",
        )
    ]
