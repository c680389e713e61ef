"""``rlgate/data/vllm_architectures.json`` against the installed vLLM's model registry.

The table (``tools/vllm_architectures.py``) is what the model rules ``vllm-pp-architecture``
and ``vllm-mm-torch-shm`` read instead of importing vLLM. Here: it is of the installed
vLLM, it lists every architecture the registry holds, and the architectures the rules and
their tests name have the facts vLLM's own ``supports_pp`` / ``supports_multimodal`` give.
The whole table (about 25 s of model-class imports): ``python tools/vllm_architectures.py
--check``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from rlgate.core.resources import DATA
from rlgate.serving.model_config import vllm_architecture

REPO = Path(__file__).resolve().parents[2]
TABLE = json.loads((DATA / "vllm_architectures.json").read_text())
# Text and multimodal, with and without PP, and the architectures NeMo RL special-cases.
SAMPLE = (
    "Qwen3MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration",
    "Gemma3nForCausalLM",
    "Gemma3ForConditionalGeneration",
    "GptOssForCausalLM",
    "Mamba2ForCausalLM",
)


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "vllm_architectures_t", REPO / "tools/vllm_architectures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_table_is_of_the_installed_vllm_and_lists_its_registry():
    from vllm.model_executor.models.registry import ModelRegistry

    assert TABLE["vllm"] == version("vllm")
    assert set(TABLE["architectures"]) == set(ModelRegistry.get_supported_archs())


@pytest.mark.parametrize("arch", SAMPLE)
def test_sampled_architectures_match_vllms_own_inspection(tool, arch):
    assert TABLE["architectures"][arch] == tool.architecture(arch)


def test_the_sample_covers_both_answers_of_each_fact():
    facts = [TABLE["architectures"][a] for a in SAMPLE]
    assert {f["pp"] for f in facts} == {f["multimodal"] for f in facts} == {True, False}


def test_the_file_is_what_the_tool_renders(tool):
    text = (DATA / "vllm_architectures.json").read_text()
    assert tool.render(TABLE) == text


def test_lookup_resolves_the_first_architecture_only():
    assert vllm_architecture(["Gemma3nForCausalLM"]).pp is False  # type: ignore[union-attr]
    assert vllm_architecture(["NoSuchModel", "Gemma3nForCausalLM"]) is None
    assert vllm_architecture([]) is None
    unknown = next(a for a, v in TABLE["architectures"].items() if v is None)
    assert vllm_architecture([unknown]) is None  # registered, but not inspectable here
