"""GRPO set-up (``grpo.py::setup``, the penalties, fp8 generation) and async GRPO's buffer.

``grpo`` is read as ``GRPOConfig`` reads it (``batch_multiplier: 1.0``, no early stop, no
message-level advantages by default); ``reward_penalties`` as ``RewardPenaltyConfig``.
"""

from __future__ import annotations

from collections.abc import Iterator

from rlgate.checks.startup import Config, Source, Violation, rule

GRPO = "nemo_rl/algorithms/grpo.py"
ROLLOUTS = "nemo_rl/experience/rollouts.py"
VCFG = "policy.generation.vllm_cfg"


@rule(
    "grpo-batch-multiplier",
    Source(GRPO, "setup", "batch_multiplier>1 can only be used if use_dynamic_sampling=True"),
)
def batch_multiplier(cfg: Config) -> Iterator[Violation]:
    """``batch_multiplier`` other than 1 without dynamic sampling."""
    value = cfg.num("grpo.batch_multiplier", 1.0)
    if value is not None and value != 1 and not cfg.on("grpo.use_dynamic_sampling"):
        yield Violation(
            "grpo.batch_multiplier", f"batch_multiplier={value:g} without use_dynamic_sampling"
        )


@rule(
    "grpo-early-stop",
    Source(GRPO, "setup", "grpo.stop_at_validation_threshold must be set when"),
    Source(GRPO, "setup", "requires grpo.val_num_generations_per_prompt > 1"),
)
def early_stop(cfg: Config) -> Iterator[Violation]:
    """Early stop without its threshold, or on pass@k with one validation generation."""
    metric = cfg.get("grpo.stop_at_validation_metric")
    if metric is None:
        return
    if cfg.get("grpo.stop_at_validation_threshold") is None:
        yield Violation(
            "grpo.stop_at_validation_threshold",
            f"stop_at_validation_metric={metric!r} without stop_at_validation_threshold",
        )
    gens = cfg.int("grpo.val_num_generations_per_prompt")
    if metric == "pass_k" and gens is not None and gens <= 1:
        yield Violation(
            "grpo.val_num_generations_per_prompt",
            f"stop_at_validation_metric 'pass_k' with val_num_generations_per_prompt={gens}",
            source=1,
        )


@rule(
    "grpo-message-advantage-without-gym",
    Source(
        GRPO,
        "_resolve_message_level_advantage_penalties",
        "grpo.invalid_tool_call_advantage / grpo.malformed_thinking_advantage require",
        "raises ValueError",
    ),
)
def message_advantage(cfg: Config) -> Iterator[Violation]:
    """Message-level advantages (invalid tool call, malformed thinking) without NeMo Gym."""
    for key in ("grpo.invalid_tool_call_advantage", "grpo.malformed_thinking_advantage"):
        if cfg.get(key) is not None and not cfg.gym:
            yield Violation(key, f"{key}={cfg.get(key)!r} without env.should_use_nemo_gym")


PENALTY_FLAGS = (
    "penalize_duplicated_reasoning",
    "penalize_empty_final_answer",
    "penalize_unwanted_tokens",
    "penalize_malformed_think_tag",
)


@rule(
    "grpo-reward-penalties-without-gym",
    Source(
        GRPO,
        "_raise_if_reward_penalties_enabled_without_nemo_gym",
        "reward_penalties require the NeMo-Gym path",
        "raises ValueError",
    ),
)
def penalties_without_gym(cfg: Config) -> Iterator[Violation]:
    """Reward penalties without NeMo Gym."""
    on = [f for f in PENALTY_FLAGS if cfg.on(f"reward_penalties.{f}")]
    if on and not cfg.gym:
        yield Violation(
            f"reward_penalties.{on[0]}",
            f"reward_penalties.{', '.join(on)} without env.should_use_nemo_gym",
        )


@rule(
    "grpo-unwanted-token-ids",
    Source(
        GRPO,
        "RewardPenaltyConfig._require_unwanted_token_ids_when_penalized",
        "reward_penalties.token_ids.unwanted must be set",
        "raises ValueError",
    ),
    Source(
        ROLLOUTS,
        "_get_required_reward_penalty_token_ids",
        "reward_penalties.token_ids.{key} must be set",
        "raises ValueError",
    ),
)
def unwanted_token_ids(cfg: Config) -> Iterator[Violation]:
    """The unwanted-token penalty without the token ids."""
    if cfg.on("reward_penalties.penalize_unwanted_tokens") and not cfg.get(
        "reward_penalties.token_ids.unwanted"
    ):
        yield Violation(
            "reward_penalties.token_ids.unwanted",
            "penalize_unwanted_tokens without reward_penalties.token_ids.unwanted",
        )


