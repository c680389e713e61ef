"""Joint validation of a NeMo RL GRPO config: RL keys x Gym x template x parsers x async.

Each ``check_*`` function is pure over a loaded :class:`~rlgate.recipes.Recipe` (or its
:class:`~rlgate.serving.ServingSetup`) and returns :class:`~rlgate.findings.Finding`s.
Template and parser verdicts are *measured*: a probe conversation is rendered with the
served template and parsed back with the served vLLM parsers. Runtime asserts NeMo RL
only hits after allocating a cluster are reported here as errors, with the assert's
meaning; keys NeMo RL or Gym accept but never read are warnings, so NeMo RL's own
working configs pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlgate.contiguity import SCENARIOS, replay
from rlgate.findings import Finding, Severity
from rlgate.gym import check_server_keys
from rlgate.recipes import Recipe, get_path, load_recipe
from rlgate.schema import check_keys
from rlgate.serving import ServingSetup, serving_chat_parameters, serving_setup
from rlgate.templates import (
    PROBE_TOOLS,
    SERVING_KWARGS,
    ThinkingMode,
    ToolCallFormat,
)

__all__ = ["CompatReport", "check_recipe", "check_recipe_file"]

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO
_XML_PARSERS, _JSON_PARSERS = ("qwen3_coder", "qwen3_xml"), ("hermes",)
_FORMAT_NAMES = {ToolCallFormat.XML: "XML (<function=...>)", ToolCallFormat.JSON: "JSON (hermes)"}


def _is_async(cfg: dict[str, Any]) -> bool:
    return bool(get_path(cfg, "grpo.async_grpo.enabled"))


def _uses_gym(cfg: dict[str, Any]) -> bool:
    return bool(get_path(cfg, "env.should_use_nemo_gym"))


def check_async(recipe: Recipe) -> list[Finding]:
    """What ``async_grpo_train`` and the Gym rollout path assert only at runtime."""
    cfg, out = recipe.config, []
    gen = get_path(cfg, "policy.generation", {}) or {}
    backend = gen.get("backend")
    if _is_async(cfg):
        if backend not in ("vllm", "megatron", "trtllm", "dynamo"):
            out.append(
                Finding(
                    "async-backend",
                    E,
                    "policy.generation.backend",
                    f"async GRPO supports vllm, megatron, trtllm, dynamo; got {backend!r}",
                )
            )
        if get_path(cfg, "policy.generation.colocated.enabled") and backend != "megatron":
            out.append(
                Finding(
                    "async-colocated",
                    E,
                    "policy.generation.colocated.enabled",
                    "async GRPO asserts non-colocated generation unless the backend is megatron; set colocated.enabled: false and give generation its own nodes",
                )
            )
        if not get_path(cfg, "loss_fn.use_importance_sampling_correction"):
            out.append(
                Finding(
                    "async-importance-sampling",
                    E,
                    "loss_fn.use_importance_sampling_correction",
                    "async GRPO asserts importance-sampling correction ('must be enabled for async GRPO')",
                )
            )
        age = get_path(cfg, "grpo.async_grpo.max_trajectory_age_steps", 1) or 1
        inflight = get_path(cfg, "grpo.async_grpo.in_flight_weight_updates")
        if age > 1 and not inflight:
            out.append(
                Finding(
                    "async-age-without-inflight",
                    W,
                    "grpo.async_grpo.max_trajectory_age_steps",
                    f"max_trajectory_age_steps={age} without in_flight_weight_updates: NeMo RL warns; generation stalls at every refit",
                )
            )
        if backend == "dynamo" and inflight:
            out.append(
                Finding(
                    "async-dynamo-inflight",
                    E,
                    "grpo.async_grpo.in_flight_weight_updates",
                    "the dynamo backend requires in_flight_weight_updates: false",
                )
            )
        for key in (
            "grpo.use_dynamic_sampling",
            "grpo.reward_scaling.enabled",
            "grpo.reward_shaping.enabled",
            "data.use_multiple_dataloader",
        ):
            if get_path(cfg, key):
                out.append(
                    Finding(
                        "async-unsupported",
                        E,
                        key,
                        f"{key}: true raises NotImplementedError in async GRPO",
                    )
                )
        if get_path(cfg, "policy.router_replay.enabled") and get_path(cfg, "data_plane.enabled"):
            out.append(
                Finding(
                    "async-r3-data-plane",
                    E,
                    "policy.router_replay.enabled",
                    "router replay (R3) with data_plane.enabled raises NotImplementedError",
                )
            )
    if _uses_gym(cfg):
        if get_path(cfg, "grpo.max_val_samples") is not None:
            out.append(
                Finding(
                    "gym-max-val-samples",
                    E,
                    "grpo.max_val_samples",
                    "run_grpo_nemo_gym.py raises on a non-null grpo.max_val_samples (it is set to the validation set size)",
                )
            )
        if gen.get("top_k") not in (None, 0):
            out.append(
                Finding(
                    "gym-top-k",
                    E,
                    "policy.generation.top_k",
                    f"top_k={gen.get('top_k')!r}: the NeMo Gym rollout path asserts top_k is unset (not OpenAI-compatible)",
                )
            )
        if gen.get("temperature") == 0:
            out.append(
                Finding(
                    "gym-greedy",
                    E,
                    "policy.generation.temperature",
                    "greedy decoding is asserted against on the NeMo Gym path",
                )
            )
        for key in ("stop_strings", "stop_token_ids"):
            if gen.get(key):
                out.append(
                    Finding(
                        "gym-stop",
                        W,
                        f"policy.generation.{key}",
                        f"{key} is forced to null on the NeMo Gym path; the value is ignored",
                    )
                )
        if get_path(cfg, "policy.generation.val_top_k") is not None:
            out.append(
                Finding(
                    "gym-val-top-k",
                    E,
                    "policy.generation.val_top_k",
                    "val_top_k is rejected on the vLLM + Gym path",
                )
            )
    return out


def check_topology(recipe: Recipe) -> list[Finding]:
    """Cluster split and batch-size arithmetic that ``setup()`` asserts."""
    cfg, out = recipe.config, []
    nodes, gpn = get_path(cfg, "cluster.num_nodes"), get_path(cfg, "cluster.gpus_per_node")
    if not get_path(cfg, "policy.generation.colocated.enabled", True):
        res = get_path(cfg, "policy.generation.colocated.resources", {}) or {}
        gen_nodes, gen_gpn = res.get("num_nodes"), res.get("gpus_per_node")
        if isinstance(nodes, int) and nodes > 1:
            if not isinstance(gen_nodes, int) or gen_nodes < 1 or gen_nodes >= nodes:
                out.append(
                    Finding(
                        "topology-generation-nodes",
                        E,
                        "policy.generation.colocated.resources.num_nodes",
                        f"multi-node non-colocated needs 1 <= generation nodes < cluster.num_nodes ({nodes}); got {gen_nodes!r}",
                    )
                )
            if gen_gpn != gpn:
                out.append(
                    Finding(
                        "topology-gpus-per-node",
                        E,
                        "policy.generation.colocated.resources.gpus_per_node",
                        f"generation gpus_per_node ({gen_gpn}) must equal cluster.gpus_per_node ({gpn})",
                    )
                )
        elif gen_nodes not in (None, 1):
            out.append(
                Finding(
                    "topology-single-node",
                    E,
                    "policy.generation.colocated.resources.num_nodes",
                    f"single-node non-colocated needs resources.num_nodes null or 1; got {gen_nodes}",
                )
            )
    prompts, gens = (
        get_path(cfg, "grpo.num_prompts_per_step"),
        get_path(cfg, "grpo.num_generations_per_prompt"),
    )
    gbs = get_path(cfg, "policy.train_global_batch_size")
    if all(isinstance(v, int) for v in (prompts, gens, gbs)) and gbs != prompts * gens:
        out.append(
            Finding(
                "batch-size",
                E,
                "policy.train_global_batch_size",
                f"train_global_batch_size {gbs} != num_prompts_per_step x num_generations_per_prompt = {prompts * gens}: every step is skipped ('Unexpected training batch size')",
            )
        )
    return out


def _agent_turns(setup: ServingSetup) -> int | None:
    turns = [
        s.config.get("agent_max_turns")
        for s in setup.servers
        if s.server_type == "responses_api_agents"
    ]
    turns = [t for t in turns if isinstance(t, int)]
    return max(turns) if turns else None


def check_budget(setup: ServingSetup) -> list[Finding]:
    """Sequence budget: max_total_sequence_length vs vLLM context vs turns x per-turn tokens."""
    cfg, out = setup.recipe.config, []
    total = get_path(cfg, "policy.max_total_sequence_length")
    model_len = get_path(cfg, "policy.generation.vllm_cfg.max_model_len")
    new_tokens = get_path(cfg, "policy.generation.max_new_tokens")
    if isinstance(total, int) and isinstance(model_len, int) and total > model_len:
        out.append(
            Finding(
                "budget-model-len",
                W,
                "policy.generation.vllm_cfg.max_model_len",
                f"max_total_sequence_length {total} > vLLM max_model_len {model_len}: the engine truncates at its own limit (NeMo RL only warns)",
            )
        )
    if isinstance(total, int) and isinstance(new_tokens, int) and new_tokens > total:
        out.append(
            Finding(
                "budget-new-tokens",
                W,
                "policy.generation.max_new_tokens",
                f"max_new_tokens {new_tokens} > max_total_sequence_length {total}",
            )
        )
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
        msg = f"{turns} agent turns in {total} tokens leaves {per_turn:.0f} tokens per turn; the template alone spends {overhead} tokens on a minimal tool turn"
        if per_turn < 4 * overhead or per_turn < 256:
            out.append(
                Finding(
                    "budget-turns",
                    W,
                    "policy.max_total_sequence_length",
                    msg
                    + ": trajectories will hit the length limit (truncation_rate) long before agent_max_turns",
                )
            )
        else:
            out.append(Finding("budget-turns", I, "policy.max_total_sequence_length", msg))
    return out


def check_serving_kwargs(recipe: Recipe) -> list[Finding]:
    """Keys of http_server_serving_chat_kwargs must be OpenAIServingChat parameters."""
    kwargs = get_path(recipe.config, SERVING_KWARGS) or {}
    allowed = sorted(serving_chat_parameters())
    out = []
    for key in kwargs if isinstance(kwargs, dict) else ():
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            out.append(
                Finding(
                    "serving-kwarg",
                    E,
                    f"{SERVING_KWARGS}.{key}",
                    f"vLLM's OpenAIServingChat has no parameter {key!r}: NeMo RL passes these kwargs straight to it and the server fails to start{hint}",
                )
            )
    for key in ("tool_parser", "reasoning_parser", "chat_template"):
        if get_path(recipe.config, f"policy.generation.vllm_cfg.{key}") is not None:
            out.append(
                Finding(
                    "serving-kwarg-level",
                    E,
                    f"policy.generation.vllm_cfg.{key}",
                    f"{key} belongs in {SERVING_KWARGS}; under vllm_cfg it is ignored",
                )
            )
    return out


def check_gym(setup: ServingSetup) -> list[Finding]:
    """Gym server configs validated against nemo-gym's own pydantic models."""
    cfg, out = setup.recipe.config, []
    if not _uses_gym(cfg):
        return out
    paths = get_path(cfg, "env.nemo_gym.config_paths") or []
    if not any(str(p).endswith("_for_training.yaml") for p in paths):
        out.append(
            Finding(
                "gym-training-model",
                E,
                "env.nemo_gym.config_paths",
                "no *_for_training.yaml model config: NeMo RL requires Gym's policy model to return token ids (vllm_model_for_training.yaml)",
            )
        )
    if setup.gym_model is not None and not setup.gym_model.config.get(
        "return_token_id_information"
    ):
        out.append(
            Finding(
                "gym-token-ids",
                E,
                f"env.nemo_gym.{setup.gym_model.instance}",
                "Gym's policy model must set return_token_id_information: true for training",
            )
        )
    for server in setup.servers:
        for f in check_server_keys(server):
            sev = E if f.suggestion else W
            what = f"did you mean {f.suggestion}?" if f.suggestion else "Gym ignores it"
            out.append(
                Finding(
                    "gym-key",
                    sev,
                    f.path,
                    f"{f.model} (nemo-gym) has no field {f.path.rsplit('.', 1)[-1]!r}: {what}",
                )
            )
        for key, value in server.config.items():
            if value == "???" and key in server.overridden | {
                "container_formatter",
                "dataset_path",
            }:
                out.append(
                    Finding(
                        "gym-missing",
                        E,
                        f"env.nemo_gym.{server.instance}.{server.server_type}.{server.implementation}.{key}",
                        "mandatory Gym value (???) is not set",
                    )
                )
    return out


