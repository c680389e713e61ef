"""GRPO set-up (``grpo.py::setup``, the penalties, fp8 generation) and async GRPO's buffer.

``grpo`` is read as ``GRPOConfig`` reads it (``batch_multiplier: 1.0``, no early stop, no
message-level advantages by default); ``reward_penalties`` as ``RewardPenaltyConfig``.
"""

from __future__ import annotations

from collections.abc import Iterator

from rlgate.checks.startup import Config, Source, Violation, _env_names, rule

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


OPD = "on_policy_distillation"
TEACHERS = f"{OPD}.non_colocated_teachers"


def _async_rollouts(cfg: Config) -> bool:
    """``interfaces.py::should_use_async_rollouts`` (vLLM's engine as the run sees it)."""
    backend = cfg.backend
    if backend == "vllm":
        return cfg.vllm_async_engine
    if backend == "sglang":
        return cfg.on("policy.generation.use_async_rollouts")
    return backend in ("dynamo", "trtllm", "megatron")


def _teachers(cfg: Config) -> list[tuple[str, int | None, int | None]] | None:
    """The non-colocated OPD teachers as ``create_teacher_configs_from_opd_config`` builds them.

    (alias, gpus_per_node, num_nodes) per teacher: ``default_teacher_cfg`` under the alias's
    ``teacher_overrides`` (``TeacherResourceConfig`` defaults 8 GPUs, 1 node), one per
    checkpoint when ``deduplicate_shared_teacher_checkpoints`` (default); None unless
    ``opd.py::is_non_colocated_teachers_enabled``.
    """
    if not (cfg.on(f"{OPD}.enabled") and cfg.on(f"{TEACHERS}.enabled")):
        return None
    names = cfg.section(f"{OPD}.teacher_model_by_agent_name") or {}
    default = cfg.section(f"{TEACHERS}.default_teacher_cfg") or {}
    overrides = cfg.section(f"{TEACHERS}.teacher_overrides") or {}
    dedup = cfg.flag(f"{OPD}.deduplicate_shared_teacher_checkpoints", True) is not False
    seen: set[str] = set()
    out = []
    for alias, model in names.items():
        if dedup and model in seen:
            continue
        seen.add(str(model))
        own = overrides.get(alias)
        merged = {**default, **(own if isinstance(own, dict) else {})}
        sizes = [merged.get(k, d) for k, d in (("gpus_per_node", 8), ("num_nodes", 1))]
        gpn, nodes = (s if isinstance(s, int) and not isinstance(s, bool) else None for s in sizes)
        out.append((str(alias), gpn, nodes))
    return out


@rule(
    "opd-teachers-placement",
    Source(GRPO, "setup", "Non-colocated OPD teachers require async GRPO"),
    Source(GRPO, "setup", "each teacher placement group must fit on one node"),
    Source(GRPO, "setup", "policy_nodes must be > 0 after reserving OPD teacher nodes"),
)
def opd_teachers(cfg: Config) -> Iterator[Violation]:
    """Non-colocated OPD teachers: async rollouts, a node per teacher group, nodes left over."""
    teachers = _teachers(cfg)
    if teachers is None:
        return
    if not _async_rollouts(cfg):
        yield Violation(
            f"{TEACHERS}.enabled",
            f"non-colocated OPD teachers with backend {cfg.backend!r} without async rollouts "
            "(vLLM needs vllm_cfg.async_engine)",
        )
    gpn, total = cfg.int("cluster.gpus_per_node"), cfg.int("cluster.num_nodes")
    for alias, t_gpn, _ in teachers:
        if gpn is not None and t_gpn is not None and t_gpn > gpn:
            yield Violation(
                f"{TEACHERS}.default_teacher_cfg.gpus_per_node",
                f"OPD teacher {alias!r} asks gpus_per_node={t_gpn} > cluster.gpus_per_node={gpn}",
                source=1,
            )
    nodes = [n for _, _, n in teachers]
    if total is None or total < 1 or None in nodes or "reward_model" in _env_names(cfg):
        return  # reward-model nodes are reserved first (not modelled here)
    left = total - sum(nodes)  # type: ignore[arg-type]
    if left <= 0:
        yield Violation(
            f"{TEACHERS}.default_teacher_cfg.num_nodes",
            f"OPD teachers take {sum(nodes)} of cluster.num_nodes={total}: {left} left for "  # type: ignore[arg-type]
            "the policy",
            source=2,
        )


VIRTUAL_CLUSTER = "nemo_rl/distributed/virtual_cluster.py"


@rule(
    "cluster-segment-size",
    Source(VIRTUAL_CLUSTER, "select_segment_nodes", "must be divisible by", "raises ValueError"),
)
def segment_size(cfg: Config) -> Iterator[Violation]:
    """``cluster.segment_size`` not dividing the training nodes ``grpo.py::setup`` selects.

    ``prepare_segment_topology`` calls ``select_segment_nodes`` with the policy's nodes
    (colocated) or the training nodes (non-colocated) on a cluster that reports NVLink
    domains, which is what ``segment_size`` is for (elsewhere it warns and falls back).
    """
    size, gpn, total = (
        cfg.int("cluster.segment_size"),
        cfg.int("cluster.gpus_per_node"),
        cfg.int("cluster.num_nodes"),
    )
    world = cfg.training_world()  # None with reward-model or teacher nodes (not modelled)
    if size is None or size < 1 or gpn is None or total is None or world is None:
        return
    nodes = 1 if total == 1 else world // gpn
    if nodes % size:
        yield Violation(
            "cluster.segment_size",
            f"segment_size {size} does not divide the {nodes} training nodes "
            "(select_segment_nodes, on a cluster reporting NVLink domains)",
        )
