"""Generation: vLLM's engine topology and arguments, refit transports, async engines, Gym's server.

``VllmGeneration.__init__`` (``vllm_generation.py``) checks the engine's parallelism against
the generation cluster and the sampling parameters before any worker starts; the worker
builds vLLM's engine arguments from ``vllm_cfg`` and ``vllm_kwargs`` (``vllm_worker.py``),
and vLLM validates them (``CacheConfig``) and every request's sampling (``SamplingParams``).
The NeMo Gym entry point forces ``vllm_cfg.async_engine`` and ``expose_http_server`` on
(``setup_nemo_gym_config``), so the rules read the async engine as the run sees it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from rlgate.checks.startup import VLLM, Config, Source, Violation, rule

VLLM_GEN = "nemo_rl/models/generation/vllm/vllm_generation.py"
INIT = "VllmGeneration.__init__"
VCFG = "policy.generation.vllm_cfg"
GEN = "policy.generation"


def _vllm(cfg: Config) -> bool:
    return cfg.backend == "vllm"


def _sizes(cfg: Config) -> tuple[int, int, int] | None:
    tp, pp = cfg.int(f"{VCFG}.tensor_parallel_size"), cfg.int(f"{VCFG}.pipeline_parallel_size")
    ep = cfg.int(f"{VCFG}.expert_parallel_size")
    if tp is None or pp is None or ep is None or min(tp, pp, ep) < 1:
        return None
    return tp, pp, ep


@rule("vllm-world", Source(VLLM_GEN, INIT, "cluster.world_size() % self.model_parallel_size"))
def vllm_world(cfg: Config) -> Iterator[Violation]:
    """The vLLM engine's TP x PP not dividing the generation cluster."""
    world, sizes = cfg.inference_world(), _sizes(cfg)
    if not _vllm(cfg) or world is None or sizes is None:
        return
    tp, pp, _ = sizes
    if world % (tp * pp):
        yield Violation(
            f"{VCFG}.tensor_parallel_size",
            f"vLLM TP {tp} x PP {pp} = {tp * pp} does not divide the {world} generation GPUs",
        )


@rule("vllm-pp-async-engine", Source(VLLM_GEN, INIT, "When pipeline_parallel_size > 1"))
def vllm_pp_engine(cfg: Config) -> Iterator[Violation]:
    """The vLLM engine's pipeline parallelism without the async engine."""
    sizes = _sizes(cfg)
    if _vllm(cfg) and sizes is not None and sizes[1] > 1 and not cfg.vllm_async_engine:
        yield Violation(
            f"{VCFG}.async_engine", f"pipeline_parallel_size={sizes[1]} without async_engine"
        )


@rule(
    "vllm-expert-parallel",
    Source(VLLM_GEN, INIT, "When EP > 1, EP must be a multiple of TP"),
    Source(VLLM_GEN, INIT, "vLLM async_engine has some issues when using DP inside vLLM"),
)
def vllm_expert_parallel(cfg: Config) -> Iterator[Violation]:
    """The vLLM engine's EP not a multiple of TP, or EP != TP (DP in vLLM) with async engine."""
    sizes = _sizes(cfg)
    if not _vllm(cfg) or sizes is None or sizes[2] <= 1:
        return
    tp, _, ep = sizes
    key = f"{VCFG}.expert_parallel_size"
    if ep % tp:
        yield Violation(key, f"expert_parallel_size {ep} is not a multiple of TP {tp}")
    elif ep != tp and cfg.vllm_async_engine:
        forced = " (forced on by the NeMo Gym entry point)" if cfg.gym else ""
        yield Violation(
            key,
            f"expert_parallel_size {ep} != TP {tp} (DP {ep // tp} inside vLLM) with "
            f"async_engine{forced}",
            source=1,
        )


