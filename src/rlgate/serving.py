"""The chat serving setup a NeMo RL config produces: tokenizer, template, parsers, kwargs, Gym.

NeMo RL builds vLLM's ``OpenAIServingChat`` from
``policy.generation.vllm_cfg.http_server_serving_chat_kwargs`` (``enable_auto_tools``
defaulting to True; ``chat_template_kwargs`` accepted as an alias of
``default_chat_template_kwargs``); NeMo Gym's ``vllm_model`` server adds its own
``chat_template_kwargs`` to every request, which win over the server defaults. vLLM
passes the merged kwargs to the parsers as they are, and to the template only the
ones the template references. :func:`serving_setup` reproduces all of that for one
recipe so that checks and tests look at what would really be served.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgate._errors import RecipeError
from rlgate.contiguity import SCENARIOS, Call, LoopContext, LoopResult, Turn, model_output, replay
from rlgate.findings import Finding, Severity
from rlgate.gym import GymChatPath, GymServer, gym_servers, vllm_model_config
from rlgate.parsers import ServedParsers, template_variables
from rlgate.parsers import serving_chat_parameters as parsers_serving_parameters
from rlgate.recipes import Recipe, functional_gate, get_path
from rlgate.templates import (
    PROBE_TOOLS,
    SERVING_KWARGS,
    ChatTemplate,
    TemplateProfile,
    ThinkingMode,
    ToolCallFormat,
    load_tokenizer,
    profile_template,
    resolve_tokenizer_source,
    served_template,
    tokenizer_folder,
    tokenizer_model_id,
)

__all__ = [
    "NoChatTemplate",
    "ServingSetup",
    "TokenizerUnavailable",
    "check_budget",
    "check_contiguity",
    "check_data",
    "check_parsers",
    "check_thinking",
    "serving_chat_parameters",
    "serving_setup",
]


def serving_chat_parameters() -> frozenset[str]:
    """Keys ``http_server_serving_chat_kwargs`` may hold (plus NeMo RL's alias)."""
    return parsers_serving_parameters() | {"chat_template_kwargs"}


def _template_variables(template: ChatTemplate) -> frozenset[str]:
    return template_variables(template.text)


_PROFILES: dict[tuple[str, str, str], TemplateProfile] = {}


@dataclass
class ServingSetup:
    """Everything that decides the tokens of a rollout, for one recipe."""

    recipe: Recipe
    tokenizer_source: str
    tokenizer: Any
    template: ChatTemplate
    tool_parser: str | None
    reasoning_parser: str | None
    enable_auto_tools: bool
    server_kwargs: dict[str, Any]  # default_chat_template_kwargs of the vLLM server
    gym_kwargs: dict[str, Any]  # chat_template_kwargs Gym's vllm_model adds to requests
    servers: list[GymServer]
    gym_model: GymServer | None
    _replays: dict[str, LoopResult] = field(default_factory=dict, repr=False)
    _context: LoopContext | None = field(default=None, repr=False)
    _profile: TemplateProfile | None = field(default=None, repr=False)

    @property
    def effective_kwargs(self) -> dict[str, Any]:
        """Merged chat_template_kwargs (request/Gym over server defaults), as parsers see them."""
        return {**self.server_kwargs, **self.gym_kwargs}

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """The kwargs vLLM actually passes to the template (those it references)."""
        used = _template_variables(self.template)
        return {k: v for k, v in self.effective_kwargs.items() if k in used}

    @property
    def ignored_kwargs(self) -> dict[str, Any]:
        """Kwargs vLLM silently drops because the template never reads them."""
        used = _template_variables(self.template)
        return {k: v for k, v in self.effective_kwargs.items() if k not in used}

    def profile(self) -> TemplateProfile:
        """The measured behaviour of the served template under the served kwargs.

        Cached per process by (tokenizer, template hash, kwargs): checking many configs of
        one model renders each template once.
        """
        if self._profile is None:
            key = (
                self.tokenizer_source,
                self.template.sha256,
                json.dumps(self.template_kwargs, sort_keys=True, default=repr),
            )
            if key not in _PROFILES:
                _PROFILES[key] = profile_template(
                    self.tokenizer, self.template, self.template_kwargs
                )
            self._profile = _PROFILES[key]
        return self._profile

    def parsers(self) -> ServedParsers:
        """The vLLM parser pair, constructed as the chat server constructs it."""
        return ServedParsers(
            self.tokenizer,
            self.tool_parser,
            self.reasoning_parser,
            self.effective_kwargs,
            enable_auto_tools=self.enable_auto_tools,
        )

    def loop_context(self, *, through_gym: bool = True) -> LoopContext:
        """A context for :func:`rlgate.contiguity.replay` (through Gym's code when it is used)."""
        gym = None
        if through_gym and self.gym_model is not None:
            gym = GymChatPath(self.gym_model.config)
        return LoopContext(
            self.tokenizer, self.template, self.parsers(), self.template_kwargs, gym=gym
        )

    def replay(self, scenario: str) -> LoopResult:
        """Replay a named scenario through Gym's path (cached: tests and checks share it)."""
        if scenario not in self._replays:
            if self._context is None:
                self._context = self.loop_context(through_gym=True)
            self._replays[scenario] = replay(self._context, SCENARIOS[scenario])
        return self._replays[scenario]

    def scenarios(self) -> list[str]:
        """Scenario names that apply: empty reasoning only exists when the model thinks."""
        thinking = self.profile().thinking
        return [n for n in SCENARIOS if n != "empty_reasoning" or thinking is ThinkingMode.OPEN]


class TokenizerUnavailable(RecipeError):
    """The config's tokenizer cannot be loaded here (offline, gated, a placeholder path).

    ``reason`` is one line: the tokenizer id, why, and what to do.
    """

    def __init__(self, model_id: str, source: str, cause: str) -> None:
        if not model_id:
            todo = (
                "the config leaves policy.model_name unset (a launcher fills it); override "
                "policy.model_name=<hub id> to check it"
            )
        elif model_id.startswith(("/", "./", "../", "~")):
            todo = (
                "the config names a local path that does not exist here; override "
                "policy.tokenizer.name=<hub id> (or policy.model_name) to check it"
            )
        else:
            todo = (
                f"put its files under --tokenizers DIR as {tokenizer_folder(model_id)}/ "
                "(or RLGATE_TOKENIZERS), or run with Hugging Face hub access (HF_TOKEN for a "
                "gated model)"
            )
        self.model_id = model_id
        named = f"tokenizer {model_id!r} not available ({cause})" if model_id else cause
        self.reason = f"{named}: {todo}"
        super().__init__(f"cannot load tokenizer {source!r}: {cause}", hint=todo)


class NoChatTemplate(RecipeError):
    """Neither the config nor the tokenizer provides a chat template."""


def _load_tokenizer(model_id: str, source: str) -> Any:
    if model_id.startswith(("/", "./", "../", "~")) and not Path(source).exists():
        raise TokenizerUnavailable(model_id, source, "no such directory here")
    try:
        return load_tokenizer(source)
    except RecipeError as exc:
        cause = str(exc.message).split(": ", 1)[-1]
        raise TokenizerUnavailable(model_id, source, cause) from exc


def _dict(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecipeError(f"{key} must be a mapping, got {value!r}")
    return dict(value)


def _served_template(config: dict[str, Any], tokenizer: Any) -> ChatTemplate:
    try:
        return served_template(config, tokenizer)
    except RecipeError as exc:
        raise NoChatTemplate(exc.message, hint=exc.hint) from exc
    except (OSError, UnicodeDecodeError) as exc:  # chat_template names a file
        path = get_path(config, f"{SERVING_KWARGS}.chat_template")
        raise RecipeError(f"{SERVING_KWARGS}.chat_template: cannot read {path!r}: {exc}") from exc


def serving_setup(recipe: Recipe, tokenizer_root: str | Path | None) -> ServingSetup:
    """Resolve the serving setup of ``recipe`` (loads the tokenizer; no GPU, no server)."""
    config = recipe.config
    kwargs = _dict(get_path(config, SERVING_KWARGS), SERVING_KWARGS)
    try:
        model_id = tokenizer_model_id(config)
    except RecipeError as exc:
        raise TokenizerUnavailable("", "", exc.message) from exc
    source = resolve_tokenizer_source(model_id, tokenizer_root)
    tokenizer = _load_tokenizer(model_id, source)
    server_kwargs = kwargs.get("default_chat_template_kwargs")
    if server_kwargs is None:
        server_kwargs = kwargs.get("chat_template_kwargs")
    servers: list[GymServer] = []
    gym_model = None
    nemo_gym = get_path(config, "env.nemo_gym")
    if get_path(config, "env.should_use_nemo_gym") and isinstance(nemo_gym, dict):
        servers = gym_servers(nemo_gym)
        gym_model = vllm_model_config(servers)
    gym_kwargs = _dict(
        gym_model.config.get("chat_template_kwargs") if gym_model else None,
        "Gym chat_template_kwargs",
    )
    return ServingSetup(
        recipe=recipe,
        tokenizer_source=source,
        tokenizer=tokenizer,
        template=_served_template(config, tokenizer),
        tool_parser=kwargs.get("tool_parser") or None,
        reasoning_parser=kwargs.get("reasoning_parser") or None,
        enable_auto_tools=bool(kwargs.get("enable_auto_tools", True)),
        server_kwargs=_dict(server_kwargs, f"{SERVING_KWARGS}.default_chat_template_kwargs"),
        gym_kwargs=gym_kwargs,
        servers=servers,
        gym_model=gym_model,
    )


# --- checks on the served setup ---------------------------------------------------

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

    (The config-only length checks are ``rlgate.compat.check_lengths``.)
    """
    cfg, out = setup.recipe.config, []
    total = get_path(cfg, "policy.max_total_sequence_length")
    if isinstance(total, bool):
        return out
    turns = _agent_turns(setup)
    if isinstance(total, int) and turns:
        # Measured: tokens one minimal tool turn (call + response) adds with this template.
        from rlgate.contiguity import SCENARIO_TOOLS

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
        from rlgate.templates import render

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


# --- a tool call written before </think> ---------------------------------------------------

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
    from rlgate.templates import THINK_CLOSE

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
