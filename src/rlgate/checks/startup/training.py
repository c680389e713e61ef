"""Training backend: which one, its parallelism against the training world, batching modes.

``Policy.__init__`` (``lm_policy.py``) picks the backend and checks TP x PP x CP against the
training cluster; Megatron's set-up (``megatron/setup.py``) and Megatron-core check the rest
when the model is built; the DTensor V1 worker checks its context parallelism.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache

from rlgate.checks.startup import MEGATRON_LM, Config, Source, Violation, rule
from rlgate.core.resources import DATA

POLICY = "nemo_rl/models/policy/lm_policy.py"
MEGATRON_SETUP = "nemo_rl/models/megatron/setup.py"
GRPO = "nemo_rl/algorithms/grpo.py"
DTENSOR_V1 = "nemo_rl/models/policy/workers/dtensor_policy_worker.py"
MEGATRON = "policy.megatron_cfg"
DTENSOR = "policy.dtensor_cfg"


def _tp_key(cfg: Config) -> str:
    return (
        f"{MEGATRON}.tensor_model_parallel_size"
        if cfg.megatron
        else f"{DTENSOR}.tensor_parallel_size"
    )


@rule(
    "backend-both",
    Source(POLICY, "Policy.__init__", "Configure either Megatron", "raises ValueError"),
)
def both_backends(cfg: Config) -> Iterator[Violation]:
    """Megatron and DTensor both enabled."""
    if cfg.megatron and cfg.on(f"{DTENSOR}.enabled"):
        yield Violation(
            f"{DTENSOR}.enabled",
            "policy.megatron_cfg.enabled and policy.dtensor_cfg.enabled are both true",
        )


@rule(
    "backend-none",
    Source(
        POLICY,
        "Policy.__init__",
        "Please either set policy.megatron_cfg.enabled",
        "raises ValueError",
    ),
)
def no_backend(cfg: Config) -> Iterator[Violation]:
    """Neither training backend enabled."""
    megatron, dtensor = cfg.flag(f"{MEGATRON}.enabled"), cfg.flag(f"{DTENSOR}.enabled")
    if megatron is False and dtensor is False:
        yield Violation(
            f"{MEGATRON}.enabled",
            "neither policy.megatron_cfg.enabled nor policy.dtensor_cfg.enabled is true: "
            "no training backend",
        )


@rule(
    "parallel-world",
    Source(
        POLICY, "Policy.__init__", "actual_world_size < model_parallel_size", "raises ValueError"
    ),
    Source(
        POLICY,
        "Policy.__init__",
        "actual_world_size % model_parallel_size != 0",
        "raises ValueError",
    ),
)
def parallel_world(cfg: Config) -> Iterator[Violation]:
    """TP x PP x CP larger than, or not dividing, the training world."""
    world, sizes = cfg.training_world(), cfg.parallel()
    if world is None or sizes is None:
        return
    tp, pp, cp = sizes
    model = tp * pp * cp
    what = f"PP {pp} x CP {cp} x TP {tp} = {model} against a training world of {world} GPUs"
    if world < model:
        yield Violation(_tp_key(cfg), f"{what} (DP would be below 1)")
    elif world % model:
        yield Violation(_tp_key(cfg), f"{what}: DP = {world}/{model} is not whole", source=1)


@rule(
    "megatron-expert-world",
    Source(
        "megatron/core/parallel_state.py",
        "initialize_model_parallel",
        "world_size % expert_tensor_model_pipeline_parallel_size != 0",
        "raises RuntimeError",
        MEGATRON_LM,
    ),
)
def expert_world(cfg: Config) -> Iterator[Violation]:
    """Megatron: ETP x EP x PP not dividing the training world."""
    world, sizes = cfg.training_world(), cfg.parallel()
    ep = cfg.int(f"{MEGATRON}.expert_model_parallel_size", 1)
    if not cfg.megatron or world is None or sizes is None or ep is None or ep < 1:
        return
    etp = cfg.get(f"{MEGATRON}.expert_tensor_parallel_size")
    if etp is None:  # Megatron-Bridge: 1 when EP > 1, else Megatron-core's default, TP
        etp = 1 if ep > 1 else sizes[0]
    if not isinstance(etp, int) or isinstance(etp, bool) or etp < 1:
        return
    size = etp * ep * sizes[1]
    if world % size:
        yield Violation(
            f"{MEGATRON}.expert_model_parallel_size",
            f"expert TP {etp} x EP {ep} x PP {sizes[1]} = {size} does not divide the training "
            f"world of {world} GPUs",
        )


@rule(
    "dynamic-batching-pp",
    Source(POLICY, "Policy.__init__", "Dynamic batching is only supported for single pipeline"),
)
def dynamic_batching_pp(cfg: Config) -> Iterator[Violation]:
    """Dynamic batching with pipeline parallelism."""
    pp = cfg.int(f"{MEGATRON}.pipeline_model_parallel_size") if cfg.megatron else 1
    if cfg.on("policy.dynamic_batching.enabled") and pp is not None and pp > 1:
        yield Violation(
            "policy.dynamic_batching.enabled",
            f"dynamic batching with pipeline_model_parallel_size={pp}",
        )


@rule(
    "dynamic-batching-packing",
    Source(POLICY, "Policy.__init__", "Dynamic Batching is exclusive of Sequence Packing"),
    Source(POLICY, "Policy.__init__", "Sequence Packing is exclusive of Dynamic Batching"),
)
def dynamic_batching_packing(cfg: Config) -> Iterator[Violation]:
    """Dynamic batching and sequence packing both enabled."""
    if cfg.on("policy.dynamic_batching.enabled") and cfg.on("policy.sequence_packing.enabled"):
        yield Violation(
            "policy.dynamic_batching.enabled",
            "policy.dynamic_batching.enabled and policy.sequence_packing.enabled are both true",
        )


@rule(
    "megatron-cp-packing",
    Source(
        MEGATRON_SETUP,
        "_apply_parallelism_config",
        "Sequence Packing must be enabled to use Context Parallelism with MCore",
    ),
)
def megatron_cp_packing(cfg: Config) -> Iterator[Violation]:
    """Megatron context parallelism without sequence packing."""
    cp = cfg.int(f"{MEGATRON}.context_parallel_size")
    packing = cfg.flag("policy.sequence_packing.enabled")
    if cfg.megatron and cp is not None and cp > 1 and packing is False:
        yield Violation(
            "policy.sequence_packing.enabled",
            f"megatron_cfg.context_parallel_size={cp} without sequence packing",
        )


@rule(
    "megatron-cp-fused-logprobs",
    Source(
        MEGATRON_SETUP,
        "_apply_parallelism_config",
        "Context Parallelism is not supported with linear CE fusion loss",
    ),
)
def megatron_cp_fused(cfg: Config) -> Iterator[Violation]:
    """Megatron context parallelism with fused linear logprobs."""
    cp = cfg.int(f"{MEGATRON}.context_parallel_size")
    if cfg.megatron and cp is not None and cp > 1 and _fused(cfg):
        yield Violation(
            f"{MEGATRON}.use_fused_linear_logprobs",
            f"use_fused_linear_logprobs with context_parallel_size={cp}",
        )


def _fused(cfg: Config) -> bool:
    return cfg.megatron and cfg.on(f"{MEGATRON}.use_fused_linear_logprobs")


@rule(
    "fused-logprobs-packing",
    Source(GRPO, "setup", "Linear CE fusion loss is not supported with sequence packing"),
)
def fused_packing(cfg: Config) -> Iterator[Violation]:
    """Fused linear logprobs with sequence packing."""
    if _fused(cfg) and cfg.on("policy.sequence_packing.enabled"):
        yield Violation(
            f"{MEGATRON}.use_fused_linear_logprobs",
            "use_fused_linear_logprobs with policy.sequence_packing.enabled",
        )


@rule(
    "fused-logprobs-filtering",
    Source(GRPO, "setup", "Linear CE fusion loss is not supported with top-k/top-p training"),
)
def fused_filtering(cfg: Config) -> Iterator[Violation]:
    """Fused linear logprobs with top-k or top-p filtering (``need_top_k_or_top_p_filtering``)."""
    if not _fused(cfg):
        return
    top_k, top_p = cfg.get("policy.generation.top_k"), cfg.num("policy.generation.top_p")
    k_on = isinstance(top_k, int) and not isinstance(top_k, bool) and top_k > 0
    if k_on or (top_p is not None and top_p != 1.0):
        yield Violation(
            f"{MEGATRON}.use_fused_linear_logprobs",
            f"use_fused_linear_logprobs with policy.generation.top_k={top_k!r}, "
            f"top_p={cfg.get('policy.generation.top_p')!r} (training-time filtering)",
        )


@rule(
    "fused-logprobs-overlap-param-gather",
    Source(MEGATRON_SETUP, "_create_megatron_config", "incompatible with overlap_param_gather"),
)
def fused_overlap(cfg: Config) -> Iterator[Violation]:
    """Fused linear logprobs with the distributed optimizer's overlap_param_gather."""
    key = f"{MEGATRON}.distributed_data_parallel_config.overlap_param_gather"
    if _fused(cfg) and cfg.on(key):
        yield Violation(key, "overlap_param_gather with use_fused_linear_logprobs")