def _probe_model_output(setup: ServingSetup) -> tuple[str, Any]:
    """What a model served with this template writes for one reasoning + tool-call turn."""
    from rlgate.contiguity import Call, Turn, _model_turn, _render

    ctx = setup.loop_context(through_gym=False)
    ctx.tools = PROBE_TOOLS
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "Fix the bug."}]
    prompt = _render(ctx, msgs, gen=True)
    turn = Turn(
        "Inspect the tree first.",
        "",
        (Call("rlgate_probe_tool", {"command": "ls -la /testbed", "count": 3}),),
    )
    text = _model_turn(ctx, msgs, turn, prompt)
    eos = setup.tokenizer.eos_token or ""
    return (text[: -len(eos)] if eos and text.endswith(eos) else text), ctx


def _parses_calls(setup: ServingSetup, text: str, tool_parser: str | None) -> bool:
    from rlgate.parsers import ServedParsers

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
            I,
            SERVING_KWARGS,
            f"served template ({setup.template.source}, sha256 {setup.template.sha256[:12]}): tool calls {fmt.value}, thinking {profile.thinking.value}, generation prompt {profile.generation_prompt!r}",
        )
    )
    text, ctx = _probe_model_output(setup)
    parsed = setup.parsers().parse(text, PROBE_TOOLS)
    if setup.tool_parser is None:
        if setup.servers:
            out.append(
                Finding(
                    "no-tool-parser",
                    E,
                    key,
                    f"no tool_parser: the model's {_FORMAT_NAMES.get(fmt, fmt.value)} tool calls stay in the message text and the agent sees no calls",
                )
            )
    elif not _parses_calls(setup, text, setup.tool_parser):
        working = [p for p in (*_XML_PARSERS, *_JSON_PARSERS) if _parses_calls(setup, text, p)]
        fix = f" Parsers that do: {', '.join(working)}." if working else ""
        out.append(
            Finding(
                "tool-parser-mismatch",
                E,
                key,
                f"tool_parser {setup.tool_parser!r} cannot parse the tool calls this template writes ({_FORMAT_NAMES.get(fmt, fmt.value)}), e.g. {profile.call_text[:120]!r}; they would be left in the message text (Gym counts them as invalid tool calls).{fix}",
            )
        )
    rkey = f"{SERVING_KWARGS}.reasoning_parser"
    gym_rp = setup.gym_model.config.get("uses_reasoning_parser", True) if setup.gym_model else None
    if profile.thinking is ThinkingMode.OPEN:
        if setup.reasoning_parser is None:
            out.append(
                Finding(
                    "reasoning-not-parsed",
                    E,
                    rkey,
                    "the template opens <think> in the generation prompt but no reasoning_parser is set: reasoning and '</think>' land in the content (malformed thinking, broken tool-call parsing)",
                )
            )
        elif "Inspect the tree first." not in (parsed.reasoning or ""):
            out.append(
                Finding(
                    "reasoning-parser-mismatch",
                    E,
                    rkey,
                    f"reasoning_parser {setup.reasoning_parser!r} does not recover the reasoning this template makes the model write (got reasoning={parsed.reasoning!r}); kwargs seen by the parser: {setup.effective_kwargs}",
                )
            )
    elif setup.reasoning_parser and parsed.reasoning:
        out.append(
            Finding(
                "reasoning-parser-swallows-content",
                E,
                rkey,
                f"thinking is {profile.thinking.value} in the served template, but reasoning_parser {setup.reasoning_parser!r} turns the model's answer into reasoning ({parsed.reasoning[:80]!r}); the content and tool calls are lost",
            )
        )
    if gym_rp is False and setup.reasoning_parser:
        out.append(
            Finding(
                "gym-reasoning-parser",
                E,
                f"env.nemo_gym.{setup.gym_model.instance}",
                "Gym's policy model sets uses_reasoning_parser: false while vLLM runs a reasoning parser: Gym raises an AssertionError on every response with reasoning",
            )
        )
    return out


