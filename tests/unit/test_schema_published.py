"""Every key and value of every published GRPO config of a NeMo RL checkout passes the schema.

Opt-in: point ``NEMO_RL_DIR`` at a NeMo RL checkout (the schema is generated from
NVIDIA-NeMo/RL 7ea279a; last run there: 161 GRPO configs, 0 errors). NeMo RL runs these
configs, so an unknown key or a type error on one of them is a schema bug. Configs load with
their ``defaults:`` chains resolved, as ``rlgate recipe check`` loads them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlgate.recipe.findings import Severity
from rlgate.recipe.load import load_recipe
from rlgate.recipe.schema import check_keys

NEMO_RL = os.environ.get("NEMO_RL_DIR")
GLOBS = (
    "examples/configs/grpo*.yaml",
    "examples/configs/recipes/llm/grpo-*.yaml",
    "examples/nemo_gym/**/*.yaml",
)
# As in NeMo RL's tests/unit/test_config_validation.py, these pick a non-GRPO MasterConfig.
OTHER_ALGORITHMS = {"teachers", "distillation", "dpo", "sft"}


@pytest.mark.skipif(not NEMO_RL, reason="set NEMO_RL_DIR to a NeMo RL checkout to run")
def test_published_grpo_configs_have_no_schema_errors() -> None:
    root = Path(str(NEMO_RL))
    files = sorted({p for pattern in GLOBS for p in root.glob(pattern)})
    checked, errors = 0, []
    for path in files:
        config = load_recipe(path).config
        if "grpo" not in config or set(config) & OTHER_ALGORITHMS:
            continue  # e.g. distillation_*.yaml, prefetch_*_envs.yaml
        checked += 1
        rel = path.relative_to(root)
        errors += [f"{rel}: {f}" for f in check_keys(config) if f.severity is Severity.ERROR]
    assert checked >= 100, f"only {checked} GRPO configs under {root}; is it a NeMo RL checkout?"
    assert errors == [], f"{len(errors)} errors in {checked} configs:\n" + "\n".join(errors)