@rule(
    "logprob-chunk-defer-fp32",
    Source(MEGATRON_SETUP, "_validate_chunking_config", "defer_fp32_logits must be True"),
)
def chunk_defer(cfg: Config) -> Iterator[Violation]:
    """Megatron: ``logprob_chunk_size`` without ``defer_fp32_logits``."""
    chunk = cfg.int("policy.logprob_chunk_size")
    defer = cfg.get(f"{MEGATRON}.defer_fp32_logits")
    if cfg.megatron and chunk is not None and chunk > 0 and defer in (False, None):
        yield Violation(
            f"{MEGATRON}.defer_fp32_logits",
            f"policy.logprob_chunk_size={chunk} with megatron_cfg.defer_fp32_logits={defer!r}",
        )


OPTIMIZER = f"{MEGATRON}.optimizer"


@rule(
    "optimizer-cpu-offload",
    Source(
        MEGATRON_SETUP,
        "_validate_optimizer_config",
        "requires 0 < optimizer_offload_fraction",
        "raises ValueError",
    ),
    Source(
        MEGATRON_SETUP,
        "_validate_optimizer_config",
        "requires use_distributed_optimizer",
        "raises ValueError",
    ),
    Source(
        MEGATRON_SETUP,
        "_validate_optimizer_config",
        "requires optimizer to be adam or sgd",
        "raises ValueError",
    ),
    Source(
        MEGATRON_SETUP,
        "_validate_optimizer_config",
        "overlap_cpu_optimizer_d2h_h2d=True requires optimizer_cpu_offload=True",
        "raises ValueError",
    ),
)
def optimizer_offload(cfg: Config) -> Iterator[Violation]:
    """Megatron optimizer CPU offload without what it needs (or its overlap without it)."""
    if not cfg.megatron:
        return
    offload = cfg.flag(f"{OPTIMIZER}.optimizer_cpu_offload", None)
    if offload is True:
        fraction = cfg.num(f"{OPTIMIZER}.optimizer_offload_fraction")
        if fraction is not None and not 0 < fraction <= 1:
            yield Violation(
                f"{OPTIMIZER}.optimizer_offload_fraction",
                f"optimizer_cpu_offload with optimizer_offload_fraction={fraction:g}",
            )
        if cfg.flag(f"{OPTIMIZER}.use_distributed_optimizer", None) is False:
            yield Violation(
                f"{OPTIMIZER}.use_distributed_optimizer",
                "optimizer_cpu_offload with use_distributed_optimizer: false",
                source=1,
            )
        name = cfg.str(f"{OPTIMIZER}.optimizer")
        if name is not None and name not in ("adam", "sgd"):
            yield Violation(
                f"{OPTIMIZER}.optimizer", f"optimizer_cpu_offload with optimizer {name!r}", source=2
            )
    elif offload is False and cfg.on(f"{OPTIMIZER}.overlap_cpu_optimizer_d2h_h2d"):
        yield Violation(
            f"{OPTIMIZER}.overlap_cpu_optimizer_d2h_h2d",
            "overlap_cpu_optimizer_d2h_h2d without optimizer_cpu_offload",
            source=3,
        )


@rule(
    "megatron-moe-tp-without-sp",
    Source(
        "megatron/core/transformer/moe/moe_layer.py",
        "MoELayer.forward",
        "performance may degrade if MoE and tensor parallelism",
        "raises ValueError in training",
        MEGATRON_LM,
    ),
)
def moe_tp_sp(cfg: Config) -> Iterator[Violation]:
    """Megatron MoE (EP > 1) with TP > 1 and no sequence parallelism: the first train step fails."""
    tp = cfg.int(f"{MEGATRON}.tensor_model_parallel_size")
    ep = cfg.int(f"{MEGATRON}.expert_model_parallel_size")
    sp = cfg.flag(f"{MEGATRON}.sequence_parallel", None)
    if cfg.megatron and tp is not None and ep is not None and tp > 1 and ep > 1 and sp is False:
        yield Violation(
            f"{MEGATRON}.sequence_parallel",
            f"tensor_model_parallel_size={tp} with expert_model_parallel_size={ep} (an MoE "
            "model) and sequence_parallel: false",
        )


@rule(
    "megatron-inference-optimized-sp",
    Source(
        MEGATRON_SETUP,
        "validate_and_set_config",
        "requires sequence parallelism",
        "raises ValueError",
    ),
)
def inference_optimized_sp(cfg: Config) -> Iterator[Violation]:
    """``transformer_impl: inference_optimized`` with TP > 1 and no sequence parallelism."""
    tp = cfg.int(f"{MEGATRON}.tensor_model_parallel_size")
    if (
        cfg.megatron
        and cfg.get(f"{MEGATRON}.transformer_impl") == "inference_optimized"
        and tp is not None
        and tp > 1
        and cfg.flag(f"{MEGATRON}.sequence_parallel", None) is False
    ):
        yield Violation(
            f"{MEGATRON}.sequence_parallel",
            f"transformer_impl inference_optimized with TP {tp} and sequence_parallel: false",
        )


@rule(
    "megatron-reward-model",
    Source(
        MEGATRON_SETUP,
        "validate_and_set_config",
        "Reward models are not yet supported with the Megatron backend",
        "raises NotImplementedError",
    ),
)
def megatron_reward_model(cfg: Config) -> Iterator[Violation]:
    """A reward model trained with Megatron."""
    if cfg.megatron and cfg.on("policy.reward_model_cfg.enabled"):
        yield Violation("policy.reward_model_cfg.enabled", "reward_model_cfg with Megatron")