def check_thinking(setup: ServingSetup) -> list[Finding]:
    """Thinking kwargs and history-thinking truncation in multi-turn agent recipes."""
    out, profile = [], setup.profile()
    for name, value in setup.ignored_kwargs.items():
        sev = (
            E
            if name == "enable_thinking"
            and value is False
            and profile.thinking is ThinkingMode.OPEN
            else W
        )
        out.append(
            Finding(
                "template-ignores-kwarg",
                sev,
                f"{SERVING_KWARGS}.default_chat_template_kwargs",
                f"chat_template_kwargs {name}={value!r}: the served template never reads {name!r}, so vLLM drops it"
                + (" and thinking stays on" if sev is E else ""),
            )
        )
    if setup.effective_kwargs.get("truncate_history_thinking") is True:
        out.append(
            Finding(
                "truncate-history-thinking",
                E,
                f"{SERVING_KWARGS}.default_chat_template_kwargs",
                "truncate_history_thinking: true breaks the rollout token contract (NVIDIA-NeMo/RL#3931): training must see the reasoning generation saw",
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
                    E,
                    where,
                    "uses_interleaved_reasoning: false drops every earlier turn's reasoning before it reaches vLLM",
                )
            )
        if gcfg.get("reasoning_field") == "reasoning_content":
            out.append(
                Finding(
                    "gym-reasoning-field",
                    E,
                    where,
                    "reasoning_field: reasoning_content - vLLM >= 0.16 reads only `reasoning` from history messages, so history reasoning is dropped",
                )
            )
    if (
        multi_turn
        and profile.thinking is not ThinkingMode.NONE
        and not profile.keeps_reasoning_after_new_user_turn
    ):
        sev = E if profile.thinking is ThinkingMode.OPEN else W
        out.append(
            Finding(
                "history-thinking-dropped",
                sev,
                f"{SERVING_KWARGS}.chat_template",
                f"the served template ({setup.template.source}) drops earlier turns' <think> blocks once a new user message arrives (harness nudges, multi-turn agents); the next prompt no longer extends the generated tokens ('Non-contiguous messages'). Serve a thinking-preserving template",
            )
        )
    return out


