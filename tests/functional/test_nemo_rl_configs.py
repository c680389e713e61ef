"""NeMo RL's own published SWE configs pass ``rlgate recipe check`` (warnings allowed).

NeMo RL's YAML files are not vendored into rlgate; point ``NEMO_RL_DIR`` at a NeMo RL checkout
(verified against NVIDIA-NeMo/RL 7ea279a). Without it these tests skip and say so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlgate.compat import check_recipe_file

NEMO_RL = os.environ.get("NEMO_RL_DIR")
# (config, overrides): swe2 starts from a local SWE1 checkpoint; check it with the base model.
CONFIGS = {
    "grpo_qwen3_30ba3b_thinking_swe1": (
        "examples/nemo_gym/grpo_qwen3_30ba3b_thinking_swe1.yaml",
        [],
    ),
    "grpo_qwen3_30ba3b_thinking_swe2": (
        "examples/nemo_gym/grpo_qwen3_30ba3b_thinking_swe2.yaml",
        ["policy.model_name=Qwen/Qwen3-30B-A3B-Thinking-2507"],
    ),
    "swe1_16n8g_async_gym_nightly": (
        "examples/configs/recipes/llm/grpo-qwen3-30ba3b-thinking-swe1-16n8g-megatron-cp2-r3-async-gym.yaml",
        [],
    ),
}


@pytest.mark.skipif(not NEMO_RL, reason="set NEMO_RL_DIR to a NeMo RL checkout to run")
@pytest.mark.parametrize("name", list(CONFIGS), ids=list(CONFIGS))
def test_nemo_rl_swe_config_is_compatible(name, tokenizers_root):
    rel, overrides = CONFIGS[name]
    report = check_recipe_file(Path(NEMO_RL) / rel, overrides, tokenizers_root)
    assert report.ok, "\n".join(str(f) for f in report.errors)
    # Its never-read keys are reported as warnings, not errors.
    assert any(f.code == "unread-key" for f in report.findings)