@rule(
    "vllm-sampling",
    Source(VLLM_GEN, INIT, "top_k valid values", "raises ValueError"),
    Source(VLLM_GEN, INIT, "top_p valid values", "raises ValueError"),
    Source(
        "vllm/sampling_params.py",
        "SamplingParams._verify_args",
        "temperature must be in [0, 2]",
        "raises VLLMValidationError",
        VLLM,
    ),
    Source(
        "vllm/sampling_params.py",
        "SamplingParams._verify_args",
        "temperature must be non-negative",
        "raises VLLMValidationError",
        VLLM,
    ),
    Source(
        "vllm/sampling_params.py",
        "SamplingParams._verify_args",
        "temperature must be a finite number",
        "raises VLLMValidationError",
        VLLM,
    ),
    Source(
        "vllm/sampling_params.py",
        "SamplingParams._verify_args",
        "stop cannot contain an empty string",
        "raises ValueError",
        VLLM,
    ),
)
def vllm_sampling(cfg: Config) -> Iterator[Violation]:
    """Sampling vLLM refuses: top_k < 1 (not -1), top_p not in (0, 1], temperature not in [0, 2]."""
    if not _vllm(cfg):
        return
    top_k = cfg.get(f"{GEN}.top_k")
    if isinstance(top_k, int) and not isinstance(top_k, bool) and top_k != -1 and top_k < 1:
        yield Violation(f"{GEN}.top_k", f"top_k={top_k} (None or -1: no filtering; >= 1)")
    top_p = cfg.num(f"{GEN}.top_p")
    if top_p is not None and not 0 < top_p <= 1:
        yield Violation(f"{GEN}.top_p", f"top_p={top_p:g} (must be in (0, 1])", source=1)
    for key in (f"{GEN}.temperature", f"{GEN}.val_temperature"):
        value = cfg.num(key)
        if value is not None and not math.isfinite(value):
            yield Violation(key, f"{key.rpartition('.')[2]}={value} (vLLM: finite)", source=4)
        elif value is not None and value > 2:
            yield Violation(key, f"{key.rpartition('.')[2]}={value:g} (vLLM: [0, 2])", source=2)
        elif value is not None and value < 0:
            yield Violation(key, f"{key.rpartition('.')[2]}={value:g} (vLLM: [0, 2])", source=3)
    stops = cfg.get(f"{GEN}.stop_strings")
    if not cfg.gym and isinstance(stops, list) and "" in stops:  # Gym drops stop strings
        yield Violation(f"{GEN}.stop_strings", "stop_strings holds an empty string", source=5)


@rule(
    "vllm-gpu-memory-utilization",
    Source(
        "vllm/config/cache.py",
        "CacheConfig",
        "gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)",
        "declares",
        VLLM,
    ),
)
def gpu_memory(cfg: Config) -> Iterator[Violation]:
    """``gpu_memory_utilization`` outside (0, 1]: vLLM's engine arguments fail to validate."""
    value = cfg.num(f"{VCFG}.gpu_memory_utilization")
    if _vllm(cfg) and value is not None and not 0 < value <= 1:
        yield Violation(
            f"{VCFG}.gpu_memory_utilization", f"gpu_memory_utilization={value:g} (not in (0, 1])"
        )


# The engine arguments BaseVllmGenerationWorker._load_model passes itself, before
# **vllm_kwargs (tests/functional/test_nemo_rl_configs.py checks the list at the pinned commit).
ENGINE_ARGUMENTS = (
    "model",
    "served_model_name",
    "load_format",
    "skip_tokenizer_init",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "enable_expert_parallel",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "dtype",
    "seed",
    "enforce_eager",
    "max_model_len",
    "trust_remote_code",
    "worker_extension_cls",
    "enable_sleep_mode",
    "disable_log_stats",
)


