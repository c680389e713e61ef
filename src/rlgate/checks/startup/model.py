"""Model rules: asserts decided by the config together with the model's ``config.json``.

vLLM checks the engine's tensor parallelism against the model's attention heads, expert
parallelism against its experts and ``max_model_len`` against its maximum length when the
engine is built (``ModelConfig``, ``vllm/config/model.py``); NeMo RL checks MoE-only
activation-offload modules against the Megatron model's experts, refuses context
parallelism for Gemma3 in the DTensor worker, and maps the Megatron layers onto pipeline
stages for ``nccl_reshard`` refit. Megatron-core's ``TransformerConfig.__post_init__`` checks
the Megatron parallel sizes against the heads, KV heads, gated delta net heads, experts, shared
experts and layers that Megatron Bridge's provider takes from the model, and Megatron Bridge's
``ConfigContainer.validate`` the provider's ``seq_length`` against context parallelism. Each
rule's ``when`` is the config side of its site.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlgate.checks.startup import (
    MEGATRON_BRIDGE,
    MEGATRON_LM,
    VLLM,
    Config,
    Source,
    Violation,
    model_rule,
)
from rlgate.recipe.findings import Severity
from rlgate.serving.model_config import (
    ModelConfig,
    VllmArchitecture,
    transformers_default_experts,
    vllm_architecture,
)

VCFG = "policy.generation.vllm_cfg"
VKW = "policy.generation.vllm_kwargs"
MCFG = "policy.megatron_cfg"
VLLM_MODEL = "vllm/config/model.py"


def _vllm_size(cfg: Config, key: str) -> int | None:
    if cfg.backend != "vllm":
        return None
    value = cfg.int(f"{VCFG}.{key}")
    return value if value is not None and value > 1 else None


@model_rule(
    "vllm-heads-tp",
    Source(
        VLLM_MODEL,
        "ModelConfig.verify_with_parallel_config",
        "must be divisible by tensor parallel size",
        "raises ValueError",
        repo=VLLM,
    ),
    when=lambda cfg: _vllm_size(cfg, "tensor_parallel_size") is not None,
    insist=False,
)
def vllm_heads_tp(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """The vLLM engine's TP not dividing the model's attention heads."""
    tp, heads = _vllm_size(cfg, "tensor_parallel_size"), model.text.num_attention_heads
    if tp is not None and heads is not None and heads % tp:
        yield Violation(
            f"{VCFG}.tensor_parallel_size",
            f"vLLM tensor_parallel_size {tp} does not divide the model's {heads} attention "
            "heads (num_attention_heads)",
        )


@model_rule(
    "vllm-ep-dense",
    Source(
        VLLM_MODEL,
        "ModelConfig._verify_with_expert_parallelism",
        "when expert parallelism is enabled",
        "raises ValueError",
        repo=VLLM,
    ),
    when=lambda cfg: _vllm_size(cfg, "expert_parallel_size") is not None,
    insist=False,  # vLLM EP is the ordinary case on MoE models
)
def vllm_ep_dense(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Expert parallelism in vLLM (NeMo RL: ``expert_parallel_size > 1``) on a dense model."""
    if model.experts == 0:
        yield Violation(
            f"{VCFG}.expert_parallel_size",
            f"vLLM expert_parallel_size {_vllm_size(cfg, 'expert_parallel_size')} enables "
            "expert parallelism, but the model has no experts (its config.json writes none "
            "of num_experts, n_routed_experts, num_local_experts, moe_num_experts)",
        )


DCP = "policy.generation.vllm_kwargs.decode_context_parallel_size"
KV_HEAD_KEYS = (  # vLLM model_arch_config_convertor.py::get_total_num_kv_heads, in its order
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)


def _dcp(cfg: Config) -> int | None:
    dcp = cfg.int(DCP)
    return dcp if cfg.backend == "vllm" and dcp is not None and dcp > 1 else None


