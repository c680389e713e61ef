"""``rlgate/data/transformers_expert_defaults.json`` against the installed transformers.

The table (``tools/transformers_expert_defaults.py``) is what ``ModelConfig.experts`` reads
when a ``config.json`` writes no expert key: the object vLLM and Megatron Bridge read holds its
config class's default there. Here: the table is of the installed transformers, it covers every
model type transformers knows, and sampled types (MoE and dense, and the ones the model rules'
tests use) give what instantiating their config class gives. The whole table:
``python tools/transformers_expert_defaults.py --check``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from rlgate.core.resources import DATA
from rlgate.serving.model_config import transformers_default_experts

REPO = Path(__file__).resolve().parents[2]
TABLE = json.loads((DATA / "transformers_expert_defaults.json").read_text())
SAMPLE = ("qwen3_moe", "qwen3_5_moe", "qwen3_next", "mixtral", "deepseek_v3", "gpt_oss",
          "qwen3", "llama", "gemma3_text")  # fmt: skip


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "transformers_expert_defaults_t", REPO / "tools/transformers_expert_defaults.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_table_is_of_the_installed_transformers_and_covers_its_model_types():
    from transformers import CONFIG_MAPPING

    assert TABLE["transformers"] == version("transformers")
    listed = set(TABLE["moe"]) | set(TABLE["dense"])
    assert not set(TABLE["moe"]) & set(TABLE["dense"])
    assert listed <= set(CONFIG_MAPPING.keys())
    assert len(set(CONFIG_MAPPING.keys()) - listed) < 30  # the few that need arguments


@pytest.mark.parametrize("model_type", SAMPLE)
def test_sampled_types_match_their_config_class_defaults(tool, model_type):
    assert transformers_default_experts(model_type) == tool.default_experts(model_type)


def test_a_type_transformers_does_not_know_is_unknown():
    assert transformers_default_experts("not_a_model_type") is None
    assert transformers_default_experts(None) is None