@rule(
    "vllm-kwargs-duplicate",
    Source(
        "nemo_rl/models/generation/vllm/vllm_worker.py",
        "BaseVllmGenerationWorker._load_model",
        "disable_log_stats=False, **vllm_kwargs)",
        "raises TypeError (a keyword given twice) at",
    ),
)
def vllm_kwargs_duplicate(cfg: Config) -> Iterator[Violation]:
    """A ``vllm_kwargs`` key that NeMo RL already passes to vLLM from ``vllm_cfg``."""
    kwargs = cfg.section(f"{GEN}.vllm_kwargs")
    if not _vllm(cfg) or not kwargs:
        return
    for key in sorted(k for k in kwargs if k in ENGINE_ARGUMENTS):
        where = f" (set from {VCFG}.{key})" if cfg.has(f"{VCFG}.{key}") else ""
        yield Violation(
            f"{GEN}.vllm_kwargs.{key}",
            f"vllm_kwargs.{key}: NeMo RL passes {key} to vLLM itself{where}",
        )


CONFIG = "nemo_rl/models/generation/vllm/config.py"
REFIT = "normalize_vllm_refit_config"
TRANSPORTS = ("vllm_s3_sparse", "vllm_zmq_sparse", "nixl", "nccl_reshard")


@rule(
    "vllm-refit-transport",
    Source(
        CONFIG, REFIT, "policy.generation.checkpoint_engine was replaced by", "raises ValueError"
    ),
    Source(CONFIG, REFIT, "Unknown vLLM refit transport", "raises ValueError"),
    Source(
        CONFIG,
        REFIT,
        "reset_encoder_cache_after_weight_update is not supported",
        "raises ValueError",
    ),
    Source(
        CONFIG, REFIT, "requires policy.generation.refit_cfg[{transport!r}]", "raises ValueError"
    ),
)
def refit_transport(cfg: Config) -> Iterator[Violation]:
    """The refit transport: the removed checkpoint_engine, an unknown name, what it lacks."""
    if not _vllm(cfg):
        return
    if cfg.get(f"{GEN}.checkpoint_engine") is not None:
        yield Violation(
            f"{GEN}.checkpoint_engine",
            "policy.generation.checkpoint_engine is set (replaced by refit_transport: nixl "
            "and refit_cfg.nixl)",
        )
    transport = cfg.str(f"{GEN}.refit_transport")
    if transport is None or transport == "nccl_reshard":
        return
    if transport not in TRANSPORTS and ":" not in transport:
        yield Violation(
            f"{GEN}.refit_transport",
            f"refit_transport {transport!r} (null, {', '.join(TRANSPORTS)} or a "
            "'module:ClassName' checkpoint engine)",
            source=1,
        )
        return
    if cfg.on(f"{VCFG}.reset_encoder_cache_after_weight_update"):
        yield Violation(
            f"{VCFG}.reset_encoder_cache_after_weight_update",
            f"reset_encoder_cache_after_weight_update with refit_transport {transport!r}",
            source=2,
        )
    refit_cfg = cfg.section(f"{GEN}.refit_cfg") or {}
    if ":" in transport and refit_cfg.get(transport) is None:
        yield Violation(
            f"{GEN}.refit_cfg",
            f"checkpoint-engine transport {transport!r} without refit_cfg[{transport!r}]",
            source=3,
        )


@rule(
    "refit-transport-backend",
    Source(
        "nemo_rl/algorithms/grpo.py",
        "setup",
        "Non-default refit transports are only supported for the vLLM",
        "raises NotImplementedError",
    ),
)
def refit_backend(cfg: Config) -> Iterator[Violation]:
    """A refit transport with a generation backend other than vLLM."""
    transport, backend = cfg.get(f"{GEN}.refit_transport"), cfg.backend
    if transport is not None and backend is not None and backend != "vllm":
        yield Violation(
            f"{GEN}.refit_transport", f"refit_transport {transport!r} with backend {backend!r}"
        )


INTERFACES = "nemo_rl/models/generation/interfaces.py"


@rule(
    "async-engine-setting",
    Source(INTERFACES, "should_use_async_rollouts", "TRT-LLM backend requires trtllm_cfg.async"),
    Source(INTERFACES, "should_use_async_rollouts", "policy.generation.mcore_generation_config"),
)
def async_engine_setting(cfg: Config) -> Iterator[Violation]:
    """TRT-LLM without its async engine; Megatron generation with the removed async_engine key."""
    if cfg.backend == "trtllm" and not cfg.on(f"{GEN}.trtllm_cfg.async_engine"):
        yield Violation(
            f"{GEN}.trtllm_cfg.async_engine", "backend trtllm without trtllm_cfg.async_engine"
        )
    key = f"{GEN}.mcore_generation_config.async_engine"
    if cfg.backend == "megatron" and cfg.get(key) is not None:
        yield Violation(key, f"mcore_generation_config.async_engine={cfg.get(key)!r}", source=1)


