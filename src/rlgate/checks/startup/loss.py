"""The GRPO loss: ``ClippedPGLossFn`` (``loss_functions.py``) and the KL set-up in ``grpo.py``.

``loss_fn`` is read as ``ClippedPGLossConfig`` reads it: an absent key takes the pydantic
default (``token_level_loss: true``, ``reference_policy_kl_penalty: 0.01``, the rest off).
"""

from __future__ import annotations

from collections.abc import Iterator

from rlgate.checks.startup import Config, Source, Violation, rule

LOSS = "nemo_rl/algorithms/loss/loss_functions.py"
INIT = "ClippedPGLossFn.__init__"
GRPO = "nemo_rl/algorithms/grpo.py"
TIS = "loss_fn.truncated_importance_sampling"


@rule(
    "loss-gspo-token-level",
    Source(LOSS, INIT, "sequence-level importance sampling (e.g. GSPO) is mutually exclusive"),
)
def gspo_token_level(cfg: Config) -> Iterator[Violation]:
    """Sequence-level importance ratios (GSPO) with the token-level loss."""
    if cfg.on("loss_fn.sequence_level_importance_ratios") and cfg.on(
        "loss_fn.token_level_loss", True
    ):
        yield Violation(
            "loss_fn.token_level_loss",
            "sequence_level_importance_ratios with token_level_loss true (its default)",
        )


_CISPO = (
    ("loss_fn.disable_ppo_ratio", True, "use_cispo is incompatible with disable_ppo_ratio"),
    ("loss_fn.force_on_policy_ratio", True, "use_cispo is incompatible with force_on_policy"),
    (
        "loss_fn.sequence_level_importance_ratios",
        True,
        "use_cispo is incompatible with sequence_level_importance_ratios",
    ),
)


@rule(
    "loss-cispo",
    *(Source(LOSS, INIT, text) for _, _, text in _CISPO),
    Source(LOSS, INIT, "use_cispo is incompatible with dual clipping (ratio_clip_c)"),
    Source(LOSS, INIT, "use_cispo requires token_level_loss=True"),
)
def cispo(cfg: Config) -> Iterator[Violation]:
    """CISPO with what it excludes (no PPO ratio, forced ratio, GSPO, dual clip, sequence loss)."""
    if not cfg.on("loss_fn.use_cispo"):
        return
    for i, (key, _, _) in enumerate(_CISPO):
        if cfg.on(key):
            yield Violation(key, f"use_cispo with {key.rpartition('.')[2]}: true", source=i)
    if cfg.num("loss_fn.ratio_clip_c") is not None:
        yield Violation(
            "loss_fn.ratio_clip_c",
            f"use_cispo with ratio_clip_c={cfg.get('loss_fn.ratio_clip_c')!r}",
            source=3,
        )
    if cfg.flag("loss_fn.token_level_loss", True) is False:
        yield Violation(
            "loss_fn.token_level_loss", "use_cispo with token_level_loss: false", source=4
        )


@rule(
    "loss-tis-without-is",
    Source(LOSS, INIT, "truncated importance sampling is only supported when use_importance"),
)
def tis_without_is(cfg: Config) -> Iterator[Violation]:
    """A truncated-IS type without importance-sampling correction."""
    kind = cfg.get(f"{TIS}_type")
    if kind is not None and not cfg.on("loss_fn.use_importance_sampling_correction"):
        yield Violation(
            "loss_fn.use_importance_sampling_correction",
            f"truncated_importance_sampling_type={kind!r} without "
            "use_importance_sampling_correction",
        )


TIS_TYPES = ("tis", "icepop", "seq-mask-tis")


