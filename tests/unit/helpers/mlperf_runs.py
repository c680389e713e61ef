"""The 18 real MLPerf Qwen3.5-397B NeMo RL async GRPO runs, for tests.

Location: ``$RLGATE_MLPERF_DIR`` or ``<repo>/../shared/mlperf-qwen35-grpo-rcp``. A missing
directory fails the test (these are the suite's real inputs, never optional).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from rlgate.checks.plan import GatePlan, load_plan
from rlgate.runs.metrics import RunMetrics, load_mlperf_log

from . import REPO_ROOT

MLPERF_DIR = Path(
    os.environ.get("RLGATE_MLPERF_DIR", REPO_ROOT.parent / "shared" / "mlperf-qwen35-grpo-rcp")
)
RECIPE = (
    REPO_ROOT
    / "recipes"
    / "reference"
    / "grpo-qwen3.5-397ba17b-64n4g-megatron-async-r2egym-mlperf.yaml"
)
BATCH_SIZES = (256, 512, 1024)
SEEDS = tuple(range(1, 7))
# The GBS rows of mlcommons/training llm_post_training/README.md, as NeMo RL overrides.
GBS_OVERRIDES = {
    256: (),
    512: (
        "grpo.num_prompts_per_step=32",
        "grpo.max_num_steps=20",
        "grpo.val_start_at=10",
        "policy.max_grad_norm=0.08838834765",
        "policy.megatron_cfg.optimizer.lr=1.4142135624e-6",
    ),
    1024: (
        "grpo.num_prompts_per_step=64",
        "grpo.max_num_steps=10",
        "grpo.val_start_at=7",
        "policy.max_grad_norm=0.0625",
        "policy.megatron_cfg.optimizer.lr=2.0e-6",
    ),
}


def mlperf_path(gbs: int, seed: int) -> Path:
    """One run log; fails the test with a message when the data is absent."""
    path = MLPERF_DIR / f"GBS{gbs}" / f"seed_{seed}.out"
    if not path.is_file():
        pytest.fail(f"MLPerf reference log missing: {path} (set RLGATE_MLPERF_DIR)", pytrace=False)
    return path


@functools.cache
def mlperf_run(gbs: int, seed: int) -> RunMetrics:
    """The parsed run (cached per process)."""
    return load_mlperf_log(mlperf_path(gbs, seed))


@functools.cache
def mlperf_plan(gbs: int) -> GatePlan:
    """The reference recipe's plan for one GBS row."""
    return load_plan(RECIPE, overrides=GBS_OVERRIDES[gbs])