@rule(
    "gym-http-server",
    Source(
        "nemo_rl/environments/nemo_gym.py",
        "should_use_nemo_gym",
        "you must expose the generation server via `expose_http_server: true`",
    ),
)
def gym_server(cfg: Config) -> Iterator[Violation]:
    """NeMo Gym with a generation backend whose HTTP server is not exposed.

    The Gym entry point sets ``vllm_cfg.expose_http_server`` itself (the vllm and dynamo
    backends); megatron and trtllm read their own section; sglang has none.
    """
    if not cfg.gym:
        return
    own = {"megatron": "mcore_generation_config", "trtllm": "trtllm_cfg"}
    backend = cfg.backend
    if backend in own and not cfg.on(f"{GEN}.{own[backend]}.expose_http_server"):
        yield Violation(
            f"{GEN}.{own[backend]}.expose_http_server",
            f"NeMo Gym with backend {backend!r} and no {own[backend]}.expose_http_server",
        )
    elif backend == "sglang":
        yield Violation(f"{GEN}.backend", "NeMo Gym with backend 'sglang' (no HTTP server)")


@rule(
    "generation-config",
    Source("examples/run_grpo.py", "main", "A generation config is required for GRPO"),
    Source("examples/nemo_gym/run_grpo_nemo_gym.py", "main", "A generation config is required"),
    Source("nemo_rl/algorithms/grpo.py", "setup", "A generation config in the PolicyConfig"),
)
def generation_config(cfg: Config) -> Iterator[Violation]:
    """``policy.generation`` null."""
    if cfg.has(GEN) and cfg.get(GEN) is None:
        yield Violation(GEN, "policy.generation is null", source=1 if cfg.gym else 0)


@rule(
    "vlm-skip-tokenizer-init",
    Source(
        "examples/nemo_gym/run_grpo_nemo_gym.py",
        "main",
        "VLMs require tokenizer to be initialized before generation",
    ),
)
def vlm_tokenizer(cfg: Config) -> Iterator[Violation]:
    """A VLM with vLLM's tokenizer initialisation skipped (NeMo Gym entry point)."""
    if cfg.gym and cfg.on("policy.is_vlm") and cfg.on(f"{VCFG}.skip_tokenizer_init"):
        yield Violation(f"{VCFG}.skip_tokenizer_init", "policy.is_vlm with skip_tokenizer_init")


@rule(
    "sglang-non-colocated",
    Source(
        "nemo_rl/algorithms/grpo.py",
        "refit_policy_generation",
        "SGLang haven't implemented non-colocated inference mode",
        "raises NotImplementedError at the first refit:",
    ),
)
def sglang_non_colocated(cfg: Config) -> Iterator[Violation]:
    """SGLang generation on its own GPUs."""
    if cfg.backend == "sglang" and cfg.flag(f"{GEN}.colocated.enabled", True) is False:
        yield Violation(f"{GEN}.colocated.enabled", "backend sglang with colocated.enabled: false")


@rule(
    "vllm-metrics-logger",
    Source(
        "nemo_rl/models/generation/vllm/vllm_worker_async.py",
        "VllmAsyncGenerationWorkerImpl._start_vllm_metrics_logger",
        "vllm_metrics_logger_interval must be set in vllm_cfg",
    ),
    Source(
        "nemo_rl/models/generation/vllm/vllm_worker_async.py",
        "VllmAsyncGenerationWorkerImpl._start_vllm_metrics_logger",
        "vllm_metrics_logger_interval must be a positive float",
    ),
)
def metrics_logger(cfg: Config) -> Iterator[Violation]:
    """The vLLM metrics logger (async engine) without a positive logger interval."""
    if not (_vllm(cfg) and cfg.vllm_async_engine and cfg.on(f"{VCFG}.enable_vllm_metrics_logger")):
        return
    key = f"{VCFG}.vllm_metrics_logger_interval"
    interval = cfg.num(key)
    if not cfg.has(key):
        yield Violation(key, "enable_vllm_metrics_logger without vllm_metrics_logger_interval")
    elif interval is not None and interval <= 0:
        yield Violation(key, f"vllm_metrics_logger_interval={interval:g}", source=1)


