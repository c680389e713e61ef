"""Megatron Bridge's own start-up validation: ``ConfigContainer.validate``.

``MegatronPolicyWorker.__init__`` calls ``self.megatron_cfg.validate()`` on the container
``megatron/setup.py::_create_megatron_config`` builds: the provider (with what
``setup_model_config`` copies from ``megatron_cfg``), ``OptimizerConfig(**megatron_cfg.optimizer)``,
``SchedulerConfig(**megatron_cfg.scheduler)``, a ``TrainingConfig`` of
``train_global_batch_size`` and ``train_iters`` (``grpo.py::setup``: ``min(max_num_steps,
max_num_epochs x batches)``), no dataset. ``validate`` finalizes each sub-config and then runs
its cross-checks (Megatron Bridge at NeMo RL's submodule pin ``8c46dc4``,
``src/megatron/bridge/training/config.py`` and ``utils/cuda_graph.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from rlgate.checks.startup import MEGATRON_BRIDGE, Config, Source, Violation, rule
from rlgate.checks.startup.training import CUDA_GRAPH_MODULES
from rlgate.recipe.findings import Severity

CONFIG = "src/megatron/bridge/training/config.py"
CUDA_GRAPH = "src/megatron/bridge/utils/cuda_graph.py"
MEGATRON = "policy.megatron_cfg"
SCHEDULER = f"{MEGATRON}.scheduler"
OPTIMIZER = f"{MEGATRON}.optimizer"


def _src(function: str, cites: str, says: str = "asserts", file: str = CONFIG) -> Source:
    return Source(file, function, cites, says, repo=MEGATRON_BRIDGE)


def _set(cfg: Config, field: str) -> bool:
    """Whether the scheduler field is given and not null (Bridge's ``is not None``)."""
    return cfg.get(f"{SCHEDULER}.{field}") is not None


def _nonzero(cfg: Config, field: str) -> bool:
    """Whether a number-valued scheduler field is given and not 0 (its default)."""
    value = cfg.num(f"{SCHEDULER}.{field}")
    return value is not None and value != 0


@rule(
    "bridge-scheduler-max-steps",
    _src("SchedulerConfig.finalize", "scheduler.max_steps must be positive", "raises ValueError"),
)
def scheduler_max_steps(cfg: Config) -> Iterator[Violation]:
    """A ``scheduler.max_steps`` that is not positive."""
    steps = cfg.int(f"{SCHEDULER}.max_steps")
    if cfg.megatron and steps is not None and steps <= 0:
        yield Violation(f"{SCHEDULER}.max_steps", f"scheduler.max_steps {steps} (must be > 0)")


@rule(
    "bridge-scheduler-max-steps-iters",
    _src(
        "ConfigContainer._calculate_scheduler_steps",
        "must be greater than or equal to train.train_iters",
        "raises ValueError",
    ),
    severity=Severity.WARNING,
)
def scheduler_max_steps_iters(cfg: Config) -> Iterator[Violation]:
    """``scheduler.max_steps`` below ``grpo.max_num_steps``: refused unless the data is short.

    A warning: ``train_iters`` is ``min(max_num_steps, max_num_epochs x the dataloader's
    batches)`` (``grpo.py::setup``), so a dataset of at most ``max_steps / max_num_epochs``
    batches passes.
    """
    steps, total = cfg.int(f"{SCHEDULER}.max_steps"), cfg.int("grpo.max_num_steps")
    if cfg.megatron and steps is not None and steps > 0 and total is not None and steps < total:
        yield Violation(
            f"{SCHEDULER}.max_steps",
            f"scheduler.max_steps {steps} < grpo.max_num_steps {total}: train_iters is "
            f"min({total}, max_num_epochs x the dataloader's batches), refused unless that "
            f"is at most {steps}",
        )


@rule(
    "bridge-scheduler-weight-decay",
    _src("SchedulerConfig.finalize", "start_weight_decay should be positive."),
    _src("SchedulerConfig.finalize", "self.end_weight_decay >= self.start_weight_decay"),
)
def scheduler_weight_decay(cfg: Config) -> Iterator[Violation]:
    """A negative ``start_weight_decay``, or an ``end_weight_decay`` below it."""
    start = cfg.num(f"{SCHEDULER}.start_weight_decay")
    end = cfg.num(f"{SCHEDULER}.end_weight_decay")
    if not cfg.megatron or start is None:
        return
    if start < 0:
        yield Violation(f"{SCHEDULER}.start_weight_decay", f"start_weight_decay {start} < 0")
    elif end is not None and end < start:
        yield Violation(
            f"{SCHEDULER}.end_weight_decay",
            f"end_weight_decay {end} < start_weight_decay {start}",
            1,
        )


@rule(
    "bridge-scheduler-override",
    _src("SchedulerConfig.finalize", "both override and use-checkpoint are set."),
)
def scheduler_override(cfg: Config) -> Iterator[Violation]:
    """Both ``override_opt_param_scheduler`` and ``use_checkpoint_opt_param_scheduler``."""
    both = cfg.on(f"{SCHEDULER}.override_opt_param_scheduler") and cfg.on(
        f"{SCHEDULER}.use_checkpoint_opt_param_scheduler"
    )
    if cfg.megatron and both:
        yield Violation(
            f"{SCHEDULER}.use_checkpoint_opt_param_scheduler",
            "override_opt_param_scheduler and use_checkpoint_opt_param_scheduler both true",
        )


@rule(
    "bridge-scheduler-iters-samples",
    _src("SchedulerConfig.finalize", "Cannot mix iteration-based and sample-based scheduler"),
    _src(
        "ConfigContainer._validate_training_scheduler_compatibility",
        "Use lr_decay_iters for iteration-based training, not lr_decay_samples",
    ),
    _src(
        "ConfigContainer._validate_training_scheduler_compatibility",
        "Use lr_warmup_iters for iteration-based training, not lr_warmup_samples",
    ),
)
def scheduler_iters_samples(cfg: Config) -> Iterator[Violation]:
    """Sample-based scheduler fields: NeMo RL's training is iteration-based (``train_iters``).

    ``SchedulerConfig.finalize`` refuses them beside iteration fields; alone,
    ``_validate_training_scheduler_compatibility`` refuses ``lr_decay_samples`` and
    ``lr_warmup_samples`` (``train_samples`` is never set).
    """
    if not cfg.megatron:
        return
    iters = [
        f
        for f, given in (
            ("lr_decay_iters", _set(cfg, "lr_decay_iters")),
            ("lr_warmup_iters", _nonzero(cfg, "lr_warmup_iters")),
            ("lr_wsd_decay_iters", _set(cfg, "lr_wsd_decay_iters")),
        )
        if given
    ]
    samples = [
        f
        for f, given in (
            ("lr_decay_samples", _set(cfg, "lr_decay_samples")),
            ("lr_warmup_samples", _nonzero(cfg, "lr_warmup_samples")),
            ("lr_wsd_decay_samples", _set(cfg, "lr_wsd_decay_samples")),
        )
        if given
    ]
    if iters and samples:
        yield Violation(
            f"{SCHEDULER}.{samples[0]}",
            f"sample-based {', '.join(samples)} beside iteration-based {', '.join(iters)}",
        )
    elif "lr_decay_samples" in samples:
        yield Violation(
            f"{SCHEDULER}.lr_decay_samples", "lr_decay_samples in iteration-based training", 1
        )
    elif "lr_warmup_samples" in samples:
        yield Violation(
            f"{SCHEDULER}.lr_warmup_samples", "lr_warmup_samples in iteration-based training", 2
        )


@rule(
    "bridge-scheduler-warmup-fraction",
    _src("SchedulerConfig.finalize", "Cannot specify lr_warmup_fraction="),
)
def scheduler_warmup_fraction(cfg: Config) -> Iterator[Violation]:
    """``lr_warmup_fraction`` beside a non-zero ``lr_warmup_iters`` or ``lr_warmup_samples``."""
    if not (cfg.megatron and _set(cfg, "lr_warmup_fraction")):
        return
    for field in ("lr_warmup_iters", "lr_warmup_samples"):
        if _nonzero(cfg, field):
            yield Violation(
                f"{SCHEDULER}.lr_warmup_fraction",
                f"lr_warmup_fraction with {field} {cfg.get(f'{SCHEDULER}.{field}')}",
            )
            return


@rule(
    "bridge-scheduler-decay-steps",
    _src(
        "ConfigContainer._calculate_scheduler_steps",
        "lr_decay_steps must be > 0",
        "raises ValueError",
    ),
)
def scheduler_decay_steps(cfg: Config) -> Iterator[Violation]:
    """No learning-rate decay steps: ``lr_decay_iters`` (or, unset, ``train_iters``) <= 0.

    ``lr_decay_steps = lr_decay_iters x train_global_batch_size``, with ``max_steps`` in
    place of ``lr_decay_iters`` when set and ``train_iters`` when neither is;
    ``grpo.py::setup``'s ``train_iters`` is ``min(max_num_steps, max_num_epochs x batches)``.
    """
    if not cfg.megatron or _set(cfg, "max_steps"):
        return
    decay = cfg.get(f"{SCHEDULER}.lr_decay_iters")
    if decay is not None:
        iters = cfg.int(f"{SCHEDULER}.lr_decay_iters")
        if iters is not None and iters <= 0:
            yield Violation(f"{SCHEDULER}.lr_decay_iters", f"lr_decay_iters {iters} (must be > 0)")
        return
    for key in ("grpo.max_num_steps", "grpo.max_num_epochs"):
        value = cfg.int(key)
        if value is not None and value <= 0:
            yield Violation(
                key,
                f"{key.rpartition('.')[2]} {value} with no scheduler.lr_decay_iters: "
                "lr_decay_steps = train_iters x train_global_batch_size <= 0",
            )
            return


@rule(
    "bridge-global-batch-dp",
    _src(
        "ConfigContainer.validate",
        "must be divisible by eval_micro_batch_size * eval_data_parallel_size",
    ),
)
def global_batch_dp(cfg: Config) -> Iterator[Violation]:
    """``train_global_batch_size`` not a multiple of Megatron's data-parallel size.

    ``validate`` defaults ``eval_global_batch_size`` to ``train.global_batch_size``
    (``policy.train_global_batch_size``) and ``eval_micro_batch_size`` to
    ``train.micro_batch_size`` (1), and asserts the first divides by DP, when the worker
    starts, before ``Policy.train`` would shard a batch (``batch-data-parallel``).
    """
    dp, gbs = cfg.data_parallel(), cfg.int("policy.train_global_batch_size")
    if cfg.megatron and dp is not None and dp > 1 and gbs is not None and gbs >= 1 and gbs % dp:
        yield Violation(
            "policy.train_global_batch_size",
            f"train_global_batch_size {gbs} is not a multiple of the data-parallel size {dp}",
        )


@rule(
    "bridge-optimizer-bf16-fp16",
    _src(
        "_validate_mixed_precision_consistency",
        "Optimizer config cannot have both bf16=True and fp16=True",
    ),
)
def optimizer_bf16_fp16(cfg: Config) -> Iterator[Violation]:
    """Megatron ``optimizer.bf16`` and ``optimizer.fp16`` both true.

    With ``policy.precision: float32`` ``_validate_dtype_config`` refuses either first
    (``megatron-optimizer-precision``).
    """
    both = cfg.on(f"{OPTIMIZER}.bf16") and cfg.on(f"{OPTIMIZER}.fp16")
    if cfg.megatron and both and cfg.str("policy.precision") != "float32":
        yield Violation(f"{OPTIMIZER}.fp16", "optimizer.bf16 and optimizer.fp16 both true")


def _offloading(cfg: Config) -> bool:
    """Fine-grained activation offloading that ``_apply_performance_config`` accepts."""
    modules = cfg.get(f"{MEGATRON}.offload_modules")
    return (
        cfg.megatron
        and cfg.on(f"{MEGATRON}.fine_grained_activation_offloading")
        and isinstance(modules, list)
        and bool(modules)
    )


def _transformer_impl(cfg: Config) -> str | None:
    """``transformer_impl`` as the provider holds it (Megatron-core's default when absent)."""
    key = f"{MEGATRON}.transformer_impl"
    return cfg.str(key) if cfg.has(key) else "transformer_engine"


@rule(
    "bridge-activation-offload-impl",
    _src(
        "_validate_fine_grained_activation_offloading",
        "is only supported with transformer_engine implementation",
        "raises ValueError",
    ),
)
def activation_offload_impl(cfg: Config) -> Iterator[Violation]:
    """Fine-grained activation offloading with a ``transformer_impl`` other than TE."""
    impl = _transformer_impl(cfg)
    if _offloading(cfg) and impl is not None and impl != "transformer_engine":
        yield Violation(
            f"{MEGATRON}.transformer_impl",
            f"fine_grained_activation_offloading with transformer_impl {impl!r}",
        )


@rule(
    "bridge-activation-offload-env",
    _src(
        "_validate_fine_grained_activation_offloading",
        "NVTE_CPU_OFFLOAD_V1 environment variable should be set to 1",
        "raises ValueError",
    ),
    severity=Severity.WARNING,
)
def activation_offload_env(cfg: Config) -> Iterator[Violation]:
    """Fine-grained activation offloading without ``env_vars.NVTE_CPU_OFFLOAD_V1: "1"``.

    NeMo RL 7ea279a pins Transformer Engine 2.14.1 (>= 2.10, ``pyproject.toml``), where
    Bridge requires the variable in the worker's environment: ``megatron_cfg.env_vars``
    (``Policy.__init__`` passes them to the workers) or the Ray cluster's own, which a config
    does not say; hence a warning.
    """
    if not _offloading(cfg) or _transformer_impl(cfg) != "transformer_engine":
        return
    env = cfg.section(f"{MEGATRON}.env_vars") or {}
    if str(env.get("NVTE_CPU_OFFLOAD_V1", "")) != "1":
        yield Violation(
            f"{MEGATRON}.env_vars",
            "fine_grained_activation_offloading without env_vars.NVTE_CPU_OFFLOAD_V1 '1' "
            "(Transformer Engine >= 2.10): the run fails unless its Ray cluster exports it",
        )


def _graph_modules(value: object) -> list[str] | None:
    """Bridge's ``cuda_graph_module_names`` of a ``cuda_graph_modules`` value.

    None for a name ``CudaGraphModule`` lacks: Bridge's ``set_cuda_graph_modules`` fails on it
    first, in ``setup_model_config``.
    """
    if isinstance(value, str):
        names = [] if value in ("", "full") else value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = value
    else:
        return None
    if not set(names) <= set(CUDA_GRAPH_MODULES):
        return None
    return list(dict.fromkeys(names))


@rule(
    "bridge-cuda-graph-local",
    _src(
        "validate_cuda_graph_configuration",
        'cuda_graph_impl="local" only for full-iteration CUDA graphs',
        "raises ValueError",
        CUDA_GRAPH,
    ),
)
def cuda_graph_local(cfg: Config) -> Iterator[Violation]:
    """``cuda_graph_impl: local`` other than for inference graphs (layer or block scope).

    ``validate_cuda_graph_configuration`` allows ``local`` only for a full-iteration graph
    (which NeMo RL cannot express as ``local``: ``CudaGraphModule`` has no full_iteration) or
    an inference graph: no ``cuda_graph_modules`` and ``inference_cuda_graph_scope`` layer or
    block (Megatron-core's default None otherwise). It runs before Megatron-core's
    ``TransformerConfig.__post_init__`` unless ``model_overrides`` made that run earlier.
    """
    if not cfg.megatron or cfg.str(f"{MEGATRON}.cuda_graph_impl") != "local":
        return
    modules_key = f"{MEGATRON}.cuda_graph_modules"
    modules = _graph_modules(cfg.get(modules_key)) if cfg.has(modules_key) else []
    if modules is None:
        return
    scope = cfg.get(f"{MEGATRON}.inference_cuda_graph_scope")
    if modules:
        yield Violation(
            modules_key,
            f"cuda_graph_impl 'local' with cuda_graph_modules {modules} (Bridge: use "
            "transformer_engine for scoped training graphs)",
        )
    elif scope not in ("layer", "block"):
        yield Violation(
            f"{MEGATRON}.cuda_graph_impl",
            f"cuda_graph_impl 'local' with inference_cuda_graph_scope {scope!r} (Bridge allows "
            "local only for layer or block inference graphs)",
        )