def check_contiguity(setup: ServingSetup) -> list[Finding]:
    """Replay agent loops through template, parsers and Gym; report token divergences."""
    if not setup.servers:
        return []
    out, ctx = [], setup.loop_context(through_gym=True)
    for scenario in SCENARIOS.values():
        if scenario.name == "empty_reasoning" and ctx.thinking is not ThinkingMode.OPEN:
            continue
        result = replay(ctx, scenario)
        if result.problems:
            detail = "; ".join(result.problems[:3])
            out.append(
                Finding(
                    f"round-trip-{scenario.name}",
                    E,
                    SERVING_KWARGS,
                    f"{scenario.description}: {detail}",
                )
            )
        if result.divergence is not None:
            splice = (
                "NeMo RL's EOS-count splice can restore the prefix when the agent echoes token ids"
                if result.splice_restores
                else "NeMo RL's EOS-count splice cannot find its boundary"
            )
            out.append(
                Finding(
                    f"non-contiguous-{scenario.name}",
                    W,
                    SERVING_KWARGS,
                    f"{scenario.description}: {result.divergence.describe()} ({splice})",
                )
            )
    return out


class CompatReport:
    """All findings for one recipe."""

    def __init__(
        self, recipe: Recipe, findings: Sequence[Finding], setup: ServingSetup | None
    ) -> None:
        self.recipe, self.findings, self.setup = recipe, list(findings), setup

    @property
    def errors(self) -> list[Finding]:
        """Findings that make the config incompatible."""
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def ok(self) -> bool:
        """True when there is no error."""
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``rlgate recipe check --json``)."""
        return {
            "recipe": str(self.recipe.path),
            "name": self.recipe.name,
            "overrides": list(self.recipe.overrides),
            "compatible": self.ok,
            "tokenizer": self.setup.tokenizer_source if self.setup else None,
            "template": {"source": self.setup.template.source, "sha256": self.setup.template.sha256}
            if self.setup
            else None,
            "profile": self.setup.profile().as_dict() if self.setup else None,
            "findings": [f.as_dict() for f in self.findings],
        }


def check_recipe(recipe: Recipe, tokenizer_root: str | Path | None) -> CompatReport:
    """Run every check on a loaded recipe."""
    findings = [
        Finding(
            "unresolved-interpolation",
            W,
            u.key,
            f"{u.expression} cannot be resolved here ({u.reason}); it must resolve where the run starts",
        )
        for u in recipe.unresolved
    ]
    findings += (
        check_keys(recipe.config)
        + check_async(recipe)
        + check_topology(recipe)
        + check_serving_kwargs(recipe)
    )
    setup = serving_setup(recipe, tokenizer_root)
    steps: list[Callable[[ServingSetup], list[Finding]]] = [
        check_gym,
        check_parsers,
        check_thinking,
        check_budget,
        check_contiguity,
    ]
    for step in steps:
        findings += step(setup)
    return CompatReport(recipe, findings, setup)


def check_recipe_file(
    path: str | Path, overrides: Sequence[str] = (), tokenizer_root: str | Path | None = None
) -> CompatReport:
    """Load ``path`` with ``overrides`` and run every check."""
    return check_recipe(load_recipe(path, overrides), tokenizer_root)