@rule(
    "loss-tis-settings",
    Source(LOSS, INIT, "truncated_importance_sampling_type must be 'tis', 'icepop'"),
    Source(LOSS, INIT, "truncated_importance_sampling_ratio should be positive"),
    Source(LOSS, INIT, "truncated_importance_sampling_ratio_min must be <="),
    Source(LOSS, INIT, "truncated_importance_sampling_ratio_min should be set when"),
    Source(LOSS, INIT, "seq-mask-tis uses token-level IS correction with sequence-level"),
    Source(
        LOSS,
        "ClippedPGLossFn.__call__",
        "Invalid truncated importance sampling type",
        "raises ValueError",
    ),
)
def tis_settings(cfg: Config) -> Iterator[Violation]:
    """A truncated-IS type that is unknown, or without a positive ratio or its minimum."""
    kind = cfg.get(f"{TIS}_type")
    if kind is None and cfg.num(f"{TIS}_ratio") is not None:
        yield Violation(
            f"{TIS}_type",
            f"truncated_importance_sampling_ratio={cfg.get(f'{TIS}_ratio')!r} without a "
            "truncated_importance_sampling_type (the first training step raises)",
            source=5,
        )
    if kind is None or (isinstance(kind, str) and "${" in kind):
        return
    if kind not in TIS_TYPES:
        yield Violation(
            f"{TIS}_type", f"truncated_importance_sampling_type {kind!r} (not {TIS_TYPES})"
        )
    ratio, low = cfg.num(f"{TIS}_ratio"), cfg.num(f"{TIS}_ratio_min")
    if cfg.get(f"{TIS}_ratio") is None or (ratio is not None and ratio <= 0):
        yield Violation(
            f"{TIS}_ratio",
            f"truncated_importance_sampling_type {kind!r} with "
            f"truncated_importance_sampling_ratio={cfg.get(f'{TIS}_ratio')!r}",
            source=1,
        )
    elif ratio is not None and low is not None and low > ratio:
        yield Violation(
            f"{TIS}_ratio_min",
            f"truncated_importance_sampling_ratio_min {low:g} > ratio {ratio:g}",
            source=2,
        )
    if kind in ("icepop", "seq-mask-tis") and cfg.get(f"{TIS}_ratio_min") is None:
        yield Violation(
            f"{TIS}_ratio_min",
            f"truncated_importance_sampling_type {kind!r} without "
            "truncated_importance_sampling_ratio_min",
            source=3,
        )
    if kind == "seq-mask-tis" and cfg.on("loss_fn.sequence_level_importance_ratios"):
        yield Violation(
            "loss_fn.sequence_level_importance_ratios",
            "seq-mask-tis with sequence_level_importance_ratios",
            source=4,
        )


@rule(
    "loss-dual-clip",
    Source(LOSS, "ClippedPGLossFn.__call__", "ratio_clip_c must exceed 1"),
)
def dual_clip(cfg: Config) -> Iterator[Violation]:
    """Dual clipping with ``ratio_clip_c <= 1`` (asserted in the first training step)."""
    c = cfg.num("loss_fn.ratio_clip_c")
    if c is not None and c <= 1:
        yield Violation("loss_fn.ratio_clip_c", f"ratio_clip_c={c:g} (must exceed 1)")


@rule(
    "loss-skip-reference-with-kl",
    Source(GRPO, "setup", "requires loss_fn.reference_policy_kl_penalty == 0"),
)
def skip_reference_kl(cfg: Config) -> Iterator[Violation]:
    """Reference logprobs skipped while the KL penalty needs them."""
    penalty = cfg.num("loss_fn.reference_policy_kl_penalty", 0.01)
    if cfg.on("grpo.skip_reference_policy_logprobs_calculation") and penalty not in (None, 0):
        yield Violation(
            "loss_fn.reference_policy_kl_penalty",
            f"grpo.skip_reference_policy_logprobs_calculation with "
            f"reference_policy_kl_penalty={penalty:g}"
            + (" (its default)" if not cfg.has("loss_fn.reference_policy_kl_penalty") else ""),
        )


@rule(
    "loss-kl-in-reward-on-policy",
    Source(GRPO, "_validate_use_kl_in_reward_compat", "requires real prev_logprobs"),
)
def kl_in_reward(cfg: Config) -> Iterator[Violation]:
    """KL in the reward against prev logprobs that force_on_policy_ratio zeroes."""
    penalty = cfg.num("loss_fn.reference_policy_kl_penalty", 0.01)
    if (
        cfg.on("loss_fn.use_kl_in_reward")
        and penalty not in (None, 0)
        and cfg.on("loss_fn.force_on_policy_ratio")
        and cfg.get("grpo.seq_logprob_error_threshold") is None
    ):
        yield Violation(
            "loss_fn.use_kl_in_reward",
            f"use_kl_in_reward with reference_policy_kl_penalty={penalty:g} and "
            "force_on_policy_ratio without grpo.seq_logprob_error_threshold",
        )


@rule(
    "loss-kl-type",
    Source("nemo_rl/algorithms/utils.py", "calculate_kl", "Invalid KL type", "raises ValueError"),
)
def kl_type(cfg: Config) -> Iterator[Violation]:
    """A KL estimator other than k1, k2 or k3 (every step computes the KL metrics with it)."""
    value = cfg.str("loss_fn.reference_policy_kl_type")
    if value is not None and value not in ("k1", "k2", "k3"):
        yield Violation("loss_fn.reference_policy_kl_type", f"{value!r} (k1, k2 or k3)")
