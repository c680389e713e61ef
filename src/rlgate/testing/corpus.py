"""Fault-injection corpus: NeMo RL-shaped async SWE runs, each with one injected fault.

Runs are written with ``torch.utils.tensorboard.SummaryWriter`` (what NeMo RL's
``TensorboardLogger`` uses) into ``<log_dir>/exp_NNN/tensorboard/``, with NeMo RL's real tag
names (``nemo_rl/algorithms/grpo.py`` async loop, ``nemo_rl/experience/rollouts.py``, the
performance and timing printers; see shared/reference/nemo-rl.md §2.3), train metrics at
steps 1..N, validation at 0 and every ``val_period``, the GPU monitor's ``ray/*`` tags
indexed by *seconds*, plus an ``add_hparams`` sub-run and an image tag as NeMo RL writes them.

Dynamics are fitted to the 18 MLPerf Qwen3.5-397B reference runs where they overlap:
reward rises from 0.27 to ~0.55 (GBS 256: 0.27 -> 0.55 over 17 steps, step-to-step SD
~0.04), the weight sync takes ~15 s, step time is log-normal around 420 s with rare
stragglers (the MLPerf GBS 256 steady median is 320-510 s). Logprob-error and agentic
metrics follow NeMo RL's healthy ranges (tmpe ~1.01, gen_kl ~0.0015, truncation ~2 %).

``build_corpus(out_dir)`` writes every :class:`Fault`, a baseline run, five reference runs
for the band, a recipe (``recipe.yaml``) whose gate block is tuned for these dynamics, and
rollout JSONL files. :data:`EXPECTED_CATCHES` lists, per fault, exactly the checks that must
not pass. ``python -m rlgate.testing.corpus OUT_DIR`` rebuilds it; nothing binary is committed.
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

import numpy as np

__all__ = [
    "EXPECTED_CATCHES",
    "Corpus",
    "Fault",
    "Profile",
    "build_corpus",
    "corpus_recipe",
    "write_run",
]


class Fault(Enum):
    """The injected faults (and the two healthy controls)."""

    HEALTHY = "healthy"
    HEALTHY_NOISE = "healthy_step_time_plus3pct"
    LOGPROB_DRIFT = "logprob_drift"
    REWARD_FLAT = "reward_flat"
    STOPPED_EARLY = "stopped_early"
    NAN_LOSS = "nan_loss"
    TURNS_AT_MAX = "turns_at_max"
    TRUNCATION_RUNAWAY = "truncation_runaway"
    STEP_TIME_UP = "step_time_plus20pct"
    TOKENS_DOWN = "tokens_per_sec_minus15pct"
    RESUMED = "resumed_two_exp_dirs"
    TOOL_CALLS_IN_REASONING = "tool_calls_in_reasoning"
    MALFORMED_THINKING = "malformed_thinking"
    STALE_ATTEMPT = "stale_complete_exp_001_newer_exp_002_stopped"
    STRAY_STEP = "stopped_early_stray_far_step"


# Checks that must fail (or error) on each fault; every other planned check must pass.
EXPECTED_CATCHES: Mapping[Fault, frozenset[str]] = {
    Fault.HEALTHY: frozenset(),
    Fault.HEALTHY_NOISE: frozenset(),
    Fault.RESUMED: frozenset(),
    Fault.LOGPROB_DRIFT: frozenset(
        {
            "logprob_error_median",
            "logprob_error_last",
            "logprob_error_ratio_above",
            "gen_kl_mean",
            "band_curve:train/token_mult_prob_error",
            "band_mean:train/token_mult_prob_error",
        }
    ),
    Fault.REWARD_FLAT: frozenset(
        {"reward_improvement", "band_curve:train/reward", "band_mean:train/reward"}
    ),
    Fault.STOPPED_EARLY: frozenset({"completion"}),
    Fault.STALE_ATTEMPT: frozenset({"completion"}),
    Fault.STRAY_STEP: frozenset({"completion"}),
    Fault.NAN_LOSS: frozenset({"finite:train/loss"}),
    Fault.TURNS_AT_MAX: frozenset({"turns_mean", "max_turns_share"}),
    Fault.TRUNCATION_RUNAWAY: frozenset({"truncation_rate", "natural_termination_rate"}),
    Fault.TOOL_CALLS_IN_REASONING: frozenset({"tool_call_failure_rate"}),
    Fault.MALFORMED_THINKING: frozenset({"malformed_thinking_rate_mean"}),
    Fault.STEP_TIME_UP: frozenset(
        {"perf:timing/train/total_step_time", "perf:performance/tokens_per_sec_per_gpu"}
    ),
    Fault.TOKENS_DOWN: frozenset(
        {
            "perf:performance/tokens_per_sec_per_gpu",
            "perf:performance/generation_tokens_per_sec_per_gpu",
        }
    ),
}


_TURNS = "train/turns_per_sample"


@dataclass(frozen=True, slots=True)
class Profile:
    """Run dynamics (defaults: a Qwen3.5-35B-A3B-like async SWE run on 2x8 GPUs)."""

    steps: int = 50
    gbs: int = 256
    gpus: int = 16
    gen_gpus: int = 8
    reward_start: float = 0.27
    reward_end: float = 0.55
    reward_noise: float = 0.035
    step_time: float = 420.0
    step_time_sigma: float = 0.09
    straggler_prob: float = 0.04
    tokens_per_sample: float = 28_000.0
    agent_max_turns: int = 50
    max_model_len: int = 65_536
    val_period: int = 10
    monitor_interval_s: int = 60


def _learning(fault: Fault, p: Profile, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Reward, loss, grad norm and train/generation mismatch per step."""
    n = p.steps
    s = np.arange(1, n + 1, dtype=float)
    ramp = (1 - np.exp(-s / (n / 3))) / (1 - np.exp(-n / (n / 3)))
    reward = p.reward_start + (p.reward_end - p.reward_start) * ramp
    if fault is Fault.REWARD_FLAT:
        reward = np.full(n, p.reward_start)
    reward = np.clip(np.round((reward + rng.normal(0, p.reward_noise, n)) * p.gbs) / p.gbs, 0, 1)
    tmpe = 1.012 + np.abs(rng.normal(0, 0.004, n))
    gen_kl = np.abs(rng.normal(0.0015, 0.0003, n))
    if fault is Fault.LOGPROB_DRIFT:
        drift = np.clip(s - n / 5, 0, None)
        tmpe, gen_kl = tmpe + 0.006 * drift, gen_kl + 0.0004 * drift
    loss = rng.normal(-0.06, 0.03, n)
    if fault is Fault.NAN_LOSS:
        loss[int(n * 0.6)] = np.nan
    return {
        "train/loss": loss,
        "train/reward": reward,
        "train/grad_norm": 0.075 * rng.lognormal(0, 0.2, n),
        "train/token_mult_prob_error": tmpe,
        "train/gen_kl_error": gen_kl,
        "train/global_valid_seqs": np.full(n, float(p.gbs)) - rng.integers(0, 8, n),
        "train/avg_trajectory_age": rng.uniform(0.5, 1.0, n),
    }