@rule(
    "megatron-recompute-granularity",
    Source(
        MEGATRON_SETUP,
        "_apply_performance_config",
        "Invalid recompute_granularity",
        "raises ValueError",
    ),
)
def recompute_granularity(cfg: Config) -> Iterator[Violation]:
    """Activation checkpointing with a granularity other than full or selective."""
    granularity = cfg.get(f"{MEGATRON}.recompute_granularity", "full")
    if (
        cfg.megatron
        and cfg.on(f"{MEGATRON}.activation_checkpointing")
        and isinstance(granularity, str)
        and "${" not in granularity
        and granularity not in ("full", "selective")
    ):
        yield Violation(
            f"{MEGATRON}.recompute_granularity", f"recompute_granularity {granularity!r}"
        )


# Megatron-core's AttnBackend members (megatron/core/transformer/enums.py at the pinned commit).
ATTENTION_BACKENDS = ("flash", "fused", "unfused", "local", "auto")


@rule(
    "megatron-attention-backend",
    Source(
        MEGATRON_SETUP,
        "_apply_performance_config",
        "Invalid attention backend",
        "raises ValueError",
    ),
)
def attention_backend(cfg: Config) -> Iterator[Violation]:
    """An attention backend Megatron-core's ``AttnBackend`` does not have."""
    backend = cfg.str(f"{MEGATRON}.attention_backend")
    if cfg.megatron and backend is not None and backend not in ATTENTION_BACKENDS:
        yield Violation(
            f"{MEGATRON}.attention_backend",
            f"attention_backend {backend!r} (AttnBackend has {', '.join(ATTENTION_BACKENDS)})",
        )


@rule(
    "dtensor-cp-packing",
    Source(
        DTENSOR_V1,
        "DTensorPolicyWorkerImpl.__init__",
        "Context parallel is not supported for sequence packing",
        "raises ValueError",
    ),
)
def dtensor_cp_packing(cfg: Config) -> Iterator[Violation]:
    """DTensor V1: context parallelism with sequence packing."""
    cp = cfg.int(f"{DTENSOR}.context_parallel_size")
    if cfg.dtensor_v1 and cp is not None and cp > 1 and cfg.on("policy.sequence_packing.enabled"):
        yield Violation(
            "policy.sequence_packing.enabled",
            f"dtensor_cfg.context_parallel_size={cp} with sequence packing (DTensor V1 worker, "
            "dtensor_cfg._v2: false)",
        )


@rule(
    "dtensor-cp-sp",
    Source(
        DTENSOR_V1,
        "DTensorPolicyWorkerImpl.__init__",
        "context parallel can't be used together with sequence parallel",
    ),
)
def dtensor_cp_sp(cfg: Config) -> Iterator[Violation]:
    """DTensor V1: context parallelism with TP > 1 and sequence parallelism."""
    cp = cfg.int(f"{DTENSOR}.context_parallel_size")
    tp = cfg.int(f"{DTENSOR}.tensor_parallel_size")
    if (
        cfg.dtensor_v1
        and cp is not None
        and tp is not None
        and cp > 1
        and tp > 1
        and cfg.on(f"{DTENSOR}.sequence_parallel")
    ):
        yield Violation(
            f"{DTENSOR}.sequence_parallel",
            f"dtensor_cfg.context_parallel_size={cp} with tensor_parallel_size={tp} and "
            "sequence_parallel (DTensor V1 worker)",
        )


@rule(
    "dtensor-v1-lora",
    Source(POLICY, "Policy.__init__", "LoRA is not supported for DTensorPolicyWorker V1"),
)
def dtensor_v1_lora(cfg: Config) -> Iterator[Violation]:
    """LoRA on the DTensor V1 worker."""
    if cfg.dtensor_v1 and cfg.on(f"{DTENSOR}.lora_cfg.enabled"):
        yield Violation(f"{DTENSOR}.lora_cfg.enabled", "LoRA with dtensor_cfg._v2: false")


@rule(
    "dtensor-v1-dp-replicate",
    Source(POLICY, "Policy.__init__", "dp_replicate_size > 1 requires", "raises ValueError"),
)
def dtensor_v1_hsdp(cfg: Config) -> Iterator[Violation]:
    """HSDP (``dp_replicate_size`` > 1) on the DTensor V1 worker."""
    size = cfg.int(f"{DTENSOR}.dp_replicate_size", 1)
    if cfg.dtensor_v1 and size is not None and size > 1:
        yield Violation(
            f"{DTENSOR}.dp_replicate_size", f"dp_replicate_size={size} with dtensor_cfg._v2: false"
        )


PRECISIONS = ("float32", "bfloat16", "float16")


@rule(
    "policy-precision",
    Source(
        DTENSOR_V1, "DTensorPolicyWorkerImpl.__init__", "Unknown precision", "raises ValueError"
    ),
)
def precision(cfg: Config) -> Iterator[Violation]:
    """A training precision other than float32, bfloat16 or float16 (DTensor V1)."""
    value = cfg.str("policy.precision")
    if cfg.dtensor_v1 and value is not None and value not in PRECISIONS:
        yield Violation("policy.precision", f"precision {value!r} (not {', '.join(PRECISIONS)})")


@rule(
    "megatron-optimizer-precision",
    Source(MEGATRON_SETUP, "_validate_dtype_config", "optimizer.bf16=True must be set if"),
    Source(MEGATRON_SETUP, "_validate_dtype_config", "optimizer.fp16=True must be set if"),
    Source(MEGATRON_SETUP, "_validate_dtype_config", "optimizer.fp16=False must be set if"),
)
def optimizer_precision(cfg: Config) -> Iterator[Violation]:
    """Megatron optimizer bf16/fp16 flags that disagree with ``policy.precision``."""
    value = cfg.str("policy.precision")
    if not cfg.megatron or value is None:
        return
    aware = cfg.on(f"{OPTIMIZER}.use_precision_aware_optimizer")
    bf16, fp16 = cfg.on(f"{OPTIMIZER}.bf16"), cfg.on(f"{OPTIMIZER}.fp16")
    if value == "bfloat16" and aware and not bf16:
        yield Violation(
            f"{OPTIMIZER}.bf16", "precision bfloat16 with use_precision_aware_optimizer and no bf16"
        )
    elif value == "float16" and aware and not fp16:
        yield Violation(
            f"{OPTIMIZER}.fp16",
            "precision float16 with use_precision_aware_optimizer and no fp16",
            source=1,
        )
    elif value == "float32" and (bf16 or fp16):
        flag = "bf16" if bf16 else "fp16"
        yield Violation(
            f"{OPTIMIZER}.{flag}", f"precision float32 with optimizer.{flag}: true", source=2
        )


@rule(
    "policy-draft",
    Source(
        POLICY,
        "Policy.__init__",
        "policy.draft.enabled=true is only supported with the Meg",
        "raises ValueError",
    ),
    Source(
        POLICY,
        "Policy.__init__",
        "policy.draft.enabled=true does not support sequence pack",
        "raises ValueError",
    ),
)
def draft(cfg: Config) -> Iterator[Violation]:
    """A draft model without Megatron, or with sequence packing."""
    if not cfg.on("policy.draft.enabled"):
        return
    if not cfg.megatron:
        yield Violation("policy.draft.enabled", "policy.draft.enabled without Megatron")
    if cfg.on("policy.sequence_packing.enabled"):
        yield Violation(
            "policy.draft.enabled", "policy.draft.enabled with sequence packing", source=1
        )