@rule(
    "grpo-thinking-tags",
    Source(
        ROLLOUTS,
        "apply_reward_penalties",
        "reward_penalties.thinking_tags must contain open and close tags",
        "raises ValueError",
    ),
)
def thinking_tags(cfg: Config) -> Iterator[Violation]:
    """The malformed-think-tag penalty with fewer than two thinking tags.

    The Gym rollouts pass ``get_nemo_gym_thinking_tags(env)`` (``env.nemo_gym.thinking_tags``
    when non-empty, else ``DEFAULT_THINKING_TAGS``) to ``resolve_reward_penalty_config``,
    which keeps them ahead of ``reward_penalties.thinking_tags`` (so on these paths that key
    is never the one used).
    """
    if not (cfg.gym and cfg.on("reward_penalties.penalize_malformed_think_tag")):
        return
    tags = cfg.get("env.nemo_gym.thinking_tags")
    if isinstance(tags, list) and len(tags) == 1:
        yield Violation(
            "env.nemo_gym.thinking_tags",
            f"penalize_malformed_think_tag with env.nemo_gym.thinking_tags={tags!r} "
            "(an open and a close tag)",
        )


@rule(
    "async-trajectory-age",
    Source(
        "nemo_rl/algorithms/async_utils/replay_buffer.py",
        "ReplayBufferImpl.__init__",
        "max_size must be positive",
        "raises ValueError",
    ),
)
def trajectory_age(cfg: Config) -> Iterator[Violation]:
    """Async GRPO with ``max_trajectory_age_steps`` < 1: a replay buffer of size 0.

    ``async_grpo_train`` sizes the buffer ``num_prompts_per_step x max_trajectory_age_steps x 2``.
    """
    age = cfg.int("grpo.async_grpo.max_trajectory_age_steps", 1)
    if cfg.is_async and age is not None and age < 1:
        yield Violation(
            "grpo.async_grpo.max_trajectory_age_steps",
            f"max_trajectory_age_steps={age}: the replay buffer holds "
            "num_prompts_per_step x max_trajectory_age_steps x 2 = 0 prompts",
        )


_FP8 = "the vLLM branch of setup"


@rule(
    "vllm-fp8-importance-sampling",
    Source(GRPO, "setup", "Importance sampling must be enabled for vLLM FP8 generation"),
)
def fp8_importance_sampling(cfg: Config) -> Iterator[Violation]:
    """fp8 vLLM generation without importance-sampling correction."""
    if (
        cfg.backend == "vllm"
        and cfg.get(f"{VCFG}.precision") == "fp8"
        and not cfg.on("loss_fn.use_importance_sampling_correction")
    ):
        yield Violation(
            "loss_fn.use_importance_sampling_correction",
            "vllm_cfg.precision fp8 without use_importance_sampling_correction",
        )


@rule(
    "vllm-fp8-kv-cache",
    Source(GRPO, "setup", "FP8 KV cache can only be used together with FP8 model weights"),
    Source(GRPO, "setup", "DTensor backend is not supported with kv cache fp8 enabled"),
    Source(GRPO, "setup", "Async rollouts is not supported with kv cache fp8 enabled"),
    Source(GRPO, "setup", "when using FP8 KV cache in generation, then in megatron we only"),
)
def fp8_kv_cache(cfg: Config) -> Iterator[Violation]:
    """An fp8 KV cache without fp8 weights, with DTensor, the async engine, or Megatron PP."""
    dtype = cfg.str(f"{VCFG}.kv_cache_dtype")
    if cfg.backend != "vllm" or dtype is None or not dtype.startswith("fp8"):
        return
    key = f"{VCFG}.kv_cache_dtype"
    if cfg.get(f"{VCFG}.precision") != "fp8":
        yield Violation(
            key, f"kv_cache_dtype {dtype!r} with precision {cfg.get(f'{VCFG}.precision')!r}"
        )
    if cfg.on("policy.dtensor_cfg.enabled"):
        yield Violation(key, f"kv_cache_dtype {dtype!r} with the DTensor backend", source=1)
    if cfg.vllm_async_engine:
        forced = " (forced on by the NeMo Gym entry point)" if cfg.gym else ""
        yield Violation(key, f"kv_cache_dtype {dtype!r} with async_engine{forced}", source=2)
    pp = cfg.int("policy.megatron_cfg.pipeline_model_parallel_size")
    if pp is not None and pp != 1:
        yield Violation(
            key, f"kv_cache_dtype {dtype!r} with megatron pipeline_model_parallel_size={pp}", 3
        )


