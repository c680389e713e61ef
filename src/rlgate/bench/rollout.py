"""The rollout path's own CPU cost per turn: prompt preparation, Gym conversion, parsing.

Every model call of a long-horizon agent rollout pays, on the vLLM front-end and the Gym
servers, for work that grows with the conversation: vLLM re-renders the whole history
through the chat template and re-tokenizes it (NeMo Gym's ``vllm_model`` asks ``/tokenize``
for the same prompt again), Gym converts the whole Responses input to Chat messages, and
streaming parsers re-scan growing text. This module measures those costs for one recipe
on its real served components (:func:`rlgate.serving.setup.serving_setup`) over a trajectory
replayed from real SWE rollouts (:mod:`rlgate.bench.trajectory`):

* **prompt preparation** per model call: *full* (what runs today: normalise the messages
  as vLLM does, render the template, tokenize the whole prompt) against *incremental*
  (append the model's own generated ids, then render and tokenize only the new tool
  messages and the generation prompt). Whether the incremental ids equal the full ones is
  recorded per call (token contiguity);
* **Gym conversion** per model call: vLLM's reply -> Responses items, then the whole
  Responses input -> Chat messages with Gym's history preprocessing (nemo-gym's code);
* **parsing** of one model output of ~N tokens (reasoning + a ``write`` call with real
  code): vLLM streaming (``parse_delta`` per token, incremental detokenization) and
  one-shot (``parse``).

Invariants: nothing is simulated (no sleeps, no cost model); every repeat measures the
whole path again and is kept, so the gate (:mod:`rlgate.bench.gate`) sees the noise.
Nothing here asserts on wall time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.bench.cputime import clock, elapsed_ms, timing
from rlgate.bench.gate import fit_exponent
from rlgate.bench.limits import MAX_PARSER_LENGTHS, MAX_PARSER_TOKENS, MAX_REPEATS
from rlgate.bench.parsing import ParseRun, build_parser_outputs, measure_parsing
from rlgate.bench.trajectory import (
    ModelCall,
    SuffixRenderer,
    SweSource,
    Trajectory,
    TrajectorySpec,
    agent_servers,
    build_trajectory,
    load_swe_source,
    trajectory_spec,
)
from rlgate.core.errors import RecipeError
from rlgate.recipe.load import Recipe
from rlgate.serving.contiguity import LoopContext, vllm_conversation
from rlgate.serving.setup import ServingSetup
from rlgate.serving.templates import (
    render,
    resolve_tokenizer_source,
    tokenizer_folder,
    tokenizer_model_id,
)

__all__ = [
    "CLI_PARSER_LENGTHS",
    "FULL_PASSES_PER_CALL",
    "TIER_PARSER_LENGTHS",
    "TIER_REPEATS",
    "TIER_TURNS",
    "BenchConfig",
    "BenchInputs",
    "ClusterShape",
    "GymRun",
    "PromptRun",
    "RolloutBench",
    "bench_config",
    "bench_metrics",
    "call_messages",
    "cluster_shape",
    "collect_bench",
    "growth_exponent",
    "gym_pass",
    "measure_gym",
    "measure_prompts",
    "parse_pass",
    "prepare_bench",
    "prompt_pass",
    "run_rollout_bench",
    "tier_config",
    "tokenizer_unavailable",
    "warm_up",
]

log = logging.getLogger(__name__)

CLI_PARSER_LENGTHS: tuple[int, ...] = (1024, 4096, 16384)
# The perf tier's configuration (tests/perf/test_rollout_path.py): small enough for CI
# (seconds per recipe), large enough to fit exponents; baselines store both configurations.
TIER_TURNS = 24
TIER_PARSER_LENGTHS: tuple[int, ...] = (256, 512, 1024)
TIER_REPEATS = 3
# Full render + tokenize passes per model call as NeMo RL + Gym serve it today: NeMo RL's
# vLLM server (nemo_rl/models/generation/vllm/vllm_worker_async.py @7ea279abf,
# preprocess_chat) renders and tokenizes the whole request, then the history up to the last
# assistant message again for its prefix splice; Gym's vllm_model (0.7.0 app.py, default
# request_prompt_and_generation_token_ids: false) then POSTs the same messages to
# /tokenize, which runs the same preprocess_chat: 4 passes (2 on a rollout's first call).
FULL_PASSES_PER_CALL = 4


# --- prompt preparation and Gym conversion ------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptRun:
    """Per-model-call prompt preparation costs of one pass over a trajectory (ms)."""

    prompt_tokens: tuple[int, ...]
    new_tokens: tuple[int, ...]  # generated + appended tokens since the previous call
    render_ms: tuple[float, ...]
    tokenize_ms: tuple[float, ...]
    incremental_ms: tuple[float, ...]
    mismatched_turns: tuple[int, ...]  # calls whose incremental ids differ from the full ids

    @property
    def full_ms(self) -> tuple[float, ...]:
        """Render + tokenize per call."""
        return tuple(r + t for r, t in zip(self.render_ms, self.tokenize_ms, strict=True))


@dataclass(frozen=True, slots=True)
class GymRun:
    """Per-model-call Gym conversion costs of one pass (ms; from the second call on)."""

    ms: tuple[float, ...]


def _gym_step(gym: Any, items: list[Any], call: ModelCall, tools: Any) -> list[dict[str, Any]]:
    """Gym's two conversions after a call: reply -> Responses items; input -> Chat."""
    items += [
        i.model_dump(exclude_none=True) if hasattr(i, "model_dump") else i
        for i in gym.response_items(call.reply)
    ]
    items += [
        {"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]}
        for m in call.tool_messages
    ]
    return gym.vllm_messages(items, tools)


def _opening_items(trajectory: Trajectory) -> list[Any]:
    return [{**m, "type": "message"} for m in trajectory.opening]


def call_messages(trajectory: Trajectory, gym: Any = None) -> tuple[list[dict[str, Any]], ...]:
    """The chat messages vLLM receives at each call (untimed).

    Gym's conversion when the recipe uses Gym, else the history as vLLM returned it plus
    the tool messages.
    """
    messages = [dict(m) for m in trajectory.opening]
    items = _opening_items(trajectory)
    out = [messages]
    for call in trajectory.calls[:-1]:
        if gym is not None:
            messages = _gym_step(gym, items, call, trajectory.tools)
        else:
            reply = {key: v for key, v in call.reply.items() if v}
            messages = [*messages, reply, *call.tool_messages]
        out.append(messages)
    return tuple(out)


def measure_gym(gym: Any, trajectory: Trajectory, reps: int = 3) -> GymRun:
    """Time Gym's conversions call by call over the growing history.

    The whole sequence runs ``reps`` times and each call keeps its fastest time (the
    conversions take milliseconds, so one run is mostly scheduler noise).
    """
    best: list[float] = []
    for _ in range(reps):
        items = _opening_items(trajectory)
        ms = []
        for call in trajectory.calls[:-1]:
            start = clock()
            _gym_step(gym, items, call, trajectory.tools)
            ms.append(elapsed_ms(start))
        best = [min(a, b) for a, b in zip(best, ms, strict=True)] if best else ms
    return GymRun(tuple(best))


def measure_prompts(
    ctx: LoopContext, trajectory: Trajectory, messages: Sequence[Sequence[dict[str, Any]]]
) -> PromptRun:
    """One timed pass: per call, full render + tokenize, and the incremental append."""
    suffixer = SuffixRenderer(ctx)
    cols: dict[str, list[Any]] = {k: [] for k in ("tok", "new", "ren", "enc", "inc", "bad")}
    running: list[int] = []
    for k, history in enumerate(messages):
        start = clock()
        conv = vllm_conversation(ctx, history)
        text = render(
            ctx.tokenizer, ctx.template, conv, trajectory.tools, add_generation_prompt=True,
            **ctx.template_kwargs,
        )  # fmt: skip
        rendered = clock()
        ids = ctx.encode(text)
        cols["ren"].append((rendered - start) * 1e3)
        cols["enc"].append(elapsed_ms(rendered))
        if k == 0:  # the first prompt is prepared whole either way
            running = list(ids)
            cols["inc"].append(cols["ren"][-1] + cols["enc"][-1])
            cols["new"].append(len(ids))
        else:
            prev = trajectory.calls[k - 1]
            start = clock()
            before = len(running)
            running.extend(prev.gen_ids)
            running.extend(ctx.encode(suffixer.suffix(prev.tool_messages)))
            cols["inc"].append(elapsed_ms(start))
            cols["new"].append(len(running) - before)
        cols["tok"].append(len(ids))
        if running != ids:
            cols["bad"].append(k)
            running = list(ids)  # resynchronise: count each divergent call once
    return PromptRun(
        tuple(cols["tok"]), tuple(cols["new"]), tuple(cols["ren"]), tuple(cols["enc"]),
        tuple(cols["inc"]), tuple(cols["bad"]),
    )  # fmt: skip


# --- a whole bench -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What makes two measurements comparable (a baseline entry must match it exactly)."""

    turns: int
    max_turns: int
    max_total_tokens: int
    parser_lengths: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON form, as stored in baselines."""
        return {
            "turns": self.turns,
            "agent_max_turns": self.max_turns,
            "max_total_sequence_length": self.max_total_tokens,
            "parser_lengths": list(self.parser_lengths),
        }


def bench_config(
    recipe: Recipe, turns: int | None = None, parser_lengths: Sequence[int] = CLI_PARSER_LENGTHS
) -> BenchConfig:
    """The configuration a bench of ``recipe`` runs with (no tokenizer needed).

    ``turns=None`` means the recipe's ``agent_max_turns`` (the CLI default); the perf
    tier uses :func:`tier_config`.

    Raises:
        RecipeError: the recipe cannot be sized, or the parser lengths are invalid.
    """
    lengths = tuple(parser_lengths)
    if not lengths or any(n < 64 for n in lengths) or len(set(lengths)) != len(lengths):
        raise RecipeError(f"parser lengths must be distinct and >= 64 tokens, got {list(lengths)}")
    if len(lengths) > MAX_PARSER_LENGTHS or max(lengths) > MAX_PARSER_TOKENS:
        raise RecipeError(
            f"at most {MAX_PARSER_LENGTHS} parser lengths of at most {MAX_PARSER_TOKENS:,} "
            f"tokens, got {len(lengths)} up to {max(lengths):,}"
        )
    spec = trajectory_spec(recipe, turns)
    return BenchConfig(spec.turns, spec.max_turns, spec.max_total_tokens, lengths)


def tier_config(recipe: Recipe) -> BenchConfig:
    """The perf tier's configuration for ``recipe`` (``TIER_TURNS`` capped by the recipe)."""
    spec = trajectory_spec(recipe)
    return bench_config(recipe, min(TIER_TURNS, spec.max_turns), TIER_PARSER_LENGTHS)


def tokenizer_unavailable(recipe: Recipe, tokenizer_root: str | Path | None) -> str | None:
    """Why the recipe's tokenizer cannot load here without a download (None when it can).

    A local folder under ``tokenizer_root`` or the HF cache makes it available; so does a
    reachable hub (``HF_HUB_OFFLINE`` unset), in which case a failed load is an error.
    """
    model_id = tokenizer_model_id(recipe.facts)
    if Path(resolve_tokenizer_source(model_id, tokenizer_root)).is_dir():
        return None
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in {"1", "true", "yes", "on"}:
        return None
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model_id, "tokenizer_config.json"), str):
        return None
    where = (
        f"no {tokenizer_folder(model_id)}/ under {tokenizer_root}"
        if tokenizer_root
        else "no --tokenizers root"
    )
    return f"tokenizer {model_id!r} is not available offline ({where}; HF_HUB_OFFLINE is set)"


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """How many rollouts a step runs and where: scales per-rollout costs to a cluster."""

    rollouts_per_step: int | None  # grpo.num_prompts_per_step x num_generations_per_prompt
    gym_concurrency: int | None  # the largest Gym agent `concurrency`
    vllm_servers: int | None  # generation GPUs / (TP x PP): one HTTP front-end each