GEN_INIT = "nemo_rl/models/generation/__init__.py"


@rule(
    "vllm-real-quant-export",
    Source(
        GEN_INIT,
        "configure_generation_config",
        "real_quant_export_cpu_offload must be a boolean",
        "raises ValueError",
    ),
    Source(
        GEN_INIT,
        "configure_generation_config",
        "real_quant_export_cpu_offload=false requires colocated CUDA-IPC refit",
        "raises ValueError",
    ),
)
def real_quant_export(cfg: Config) -> Iterator[Violation]:
    """The vLLM ``real_quant`` without a boolean export offload, or with false off colocated IPC."""
    if not _vllm(cfg) or not cfg.get(f"{GEN}.real_quant"):
        return
    key = f"{GEN}.real_quant_export_cpu_offload"
    export = cfg.get(key)
    if not isinstance(export, bool):
        yield Violation(key, f"real_quant with real_quant_export_cpu_offload={export!r}")
        return
    colocated = cfg.get(f"{GEN}.colocated")
    enabled = colocated.get("enabled", False) if isinstance(colocated, dict) else False
    transport = cfg.get(f"{GEN}.refit_transport")
    if not export and (not enabled or transport is not None):
        why = f"refit_transport {transport!r}" if transport is not None else "not colocated"
        yield Violation(key, f"real_quant_export_cpu_offload=false with {why}", source=1)


NIXL_VLLM_WORKER = "nemo_rl.models.generation.vllm.vllm_backend.NixlVllmWorker"


@rule(
    "nixl-worker-cls",
    Source(
        "nemo_rl/models/generation/vllm/checkpoint_engine.py",
        "configure_nixl_worker",
        "NIXL checkpoint-engine refit requires vllm_kwargs.worker_cls",
        "raises ValueError",
    ),
)
def nixl_worker_cls(cfg: Config) -> Iterator[Violation]:
    """NIXL refit with ``vllm_kwargs.worker_cls`` set to another worker."""
    worker = cfg.get(f"{GEN}.vllm_kwargs.worker_cls")
    if (
        _vllm(cfg)
        and cfg.str(f"{GEN}.refit_transport") == "nixl"
        and worker is not None
        and worker != NIXL_VLLM_WORKER
    ):
        yield Violation(
            f"{GEN}.vllm_kwargs.worker_cls",
            f"refit_transport nixl with vllm_kwargs.worker_cls={worker!r} "
            f"(unset or {NIXL_VLLM_WORKER})",
        )


EPLB = f"{GEN}.vllm_kwargs.enable_eplb"


@rule(
    "nixl-expert-shard-eplb",
    Source(
        "nemo_rl/models/generation/vllm/refit_loader.py",
        "VllmShardedExpertRefitMixin._checkpoint_engine_weight_layout",
        "enable_eplb",
        "raises RuntimeError",
    ),
)
def nixl_expert_shard_eplb(cfg: Config) -> Iterator[Violation]:
    """NIXL sharded expert refit with vLLM's dynamic expert load balancing (EPLB) under EP.

    vLLM's ``ParallelConfig.__post_init__`` allows EPLB only with expert parallelism over
    more than one GPU, which is when its MoE layers run EP (``FusedMoEParallelConfig.make``:
    ``use_ep``); a dense model with EP is refused earlier (``vllm-ep-dense``).
    """
    sizes, kw = _sizes(cfg), f"{GEN}.vllm_kwargs"
    dp, pcp = (
        cfg.int(f"{kw}.data_parallel_size", 1),
        cfg.int(f"{kw}.prefill_context_parallel_size", 1),
    )
    if (
        not _vllm(cfg)
        or cfg.str(f"{GEN}.refit_transport") != "nixl"
        or not cfg.on(f"{GEN}.refit_cfg.nixl.shard_expert_weights")
        or not cfg.on(EPLB)
        or sizes is None
        or dp is None
        or pcp is None
    ):
        return
    tp, _, ep = sizes
    if ep > 1 and tp * dp * pcp > 1:
        yield Violation(
            EPLB,
            f"vllm_kwargs.enable_eplb with NIXL shard_expert_weights and vLLM EP {ep}: expert "
            "ownership can move after the layout is exchanged",
        )


