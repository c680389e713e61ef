"""Checkpointing and logging: the checkpoint metric (read at every save) and the loggers.

``Logger.__init__`` (``utils/logger.py``) indexes the section of every logger it enables, so
an enabled logger without its section is a KeyError in ``grpo.py::setup``.
"""

from __future__ import annotations

from collections.abc import Iterator

from rlgate.checks.startup import Config, Source, Violation, rule
from rlgate.recipe.findings import Severity

GRPO = "nemo_rl/algorithms/grpo.py"
LOGGER = "nemo_rl/utils/logger.py"


@rule(
    "checkpoint-metric-name",
    Source(GRPO, "grpo_train", "must start with 'val:' or 'train:'"),
    Source(GRPO, "async_grpo_train", "must start with 'val:' or 'train:'"),
)
def metric_name(cfg: Config) -> Iterator[Violation]:
    """A checkpoint metric in the old format (``val_reward``): the first save fails."""
    name = cfg.str("checkpointing.metric_name")
    if not cfg.on("checkpointing.enabled") or name is None:
        return
    if not name.startswith(("train:", "val:")):
        yield Violation(
            "checkpointing.metric_name",
            f"metric_name {name!r} (the old format; e.g. 'val_reward' is now 'val:reward')",
            source=1 if cfg.is_async else 0,
        )


@rule(
    "checkpoint-metric-without-validation",
    Source(GRPO, "grpo_train", "but no {prefix} metrics were collected", "warns"),
    severity=Severity.WARNING,
)
def metric_without_validation(cfg: Config) -> Iterator[Violation]:
    """A ``val:`` checkpoint metric while validation never runs during training."""
    name = cfg.str("checkpointing.metric_name")
    if not cfg.on("checkpointing.enabled") or name is None or not name.startswith("val:"):
        return
    if cfg.int("grpo.val_period") == 0:
        yield Violation(
            "checkpointing.metric_name",
            f"metric_name {name!r} with grpo.val_period 0: no checkpoint is ranked by it "
            "(keep_top_k keeps the latest ones)",
        )


_LOGGERS = ("wandb", "swanlab", "tensorboard", "mlflow")


@rule(
    "logger-section",
    *(Source(LOGGER, "Logger.__init__", f"cfg['{name}']", "indexes") for name in _LOGGERS),
    Source(LOGGER, "Logger.__init__", "cfg['gpu_monitoring']['collection_interval']", "indexes"),
)
def logger_sections(cfg: Config) -> Iterator[Violation]:
    """A logger enabled without its section (``logger.wandb`` for ``wandb_enabled``...)."""
    for i, name in enumerate(_LOGGERS):
        if cfg.on(f"logger.{name}_enabled") and cfg.section(f"logger.{name}") is None:
            yield Violation(
                f"logger.{name}",
                f"logger.{name}_enabled without a logger.{name} section (KeyError)",
                source=i,
            )
    if cfg.on("logger.monitor_gpus"):
        monitoring = cfg.section("logger.gpu_monitoring")
        missing = [
            k for k in ("collection_interval", "flush_interval") if k not in (monitoring or {})
        ]
        if missing:
            yield Violation(
                "logger.gpu_monitoring",
                f"logger.monitor_gpus without logger.gpu_monitoring.{', '.join(missing)} "
                "(KeyError)",
                source=len(_LOGGERS),
            )


@rule(
    "checkpoint-model-save-format",
    Source(
        "nemo_rl/models/policy/lm_policy.py",
        "Policy.save_checkpoint",
        "model_save_format must be None or omitted if using DTensorPolicyWorker",
        "raises ValueError at the first save:",
    ),
)
def model_save_format(cfg: Config) -> Iterator[Violation]:
    """A ``model_save_format`` without ``dtensor_cfg._v2`` (which decides, for every backend)."""
    fmt = cfg.get("checkpointing.model_save_format")
    if cfg.on("checkpointing.enabled") and fmt is not None and not cfg.on("policy.dtensor_cfg._v2"):
        yield Violation(
            "checkpointing.model_save_format",
            f"model_save_format {fmt!r} without policy.dtensor_cfg._v2: true (Policy."
            "save_checkpoint reads _v2 whatever the backend)",
        )