@rule(
    "dynamic-batching-mb-tokens",
    Source(
        "nemo_rl/distributed/batched_data_dict.py",
        "BatchedDataDict.shard_by_batch_size",
        "max_seqlen_this_shard_indice <= max_tokens_per_microbatch",
    ),
)
def dynamic_batching_tokens(cfg: Config) -> Iterator[Violation]:
    """Dynamic batching micro batches smaller than one sequence of the maximum length.

    A sample that reaches ``max_total_sequence_length`` (every truncated one does) does not fit
    a micro batch of ``train_mb_tokens`` / ``logprob_mb_tokens`` tokens.
    """
    total = cfg.int("policy.max_total_sequence_length")
    if not cfg.on("policy.dynamic_batching.enabled") or total is None:
        return
    for name in ("train_mb_tokens", "logprob_mb_tokens"):
        tokens = cfg.int(f"policy.dynamic_batching.{name}")
        if tokens is not None and tokens < total:
            yield Violation(
                f"policy.dynamic_batching.{name}",
                f"dynamic_batching.{name} {tokens} < max_total_sequence_length {total}: a "
                "sample of the maximum length fits no micro batch",
            )


YARN_FIELDS = (
    "factor",
    "rope_theta",
    "original_max_position_embeddings",
    "truncate",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
)


@rule(
    "megatron-yarn-rope-scaling",
    Source(MEGATRON_SETUP, "validate_and_set_config", "rope_scaling.rope_type is 'yarn' but"),
)
def yarn(cfg: Config) -> Iterator[Violation]:
    """Megatron with yarn ``rope_scaling`` overrides that leave a required field out."""
    scaling = cfg.section("policy.hf_config_overrides.rope_scaling")
    if not cfg.megatron or not scaling or scaling.get("rope_type") != "yarn":
        return
    missing = [f for f in YARN_FIELDS if f not in scaling]
    if missing:
        yield Violation(
            "policy.hf_config_overrides.rope_scaling",
            f"rope_type yarn without {', '.join(missing)}",
        )


@rule(
    "megatron-peft",
    Source(
        MEGATRON_SETUP,
        "setup_model_and_optimizer",
        "dim must be set in peft_cfg",
        "raises ValueError",
    ),
    Source(
        MEGATRON_SETUP,
        "setup_model_and_optimizer",
        "alpha must be set in peft_cfg",
        "raises ValueError",
    ),
)
def peft(cfg: Config) -> Iterator[Violation]:
    """Megatron LoRA (``megatron_cfg.peft.enabled``) without its rank or alpha."""
    if not (cfg.megatron and cfg.on(f"{MEGATRON}.peft.enabled")):
        return
    for i, name in enumerate(("dim", "alpha")):
        if cfg.get(f"{MEGATRON}.peft.{name}") is None:
            yield Violation(
                f"{MEGATRON}.peft.{name}", f"peft enabled without peft.{name}", source=i
            )


@rule(
    "megatron-fp8-cfg",
    Source(
        MEGATRON_SETUP, "_apply_performance_config", "Missing key in fp8_cfg", "raises KeyError"
    ),
)
def fp8_cfg(cfg: Config) -> Iterator[Violation]:
    """Megatron fp8 training enabled without ``fp8``, ``fp8_recipe`` or ``fp8_param``."""
    section = cfg.section(f"{MEGATRON}.fp8_cfg")
    if not cfg.megatron or not section or section.get("enabled") is not True:
        return
    missing = [k for k in ("fp8", "fp8_recipe", "fp8_param") if k not in section]
    if missing:
        yield Violation(f"{MEGATRON}.fp8_cfg", f"fp8_cfg enabled without {', '.join(missing)}")


@rule(
    "megatron-activation-offload",
    Source(
        MEGATRON_SETUP,
        "_apply_performance_config",
        "offload_modules must be a non-empty",
        "raises ValueError",
    ),
)
def activation_offload(cfg: Config) -> Iterator[Violation]:
    """Fine-grained activation offloading without the modules to offload."""
    modules = cfg.get(f"{MEGATRON}.offload_modules")
    if (
        cfg.megatron
        and cfg.on(f"{MEGATRON}.fine_grained_activation_offloading")
        and not (isinstance(modules, list) and modules)
    ):
        yield Violation(
            f"{MEGATRON}.offload_modules",
            f"fine_grained_activation_offloading with offload_modules={modules!r}",
        )


# Megatron-Bridge model-provider fields reach the model only through
# ``megatron_cfg.model_overrides`` (``setup_model_config``: ``_merge_model_overrides``); NeMo RL
# never copies ``megatron_cfg.virtual_pipeline_model_parallel_size`` itself.
OVERRIDES = f"{MEGATRON}.model_overrides"


def _override(cfg: Config, field: str) -> object:
    """A model field as ``model_overrides`` sets it (None when it does not)."""
    section = cfg.section(OVERRIDES)
    return section.get(field) if section else None


def _vpp(cfg: Config) -> int | None:
    value = _override(cfg, "virtual_pipeline_model_parallel_size")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@rule(
    "megatron-vpp-pp1",
    Source(
        "megatron/core/parallel_state.py",
        "initialize_model_parallel",
        "pipeline-model-parallel size should be greater than 1 with interleaved schedule",
        "raises RuntimeError",
        MEGATRON_LM,
    ),
)
def vpp_without_pp(cfg: Config) -> Iterator[Violation]:
    """Virtual pipeline parallelism (``model_overrides``) with PP 1.

    Megatron-Bridge's ``torch_dist_init`` passes the model's
    ``virtual_pipeline_model_parallel_size`` to ``initialize_model_parallel``.
    """
    vpp, sizes = _vpp(cfg), cfg.parallel()
    if cfg.megatron and vpp is not None and sizes is not None and sizes[1] <= 1:
        yield Violation(
            f"{OVERRIDES}.virtual_pipeline_model_parallel_size",
            f"virtual_pipeline_model_parallel_size={vpp} with pipeline_model_parallel_size="
            f"{sizes[1]}",
        )


_LAYOUT = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "context_parallel_size",
)


def _dedicated_inference_model(cfg: Config) -> bool:
    """Whether ``dedicated_inference_megatron_cfg`` builds a second (inference) model.

    It does for colocated Megatron generation whose layout (CP pinned to 1) or
    ``transformer_impl`` differs from training's.
    """
    train, gen = cfg.section(MEGATRON), cfg.section("policy.generation.mcore_generation_config")
    if not (
        cfg.megatron
        and train
        and cfg.backend == "megatron"
        and cfg.on("policy.generation.colocated.enabled")
    ):
        return False
    merged = {**train, **(gen or {}), "context_parallel_size": 1}
    if any(k not in train or k not in merged for k in _LAYOUT):
        return False  # a key the run indexes directly is missing: the key schema says so
    layout = any(merged[k] != train[k] for k in _LAYOUT)
    return layout or merged.get("transformer_impl") != train.get("transformer_impl")


@rule(
    "megatron-colocated-reshard",
    Source(
        MEGATRON_SETUP,
        "setup_model_and_optimizer",
        "inference_megatron_cfg is not None and vpp_size not in (None, 1)",
        "raises NotImplementedError",
    ),
    Source(
        MEGATRON_SETUP,
        "setup_model_and_optimizer",
        "inference_megatron_cfg is not None and peft is not None",
        "raises NotImplementedError",
    ),
    Source(
        MEGATRON_SETUP,
        "setup_model_and_optimizer",
        "inference_megatron_cfg is not None and draft_enabled",
        "raises NotImplementedError",
    ),
)
def colocated_reshard(cfg: Config) -> Iterator[Violation]:
    """Colocated Megatron generation on a second (resharded) model with VPP, PEFT or a draft."""
    if not _dedicated_inference_model(cfg):
        return
    what = "colocated Megatron generation with a layout other than training's (reshard)"
    vpp = _vpp(cfg)
    if vpp is not None and vpp != 1:
        yield Violation(
            f"{OVERRIDES}.virtual_pipeline_model_parallel_size",
            f"{what} and virtual_pipeline_model_parallel_size={vpp}",
        )
    if cfg.on(f"{MEGATRON}.peft.enabled"):
        yield Violation(f"{MEGATRON}.peft.enabled", f"{what} and PEFT", source=1)
    if cfg.on("policy.draft.enabled"):
        yield Violation("policy.draft.enabled", f"{what} and a draft model", source=2)