VIDEO = "materialize_vllm_video_config"


@rule(
    "vllm-video-kwargs",
    Source(CONFIG, VIDEO, "vllm_kwargs is required when vllm_cfg.video", "raises ValueError"),
    Source(CONFIG, VIDEO, "limit_mm_per_prompt must configure video", "raises ValueError"),
    Source(CONFIG, VIDEO, "limit_mm_per_prompt.video must be a mapping", "raises ValueError"),
    Source(CONFIG, VIDEO, "vllm_kwargs.media_io_kwargs must be a mapping", "raises ValueError"),
    Source(CONFIG, VIDEO, "media_io_kwargs.video must be a mapping", "raises ValueError"),
)  # fmt: skip
def video_kwargs(cfg: Config) -> Iterator[Violation]:
    """``vllm_cfg.video`` without the ``vllm_kwargs`` the Gym runner writes the frames into."""
    if not (cfg.gym and _vllm(cfg) and cfg.get(f"{VCFG}.video") is not None):
        return
    kwargs = cfg.get(f"{GEN}.vllm_kwargs")
    if not isinstance(kwargs, dict):
        yield Violation(f"{GEN}.vllm_kwargs", f"vllm_cfg.video with vllm_kwargs={kwargs!r}")
        return
    limit = kwargs.get("limit_mm_per_prompt")
    key = f"{GEN}.vllm_kwargs.limit_mm_per_prompt"
    if not isinstance(limit, dict):
        yield Violation(key, f"vllm_cfg.video with limit_mm_per_prompt={limit!r}", source=1)
    elif not isinstance(limit.get("video"), dict):
        yield Violation(
            f"{key}.video",
            f"vllm_cfg.video with limit_mm_per_prompt.video={limit.get('video')!r}",
            source=2,
        )
    media = kwargs.get("media_io_kwargs", {})
    key = f"{GEN}.vllm_kwargs.media_io_kwargs"
    if not isinstance(media, dict):
        yield Violation(key, f"vllm_cfg.video with media_io_kwargs={media!r}", source=3)
    elif not isinstance(media.get("video", {}), dict):
        yield Violation(
            f"{key}.video",
            f"vllm_cfg.video with media_io_kwargs.video={media['video']!r}",
            source=4,
        )


WORKER = "nemo_rl/models/policy/workers/megatron_policy_worker.py"
LAYER_TO_STAGE = "MegatronPolicyWorkerImpl._build_layer_to_pp_stage"
# The model fields _build_layer_to_pp_stage asserts on, in its order (its messages name them)
RESHARD_LAYOUT = (
    "pipeline_model_parallel_layout",
    "virtual_pipeline_model_parallel_size",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
)