def cluster_shape(recipe: Recipe) -> ClusterShape:
    """The rollout count per step, Gym concurrency and generation topology of ``recipe``."""
    conc = [s.config.get("concurrency") for s in agent_servers(recipe)]
    conc = [c for c in conc if isinstance(c, int) and not isinstance(c, bool) and c > 0]
    return ClusterShape(
        recipe.facts.grpo.rollouts_per_step,
        max(conc, default=None),
        recipe.facts.policy.generation.vllm_servers,
    )


@dataclass(frozen=True, slots=True)
class BenchInputs:
    """Everything a timed pass needs, prepared once (untimed)."""

    recipe: Recipe
    ctx: LoopContext
    gym: Any  # rlgate.serving.gym.GymChatPath, or None when the recipe does not use Gym
    trajectory: Trajectory
    messages: tuple[list[dict[str, Any]], ...]  # what vLLM receives at each call
    parser_outputs: tuple[tuple[str, tuple[int, ...]], ...]
    config: BenchConfig
    cluster: ClusterShape


def prepare_bench(
    setup: ServingSetup, config: BenchConfig, *, source: SweSource | None = None
) -> BenchInputs:
    """Build the trajectory, per-call messages and parser outputs of ``setup``."""
    from rlgate.serving.gym import GymChatPath

    recipe = setup.recipe
    spec = TrajectorySpec(recipe.name, config.turns, config.max_turns, config.max_total_tokens)
    source = source or load_swe_source()
    ctx = setup.loop_context(through_gym=False)
    trajectory = build_trajectory(ctx, spec, source)
    outputs = tuple(build_parser_outputs(ctx, source, config.parser_lengths))
    gym = GymChatPath(setup.gym_model.config) if setup.gym_model is not None else None
    messages = call_messages(trajectory, gym)
    return BenchInputs(
        recipe, ctx, gym, trajectory, messages, outputs, config, cluster_shape(recipe)
    )