# ``MegatronConfig``'s fields (``nemo_rl/models/policy/__init__.py`` at 7ea279a; the opt-in
# test at a NeMo RL checkout compares them).
MEGATRON_CONFIG_FIELDS = (
    "activation_checkpointing", "apply_rope_fusion", "attention_backend",
    "bias_activation_fusion", "checkpoint", "clear_memory_caches_before_refit",
    "context_parallel_size", "cuda_graph_impl", "cuda_graph_modules", "cuda_graph_warmup_steps",
    "defer_fp32_logits", "distributed_data_parallel_config", "empty_unused_memory_level",
    "enabled", "env_vars", "expert_model_parallel_size", "expert_tensor_parallel_size",
    "fine_grained_activation_offloading", "force_reconvert_from_hf", "fp8_cfg", "freeze_config",
    "freeze_moe_router", "freeze_sound_encoder", "freeze_sound_projection",
    "freeze_vision_model", "freeze_vision_projection", "fused_linear_logprobs_chunk_size",
    "gradient_accumulation_fusion", "hybridep_num_ranks_per_nvlink_domain", "hybridep_use_mnnvl",
    "inference_grouped_gemm_backend", "inference_moe_token_dispatcher_type", "model_overrides",
    "moe_enable_deepep", "moe_flex_dispatcher_backend", "moe_grouped_gemm",
    "moe_hybridep_num_sms", "moe_pad_experts_for_cuda_graph_inference", "moe_per_layer_logging",
    "moe_router_group_topk", "moe_router_num_groups", "moe_shared_expert_overlap",
    "moe_token_dispatcher_type", "mtp_detach_heads", "mtp_loss_scaling_factor", "mtp_num_layers",
    "mtp_use_repeated_layer", "num_layers_in_first_pipeline_stage",
    "num_layers_in_last_pipeline_stage", "offload_modules", "optimizer", "peft", "pipeline_dtype",
    "pipeline_model_parallel_size", "radio_force_cpe_eval_mode", "recompute_granularity",
    "recompute_modules", "scheduler", "sequence_parallel", "tensor_model_parallel_size",
    "transformer_impl", "use_fused_linear_logprobs", "use_fused_weighted_squared_relu",
    "use_gloo_process_groups",
)  # fmt: skip


@rule(
    "megatron-model-overrides-conflict",
    Source(
        MEGATRON_SETUP,
        "_validate_model_override_conflicts",
        "model_overrides is only for Megatron Bridge model fields",
        "raises ValueError",
    ),
)
def model_overrides_conflict(cfg: Config) -> Iterator[Violation]:
    """A ``model_overrides`` field ``megatron_cfg`` (or ``MegatronConfig``) has first-class."""
    train, overrides = cfg.section(MEGATRON), cfg.section(OVERRIDES)
    if not cfg.megatron or not train or not overrides:
        return
    first_class = (set(MEGATRON_CONFIG_FIELDS) | set(train)) - {"model_overrides"}
    for name in sorted(set(overrides) & first_class):
        yield Violation(
            f"{OVERRIDES}.{name}",
            f"model_overrides.{name} duplicates the first-class policy.megatron_cfg.{name}",
        )


@cache
def provider_fields() -> frozenset[str]:
    """Every field name a dataclass of Megatron Bridge or Megatron-core declares.

    ``rlgate/data/megatron_bridge_fields.json``, written by ``tools/megatron_bridge_fields.py``
    from Megatron Bridge at NeMo RL's submodule commit and its Megatron-LM.
    """
    table = json.loads((DATA / "megatron_bridge_fields.json").read_text(encoding="utf-8"))
    return frozenset(table["fields"])


@rule(
    "megatron-model-overrides-field",
    Source(
        MEGATRON_SETUP, "_merge_model_overrides", "not attribute_exists", "raises AttributeError"
    ),
)
def model_overrides_field(cfg: Config) -> Iterator[Violation]:
    """A ``model_overrides`` name that no Megatron Bridge provider has as a field.

    NeMo RL refuses a name that is not an ``init`` field of the model's provider dataclass
    (and any override on a provider that is no dataclass, ``setup_model_config``). Which
    provider a model gets needs Megatron Bridge; a name no dataclass of Megatron Bridge or
    Megatron-core declares is refused for every model (a typo, a field of another library).
    """
    train, overrides = cfg.section(MEGATRON), cfg.section(OVERRIDES)
    if not cfg.megatron or not train or not overrides:
        return
    first_class = set(MEGATRON_CONFIG_FIELDS) | set(train)  # megatron-model-overrides-conflict
    for name in sorted(n for n in overrides if isinstance(n, str)):
        if name not in first_class and name not in provider_fields():
            yield Violation(
                f"{OVERRIDES}.{name}",
                f"model_overrides.{name} is a field of no Megatron Bridge model provider (nor of "
                "Megatron-core's TransformerConfig)",
            )


@rule(
    "megatron-pretrained-format",
    Source(
        MEGATRON_SETUP,
        "validate_model_paths",
        "Unknown pretrained_checkpoint format",
        "raises ValueError",
    ),
)
def pretrained_format(cfg: Config) -> Iterator[Violation]:
    """``policy.pretrained_checkpoint.format`` other than megatron_bridge or megatron_lm."""
    section = cfg.section("policy.pretrained_checkpoint")
    fmt = section.get("format") if section else None
    if cfg.megatron and isinstance(fmt, str) and fmt not in ("megatron_bridge", "megatron_lm"):
        yield Violation(
            "policy.pretrained_checkpoint.format",
            f"pretrained_checkpoint.format {fmt!r} (megatron_bridge or megatron_lm)",
        )


WORKER = "DTensorPolicyWorkerImpl"


def _v1_vlm(cfg: Config) -> bool:
    """DTensor V1 with a processor: the Gym runner loads one when ``policy.is_vlm``."""
    return cfg.dtensor_v1 and cfg.gym and cfg.on("policy.is_vlm")


@rule(
    "dtensor-v1-vlm",
    Source(DTENSOR_V1, f"{WORKER}.__init__", "Sequence packing is not supported for VLM"),
    Source(DTENSOR_V1, f"{WORKER}.__init__", "Context parallel is yet not supported for VLM"),
)
def dtensor_v1_vlm(cfg: Config) -> Iterator[Violation]:
    """DTensor V1 training a VLM with sequence packing or context parallelism."""
    if not _v1_vlm(cfg):
        return
    if cfg.on("policy.sequence_packing.enabled"):
        yield Violation(
            "policy.sequence_packing.enabled", "policy.is_vlm with sequence packing (DTensor V1)"
        )
    cp = cfg.int(f"{DTENSOR}.context_parallel_size")
    if cp is not None and cp > 1:
        yield Violation(
            f"{DTENSOR}.context_parallel_size",
            f"policy.is_vlm with context_parallel_size={cp} (DTensor V1)",
            source=1,
        )


