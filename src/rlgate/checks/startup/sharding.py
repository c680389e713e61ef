"""Batch sharding beyond "the global batch divides the step": data parallelism, micro batches.

One GRPO step trains on ``num_prompts_per_step x num_generations_per_prompt`` samples.
``Policy.train`` shards each global batch of ``train_global_batch_size`` over the data-parallel
ranks, and each rank cuts its share into micro batches of ``train_micro_batch_size``;
``Policy.get_logprobs`` shards the whole step over the ranks and cuts each share into micro
batches of ``logprob_batch_size``. Dynamic batching and sequence packing cut by tokens
instead, so the micro-batch rules do not apply to them.
"""

from __future__ import annotations

from collections.abc import Iterator

from rlgate.checks.startup import Config, Source, Violation, rule
from rlgate.recipe.findings import Severity

BATCH = "nemo_rl/distributed/batched_data_dict.py"
POLICY = "nemo_rl/models/policy/lm_policy.py"


def _step(cfg: Config) -> int | None:
    prompts = cfg.int("grpo.num_prompts_per_step")
    gens = cfg.int("grpo.num_generations_per_prompt")
    if prompts is None or gens is None or prompts < 1 or gens < 1:
        return None
    return prompts * gens


def _by_tokens(cfg: Config) -> bool:
    return cfg.on("policy.dynamic_batching.enabled") or cfg.on("policy.sequence_packing.enabled")


@rule(
    "batch-data-parallel",
    Source(BATCH, "BatchedDataDict.shard_by_batch_size", "is not a multiple of shards ({shards})"),
    Source(
        "nemo_rl/algorithms/grpo.py",
        "async_grpo_train",
        "must be divisible by data_parallel size",
        "raises AssertionError",
    ),
)
def data_parallel(cfg: Config) -> Iterator[Violation]:
    """The global batch (training) or the step's batch (logprobs) not divisible by DP."""
    dp, gbs, step = cfg.data_parallel(), cfg.int("policy.train_global_batch_size"), _step(cfg)
    if dp is None or dp < 2:
        return
    if gbs is not None and gbs >= 1 and gbs % dp:
        yield Violation(
            "policy.train_global_batch_size",
            f"train_global_batch_size {gbs} is not a multiple of the data-parallel size {dp} "
            "(Policy.train shards each global batch over the DP ranks)",
        )
    elif step is not None and step % dp:
        yield Violation(
            "grpo.num_prompts_per_step",
            f"num_prompts_per_step x num_generations_per_prompt = {step} is not a multiple "
            f"of the data-parallel size {dp} (Policy.get_logprobs shards the step over the "
            "DP ranks)",
            source=1 if cfg.is_async else 0,
        )


@rule(
    "batch-micro",
    Source(BATCH, "BatchedDataDict.make_microbatch_iterator", "is not a multiple of the provided"),
)
def micro_batch(cfg: Config) -> Iterator[Violation]:
    """A DP rank's share not a multiple of the training or logprob micro batch (NeMo RL #648)."""
    dp, gbs, step = cfg.data_parallel(), cfg.int("policy.train_global_batch_size"), _step(cfg)
    if dp is None or _by_tokens(cfg):
        return
    mbs = cfg.int("policy.train_micro_batch_size")
    if gbs is not None and gbs >= 1 and gbs % dp == 0 and mbs is not None and mbs >= 1:
        local = gbs // dp
        if local % mbs:
            yield Violation(
                "policy.train_micro_batch_size",
                f"each DP rank trains on train_global_batch_size / DP = {gbs} / {dp} = {local} "
                f"samples, not a multiple of train_micro_batch_size {mbs}",
            )
    lbs = cfg.int("policy.logprob_batch_size")
    if step is not None and step % dp == 0 and lbs is not None and lbs >= 1:
        local = step // dp
        if local % lbs:
            yield Violation(
                "policy.logprob_batch_size",
                f"each DP rank computes logprobs for {step} / DP {dp} = {local} samples, not "
                f"a multiple of logprob_batch_size {lbs}",
            )


@rule(
    "tp-logprob-batch",
    Source(POLICY, "Policy.__init__", "config['train_micro_batch_size'] == config['logprob_batch"),
    severity=Severity.WARNING,
)
def tp_accuracy(cfg: Config) -> Iterator[Violation]:
    """TP >= 4 with a logprob batch other than the training micro batch (batch-variant logprobs).

    A warning, not an error: NeMo RL skips the assert when NRL_IGNORE_TP_ACCURACY_CHECK is set
    where the run starts (its nightly scripts for such recipes export it), which a config does
    not say; ``grpo.py::setup`` sets it itself under ``loss_fn.force_on_policy_ratio``.
    """
    sizes = cfg.parallel()
    mbs, lbs = cfg.int("policy.train_micro_batch_size"), cfg.int("policy.logprob_batch_size")
    if sizes is None or mbs is None or lbs is None or cfg.on("loss_fn.force_on_policy_ratio"):
        return
    if sizes[0] >= 4 and mbs != lbs:
        yield Violation(
            "policy.logprob_batch_size",
            f"TP {sizes[0]} with train_micro_batch_size {mbs} != logprob_batch_size {lbs} "
            "(batch-variant logprobs at TP >= 4): the run fails unless it starts with "
            "NRL_IGNORE_TP_ACCURACY_CHECK=1 (or set loss_fn.force_on_policy_ratio)",
        )