def prompt_pass(inputs: BenchInputs) -> PromptRun:
    """One timed pass of prompt preparation over the trajectory (collector paused)."""
    with timing():
        return measure_prompts(inputs.ctx, inputs.trajectory, inputs.messages)


def gym_pass(inputs: BenchInputs) -> GymRun | None:
    """One timed pass of Gym's conversions (None when the recipe does not use Gym)."""
    if inputs.gym is None:
        return None
    with timing():
        return measure_gym(inputs.gym, inputs.trajectory)


def parse_pass(inputs: BenchInputs) -> ParseRun:
    """One timed pass of streaming and one-shot parsing over the parser outputs."""
    with timing():
        return measure_parsing(inputs.ctx, inputs.parser_outputs, inputs.trajectory.tools)


def warm_up(inputs: BenchInputs) -> None:
    """Run each path once, untimed, on small inputs (lazy imports, caches, allocator)."""
    traj = inputs.trajectory
    short = Trajectory(
        traj.spec, traj.opening, traj.tools, traj.calls[:3], traj.prompt_tokens[:3], 0, 0
    )
    measure_prompts(inputs.ctx, short, inputs.messages[:3])
    if inputs.gym is not None:
        measure_gym(inputs.gym, short)
    measure_parsing(inputs.ctx, inputs.parser_outputs[:1], inputs.trajectory.tools)


