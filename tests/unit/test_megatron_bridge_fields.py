"""``rlgate/data/megatron_bridge_fields.json`` (``tools/megatron_bridge_fields.py``).

The field names rule ``megatron-model-overrides-field`` knows.

The table is of Megatron Bridge at NeMo RL 7ea279a's submodule commit and the Megatron-LM the
inventory reads; the tool's scan is checked on a small tree here, and against real checkouts
when ``MEGATRON_BRIDGE_DIR`` (a Megatron Bridge tree at that commit) and ``MEGATRON_LM_DIR``
are set.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from rlgate.checks.startup.training import MEGATRON_CONFIG_FIELDS, provider_fields
from rlgate.core.resources import DATA

REPO = Path(__file__).resolve().parents[2]
TABLE = json.loads((DATA / "megatron_bridge_fields.json").read_text())
BRIDGE_PIN = "8c46dc4259080c510b7455f43e836fdff222c5d3"  # NeMo RL 7ea279a's submodule
LM_PIN = "14346b65a2d0790e451919858f7771078105c5f0"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "megatron_bridge_fields_t", REPO / "tools/megatron_bridge_fields.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_table_is_of_the_pinned_commits():
    refs = {repo: src["ref"] for repo, src in TABLE["sources"].items()}
    assert refs == {"NVIDIA-NeMo/Megatron-Bridge": BRIDGE_PIN, "NVIDIA/Megatron-LM": LM_PIN}


def test_the_table_holds_the_fields_rlgate_and_nemo_rl_name():
    """Megatron-core's and the providers' fields the other rules and NeMo RL's keys use."""
    named = {
        "num_layers",
        "virtual_pipeline_model_parallel_size",
        "account_for_loss_in_pipeline_split",
        "seq_length",
        "vocab_size",
        "freeze_sound_encoder",  # NemotronOmniModelProvider
    }
    assert named <= provider_fields()
    # MegatronConfig keys NeMo RL copies onto the provider are provider fields too
    copied = {"tensor_model_parallel_size", "sequence_parallel", "moe_token_dispatcher_type"}
    assert copied <= set(MEGATRON_CONFIG_FIELDS) & provider_fields()


def test_the_scan_reads_dataclass_fields_only(tool, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        "import dataclasses\n"
        "from dataclasses import dataclass, field\n"
        "@dataclass\n"
        "class P:\n"
        "    alpha: int = 1\n"
        "    beta: list = field(default_factory=list)\n"
        "    def method(self): gamma: int = 2\n"
        "@dataclasses.dataclass(kw_only=True)\n"
        "class Q(P):\n"
        "    delta: str = ''\n"
        "class NotOne:\n"
        "    epsilon: int = 3\n"
    )
    (tmp_path / "pkg" / "broken.py").write_text("def (:\n")
    assert tool.dataclass_fields(tmp_path) == {"alpha", "beta", "delta"}


def test_the_file_is_what_the_tool_renders(tool):
    assert tool.render(TABLE) == (DATA / "megatron_bridge_fields.json").read_text()


BRIDGE, LM = os.environ.get("MEGATRON_BRIDGE_DIR"), os.environ.get("MEGATRON_LM_DIR")


@pytest.mark.skipif(not (BRIDGE and LM), reason="set MEGATRON_BRIDGE_DIR and MEGATRON_LM_DIR")
def test_the_table_is_the_scan_of_the_checkouts(tool):
    scan = tool.scan(Path(str(BRIDGE)), BRIDGE_PIN, Path(str(LM)), LM_PIN)
    assert scan == TABLE