@rule(
    "dtensor-v1-reward-model",
    Source(
        DTENSOR_V1,
        "DTensorPolicyWorkerImpl.__init__",
        "Sequence packing is not supported for reward models",
        "raises NotImplementedError",
    ),
    Source(
        DTENSOR_V1,
        "DTensorPolicyWorkerImpl.__init__",
        "Unknown reward model type",
        "raises ValueError",
    ),
)
def dtensor_v1_reward_model(cfg: Config) -> Iterator[Violation]:
    """A DTensor V1 reward model with sequence packing, or of a type other than bradley_terry."""
    if not (cfg.dtensor_v1 and cfg.on("policy.reward_model_cfg.enabled")):
        return
    if cfg.on("policy.sequence_packing.enabled"):
        yield Violation(
            "policy.sequence_packing.enabled", "reward_model_cfg with sequence packing (DTensor V1)"
        )
    kind = cfg.get("policy.reward_model_cfg.reward_model_type")
    if isinstance(kind, str) and kind != "bradley_terry":
        yield Violation(
            "policy.reward_model_cfg.reward_model_type",
            f"reward_model_type {kind!r} (only bradley_terry)",
            source=1,
        )


@rule(
    "dtensor-v1-scheduler",
    Source(DTENSOR_V1, "DTensorPolicyWorkerImpl.__init__", "'milestones' in scheduler_cfg"),
)
def dtensor_v1_scheduler(cfg: Config) -> Iterator[Violation]:
    """A DTensor V1 scheduler list with an entry that has neither ``name`` nor ``milestones``."""
    entries = cfg.get("policy.scheduler")
    if not cfg.dtensor_v1 or not isinstance(entries, list):
        return
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and "name" not in entry and "milestones" not in entry:
            yield Violation(
                f"policy.scheduler.{i}", f"policy.scheduler[{i}] has neither name nor milestones"
            )


# Megatron-core's TransformerConfig.__post_init__, which Megatron Bridge's provider runs
# (finalize) on the fields NeMo RL's setup_model_config copies from megatron_cfg.
TRANSFORMER_CONFIG = "megatron/core/transformer/transformer_config.py"
POST_INIT = "TransformerConfig.__post_init__"


def _post_init(cites: str, says: str = "raises ValueError") -> Source:
    return Source(TRANSFORMER_CONFIG, POST_INIT, cites, says, MEGATRON_LM)


# TransformerConfig.__post_init__'s allowed_modules sets at the pinned commit.
RECOMPUTE_MODULES = (
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
    "gdn_norm_out",
)  # fmt: skip
OFFLOAD_MODULES = (
    "core_attn", "attn_proj", "expert_fc1", "fused_group_mlp", "moe_act", "attn_norm",
    "mlp_norm", "qkv_linear",
)  # fmt: skip
MOE_INSIDE = ("moe_act", "expert_fc1", "fused_group_mlp")