@dataclass(frozen=True, slots=True)
class RolloutBench:
    """Every repeat of one recipe's bench."""

    recipe: str
    config: BenchConfig
    cluster: ClusterShape
    prompt_tokens: tuple[int, ...]  # prompt length at each call
    generated_tokens: int  # tokens the model wrote over the trajectory
    skipped_steps: int
    prompt_runs: tuple[PromptRun, ...]
    gym_runs: tuple[GymRun, ...]
    parse_runs: tuple[ParseRun, ...]


def collect_bench(
    inputs: BenchInputs,
    prompt_runs: Sequence[PromptRun],
    gym_runs: Sequence[GymRun | None],
    parse_runs: Sequence[ParseRun],
) -> RolloutBench:
    """Bundle measured passes (e.g. pytest-benchmark rounds) into one result.

    Any kind of pass may be absent (``[]``): its metrics are then absent too.
    """
    traj = inputs.trajectory
    return RolloutBench(
        inputs.recipe.name,
        inputs.config,
        inputs.cluster,
        traj.prompt_tokens,
        sum(len(c.gen_ids) for c in traj.calls),
        traj.skipped_steps,
        tuple(prompt_runs),
        tuple(r for r in gym_runs if r is not None),
        tuple(parse_runs),
    )


def run_rollout_bench(inputs: BenchInputs, repeats: int = 3) -> RolloutBench:
    """Warm up, then measure ``repeats`` passes of each path."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise RecipeError(f"repeats must be in 1..{MAX_REPEATS}, got {repeats}")
    warm_up(inputs)
    prompts = [prompt_pass(inputs) for _ in range(repeats)]
    gyms = [gym_pass(inputs) for _ in range(repeats)]
    parses = [parse_pass(inputs) for _ in range(repeats)]
    return collect_bench(inputs, prompts, gyms, parses)


# --- numbers ---------------------------------------------------------------------------------


def growth_exponent(per_call: Sequence[float]) -> float:
    """Exponent of the cumulative cost vs number of calls (2: quadratic total, 1: linear)."""
    total, cumulative = 0.0, []
    for value in per_call:
        total += value
        cumulative.append(total)
    return fit_exponent(range(1, len(cumulative) + 1), cumulative).exponent


def bench_metrics(bench: RolloutBench) -> dict[str, tuple[float, ...]]:
    """The gated metrics, one sample per repeat (all lower-is-better)."""
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(name, []).append(value)

    for run in bench.prompt_runs:
        add("prompt.full_exponent", growth_exponent(run.full_ms))
        # from the second call on: the first prompt is prepared whole either way
        add("prompt.incremental_exponent", growth_exponent(run.incremental_ms[1:]))
        add("prompt.full_us_per_token", 1e3 * sum(run.full_ms) / sum(run.prompt_tokens))
        added = sum(run.new_tokens[1:])
        add("prompt.incremental_us_per_token", 1e3 * sum(run.incremental_ms[1:]) / added)
    history = sum(bench.prompt_tokens[1:])
    for run in bench.gym_runs:
        add("gym.exponent", growth_exponent(run.ms))
        add("gym.us_per_token", 1e3 * sum(run.ms) / history)
    for run in bench.parse_runs:
        for kind, seconds in (("streaming", run.streaming_s), ("one_shot", run.one_shot_s)):
            if len(run.tokens) > 1:
                add(f"parser.{kind}_exponent", fit_exponent(run.tokens, seconds).exponent)
            for length, n, sec in zip(
                bench.config.parser_lengths, run.tokens, seconds, strict=True
            ):
                add(f"parser.{kind}_us_per_token@{length}", 1e6 * sec / n)
    return {k: tuple(v) for k, v in out.items()}