@rule(
    "grpo-multimodal-dedup",
    Source(
        GRPO,
        "_validate_multimodal_dedup_capability",
        "qualified only with policy.generation",
        "raises NotImplementedError",
    ),
    Source(
        GRPO,
        "_validate_multimodal_dedup_capability",
        "only when data_plane.enabled=false",
        "raises NotImplementedError",
    ),
)
def multimodal_dedup(cfg: Config) -> Iterator[Violation]:
    """Multimodal de-duplication with another backend than vLLM, or with the data plane."""
    if not cfg.on("grpo.deduplicate_multimodal_data"):
        return
    if cfg.backend is not None and cfg.backend != "vllm":
        yield Violation(
            "grpo.deduplicate_multimodal_data",
            f"deduplicate_multimodal_data with backend {cfg.backend!r}",
        )
    if cfg.on("data_plane.enabled"):
        yield Violation(
            "grpo.deduplicate_multimodal_data",
            "deduplicate_multimodal_data with data_plane.enabled",
            source=1,
        )


@rule(
    "grpo-multiple-dataloader",
    Source(GRPO, "setup", "Expected num_prompts_per_step to be a multiple of num_prompts_per"),
)
def multiple_dataloader(cfg: Config) -> Iterator[Violation]:
    """Several dataloaders whose batch does not divide the step's prompts."""
    per = cfg.int("data.num_prompts_per_dataloader")
    prompts = cfg.int("grpo.num_prompts_per_step")
    if not cfg.on("data.use_multiple_dataloader") or per is None or prompts is None or per < 1:
        return
    if cfg.on("grpo.use_dynamic_sampling"):
        multiplier = cfg.num("grpo.batch_multiplier", 1.0)
        if multiplier is None:
            return
        prompts, per = int(prompts * multiplier), int(per * multiplier)
    if per and prompts % per:
        yield Violation(
            "data.num_prompts_per_dataloader",
            f"num_prompts_per_step {prompts} is not a multiple of num_prompts_per_dataloader {per}",
        )


@rule(
    "grpo-dynamic-sampling-batches",
    Source(GRPO, "dynamic_sampling", "grpo.dynamic_sampling_max_gen_batches must be > 0"),
)
def dynamic_sampling_batches(cfg: Config) -> Iterator[Violation]:
    """Dynamic sampling allowed no extra generation batch (fails the first time one is needed)."""
    value = cfg.int("grpo.dynamic_sampling_max_gen_batches", 10)
    if cfg.on("grpo.use_dynamic_sampling") and value is not None and value <= 0:
        yield Violation(
            "grpo.dynamic_sampling_max_gen_batches",
            f"use_dynamic_sampling with dynamic_sampling_max_gen_batches={value}",
        )


ESTIMATORS = ("grpo", "gdpo", "opd", "reinforce_plus_plus")


@rule(
    "grpo-advantage-estimator",
    Source(GRPO, "_create_advantage_estimator", "Invalid adv_estimator name", "raises ValueError"),
)
def advantage_estimator(cfg: Config) -> Iterator[Violation]:
    """An advantage estimator NeMo RL does not have."""
    name = cfg.str("grpo.adv_estimator.name")
    if name is not None and name not in ESTIMATORS:
        yield Violation("grpo.adv_estimator.name", f"{name!r} (not {', '.join(ESTIMATORS)})")


@rule(
    "data-train-split",
    Source("nemo_rl/data/utils.py", "setup_response_data", "The dataset config structure is"),
)
def train_split(cfg: Config) -> Iterator[Violation]:
    """A data config without ``data.train`` (the format before NeMo RL #1649)."""
    data = cfg.section("data")
    if data is not None and "train" not in data:
        yield Violation("data.train", "no data.train (the data config's old format)")