@model_rule(
    "vllm-dcp-kv-heads",
    *(
        Source(VLLM_MODEL, "ModelConfig.verify_with_parallel_config", cites, repo=VLLM)
        for cites in (
            "tensor_parallel_size > total_num_kv_heads",
            "decode_context_parallel_size <= max_dcp_size",
            "num_q_per_kv % decode_context_parallel_size == 0",
        )
    ),
    when=lambda cfg: _dcp(cfg) is not None,
)
def vllm_dcp(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Decode context parallelism (``vllm_kwargs``) against TP and the model's KV heads (GQA)."""
    dcp, tp = _dcp(cfg), cfg.int(f"{VCFG}.tensor_parallel_size", 1)
    heads = model.text.num_attention_heads
    kv = next(
        (
            v
            for k in KV_HEAD_KEYS
            if isinstance(v := model.text.extra(k) or getattr(model.text, k, None), int)
        ),
        heads,
    )
    if dcp is None or tp is None or heads is None or not kv or model.text.extra("kv_lora_rank"):
        return  # an MLA model (kv_lora_rank) is not checked by vLLM
    if tp <= kv:
        yield Violation(
            f"{VCFG}.tensor_parallel_size",
            f"decode_context_parallel_size {dcp} needs vLLM TP above the model's {kv} KV heads "
            f"(TP {tp})",
        )
    elif dcp > tp // kv:
        yield Violation(DCP, f"decode_context_parallel_size {dcp} > TP {tp} // {kv} KV heads", 1)
    elif (heads // kv) % dcp:
        yield Violation(
            DCP,
            f"the model's {heads // kv} query heads per KV head are not a multiple of "
            f"decode_context_parallel_size {dcp}",
            2,
        )


@model_rule(
    "vllm-max-model-len",
    Source(
        VLLM_MODEL,
        "_get_and_verify_max_len",
        "max_model_len > derived_max_model_len",
        "raises ValueError",
        repo=VLLM,
    ),
    when=lambda cfg: cfg.backend == "vllm" and cfg.int(f"{VCFG}.max_model_len") is not None,
    insist=False,
)
def vllm_max_model_len(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """``vllm_cfg.max_model_len`` above the model's own maximum length."""
    asked = cfg.int(f"{VCFG}.max_model_len")
    derived, key = model.max_len()
    if asked is None or asked == -1 or derived == float("inf") or asked <= derived:
        return
    yield Violation(
        f"{VCFG}.max_model_len",
        f"max_model_len {asked} is above the model's maximum length {derived:g} ({key}, "
        "RoPE scaling applied as vLLM does); vLLM refuses it unless the run sets "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    )


MEGATRON_SETUP = "nemo_rl/models/megatron/setup.py"
MOE_ONLY_MODULES = ("expert_fc1", "moe_act", "fused_group_mlp")  # _apply_performance_config


def _moe_only_offload(cfg: Config) -> list[str]:
    if not cfg.megatron or not cfg.get(f"{MCFG}.fine_grained_activation_offloading"):
        return []
    modules = cfg.get(f"{MCFG}.offload_modules")
    modules = modules if isinstance(modules, list) else []
    return sorted(m for m in MOE_ONLY_MODULES if m in modules)


@model_rule(
    "megatron-moe-offload-dense",
    Source(
        MEGATRON_SETUP,
        "_apply_performance_config",
        "A MoE-only offload module requires a MoE model",
        "raises ValueError",
    ),
    when=lambda cfg: bool(_moe_only_offload(cfg)),
)
def moe_offload_dense(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """MoE-only activation-offload modules on a dense model (``num_moe_experts`` None)."""
    if model.experts == 0:
        yield Violation(
            f"{MCFG}.offload_modules",
            f"offload_modules {_moe_only_offload(cfg)} are MoE-only, but the model has no "
            "experts (Megatron Bridge leaves num_moe_experts None)",
        )


DTENSOR_WORKER = "nemo_rl/models/policy/workers/dtensor_policy_worker.py"
GEMMA3_TYPES = ("gemma3", "gemma3_text")  # Gemma3ForConditionalGeneration, Gemma3ForCausalLM


def _dtensor_cp(cfg: Config) -> int | None:
    cp = cfg.int("policy.dtensor_cfg.context_parallel_size")
    return cp if cfg.dtensor and cp is not None and cp > 1 else None


@model_rule(
    "dtensor-gemma3-context-parallel",
    Source(DTENSOR_WORKER, "DTensorPolicyWorkerImpl.__init__", "not self.is_gemma3"),
    when=lambda cfg: _dtensor_cp(cfg) is not None,
)
def gemma3_cp(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Context parallelism on a Gemma3 model in the DTensor worker."""
    if model.model_type in GEMMA3_TYPES:
        yield Violation(
            "policy.dtensor_cfg.context_parallel_size",
            f"context_parallel_size {_dtensor_cp(cfg)} on a Gemma3 model (model_type "
            f"{model.model_type!r}): torch context parallel does not support Gemma3",
        )


MEGATRON_WORKER = "nemo_rl/models/policy/workers/megatron_policy_worker.py"
LAYER_TO_STAGE = "MegatronPolicyWorkerImpl._build_layer_to_pp_stage"


def _reshard_pp(cfg: Config) -> int | None:
    pp = cfg.int(f"{MCFG}.pipeline_model_parallel_size")
    reshard = cfg.str("policy.generation.refit_transport") == "nccl_reshard"
    return pp if reshard and cfg.megatron and pp is not None and pp > 1 else None


@model_rule(
    "nccl-reshard-layer-split",
    Source(MEGATRON_WORKER, LAYER_TO_STAGE, "layers_to_distribute % stages_left == 0"),
    Source(MEGATRON_WORKER, LAYER_TO_STAGE, "layer_idx == num_layers"),
    when=lambda cfg: _reshard_pp(cfg) is not None,
)
def layer_split(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """nccl_reshard's layer-to-stage map: the model's layers against the pipeline split."""
    pp, layers = _reshard_pp(cfg), model.text.num_hidden_layers
    if pp is None or layers is None:
        return
    first = cfg.int(f"{MCFG}.num_layers_in_first_pipeline_stage")
    last = cfg.int(f"{MCFG}.num_layers_in_last_pipeline_stage")
    left, stages = (
        layers - (first or 0) - (last or 0),
        pp - (first is not None) - (last is not None),
    )
    split = f"first {first}, last {last}" if first is not None or last is not None else "even"
    if stages > 0 and left % stages:
        yield Violation(
            f"{MCFG}.pipeline_model_parallel_size",
            f"the model's {layers} layers (num_hidden_layers) less the {split} stages leave "
            f"{left} layers for {stages} pipeline stages",
        )
    elif stages == 0 and left != 0:
        yield Violation(
            f"{MCFG}.num_layers_in_last_pipeline_stage",
            f"num_layers_in_first/last_pipeline_stage {first} + {last} with PP {pp} assign "
            f"{layers - left} of the model's {layers} layers (num_hidden_layers)",
            source=1,
        )


VLLM_WORKER = "nemo_rl/models/generation/vllm/vllm_worker.py"
LOAD_MODEL = "BaseVllmGenerationWorker._load_model"
QUANTIZED_DUMMY_ONLY = ("GptOssForCausalLM", "Mistral3ForConditionalGeneration")


def _load_format(cfg: Config) -> str | None:
    """``vllm_cfg.load_format`` when it is not ``dummy`` (gemma/Nemotron VL: forced auto)."""
    value = cfg.str(f"{VCFG}.load_format")
    return value if cfg.backend == "vllm" and value is not None and value != "dummy" else None


@model_rule(
    "vllm-quantized-load-format",
    Source(VLLM_WORKER, LOAD_MODEL, "Loading quantized GPT-OSS models"),
    Source(VLLM_WORKER, LOAD_MODEL, "Loading FP8-quantized Mistral3 in vLLM"),
    when=lambda cfg: _load_format(cfg) is not None,
    insist=False,  # a real load_format is the ordinary case
)
def quantized_load_format(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """A quantized GPT-OSS or Mistral3 checkpoint loaded by vLLM with a real ``load_format``."""
    if not model.quantized:
        return
    for i, arch in enumerate(QUANTIZED_DUMMY_ONLY):
        if arch in model.architectures:
            yield Violation(
                f"{VCFG}.load_format",
                f"load_format {_load_format(cfg)!r} on a quantized {arch} checkpoint (its "
                "config.json has a quantization_config): only load_format 'dummy' (weights by "
                "refit) is supported",
                source=i,
            )


REFIT_LAYOUT = "nemo_rl/models/generation/vllm/refit_layout.py"


def _nixl_expert_tp(cfg: Config) -> int | None:
    """VLLM's expert TP under NIXL sharded expert refit: vLLM TP when EP is off, else None.

    ``refit_cfg.nixl.shard_expert_weights`` makes the policy select each vLLM rank's slice of
    every expert weight; with vLLM EP (``expert_parallel_size > 1``) whole experts move and
    vLLM's ``FusedMoEParallelConfig.make`` sets the expert TP to 1.
    """
    if cfg.str("policy.generation.refit_transport") != "nixl":
        return None
    if not cfg.on("policy.generation.refit_cfg.nixl.shard_expert_weights"):
        return None
    ep = cfg.int(f"{VCFG}.expert_parallel_size", 1)
    tp = _vllm_size(cfg, "tensor_parallel_size")
    return tp if ep is not None and ep <= 1 else None


@model_rule(
    "nixl-expert-shard-tp",
    Source(
        REFIT_LAYOUT,
        "select_hf_weight_for_vllm_target",
        "tensor.shape[shard_dim] % tp_size != 0",
        "raises ValueError",
    ),
    when=lambda cfg: _nixl_expert_tp(cfg) is not None,
)
def nixl_expert_shard_tp(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """NIXL sharded expert refit: the experts' intermediate size not divisible by vLLM's TP.

    The HF expert weights it shards (``mlp.experts.N.{gate,up,down}_proj``, the naming of the
    MoE models whose config writes ``moe_intermediate_size``: Qwen MoE, DeepSeek) are cut
    along that size (dim 0 of gate/up, dim 1 of down).
    """
    tp, size = _nixl_expert_tp(cfg), model.text.extra("moe_intermediate_size")
    if not model.experts or tp is None or not isinstance(size, int) or isinstance(size, bool):
        return
    if size % tp:
        yield Violation(
            f"{VCFG}.tensor_parallel_size",
            f"NIXL shard_expert_weights with vLLM TP {tp} and no EP: the model's "
            f"moe_intermediate_size {size} is not divisible by {tp}",
        )


def _vllm_arch(cfg: Config, model: ModelConfig) -> VllmArchitecture | None:
    """The vLLM registry entry the engine resolves the model to (None: not decided here).

    ``vllm_kwargs.hf_overrides.architectures`` replaces the file's; a ``model_impl`` other
    than auto/vllm (the Transformers or Terratorch backend) resolves another class.
    """
    if cfg.str(f"{VKW}.model_impl", "auto") not in ("auto", "vllm"):
        return None
    override = cfg.get(f"{VKW}.hf_overrides.architectures")
    archs = override if isinstance(override, list) else list(model.architectures)
    return vllm_architecture([a for a in archs if isinstance(a, str)])


@model_rule(
    "vllm-pp-architecture",
    Source(
        VLLM_MODEL,
        "ModelConfig.verify_with_parallel_config",
        "is_pp_supported_model",
        "raises NotImplementedError",
        repo=VLLM,
    ),
    when=lambda cfg: _vllm_size(cfg, "pipeline_parallel_size") is not None,
)
def vllm_pp_architecture(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Pipeline parallelism in vLLM on an architecture whose vLLM class lacks ``SupportsPP``."""
    pp, arch = _vllm_size(cfg, "pipeline_parallel_size"), _vllm_arch(cfg, model)
    if pp is not None and arch is not None and not arch.pp:
        yield Violation(
            f"{VCFG}.pipeline_parallel_size",
            f"vLLM pipeline_parallel_size {pp} on {arch.name}, whose vLLM {arch.vllm} "
            "implementation does not support pipeline parallelism (no SupportsPP in its "
            "model registry)",
        )


MM_IPC = f"{VKW}.mm_tensor_ipc"


def _shm_world(cfg: Config) -> int | None:
    """The engine's ``world_size_across_dp`` (TP x PP x PCP x DP) with ``torch_shm``, if > 1."""
    if cfg.backend != "vllm" or cfg.str(MM_IPC) != "torch_shm":
        return None
    sizes = (
        cfg.int(f"{VCFG}.tensor_parallel_size"),
        cfg.int(f"{VCFG}.pipeline_parallel_size"),
        cfg.int(f"{VKW}.prefill_context_parallel_size", 1),
        cfg.int(f"{VKW}.data_parallel_size", 1),
    )
    if any(s is None or s < 1 for s in sizes):
        return None
    world = math.prod(s for s in sizes if s is not None)
    return world if world > 1 else None


@model_rule(
    "vllm-mm-torch-shm",
    Source(
        VLLM_MODEL,
        "ModelConfig.verify_with_parallel_config",
        "mm_tensor_ipc == 'torch_shm'",
        "raises ValueError",
        repo=VLLM,
    ),
    when=lambda cfg: _shm_world(cfg) is not None,
)
def vllm_mm_torch_shm(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """``vllm_kwargs.mm_tensor_ipc: torch_shm`` on a multimodal model with more than one GPU.

    vLLM builds a ``multimodal_config`` for every architecture its registry calls multimodal
    (Qwen3.5's ``*ForConditionalGeneration`` too, ``language_model_only`` or not).
    """
    world, arch = _shm_world(cfg), _vllm_arch(cfg, model)
    if world is not None and arch is not None and arch.multimodal:
        yield Violation(
            MM_IPC,
            f"mm_tensor_ipc 'torch_shm' on the multimodal {arch.name} with {world} GPUs per "
            "vLLM engine (TP x PP x PCP x DP): torch_shm needs exactly one",
        )


REFIT_LOADER = "nemo_rl/models/generation/vllm/refit_loader.py"
EXPERT_LAYOUT = "VllmShardedExpertRefitMixin._checkpoint_engine_weight_layout"
# The other unquantized MoE kernels vLLM takes (oracle/unquantized.py::map_unquantized_backend;
# vLLM refuses any other value for an unquantized model itself, "humming" falls back to auto).
NON_TRITON_MOE = ("flashinfer_trtllm", "flashinfer_cutlass", "aiter")
CLEARED_QUANT = ("GptOssForCausalLM", "Mistral3ForConditionalGeneration")  # _load_model


def _nixl_sharded(cfg: Config) -> bool:
    return (
        cfg.backend == "vllm"
        and cfg.str("policy.generation.refit_transport") == "nixl"
        and cfg.on("policy.generation.refit_cfg.nixl.shard_expert_weights")
    )


@model_rule(
    "nixl-expert-shard-quantized",
    Source(REFIT_LOADER, EXPERT_LAYOUT, "canonical unquantized Triton", "raises ValueError"),
    Source(
        REFIT_LOADER,
        "VllmShardedExpertRefitMixin._load_sharded_expert_weights",
        "not supported for FP8 vLLM models",
        "raises ValueError",
    ),
    Source(REFIT_LOADER, EXPERT_LAYOUT, "is_transposed", "raises ValueError"),
    when=_nixl_sharded,
)
def nixl_expert_shard_quantized(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """NIXL sharded expert refit on quantized vLLM weights, or MoE experts off Triton.

    The weight layout each vLLM rank advertises (``prepare_checkpoint_engine``, before any
    refit) refuses expert layers with a quantization config (AWQ/GPTQ-style ones, whose
    experts are stored transposed, first) or an unquantized kernel other than Triton; a
    dense model has no expert layers there, but its first refit refuses an fp8 engine.
    NeMo RL clears a GPT-OSS or Mistral3 checkpoint's quantization (not decided here).
    """
    if any(a in CLEARED_QUANT for a in model.architectures) or model.experts is None:
        return
    precision, quant = cfg.str(f"{VCFG}.precision"), cfg.get(f"{VKW}.quantization")
    if precision == "fp8":
        key, what, fp8 = f"{VCFG}.precision", "precision 'fp8'", True
    elif isinstance(quant, str):
        key, what, fp8 = (
            f"{VKW}.quantization",
            f"vllm_kwargs.quantization {quant!r}",
            quant == "fp8",
        )
    elif model.quantized:
        method = model.quant_method or "?"
        key, what, fp8 = "policy.model_name", f"a quantized checkpoint ({method})", method == "fp8"
    else:
        key, what, fp8 = "", "", False
    if key and model.experts == 0:
        if fp8:
            yield Violation(
                key,
                f"NIXL shard_expert_weights with {what}: sharded expert refit refuses an fp8 "
                "vLLM model at its first refit",
                source=1,
            )
        return
    if model.experts == 0:
        return
    if key:
        yield Violation(
            key,
            f"NIXL shard_expert_weights with {what} on a MoE model ({model.experts} experts): "
            "the expert weight layout needs unquantized Triton expert weights",
        )
        return
    backend = cfg.str(f"{VKW}.moe_backend")
    if backend is not None and backend.lower().replace("-", "_") in NON_TRITON_MOE:
        yield Violation(
            f"{VKW}.moe_backend",
            f"NIXL shard_expert_weights with moe_backend {backend!r} on a MoE model "
            f"({model.experts} experts): the expert weight layout needs the Triton kernel",
        )


def _auto_moe_backend(cfg: Config) -> bool:
    """NIXL sharded expert refit leaving vLLM's unquantized MoE kernel to vLLM (auto)."""
    backend = cfg.str(f"{VKW}.moe_backend", "auto")
    auto = backend is not None and backend.lower().replace("-", "_") in ("auto", "humming")
    return _nixl_sharded(cfg) and auto and not cfg.on(f"{VKW}.enable_lora")


@model_rule(
    "nixl-expert-shard-moe-backend",
    Source(REFIT_LOADER, EXPERT_LAYOUT, "canonical unquantized Triton", "raises ValueError"),
    when=_auto_moe_backend,
    insist=False,  # nixl-expert-shard-quantized insists on the same config side
    severity=Severity.WARNING,
)
def nixl_expert_shard_moe_backend(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """NIXL sharded expert refit on a MoE model with ``moe_backend`` auto: the GPU decides.

    vLLM's unquantized MoE oracle (``fused_moe/oracle/unquantized.py::_get_priority_backends``)
    tries FlashInfer TRTLLM and CUTLASS before Triton on CUDA GPUs other than Hopper (SM90),
    except for GPT-OSS's SWIGLUOAI activation; the sharded layout refuses any but Triton.
    A quantized model is ``nixl-expert-shard-quantized`` (an error whatever the kernel).
    """
    quantized = (
        cfg.str(f"{VCFG}.precision") == "fp8"
        or isinstance(cfg.get(f"{VKW}.quantization"), str)
        or (model.quantized and not any(a in CLEARED_QUANT for a in model.architectures))
    )
    if not model.experts or quantized or "GptOssForCausalLM" in model.architectures:
        return
    yield Violation(
        f"{VKW}.moe_backend",
        f"NIXL shard_expert_weights on a MoE model ({model.experts} experts) with moe_backend "
        f"{cfg.str(f'{VKW}.moe_backend', 'auto')!r}: vLLM tries FlashInfer before Triton on "
        "CUDA GPUs other than Hopper, which the expert weight layout refuses; set "
        "vllm_kwargs.moe_backend: triton",
    )


# Megatron-core's TransformerConfig.__post_init__ on the fields Megatron Bridge's provider
# takes from the HF config (num_attention_heads, num_query_groups = num_key_value_heads,
# num_layers = num_hidden_layers, num_moe_experts, the gated delta net's linear_* heads) and
# the parallel sizes NeMo RL's _apply_parallelism_config / _apply_moe_config copy.
TRANSFORMER_CONFIG = "megatron/core/transformer/transformer_config.py"
POST_INIT = "TransformerConfig.__post_init__"


def _post_init(cites: str, says: str = "raises ValueError") -> Source:
    return Source(TRANSFORMER_CONFIG, POST_INIT, cites, says, MEGATRON_LM)


def _megatron_size(cfg: Config, key: str) -> int | None:
    """A Megatron parallel size above 1 (None otherwise, or without the Megatron backend)."""
    value = cfg.int(f"{MCFG}.{key}") if cfg.megatron else None
    return value if value is not None and value > 1 else None


@model_rule(
    "megatron-heads-tp",
    _post_init("must be a multiple of tensor_model_parallel_size"),
    _post_init("must be a multiple or divisor of tensor_model_parallel_size"),
    when=lambda cfg: _megatron_size(cfg, "tensor_model_parallel_size") is not None,
    insist=False,
)
def megatron_heads_tp(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Megatron TP against the attention heads and the KV heads (``num_query_groups``)."""
    tp = _megatron_size(cfg, "tensor_model_parallel_size")
    heads, groups = model.text.num_attention_heads, model.text.num_key_value_heads
    if tp is None or heads is None:
        return
    key = f"{MCFG}.tensor_model_parallel_size"
    if heads % tp:
        yield Violation(
            key, f"Megatron TP {tp} does not divide the model's {heads} attention heads"
        )
    groups = heads if groups is None else groups  # Megatron-core: num_query_groups defaults
    if groups > 0 and groups % tp and tp % groups:
        yield Violation(
            key,
            f"Megatron TP {tp} is neither a divisor nor a multiple of the model's {groups} KV "
            "heads (num_key_value_heads, Megatron's num_query_groups)",
            source=1,
        )


@model_rule(
    "megatron-ep-dense",
    _post_init("num_moe_experts must be non None to use expert-parallel"),
    when=lambda cfg: _megatron_size(cfg, "expert_model_parallel_size") is not None,
    insist=False,  # Megatron EP is the ordinary case on MoE models
)
def megatron_ep_dense(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Megatron expert parallelism on a model without experts."""
    if model.experts == 0:
        ep = _megatron_size(cfg, "expert_model_parallel_size")
        yield Violation(
            f"{MCFG}.expert_model_parallel_size",
            f"expert_model_parallel_size {ep} on a model without experts (Megatron Bridge "
            "leaves num_moe_experts None)",
        )


def _tp_cp(cfg: Config) -> tuple[int, int] | None:
    if not cfg.megatron:
        return None
    tp = cfg.int(f"{MCFG}.tensor_model_parallel_size")
    cp = cfg.int(f"{MCFG}.context_parallel_size")
    if tp is None or cp is None or tp < 1 or cp < 1 or tp * cp == 1:
        return None
    return tp, cp


# The model types whose bridges build gated delta net layers (experimental_attention_variant
# gated_delta_net: qwen3_next_bridge.py, qwen35_bridge.py, qwen35_vl_bridge.py at 8c46dc4).
GDN_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


@model_rule(
    "megatron-gdn-heads-tp",
    _post_init("self.linear_num_key_heads % tp_cp_size == 0", "asserts"),
    _post_init("self.linear_num_value_heads % tp_cp_size == 0", "asserts"),
    when=lambda cfg: _tp_cp(cfg) is not None,
    insist=False,
)
def megatron_gdn_heads(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Gated delta net key / value heads (Qwen3-Next, Qwen3.5) not divisible by TP x CP."""
    sizes = _tp_cp(cfg)
    if sizes is None:
        return
    tp, cp = sizes
    if not {model.model_type, model.text.model_type} & set(GDN_TYPES):
        return
    for i, name in enumerate(("linear_num_key_heads", "linear_num_value_heads")):
        heads = model.text.extra(name)
        if isinstance(heads, int) and not isinstance(heads, bool) and heads % (tp * cp):
            yield Violation(
                f"{MCFG}.tensor_model_parallel_size",
                f"Megatron TP {tp} x CP {cp} = {tp * cp} does not divide the model's {heads} "
                f"gated delta net heads ({name})",
                source=i,
            )


def _stage_layers(cfg: Config) -> tuple[int, int | None, int | None] | None:
    """PP and the uneven first / last stage sizes, when one is set."""
    if not cfg.megatron:
        return None
    pp = cfg.int(f"{MCFG}.pipeline_model_parallel_size")
    first = cfg.int(f"{MCFG}.num_layers_in_first_pipeline_stage")
    last = cfg.int(f"{MCFG}.num_layers_in_last_pipeline_stage")
    if pp is None or pp < 1 or (first is None and last is None):
        return None
    if (first is not None and first <= 0) or (last is not None and last <= 0):
        return None  # megatron-pipeline-stage-layers
    return pp, first, last


@model_rule(
    "megatron-pp-layer-split",
    _post_init("Mismatch: {num_layers} middle layers remaining but"),
    _post_init("number of layers at middle stage: {num_layers} must be divisible by"),
    when=lambda cfg: _stage_layers(cfg) is not None,
)
def megatron_pp_layer_split(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """An uneven pipeline split whose middle stages cannot share the layers left evenly."""
    split, layers = _stage_layers(cfg), model.text.num_hidden_layers
    if split is None or layers is None:
        return
    pp, first, last = split
    left = layers - (first or 0) - (last or 0)
    stages = pp - (first is not None) - (last is not None)
    what = f"the model's {layers} layers less first {first}, last {last} leave {left} layers"
    if bool(left) != bool(stages):
        yield Violation(
            f"{MCFG}.pipeline_model_parallel_size", f"{what} for {stages} middle stages (PP {pp})"
        )
    elif stages and left % stages:
        yield Violation(
            f"{MCFG}.pipeline_model_parallel_size",
            f"{what}, not divisible by the {stages} middle stages (PP {pp})",
            source=1,
        )


# The bridges that set moe_shared_expert_intermediate_size, and from what: Qwen3-Next and
# Qwen3.5 from shared_expert_intermediate_size, DeepSeek V2/V3/V4 from moe_intermediate_size x
# n_shared_experts (qwen3_next_bridge.py, qwen35_bridge.py, deepseek_v*_bridge.py at 8c46dc4).
QWEN_SHARED = ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")
DEEPSEEK_SHARED = ("deepseek_v2", "deepseek_v3", "deepseek_v4")


def _shared_expert_size(model: ModelConfig) -> int | None:
    """The provider's ``moe_shared_expert_intermediate_size`` (None: no shared experts, unknown)."""
    types = {model.model_type, model.text.model_type}
    if types & set(QWEN_SHARED):
        size = model.text.extra("shared_expert_intermediate_size")
    elif types & set(DEEPSEEK_SHARED):
        each, count = (
            model.text.extra("moe_intermediate_size"),
            model.text.extra("n_shared_experts"),
        )
        size = each * count if isinstance(each, int) and isinstance(count, int) else None
    else:
        return None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def _overlap_dispatcher(cfg: Config) -> str | None:
    """The token dispatcher when ``moe_shared_expert_overlap`` is on and it is not alltoall/flex."""
    if not (cfg.megatron and cfg.on(f"{MCFG}.moe_shared_expert_overlap")):
        return None
    dispatcher = cfg.str(f"{MCFG}.moe_token_dispatcher_type")
    return dispatcher if dispatcher not in (None, "alltoall", "flex") else None


@model_rule(
    "megatron-shared-expert-overlap",
    _post_init("moe_shared_expert_overlap only works with alltoall or flex token dispatcher"),
    when=lambda cfg: _overlap_dispatcher(cfg) is not None,
)
def megatron_shared_expert_overlap(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Shared-expert overlap with a dispatcher other than alltoall / flex, on shared experts."""
    size = _shared_expert_size(model)
    if size is not None:
        yield Violation(
            f"{MCFG}.moe_token_dispatcher_type",
            f"moe_shared_expert_overlap with moe_token_dispatcher_type "
            f"{_overlap_dispatcher(cfg)!r} on a model with shared experts (intermediate size "
            f"{size})",
        )


def _bridge_cp(cfg: Config) -> int | None:
    """Megatron CP > 1 with the provider's own ``seq_length`` (not one ``model_overrides`` sets)."""
    overrides = cfg.section(f"{MCFG}.model_overrides") or {}
    return None if "seq_length" in overrides else _megatron_size(cfg, "context_parallel_size")


@model_rule(
    "megatron-cp-seq-length",
    Source(
        "src/megatron/bridge/training/config.py",
        "ConfigContainer.validate",
        "Sequence length must be divisible by 2 * context parallel size",
        repo=MEGATRON_BRIDGE,
    ),
    when=lambda cfg: _bridge_cp(cfg) is not None,
    insist=False,  # CP > 1 is ordinary
)
def megatron_cp_seq_length(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Megatron CP against the provider's ``seq_length`` (the HF ``max_position_embeddings``).

    The model bridges map ``max_position_embeddings`` (of ``text_config`` when nested) to the
    provider's ``seq_length``; NeMo RL never sets it, and ``validate`` asserts it divides by
    2 x CP.
    """
    cp, length = _bridge_cp(cfg), model.text.max_position_embeddings
    if cp is not None and length is not None and length % (2 * cp):
        yield Violation(
            f"{MCFG}.context_parallel_size",
            f"Megatron CP {cp}: the model's max_position_embeddings {length} (the provider's "
            f"seq_length) is not a multiple of 2 x CP = {2 * cp}",
        )


# -- Megatron-core checks on the fields Megatron Bridge's bridge sets from the model --------
# Which bridge sets what, read from Megatron Bridge 8c46dc4 (src/megatron/bridge/models/):
# each table names the bridge file and the model types its register_bridge takes.

GEN = "policy.generation.mcore_generation_config"
# The fields build_inference_model (megatron/setup.py) applies to the colocated second model:
# _apply_parallelism_config, _apply_moe_config and transformer_impl (the rest is training's).
INFERENCE_MODEL_FIELDS = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
    "sequence_parallel", "expert_tensor_parallel_size", "expert_model_parallel_size",
    "moe_router_dtype", "moe_router_load_balancing_type", "moe_router_bias_update_rate",
    "moe_enable_deepep", "moe_token_dispatcher_type", "inference_moe_token_dispatcher_type",
    "inference_grouped_gemm_backend", "moe_router_num_groups", "moe_router_group_topk",
    "moe_pad_experts_for_cuda_graph_inference", "moe_shared_expert_overlap",
    "moe_flex_dispatcher_backend", "moe_hybridep_num_sms", "moe_permute_fusion",
    "moe_grouped_gemm", "transformer_impl",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Build:
    """One Megatron model NeMo RL builds: the ``megatron_cfg`` values its provider gets."""

    values: dict[str, Any]
    gen: frozenset[str]  # the keys mcore_generation_config gives (named in a finding)

    def key(self, field: str) -> str:
        return f"{GEN}.{field}" if field in self.gen else f"{MCFG}.{field}"


def _builds(cfg: Config) -> list[_Build]:
    """The training model and, with Megatron generation, the inference model NeMo RL builds.

    Non-colocated Megatron generation runs a policy on ``merged_inference_megatron_cfg``
    (``megatron_cfg`` with ``mcore_generation_config`` over it); colocated generation shares
    the training model unless ``dedicated_inference_megatron_cfg`` asks for a second one,
    which ``build_inference_model`` builds from the training provider with only
    :data:`INFERENCE_MODEL_FIELDS` of the merged config.
    """
    from rlgate.checks.startup.training import _dedicated_inference_model

    train = cfg.section(MCFG)
    if not cfg.megatron or train is None:
        return []
    out = [_Build(train, frozenset())]
    gen = cfg.section(GEN) or {}
    if cfg.backend != "megatron":
        return out
    if not cfg.on("policy.generation.colocated.enabled"):
        out.append(_Build({**train, **gen}, frozenset(gen)))
    elif _dedicated_inference_model(cfg):
        picked = {k: v for k, v in gen.items() if k in INFERENCE_MODEL_FIELDS}
        out.append(_Build({**train, **picked}, frozenset(picked)))
    return out


def _types(model: ModelConfig) -> set[str]:
    return {t for t in (model.model_type, model.text.model_type) if t}


def _known_type(model: ModelConfig) -> bool:
    """A model type transformers knows here (its config class's defaults are in the table)."""
    return any(transformers_default_experts(t) is not None for t in _types(model))


def _inference_optimized(cfg: Config) -> list[_Build]:
    return [b for b in _builds(cfg) if b.values.get("transformer_impl") == "inference_optimized"]


# MoE bridges that set gated_linear_unit True (qwen3_moe_bridge.py, qwen3_next_bridge.py,
# qwen35_bridge.py, qwen3_vl_bridge.py, deepseek_v2/v3/v4_bridge.py, gpt_oss_bridge.py,
# glm45_bridge.py, glm47_flash_bridge.py, glm5_bridge.py, kimi_bridge.py, kimi_k3_bridge.py,
# olmoe_bridge.py, minimax_m2_bridge.py); nemotron_h_bridge.py sets squared_relu, no GLU
# (another type: not decided).
GLU_MOE_TYPES = (
    "qwen3_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_vl_moe",
    "deepseek_v2", "deepseek_v3", "deepseek_v4", "gpt_oss", "glm4_moe", "glm4_moe_lite",
    "glm_moe_dsa", "kimi_k2", "kimi_k3", "olmoe", "minimax_m2",
)  # fmt: skip
GEMM_BACKENDS = (
    "flashinfer",
    "torch",
    "vllm",
)  # megatron/core/inference/moe::InferenceGroupedGemmBackend


def _fp8(build: _Build) -> str | None:
    """``fp8_cfg.fp8`` when ``fp8_cfg.enabled`` (``_apply_performance_config``), else None."""
    fp8 = build.values.get("fp8_cfg")
    if not isinstance(fp8, dict) or fp8.get("enabled") is not True:
        return None
    value = fp8.get("fp8")
    return value if isinstance(value, str) else None


@model_rule(
    "megatron-inference-optimized-moe",
    _post_init("does not support expert tensor parallelism"),
    _post_init("requires --moe-router-dtype=fp32"),
    _post_init("supports gated linear units (SwiGLU/GeGLU) only with"),
    _post_init("fp8_param must be enabled when using"),
    _post_init("inference_grouped_gemm_backend must be 'flashinfer', 'torch', or 'vllm'"),
    _post_init("FlashInfer is not compatible with MXFP8 quantization"),
    _post_init("vLLM Triton fused MoE only supports BF16"),
    when=lambda cfg: bool(_inference_optimized(cfg)),
    insist=False,  # NeMo RL's Nemotron-3 Nano recipes generate with inference_optimized
)
def megatron_inference_optimized_moe(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """``transformer_impl: inference_optimized`` on a MoE model: ETP, router dtype, GEMM backend.

    ``megatron_cfg`` or ``mcore_generation_config`` (the generation model) gives it;
    ``inference_grouped_gemm_backend`` is copied only when given (Megatron-core's default
    ``vllm`` otherwise), gated linear units are the bridge's (:data:`GLU_MOE_TYPES`).
    """
    if not model.experts:
        return
    types = _types(model)
    glu = bool(types & set(GLU_MOE_TYPES))  # a type outside the table: not decided
    for b in _inference_optimized(cfg):
        v = b.values
        etp = v.get("expert_tensor_parallel_size")
        if isinstance(etp, int) and not isinstance(etp, bool) and etp > 1:
            yield Violation(
                b.key("expert_tensor_parallel_size"),
                f"transformer_impl inference_optimized with expert_tensor_parallel_size {etp} "
                f"on a MoE model ({model.experts} experts)",
            )
        if "moe_router_dtype" in v and v["moe_router_dtype"] != "fp32":
            yield Violation(
                b.key("moe_router_dtype"),
                f"transformer_impl inference_optimized with moe_router_dtype "
                f"{v['moe_router_dtype']!r} on a MoE model: it needs 'fp32'",
                1,
            )
        backend = v.get("inference_grouped_gemm_backend", "vllm")
        where, fp8 = b.key("inference_grouped_gemm_backend"), _fp8(b)
        if glu and backend not in ("torch", "vllm"):
            yield Violation(
                where,
                f"transformer_impl inference_optimized with inference_grouped_gemm_backend "
                f"{backend!r} on a MoE model with gated linear units (its bridge's SwiGLU)",
                2,
            )
        elif backend not in GEMM_BACKENDS:
            yield Violation(
                where,
                f"inference_grouped_gemm_backend {backend!r} is not one of {GEMM_BACKENDS}",
                4,
            )
        if fp8 == "mxfp8":
            fp8_cfg = v.get("fp8_cfg") or {}
            if not fp8_cfg.get("fp8_param"):
                yield Violation(
                    b.key("fp8_cfg") + ".fp8_param",
                    "transformer_impl inference_optimized with fp8 'mxfp8' on a MoE model "
                    "needs fp8_cfg.fp8_param",
                    3,
                )
            if backend in ("flashinfer", "vllm"):
                yield Violation(
                    where,
                    f"inference_grouped_gemm_backend {backend!r} with fp8 'mxfp8' on a MoE model "
                    "(only 'torch' takes MXFP8)",
                    5 if backend == "flashinfer" else 6,
                )


# What inference_optimized layers refuse, by the bridge that sets it: zero-centred RMSNorm
# gamma (gemma_bridge.py, gemma2_provider.py, qwen3_next_bridge.py, qwen35_bridge.py,
# nemotron_bridge.py), LayerNorm (nemotron_bridge.py), QKV bias (qwen2_bridge.py), linear
# bias (gpt_oss_bridge.py).
ZERO_CENTRED_TYPES = (
    "gemma", "gemma2", "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
    "qwen3_5_moe_text", "nemotron",
)  # fmt: skip
INFERENCE_OPTIMIZED_LAYERS = (
    ("nemotron",),
    ZERO_CENTRED_TYPES,
    ("gpt_oss",),
    ("qwen2",),
)
LAYER_WHAT = (
    "LayerNorm (normalization must be RMSNorm)",
    "zero-centred RMSNorm gamma (layernorm_zero_centered_gamma)",
    "linear bias (add_bias_linear)",
    "QKV bias (add_qkv_bias)",
)


@model_rule(
    "megatron-inference-optimized-layers",
    _post_init("self.normalization == 'RMSNorm'", "asserts"),
    _post_init("not self.layernorm_zero_centered_gamma", "asserts"),
    _post_init(
        "not self.add_bias_linear | self.transformer_impl == 'inference_optimized'", "asserts"
    ),
    _post_init("not self.add_qkv_bias", "asserts"),
    when=lambda cfg: bool(_inference_optimized(cfg)),
    insist=False,  # NeMo RL's Nemotron-3 Nano recipes generate with inference_optimized
)
def megatron_inference_optimized_layers(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """``transformer_impl: inference_optimized`` on a model whose bridge sets what it refuses."""
    types = _types(model)
    for b in _inference_optimized(cfg)[:1]:  # the first model built says it
        for i, (owners, what) in enumerate(
            zip(INFERENCE_OPTIMIZED_LAYERS, LAYER_WHAT, strict=True)
        ):
            if types & set(owners):
                yield Violation(
                    b.key("transformer_impl"),
                    f"transformer_impl inference_optimized on a {sorted(types)[0]} model, whose "
                    f"Megatron Bridge provider has {what}",
                    i,
                )


# Bridges whose provider is an MLATransformerConfig (multi_latent_attention True): deepseek_v2/
# v3/v4_bridge.py, kimi_bridge.py, glm47_flash_bridge.py, glm5_bridge.py (MLAModelProvider).
MLA_TYPES = (
    "deepseek_v2", "deepseek_v3", "deepseek_v4", "kimi_k2", "glm4_moe_lite", "glm_moe_dsa",
)  # fmt: skip


def _selective(cfg: Config) -> list[str]:
    """The selective recompute modules ``_apply_performance_config`` sets ([] otherwise)."""
    from rlgate.checks.startup.training import _recompute

    granularity, modules = _recompute(cfg)
    return (modules or []) if granularity == "selective" else []


MODEL_RECOMPUTE = ("moe_act", "mla_up_proj", "gdn_norm_out", "shared_experts")


@model_rule(
    "megatron-recompute-model-modules",
    _post_init("moe_act in recompute_modules is only supported with moe_grouped_gemm"),
    _post_init("mla_up_proj in recompute_modules is only supported with"),
    _post_init("gdn_norm_out in recompute_modules is only supported with"),
    _post_init("shared_experts recompute cannot work with --moe-shared-expert-overlap"),
    when=lambda cfg: bool(set(_selective(cfg)) & set(MODEL_RECOMPUTE)),
)
def megatron_recompute_model_modules(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Selective recompute of a module the model lacks (MoE grouped GEMM, MLA, GDN, overlap).

    ``moe_grouped_gemm`` is ``megatron_cfg``'s when given, else the provider's: False for a
    dense model (no dense bridge sets it; ``GPTModelProvider``'s default), the MoE bridge's
    otherwise (not decided). MLA: :data:`MLA_TYPES`; gated delta net: :data:`GDN_TYPES`; a
    type transformers does not know is not decided.
    """
    modules, key = _selective(cfg), f"{MCFG}.recompute_modules"
    types, known = _types(model), _known_type(model)
    if "moe_act" in modules:
        grouped = cfg.flag(f"{MCFG}.moe_grouped_gemm", None)
        if grouped is None and not cfg.has(f"{MCFG}.moe_grouped_gemm") and model.experts == 0:
            grouped = False
        if grouped is False:
            yield Violation(
                key,
                "recompute_modules has moe_act but moe_grouped_gemm is off "
                f"({'megatron_cfg' if cfg.has(f'{MCFG}.moe_grouped_gemm') else 'a dense model'})",
            )
    mla = bool(types & set(MLA_TYPES)) or model.text.extra("kv_lora_rank") is not None
    if "mla_up_proj" in modules and known and not mla:
        yield Violation(
            key, f"recompute_modules has mla_up_proj on a {sorted(types)[0]} model: no MLA", 1
        )
    if "gdn_norm_out" in modules and known and not types & set(GDN_TYPES):
        yield Violation(
            key,
            f"recompute_modules has gdn_norm_out on a {sorted(types)[0]} model: no gated delta "
            "net layers",
            2,
        )
    size = _shared_expert_size(model)
    if "shared_experts" in modules and cfg.on(f"{MCFG}.moe_shared_expert_overlap") and size:
        yield Violation(
            key,
            "recompute_modules has shared_experts with moe_shared_expert_overlap on a model with "
            f"shared experts (intermediate size {size})",
            3,
        )


# The activation a bridge sets over hidden_act (nemotron_h_bridge.py, nemotron_bridge.py:
# squared_relu; gemma_bridge.py, gemma2_bridge.py: fast_gelu; gpt_oss_bridge.py,
# minimax_m3_bridge.py: quick_gelu), else Bridge's ACTIVATION_FUNC_MAP on the file's hidden_act
# / hidden_activation (utils/activation_map.py, model_bridge.py::_hf_config_to_megatron_kwargs).
BRIDGE_ACTIVATION = {
    "nemotron_h": "squared_relu",
    "nemotron": "squared_relu",
    "gemma": "fast_gelu",
    "gemma2": "fast_gelu",
    "gpt_oss": "quick_gelu",
    "minimax_m3_vl": "quick_gelu",
}
ACTIVATION_MAP = {
    "gelu": "gelu", "relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh",
    "relu2": "squared_relu", "squared_relu": "squared_relu", "gelu_pytorch_tanh": "fast_gelu",
    "fast_gelu": "fast_gelu", "quick_gelu": "quick_gelu",
}  # fmt: skip
FUSED_ACTIVATIONS = ("gelu", "silu", "quick_gelu")  # F.gelu, F.silu, quick_gelu
TE_ACTIVATION_TYPES = ("kimi_k3",)  # kimi_k3_bridge.py: use_te_activation_func = True


def _activation(model: ModelConfig) -> str | None:
    """The provider's activation function (None: the file does not say)."""
    for t in _types(model):
        if t in BRIDGE_ACTIVATION:
            return BRIDGE_ACTIVATION[t]
    act = model.text.extra("hidden_act") or model.text.extra("hidden_activation")
    return ACTIVATION_MAP.get(act) if isinstance(act, str) else None


@model_rule(
    "megatron-bias-activation-fusion",
    _post_init("When bias_activation_fusion is True, activation function should be either"),
    _post_init("bias_activation_fusion and use_te_activation_func cannot be both true"),
    when=lambda cfg: cfg.megatron and cfg.on(f"{MCFG}.bias_activation_fusion"),
    insist=False,  # grpo_math_1B.yaml sets bias_activation_fusion: true
)
def megatron_bias_activation_fusion(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """``bias_activation_fusion`` on an activation it cannot fuse, or TE's activation (Kimi K3)."""
    act, key = _activation(model), f"{MCFG}.bias_activation_fusion"
    if act is not None and act not in FUSED_ACTIVATIONS:
        yield Violation(
            key,
            f"bias_activation_fusion on a model whose activation is {act} (fused: gelu, silu, "
            "quick_gelu); NeMo RL's Nemotron-3 Nano recipes set it false",
        )
    if _types(model) & set(TE_ACTIVATION_TYPES):
        yield Violation(
            key,
            "bias_activation_fusion on Kimi K3, whose bridge sets use_te_activation_func",
            1,
        )


DSA_TYPES = ("glm_moe_dsa",)  # glm5_bridge.py: experimental_attention_variant = "dsa"


@model_rule(
    "megatron-dsa-rope-fusion",
    _post_init("RoPE fusion is not supported for DSAttention", "asserts"),
    when=lambda cfg: cfg.megatron and cfg.on(f"{MCFG}.apply_rope_fusion"),
    insist=False,  # grpo_math_1B.yaml sets apply_rope_fusion: true
)
def megatron_dsa_rope_fusion(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """``apply_rope_fusion`` (copied by ``_apply_performance_config``) on a DSA model (GLM-5)."""
    if _types(model) & set(DSA_TYPES):
        yield Violation(
            f"{MCFG}.apply_rope_fusion",
            "apply_rope_fusion on a DeepSeek sparse attention model (GLM-5: "
            "experimental_attention_variant 'dsa')",
        )


def _split_with_pp(cfg: Config) -> tuple[int, int | None, int | None] | None:
    split = _stage_layers(cfg)
    return split if split is not None and split[0] > 1 else None


@model_rule(
    "megatron-dsv4-pipeline-layout",
    _post_init("pipeline_model_parallel_layout cannot be set"),
    when=lambda cfg: _split_with_pp(cfg) is not None,
)
def megatron_dsv4_pipeline_layout(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """An uneven first / last pipeline stage on DeepSeek-V4 with PP > 1.

    ``ModelProviderMixin.provide`` (model_provider.py) sets DeepSeek-V4's
    ``pipeline_model_parallel_layout`` (experimental_attention_variant ``dsv4_hybrid``) when
    PP > 1 and none is set, then finalizes: the layout conflicts with the stage sizes.
    """
    split = _split_with_pp(cfg)
    if split is not None and "deepseek_v4" in _types(model):
        key = (
            "num_layers_in_first_pipeline_stage"
            if split[1] is not None
            else ("num_layers_in_last_pipeline_stage")
        )
        yield Violation(
            f"{MCFG}.{key}",
            f"{key} with PP {split[0]} on DeepSeek-V4, whose provider sets "
            "pipeline_model_parallel_layout itself",
        )


LINEAR_BIAS_MOE_TYPES = ("gpt_oss",)  # gpt_oss_bridge.py: add_bias_linear = True


def _etp(cfg: Config) -> list[tuple[_Build, int]]:
    out = []
    for b in _builds(cfg):
        etp = b.values.get("expert_tensor_parallel_size")
        if isinstance(etp, int) and not isinstance(etp, bool) and etp > 1:
            out.append((b, etp))
    return out


@model_rule(
    "megatron-moe-bias-etp",
    _post_init("Bias in Moe is only supported when ETP==1", "asserts"),
    when=lambda cfg: bool(_etp(cfg)),
    insist=False,
)
def megatron_moe_bias_etp(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Expert TP > 1 on a MoE model with linear bias (GPT-OSS)."""
    if not model.experts or not _types(model) & set(LINEAR_BIAS_MOE_TYPES):
        return
    for b, etp in _etp(cfg)[:1]:
        yield Violation(
            b.key("expert_tensor_parallel_size"),
            f"expert_tensor_parallel_size {etp} on GPT-OSS, whose experts have linear bias "
            "(add_bias_linear)",
        )


def _group_routing(cfg: Config) -> bool:
    keys = ("moe_router_num_groups", "moe_router_group_topk")
    return cfg.megatron and any(cfg.has(f"{MCFG}.{k}") for k in keys)


@model_rule(
    "megatron-router-groups-experts",
    _post_init("num_moe_experts % self.moe_router_num_groups == 0", "asserts"),
    when=_group_routing,
)
def megatron_router_groups(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """Group-limited routing whose groups do not divide the model's routed experts.

    ``_apply_moe_config`` copies ``moe_router_num_groups`` / ``moe_router_group_topk`` when
    ``megatron_cfg`` has them, else the provider keeps ``n_group`` / ``topk_group`` of the HF
    config (Bridge's ``CONFIG_MAPPING``); inference_optimized with one group clears both.
    """

    def pick(field: str, hf: str) -> object:
        return cfg.get(f"{MCFG}.{field}") if cfg.has(f"{MCFG}.{field}") else model.text.extra(hf)

    groups, topk = (
        pick("moe_router_num_groups", "n_group"),
        pick("moe_router_group_topk", "topk_group"),
    )
    if cfg.str(f"{MCFG}.transformer_impl") == "inference_optimized" and groups == 1:
        return
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (groups, topk))
    if not ints or not topk or not groups or not model.experts:
        return
    if model.experts % groups:  # type: ignore[operator]
        yield Violation(
            f"{MCFG}.moe_router_num_groups",
            f"moe_router_num_groups {groups} does not divide the model's {model.experts} "
            "routed experts",
        )


# MoE bridges that leave moe_layer_freq at 1 (every layer MoE): qwen3_moe_bridge.py (sets
# decoder_sparse_step 1), olmoe_bridge.py, gpt_oss_bridge.py.
ALL_MOE_TYPES = ("qwen3_moe", "olmoe", "gpt_oss")


def _graphed(cfg: Config) -> list[str]:
    """Per-layer CUDA-graph modules (``local`` / ``transformer_engine``) on the training model."""
    from rlgate.checks.startup.training import _graph_modules

    impl = cfg.str(f"{MCFG}.cuda_graph_impl")
    if not cfg.megatron or impl not in ("local", "transformer_engine"):
        return []
    return _graph_modules(cfg, impl) or []


@model_rule(
    "megatron-cuda-graph-moe",
    _post_init("moe cuda graph is only supported for MoE.", "asserts"),
    _post_init("mlp cuda graph is only supported for dense layers", "asserts"),
    _post_init("moe cuda graph is only supported with drop-padding MoE.", "asserts"),
    when=lambda cfg: bool({"moe", "moe_router", "mlp"} & set(_graphed(cfg))),
)
def megatron_cuda_graph_moe(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """CUDA-graph modules against the model's experts.

    ``moe`` / ``moe_router`` need experts; ``mlp`` needs a dense layer; ``moe`` needs
    drop-padding MoE, which no bridge sets (``moe_expert_capacity_factor`` stays None).
    """
    modules, key = _graphed(cfg), f"{MCFG}.cuda_graph_modules"
    graphed = sorted({"moe", "moe_router"} & set(modules))
    if model.experts == 0 and graphed:
        yield Violation(key, f"cuda_graph_modules {graphed} on a model without experts")
    if not model.experts or model.experts <= 1:
        return
    sparse = model.text.extra("decoder_sparse_step")
    every = _types(model) & set(ALL_MOE_TYPES) and not model.text.extra("mlp_only_layers")
    if "mlp" in modules and every and sparse in (None, 1):
        yield Violation(key, "cuda_graph_modules has mlp, but every layer of the model is MoE", 1)
    if "moe" in modules:
        yield Violation(
            key,
            "cuda_graph_modules has moe on a MoE model without drop-padding "
            "(moe_expert_capacity_factor)",
            2,
        )


VARIABLE_SEQ_TYPES = ("kimi_k3",)  # kimi_k3_provider.py: variable_seq_lengths = True


def _allgather(cfg: Config) -> list[_Build]:
    return [b for b in _builds(cfg) if b.values.get("moe_token_dispatcher_type") == "allgather"]


@model_rule(
    "megatron-allgather-variable-seq",
    _post_init("does not support variable sequence length"),
    when=lambda cfg: bool(_allgather(cfg)),
    insist=False,
)
def megatron_allgather_variable_seq(cfg: Config, model: ModelConfig) -> Iterator[Violation]:
    """The allgather token dispatcher on Kimi K3, whose provider sets ``variable_seq_lengths``."""
    if _types(model) & set(VARIABLE_SEQ_TYPES):
        for b in _allgather(cfg)[:1]:
            yield Violation(
                b.key("moe_token_dispatcher_type"),
                "moe_token_dispatcher_type allgather on Kimi K3, whose provider sets "
                "variable_seq_lengths (use alltoall)",
            )