def _names(value: object) -> list[str] | None:
    """A list of strings, else None."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _recompute(cfg: Config) -> tuple[str | None, list[str] | None]:
    """The recompute granularity and modules ``_apply_performance_config`` sets (None: off).

    Granularity: ``megatron_cfg.get("recompute_granularity", "full")`` when
    ``activation_checkpointing``; modules: ``recompute_modules`` with granularity selective,
    Megatron-core's default ``["core_attn"]`` when null.
    """
    if not (cfg.megatron and cfg.on(f"{MEGATRON}.activation_checkpointing")):
        return None, None
    granularity = cfg.str(f"{MEGATRON}.recompute_granularity", "full")
    if granularity != "selective":
        return granularity, None
    modules = cfg.get(f"{MEGATRON}.recompute_modules")
    return granularity, ["core_attn"] if modules is None else _names(modules)


def _offload(cfg: Config) -> list[str] | None:
    """``offload_modules`` when fine-grained activation offloading is on (a list of names)."""
    if not (cfg.megatron and cfg.on(f"{MEGATRON}.fine_grained_activation_offloading")):
        return None
    return _names(cfg.get(f"{MEGATRON}.offload_modules")) or None


def _fp8(cfg: Config) -> dict[str, object] | None:
    """``fp8_cfg`` when enabled (``_apply_performance_config`` copies its three keys)."""
    section = cfg.section(f"{MEGATRON}.fp8_cfg")
    if cfg.megatron and section and section.get("enabled") is True:
        return section
    return None


@rule(
    "megatron-recompute-modules",
    _post_init("Invalid choices for recompute_modules", "asserts"),
    _post_init("Delayed scaling does not support moe_act and layernorm recompute"),
    _post_init("Cannot offload {offload_inside_moe} while recomputing the entire MoE", "asserts"),
)
def recompute_modules(cfg: Config) -> Iterator[Violation]:
    """Selective recompute of modules Megatron-core does not know, or that fp8 / offload refuse."""
    granularity, modules = _recompute(cfg)
    if granularity != "selective" or modules is None:
        return
    key = f"{MEGATRON}.recompute_modules"
    unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
    if unknown:
        yield Violation(key, f"recompute_modules {unknown} are not among {list(RECOMPUTE_MODULES)}")
    fp8 = _fp8(cfg)
    if fp8 and fp8.get("fp8") and fp8.get("fp8_recipe") == "delayed":
        both = [m for m in ("moe_act", "layernorm") if m in modules]
        if both:
            yield Violation(
                key, f"recompute_modules {both} with fp8_cfg.fp8_recipe 'delayed'", source=1
            )
    inside = [m for m in MOE_INSIDE if m in (_offload(cfg) or [])]
    if "moe" in modules and inside:
        yield Violation(
            f"{MEGATRON}.offload_modules",
            f"offload_modules {inside} inside the MoE layer that recompute_modules 'moe' "
            "recomputes whole",
            source=2,
        )


@rule(
    "megatron-offload-modules",
    _post_init("Invalid choices for offload_modules", "asserts"),
    _post_init("attn_proj cannot be set to offload_modules alone without core_attn"),
    _post_init("fused_group_mlp requires use_transformer_engine_op_fuser"),
    _post_init("fused_group_mlp offloads the whole fused grouped MLP"),
)
def offload_modules(cfg: Config) -> Iterator[Violation]:
    """Fine-grained activation offloading of modules Megatron-core refuses or cannot combine."""
    modules = _offload(cfg)
    if modules is None:
        return
    key = f"{MEGATRON}.offload_modules"
    unknown = [m for m in modules if m not in OFFLOAD_MODULES]
    if unknown:
        yield Violation(key, f"offload_modules {unknown} are not among {list(OFFLOAD_MODULES)}")
    if "attn_proj" in modules and "core_attn" not in modules:
        yield Violation(key, "offload_modules has attn_proj without core_attn", source=1)
    if "fused_group_mlp" in modules:
        # NeMo RL never sets it and no provider does: GPTModelProvider's default False.
        if _override(cfg, "use_transformer_engine_op_fuser") is not True:
            yield Violation(
                key,
                "offload_modules fused_group_mlp without use_transformer_engine_op_fuser "
                "(neither NeMo RL nor Megatron Bridge's providers set it)",
                source=2,
            )
        partial = [m for m in ("expert_fc1", "moe_act") if m in modules]
        if partial:
            yield Violation(key, f"offload_modules fused_group_mlp with {partial}", source=3)


@rule(
    "megatron-moe-dispatcher",
    _post_init("DeepEP backend is only supported with flex token dispatcher"),
    _post_init("Only one backend is supported for flex token dispatcher"),
    _post_init("moe_flex_dispatcher_backend='ncclep' requires"),
)
def moe_dispatcher(cfg: Config) -> Iterator[Violation]:
    """DeepEP or NCCL-EP without the flex token dispatcher, DeepEP with the HybridEP backend.

    Megatron-core raises whether or not the model has experts.
    """
    if not cfg.megatron:
        return
    dispatcher = cfg.str(f"{MEGATRON}.moe_token_dispatcher_type")
    backend = cfg.str(f"{MEGATRON}.moe_flex_dispatcher_backend")
    if cfg.on(f"{MEGATRON}.moe_enable_deepep"):
        if dispatcher is not None and dispatcher != "flex":
            yield Violation(
                f"{MEGATRON}.moe_token_dispatcher_type",
                f"moe_enable_deepep with moe_token_dispatcher_type {dispatcher!r} (not 'flex')",
            )
        if backend == "hybridep":
            yield Violation(
                f"{MEGATRON}.moe_flex_dispatcher_backend",
                "moe_enable_deepep with moe_flex_dispatcher_backend 'hybridep'",
                source=1,
            )
    if backend == "ncclep" and dispatcher is not None and dispatcher != "flex":
        yield Violation(
            f"{MEGATRON}.moe_token_dispatcher_type",
            f"moe_flex_dispatcher_backend 'ncclep' with moe_token_dispatcher_type {dispatcher!r}",
            source=2,
        )


@rule(
    "megatron-pipeline-stage-layers",
    _post_init("num_layers_in_first_pipeline_stage must be larger than 0"),
    _post_init("num_layers_in_last_pipeline_stage must be larger than 0"),
)
def pipeline_stage_layers(cfg: Config) -> Iterator[Violation]:
    """An uneven pipeline split whose first or last stage has no layers."""
    if not cfg.megatron:
        return
    for i, end in enumerate(("first", "last")):
        key = f"{MEGATRON}.num_layers_in_{end}_pipeline_stage"
        layers = cfg.int(key)
        if layers is not None and layers <= 0:
            yield Violation(key, f"num_layers_in_{end}_pipeline_stage={layers}", source=i)


@rule(
    "megatron-fp8-mode",
    _post_init("fp8_param must be used together with fp8 mode"),
    _post_init("fp8_quantizer_factory must be provided when fp8_recipe is 'custom'"),
)
def fp8_mode(cfg: Config) -> Iterator[Violation]:
    """fp8 enabled with ``fp8_param`` but no ``fp8`` format, or the ``custom`` recipe.

    NeMo RL never sets ``fp8_quantizer_factory``, so ``fp8_recipe: custom`` always fails.
    """
    fp8 = _fp8(cfg)
    if fp8 is None:
        return
    if fp8.get("fp8_param") is True and not fp8.get("fp8") and "fp8" in fp8:
        yield Violation(
            f"{MEGATRON}.fp8_cfg.fp8", f"fp8_cfg.fp8_param with fp8_cfg.fp8={fp8.get('fp8')!r}"
        )
    if fp8.get("fp8") and fp8.get("fp8_recipe") == "custom":
        yield Violation(
            f"{MEGATRON}.fp8_cfg.fp8_recipe",
            "fp8_cfg.fp8_recipe 'custom' (NeMo RL sets no fp8_quantizer_factory)",
            source=1,
        )


CUDA_GRAPH_IMPLS = ("none", "transformer_engine", "local", "full_iteration")


@rule(
    "megatron-cuda-graph",
    _post_init("Invalid cuda graph implementation", "asserts"),
    _post_init("full recompute is only supported with full iteration CUDA graph", "asserts"),
)
def cuda_graph(cfg: Config) -> Iterator[Violation]:
    """An unknown ``cuda_graph_impl``, or a layer-level CUDA graph with full recompute."""
    impl = cfg.str(f"{MEGATRON}.cuda_graph_impl")
    if not cfg.megatron or impl is None:
        return
    key = f"{MEGATRON}.cuda_graph_impl"
    if impl not in CUDA_GRAPH_IMPLS:
        yield Violation(key, f"cuda_graph_impl {impl!r} is not one of {list(CUDA_GRAPH_IMPLS)}")
        return
    granularity, _ = _recompute(cfg)
    if impl in ("local", "transformer_engine") and granularity == "full":
        yield Violation(
            key, f"cuda_graph_impl {impl!r} with activation_checkpointing (full recompute)", 1
        )


# CudaGraphModule's members at the pinned commit (megatron/core/transformer/enums.py); Bridge's
# set_cuda_graph_modules maps each name with CudaGraphModule[name].
CUDA_GRAPH_MODULES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba")
# ALLOWED_INFERENCE_SCOPES (megatron/core/transformer/cuda_graph_config.py).
INFERENCE_SCOPES = {
    "none": ("none",),
    "local": ("layer", "block"),
    "transformer_engine": ("none",),
    "full_iteration": ("none",),
}


def _graph_modules(cfg: Config, impl: str) -> list[str] | None:
    """``cuda_graph_modules`` as ``__post_init__`` holds them (None: unknown or not a list).

    Absent: the provider's default ``"full"`` (normalised to ``[]``, the whole layer). With
    ``local``, either of ``moe_router`` / ``moe_preprocess`` brings in the other.
    """
    key = f"{MEGATRON}.cuda_graph_modules"
    if not cfg.has(key):
        return []
    names = _names(cfg.get(key))
    if names is None or not set(names) <= set(CUDA_GRAPH_MODULES):
        return None
    names = list(names)
    if impl == "local" and {"moe_router", "moe_preprocess"} & set(names):
        names += [n for n in ("moe_router", "moe_preprocess") if n not in names]
    return names


def _dropout(cfg: Config, field: str) -> bool:
    """Whether ``model_overrides`` sets a non-zero ``field`` (else the provider's value)."""
    value = _override(cfg, field)
    return isinstance(value, int | float) and not isinstance(value, bool) and value != 0.0


@rule(
    "megatron-cuda-graph-modules",
    _post_init("Invalid inference CUDA graph scope", "asserts"),
    _post_init("cuda_graph_modules must be empty when cuda_graph_impl=", "asserts"),
    _post_init("cuda_graph_modules must not contain both moe and moe_router", "asserts"),
    _post_init("moe_preprocess cuda graph is only supported with moe_router", "asserts"),
    _post_init("moe recompute is not supported with moe_router CUDA graph", "asserts"),
    _post_init("attention dropout is not supported with graphed attention", "asserts"),
    _post_init("hidden dropout is not supported with graphed MLP/MoE", "asserts"),
    _post_init("moe_input_jitter_eps is not supported with graphed moe", "asserts"),
    _post_init("only supports offload_modules 'expert_fc1'", "asserts"),
    _post_init("is not supported with whole-layer CUDA graph capture", "asserts"),
    _post_init("offloading is only supported with transformer_engine CUDA graph", "asserts"),
    _post_init("Token-drop MoE is temporarily not supported with activation", "asserts"),
    _post_init("cuda_graph_warmup_steps must be greater than 0 when enabling", "asserts"),
)
def cuda_graph_modules(cfg: Config) -> Iterator[Violation]:
    """CUDA-graph scopes Megatron-core refuses with the impl, recompute, dropout or offloading.

    ``_apply_performance_config`` copies ``cuda_graph_impl`` (and, only then,
    ``inference_cuda_graph_scope``), ``cuda_graph_modules`` (Bridge's
    ``set_cuda_graph_modules``), ``cuda_graph_warmup_steps``, the recompute keys and
    ``fine_grained_activation_offloading`` / ``offload_modules``. The dropouts and
    ``moe_input_jitter_eps`` NeMo RL never sets: the provider's (Bridge's Qwen bridges set
    ``hidden_dropout = 0.0``, ``moe_input_jitter_eps`` defaults to None) unless
    ``model_overrides`` sets them; the rule reads only ``model_overrides``.

    ``__post_init__`` runs first in ``setup_model_config`` only with ``model_overrides`` (or a
    ``megatron_lm`` checkpoint); otherwise in ``MegatronPolicyWorkerImpl.__init__``'s
    ``ConfigContainer.validate``, after Bridge's ``validate_cuda_graph_configuration``, which
    refuses ``local`` with ``cuda_graph_modules`` (or with none and no inference scope) first:
    those configs fail either way, but with Bridge's message.
    """
    impl = cfg.str(f"{MEGATRON}.cuda_graph_impl")
    if not cfg.megatron or impl not in CUDA_GRAPH_IMPLS:
        return
    modules_key = f"{MEGATRON}.cuda_graph_modules"
    scope = cfg.str(f"{MEGATRON}.inference_cuda_graph_scope")
    if scope in ("none", "layer", "block") and scope not in INFERENCE_SCOPES[impl]:
        yield Violation(
            f"{MEGATRON}.inference_cuda_graph_scope",
            f"inference_cuda_graph_scope {scope!r} with cuda_graph_impl {impl!r} (allowed: "
            f"{list(INFERENCE_SCOPES[impl])})",
        )
    modules = _graph_modules(cfg, impl)
    if impl == "none" or modules is None:
        return
    if impl == "full_iteration" and modules:
        yield Violation(
            modules_key, f"cuda_graph_modules {modules} with cuda_graph_impl 'full_iteration'", 1
        )
    per_layer = impl in ("local", "transformer_engine")
    if per_layer and {"moe", "moe_router"} <= set(modules):
        yield Violation(modules_key, f"cuda_graph_modules {modules}: both moe and moe_router", 2)
    if per_layer and "moe_preprocess" in modules and "moe_router" not in modules:
        yield Violation(modules_key, f"cuda_graph_modules {modules}: moe_preprocess alone", 3)
    yield from _graphed_recompute(cfg, impl, modules)
    yield from _graphed_offload(cfg, impl, modules)


def _graphed_recompute(cfg: Config, impl: str, modules: list[str]) -> Iterator[Violation]:
    """Selective recompute of a module the CUDA graph captures (sources 4-7)."""
    granularity, recomputed = _recompute(cfg)
    if granularity != "selective" or recomputed is None:
        return
    key = f"{MEGATRON}.recompute_modules"
    if impl == "transformer_engine" and "moe" in recomputed and "moe_router" in modules:
        yield Violation(key, "recompute_modules 'moe' with the moe_router CUDA graph", 4)
    full = impl == "full_iteration" or not modules  # the whole layer is captured

    def graphed(module: str, recompute: str) -> bool:
        return (full or module in modules) and recompute in recomputed

    if _dropout(cfg, "attention_dropout") and graphed("attn", "core_attn"):
        yield Violation(key, "recompute_modules 'core_attn' graphed with attention_dropout", 5)
    if _dropout(cfg, "hidden_dropout") and (graphed("mlp", "mlp") or graphed("moe", "moe")):
        yield Violation(key, "recompute_modules 'mlp'/'moe' graphed with hidden_dropout", 6)
    if _override(cfg, "moe_input_jitter_eps") is not None and graphed("moe", "moe"):
        yield Violation(key, "recompute_modules 'moe' graphed with moe_input_jitter_eps", 7)


def _graphed_offload(cfg: Config, impl: str, modules: list[str]) -> Iterator[Violation]:
    """Fine-grained activation offloading under a CUDA graph (sources 8-12)."""
    offload = _offload(cfg)
    if offload is None:
        return
    key = f"{MEGATRON}.offload_modules"
    outside = sorted(set(offload) - set(MOE_INSIDE))
    if impl == "local":
        if outside:
            yield Violation(key, f"offload_modules {outside} with cuda_graph_impl 'local'", 8)
        if not modules:
            yield Violation(
                f"{MEGATRON}.cuda_graph_modules",
                "fine_grained_activation_offloading with cuda_graph_impl 'local' and no "
                "cuda_graph_modules (whole-layer capture)",
                9,
            )
        if not outside and "moe" in modules:
            yield Violation(key, "offload_modules with the local moe CUDA graph", 10)
    if "moe" in modules:
        yield Violation(
            f"{MEGATRON}.cuda_graph_modules",
            "cuda_graph_modules 'moe' with fine_grained_activation_offloading",
            11,
        )
    warmup = cfg.int(f"{MEGATRON}.cuda_graph_warmup_steps")
    if warmup is not None and warmup <= 0:
        yield Violation(
            f"{MEGATRON}.cuda_graph_warmup_steps",
            f"cuda_graph_warmup_steps={warmup} with fine_grained_activation_offloading",
            12,
        )


@rule(
    "megatron-moe-router",
    _post_init("moe_aux_loss_coeff must be a list of the same length", "asserts"),
    _post_init("When using group limited routing, moe_router_num_groups must be specified"),
    _post_init("should be smaller than moe_router_num_groups", "asserts"),
)
def moe_router(cfg: Config) -> Iterator[Violation]:
    """Load-balancing types without their aux-loss coefficients, or group routing without groups.

    A list of load-balancing types needs a ``moe_aux_loss_coeff`` list as long; group-limited
    routing needs groups, and no more chosen groups than there are.

    ``_apply_moe_config`` copies ``moe_router_load_balancing_type`` always and the two group
    keys only when ``megatron_cfg`` has them (else the provider's values decide, and the rule
    says nothing); with ``transformer_impl: inference_optimized`` one group clears both.
    """
    if not cfg.megatron:
        return
    kinds = cfg.get(f"{MEGATRON}.moe_router_load_balancing_type")
    if isinstance(kinds, list):
        coeff = _override(cfg, "moe_aux_loss_coeff")  # the provider's float otherwise
        if not (isinstance(coeff, list) and len(coeff) == len(kinds)):
            yield Violation(
                f"{MEGATRON}.moe_router_load_balancing_type",
                f"moe_router_load_balancing_type {kinds} (a list) without a moe_aux_loss_coeff "
                f"list of {len(kinds)} (model_overrides)",
            )
    if not (
        cfg.has(f"{MEGATRON}.moe_router_group_topk")
        and cfg.has(f"{MEGATRON}.moe_router_num_groups")
    ):
        return
    topk = cfg.get(f"{MEGATRON}.moe_router_group_topk")
    groups = cfg.get(f"{MEGATRON}.moe_router_num_groups")
    if cfg.str(f"{MEGATRON}.transformer_impl") == "inference_optimized" and groups == 1:
        return
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        return
    if groups is None or groups == 0:
        yield Violation(
            f"{MEGATRON}.moe_router_num_groups",
            f"moe_router_group_topk={topk} with moe_router_num_groups={groups!r}",
            source=1,
        )
    elif isinstance(groups, int) and not isinstance(groups, bool) and topk > groups:
        yield Violation(
            f"{MEGATRON}.moe_router_group_topk",
            f"moe_router_group_topk={topk} above moe_router_num_groups={groups}",
            source=2,
        )