def _throughput(fault: Fault, p: Profile, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Step time, its parts, and tokens/s per step."""
    n = p.steps
    step_time = p.step_time * rng.lognormal(0, p.step_time_sigma, n)
    step_time *= np.where(rng.random(n) < p.straggler_prob, 1.6, 1.0)
    step_time[0] *= 1.5  # first step: compile + first refit
    if fault is Fault.STEP_TIME_UP:
        step_time *= 1.20
    if fault is Fault.HEALTHY_NOISE:
        step_time *= 1.03 * rng.lognormal(0, 0.02, n)
    tokens = p.gbs * p.tokens_per_sample * rng.lognormal(0, 0.05, n)
    gen_tput = 420.0 * rng.lognormal(0, 0.05, n)
    if fault is Fault.TOKENS_DOWN:  # slower generation, hidden by async overlap: fewer tokens
        tokens, gen_tput = tokens * 0.85, gen_tput * 0.85
    return {
        "train/global_valid_toks": tokens * 0.8,
        "train/total_num_tokens": tokens,
        "train/total_tokens_per_sample/mean": tokens / p.gbs,
        "timing/train/total_step_time": step_time,
        "timing/train/policy_training": 0.25 * step_time,
        "timing/train/exposed_generation": 0.6 * step_time,
        "timing/train/weight_sync": 15.0 * rng.lognormal(0, 0.03, n),
        "timing/train/valid_tokens_per_sec_per_gpu": tokens * 0.8 / step_time / p.gpus,
        "performance/tokens_per_sec_per_gpu": tokens / step_time / p.gpus,
        "performance/generation_tokens_per_sec_per_gpu": gen_tput,
    }


def _agentic(fault: Fault, p: Profile, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """NeMo Gym rollout metrics per step (turns, truncation, tool calls)."""
    n, full = p.steps, float(p.agent_max_turns)
    s = np.arange(1, n + 1, dtype=float)
    trunc = np.clip(rng.binomial(p.gbs, 0.02, n) / p.gbs, 0, 1)
    if fault is Fault.TRUNCATION_RUNAWAY:
        trunc = np.clip(trunc + np.clip((s - n * 0.3) / n, 0, None) * 0.7, 0, 1)
    pinned = (fault is Fault.TURNS_AT_MAX) & (s > n / 5)
    out = {
        f"{_TURNS}/mean": np.where(
            pinned, full - rng.uniform(0.5, 2.0, n), 22 + rng.normal(0, 1.5, n)
        ),
        f"{_TURNS}/min": np.where(pinned, 30.0, 4.0 + rng.integers(0, 3, n)),
        f"{_TURNS}/median": np.where(pinned, full, 20.0 + rng.integers(-2, 3, n)),
        f"{_TURNS}/p95": np.where(pinned, full, 40.0 + rng.integers(-3, 4, n)),
        f"{_TURNS}/p99": np.where(pinned, full, 47.0 + rng.integers(-2, 3, n)),
        f"{_TURNS}/max": np.full(n, full),
        "train/truncation_rate": trunc,
        "train/natural_termination_rate": 1.0 - trunc,
        "train/total_tokens_per_sample/max": np.where(trunc > 0, float(p.max_model_len), 61_000.0),
        "train/invalid_tool_call_rate": np.clip(rng.normal(0.01, 0.004, n), 0, 1),
    }
    # NeMo RL logs both penalty rates together, per assistant turn (grpo.py::
    # _apply_message_level_advantage_penalties). Faults from 30 % of the run: tool calls written
    # inside the reasoning and lost there (flagged as invalid), think tags leaking into answers.
    # The child stream keeps every other series of a seed what it was before this tag existed.
    malformed = np.clip(rng.spawn(1)[0].normal(0.004, 0.002, n), 0, 1)
    late = s > n * 0.3
    if fault is Fault.TOOL_CALLS_IN_REASONING:
        out["train/invalid_tool_call_rate"] += np.where(late, 0.12, 0.0)
    if fault is Fault.MALFORMED_THINKING:
        malformed = np.where(late, malformed + 0.15, malformed)
    return {**out, "train/malformed_thinking_rate": malformed}


def _series(fault: Fault, p: Profile, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per-step values of every train/timing/performance tag for steps 1..p.steps."""
    return {**_learning(fault, p, rng), **_throughput(fault, p, rng), **_agentic(fault, p, rng)}


def _write(
    log_dir: Path,
    exp: int,
    steps: range,
    values: Mapping[str, np.ndarray],
    extras: bool,
    p: Profile,
    rng: np.random.Generator,
) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    tb_dir = log_dir / f"exp_{exp:03d}" / "tensorboard"
    writer = SummaryWriter(
        log_dir=str(tb_dir), max_queue=100_000
    )  # same bytes, fewer thread handoffs
    try:
        if extras:  # what NeMo RL writes once per run
            writer.add_hparams({"grpo.max_num_steps": p.steps, "cluster.num_nodes": 2}, {})
            writer.add_scalar("timing/setup/total", 310.0, 0)
            writer.add_image(
                "train/token_mult_prob_error_plot_sample", np.zeros((3, 4, 4), dtype=np.uint8), 1
            )
        for step in steps:
            for tag, vals in values.items():
                writer.add_scalar(tag, float(vals[step - 1]), step)
            if (step == steps[0] and extras) or step % p.val_period == 0:
                acc = 0.40 + 0.15 * step / p.steps + rng.normal(0, 0.01)
                writer.add_scalar("validation/accuracy", acc, step - 1 if step == 1 else step)
        elapsed = np.cumsum(values["timing/train/total_step_time"])[steps[-1] - 1]
        for sec in range(0, int(elapsed), p.monitor_interval_s):  # GPU monitor: step = seconds
            writer.add_scalar("ray/node.0.gpu.0.util", float(rng.uniform(60, 100)), sec)
            writer.add_scalar("ray/node.0.gpu.0.mem_gb", float(rng.uniform(60, 75)), sec)
    finally:
        writer.close()
    return tb_dir


def write_run(
    log_dir: str | os.PathLike[str], fault: Fault, *, seed: int, profile: Profile = Profile()
) -> Path:
    """Write one run with ``fault`` into ``log_dir`` (NeMo RL's ``logger.log_dir``)."""
    root = Path(log_dir)
    rng = np.random.default_rng(seed)
    values = _series(fault, profile, rng)
    n = profile.steps
    if fault is Fault.STOPPED_EARLY:
        _write(root, 1, range(1, int(n * 0.6) + 1), values, True, profile, rng)
    elif fault is Fault.STRAY_STEP:  # stopped at 60 %, plus one train/loss point far ahead
        tb = _write(root, 1, range(1, int(n * 0.6) + 1), values, True, profile, rng)
        _stray_point(tb, "train/loss", 20 * n)
    elif fault is Fault.STALE_ATTEMPT:  # a complete old run, then a fresh run in the same dir
        old = _write(root, 1, range(1, n + 1), values, True, profile, rng)
        fresh = _series(Fault.HEALTHY, profile, np.random.default_rng(seed + 2))
        new = _write(root, 2, range(1, int(n * 0.6) + 1), fresh, True, profile, rng)
        _age(old, new)
    elif fault is Fault.RESUMED:
        first = _write(root, 1, range(1, int(n * 0.55) + 1), values, True, profile, rng)
        resume_at = int(n * 0.45)  # last checkpoint: steps after it are re-done after the crash
        fresh = _series(Fault.HEALTHY, profile, np.random.default_rng(seed + 1))
        redo = {k: np.where(np.arange(n) < resume_at, v, fresh[k]) for k, v in values.items()}
        second = _write(root, 2, range(resume_at + 1, n + 1), redo, False, profile, rng)
        _age(first, second)
    else:
        _write(root, 1, range(1, n + 1), values, True, profile, rng)
    return root


def _stray_point(tb_dir: Path, tag: str, step: int) -> None:
    """Append one ``tag`` value at ``step`` to the run's event file (a stray, far step)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tb_dir), filename_suffix=".stray")
    try:
        writer.add_scalar(tag, 0.0, step)
    finally:
        writer.close()


def _age(older: Path, newer: Path) -> None:
    """Make every event file under ``older`` older than those under ``newer`` (mtime order)."""
    newest = max(f.stat().st_mtime for f in newer.rglob("*tfevents*"))
    for f in older.rglob("*tfevents*"):
        os.utime(f, (newest - 3600, newest - 3600))


_RECIPE = string.Template("""\
# Qwen3.5-35B-A3B async GRPO on NeMo Gym SWE agents, 2 nodes x 8 GPUs (1 generation node):
# the configuration the fault-injection corpus imitates. Written by rlgate.testing.corpus.
grpo:
  num_prompts_per_step: 16
  num_generations_per_prompt: 16
  max_num_steps: $steps
  val_period: $val_period
  val_at_start: true
  invalid_tool_call_advantage: -5.0  # NeMo RL then logs both penalty rates
  async_grpo: {enabled: true, max_trajectory_age_steps: 1, in_flight_weight_updates: true}
policy:
  model_name: Qwen/Qwen3.5-35B-A3B
  max_total_sequence_length: $max_model_len
  generation:
    backend: vllm
    vllm_cfg: {max_model_len: $max_model_len, async_engine: true}
    colocated: {enabled: false, resources: {num_nodes: 1, gpus_per_node: 8}}
env:
  should_use_nemo_gym: true
  nemo_gym:
    swe_agents_train:
      responses_api_agents:
        swe_agents: {agent_max_turns: $agent_max_turns}
cluster: {num_nodes: 2, gpus_per_node: 8}
rlgate:
  convergence:
    checks:
      # NeMo RL's own gates (nemo-rl.md §1.7, §8): 1.05 is the "investigate" threshold
      - {name: logprob_error_median, metric: train/token_mult_prob_error, reducer: median,
         op: "<", threshold: 1.05}
      - {name: logprob_error_last, metric: train/token_mult_prob_error, reducer: last,
         op: "<", threshold: 1.1}
      - {name: gen_kl_mean, metric: train/gen_kl_error, reducer: mean, op: "<", threshold: 0.003}
      - {name: logprob_error_ratio_above,
         condition: 'ratio_above(data["train/token_mult_prob_error"], 1.1) < 0.1'}
      - {name: trajectory_age_max, condition: 'max(data["train/avg_trajectory_age"]) <= 1.0'}
      - {name: gpu_memory_max, condition: 'max(data["ray/node.0.gpu.0.mem_gb"]) < 80'}
      - {name: malformed_thinking_rate_mean, metric: train/malformed_thinking_rate,
         reducer: mean, op: "<=", threshold: 0.05}
    reward: {test: trend, alpha: 0.05, min_improvement: 0.05}
    agentic: {turns_mean: 40, max_turns_share: 0.3, truncation_rate: 0.1,
              natural_termination_rate: 0.9, tool_call_failure_rate: 0.05}
    rollouts: {max_turns_share: 0.3, failed_call_rate: 0.2, unparsed_tool_call_rate: 0.05,
               malformed_reasoning_rate: 0.05, empty_final_rate: 0.05,
               truncated_final_rate: 0.1, reward_mean_min: 0.1}
  perf:
    # 10% floor: with ~14% per-step noise a 50-step run tells +3% from +15-20% only ~4 SE apart;
    # the floor splits that gap (measured over 30 corpus seeds: benchmarks/bench_corpus_gate.py)
    warmup_steps: 3
    alpha: 0.01
    min_effect: 0.10
    metrics:
      timing/train/total_step_time: lower
      performance/tokens_per_sec_per_gpu: higher
      performance/generation_tokens_per_sec_per_gpu: higher
  band:
    min_runs: 5
    runs: [$band_glob]
    alpha: 0.01
    max_outside: 0.2
    metrics: {train/reward: higher, train/token_mult_prob_error: lower}
""")


def corpus_recipe(profile: Profile = Profile(), band_glob: str = "band/seed_*") -> str:
    """The recipe YAML the corpus is gated with (a NeMo RL config + an ``rlgate`` block)."""
    return _RECIPE.substitute(
        steps=profile.steps,
        val_period=profile.val_period,
        max_model_len=profile.max_model_len,
        agent_max_turns=profile.agent_max_turns,
        band_glob=band_glob,
    )


# --- rollouts ----------------------------------------------------------------------------

ROLLOUT_FAULTS = (
    "healthy",
    "unparsed_tool_calls",
    "malformed_reasoning",
    "truncated_final",
    "empty_final",
    "failed_calls",
    "turns_at_max",
)
EXPECTED_ROLLOUT_CATCHES: Mapping[str, frozenset[str]] = {
    "healthy": frozenset(),
    "unparsed_tool_calls": frozenset({"rollouts:unparsed_tool_call_rate"}),
    "malformed_reasoning": frozenset({"rollouts:malformed_reasoning_rate"}),
    "truncated_final": frozenset({"rollouts:truncated_final_rate"}),
    "empty_final": frozenset({"rollouts:empty_final_rate"}),
    "failed_calls": frozenset({"rollouts:failed_call_rate"}),
    "turns_at_max": frozenset({"rollouts:max_turns_share"}),
}


_UNPARSED_CALL = (  # Qwen3.5 XML tool-call markup left in the text: the parser did not run
    "<tool_call>\n<function=bash>\n<parameter=command>ls</parameter>\n</function>\n</tool_call>"
)


_TOOL = {
    "type": "function",
    "name": "execute_bash",
    "strict": False,
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def _final_message(kind: str, bad: bool, t: int) -> dict[str, object]:
    text = {
        "unparsed_tool_calls": _UNPARSED_CALL,
        "malformed_reasoning": "<think>I should stop.</think> The fix is applied.",
        "empty_final": "",
    }.get(kind, "The fix is applied.")
    return {
        "type": "message",
        "id": f"msg_{t}",
        "role": "assistant",
        "status": "incomplete" if kind == "truncated_final" and bad else "completed",
        "content": [
            {
                "type": "output_text",
                "text": text if bad else "The fix is applied.",
                "annotations": [],
            }
        ],
    }


def _rollout(kind: str, i: int, rng: np.random.Generator, max_turns: int) -> dict[str, object]:
    """One rollout row: reasoning + a bash call per turn, a final message; maybe a fault."""
    bad = kind != "healthy" and i % 2 == 0  # half of the rollouts carry the fault
    turns = max_turns if kind == "turns_at_max" and bad else int(rng.integers(4, 20))
    args = "{'command': 'ls'" if kind == "failed_calls" and bad else '{"command": "ls"}'
    output: list[dict[str, object]] = []
    for t in range(turns):
        summary = [{"type": "summary_text", "text": f"step {t}: plan"}]
        output.append({"type": "reasoning", "id": f"rs_{t}", "summary": summary})
        if t == turns - 1:
            output.append(_final_message(kind, bad, t))
            break
        call = {"type": "function_call", "id": f"fc_{t}", "call_id": f"call_{t}"}
        output.append(call | {"name": "execute_bash", "arguments": args})
        output.append(
            {"type": "function_call_output", "call_id": f"call_{t}", "output": "README.md"}
        )
    response = {
        "id": f"resp_{i}",
        "created_at": 0,
        "model": "Qwen/Qwen3.5-35B-A3B",
        "object": "response",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [_TOOL],
    }
    return {
        "responses_create_params": {"input": []},
        "response": response,
        "reward": float(rng.random() < 0.35),
        "_ng_task_index": i // 4,
        "_ng_rollout_index": i % 4,
    }


def write_rollouts(
    path: str | os.PathLike[str], kind: str, *, seed: int, n: int = 32, max_turns: int = 50
) -> Path:
    """A rollout JSONL in ``ng_collect_rollouts``'s row format with one injected fault kind."""
    rng = np.random.default_rng(seed)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [_rollout(kind, i, rng, max_turns) for i in range(n)]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


# --- corpus ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Corpus:
    """Paths of a built corpus."""

    root: Path
    recipe: Path
    runs: Mapping[Fault, Path]
    baseline: Path
    band_runs: tuple[Path, ...]
    rollouts: Mapping[str, Path]


def build_corpus(
    out_dir: str | os.PathLike[str], *, seed: int = 0, profile: Profile = Profile()
) -> Corpus:
    """Write the whole corpus under ``out_dir`` (which must not exist or be empty)."""
    root = Path(out_dir)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(
            f"{root} is not empty; the corpus is only written to a fresh directory"
        )
    root.mkdir(parents=True, exist_ok=True)
    runs = {
        f: write_run(root / "runs" / f.value, f, seed=seed + 1000, profile=profile) for f in Fault
    }
    baseline = write_run(root / "baseline", Fault.HEALTHY, seed=seed + 1, profile=profile)
    band = tuple(
        write_run(root / "band" / f"seed_{k}", Fault.HEALTHY, seed=seed + 10 + k, profile=profile)
        for k in range(5)
    )
    rollouts = {
        k: write_rollouts(
            root / "rollouts" / f"{k}.jsonl", k, seed=seed + 7, max_turns=profile.agent_max_turns
        )
        for k in ROLLOUT_FAULTS
    }
    recipe = root / "recipe.yaml"
    recipe.write_text(corpus_recipe(profile), encoding="utf-8")
    return Corpus(root, recipe, runs, baseline, band, rollouts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlgate.testing.corpus OUT_DIR [--seed N] [--steps N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m rlgate.testing.corpus", description=__doc__.splitlines()[0]
    )
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=Profile().steps)
    args = parser.parse_args(argv)
    corpus = build_corpus(
        args.out_dir, seed=args.seed, profile=replace(Profile(), steps=args.steps)
    )
    sys.stdout.write(f"corpus written to {corpus.root} (recipe {corpus.recipe})\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