@rule(
    "nccl-reshard-pipeline-layout",
    *(Source(WORKER, LAYER_TO_STAGE, f"getattr(config, '{n}'") for n in RESHARD_LAYOUT),
)
def nccl_reshard_layout(cfg: Config) -> Iterator[Violation]:
    """nccl_reshard refit with PP > 1 and a pipeline layout it cannot map (``model_overrides``).

    ``check_nccl_reshard_refit_support`` reads these fields from ``megatron_cfg`` itself; the
    model gets them from ``megatron_cfg.model_overrides``, which only the worker checks.
    """
    pp = cfg.int("policy.megatron_cfg.pipeline_model_parallel_size")
    overrides = cfg.section("policy.megatron_cfg.model_overrides")
    if (
        cfg.str(f"{GEN}.refit_transport") != "nccl_reshard"
        or not cfg.megatron
        or pp is None
        or pp <= 1
        or not overrides
    ):
        return
    for i, name in enumerate(RESHARD_LAYOUT):
        value = overrides.get(name)
        bad = (
            value not in (None, 1)
            if name == "virtual_pipeline_model_parallel_size"
            else (value is not None if name == "pipeline_model_parallel_layout" else bool(value))
        )
        if bad:
            yield Violation(
                f"policy.megatron_cfg.model_overrides.{name}",
                f"refit_transport nccl_reshard with PP {pp} and model_overrides.{name}={value!r}",
                source=i,
            )


INTERFACES_FILE = "nemo_rl/models/generation/interfaces.py"


@rule(
    "fleet-health-backend",
    Source(
        INTERFACES_FILE,
        "GenerationInterface.attach_fleet_health",
        "async_rl.generation_fleet_health.enabled=true is not supported for the",
        "raises NotImplementedError",
    ),
)
def fleet_health_backend(cfg: Config) -> Iterator[Violation]:
    """Generation fleet health with a backend other than vLLM (only ``VllmGeneration`` has it).

    The single-controller entry point calls ``attach_fleet_health`` whenever
    ``async_rl.generation_fleet_health.enabled`` (``_maybe_attach_fleet_health``); only
    ``VllmGeneration`` overrides the interface's ``NotImplementedError``.
    """
    key = "async_rl.generation_fleet_health.enabled"
    if cfg.on(key) and cfg.backend is not None and cfg.backend != "vllm":
        yield Violation(key, f"generation_fleet_health enabled with backend {cfg.backend!r}")


#: ``VllmConfig.__required_keys__`` (``vllm/config.py``: ``GenerationConfig``'s keys without
#: ``NotRequired``, then ``vllm_cfg``); ``model_name`` is written by ``grpo.py::setup``.
VLLM_REQUIRED_KEYS = (
    "backend",
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "val_temperature",
    "val_top_p",
    "val_top_k",
    "stop_token_ids",
    "stop_strings",
    "vllm_cfg",
)


@rule(
    "vllm-required-keys",
    Source(VLLM_GEN, INIT, "VLLM Configuration Error: Missing required keys in VllmConfig."),
)
def vllm_required_keys(cfg: Config) -> Iterator[Violation]:
    """A key ``VllmConfig`` requires missing from ``policy.generation`` (null is present)."""
    if not _vllm(cfg) or cfg.section(GEN) is None:
        return
    for key in VLLM_REQUIRED_KEYS:
        if not cfg.has(f"{GEN}.{key}"):
            yield Violation(f"{GEN}.{key}", f"policy.generation.{key} is missing (vLLM backend)")


BASE_WORKER = "nemo_rl/models/policy/workers/base_policy_worker.py"


@rule(
    "nccl-reshard-worker",
    Source(
        BASE_WORKER,
        "AbstractPolicyWorker.prepare_nccl_reshard_refit_info",
        "prepare_nccl_reshard_refit_info is not implemented for this policy worker",
        "raises NotImplementedError",
    ),
    Source(
        BASE_WORKER,
        "AbstractPolicyWorker.nccl_reshard_refit",
        "nccl_reshard_refit is not implemented for this policy worker",
        "raises NotImplementedError",
    ),
)
def nccl_reshard_worker(cfg: Config) -> Iterator[Violation]:
    """``nccl_reshard`` refit from a DTensor policy worker (only the Megatron worker has it)."""
    if _vllm(cfg) and cfg.str(f"{GEN}.refit_transport") == "nccl_reshard" and cfg.dtensor:
        yield Violation(
            f"{GEN}.refit_transport",
            "refit_transport nccl_reshard with the DTensor training backend (only "
            "MegatronPolicyWorkerImpl implements prepare_nccl_reshard_refit_info and "
            "nccl_reshard_refit)",
        )
