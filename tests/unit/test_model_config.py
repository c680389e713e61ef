"""rlgate.serving.model_config: finding a model's config.json offline and reading it safely."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub.constants
import pytest

from rlgate.cli.app import main
from rlgate.core.errors import RecipeError
from rlgate.core.resources import RECIPES
from rlgate.serving.model_config import find_model_config, load_model_config

TARGET = RECIPES / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
DENSE = {
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
    },
}


def _write(folder: Path, raw: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(raw) if not isinstance(raw, str) else raw)
    return path


def test_hf_cache_layout_is_found_offline(tmp_path, monkeypatch):
    """huggingface_hub's cache: models--org--name/refs/main names a snapshot folder."""
    repo = tmp_path / "models--meta-llama--Llama-3.1-8B-Instruct"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0e9e39f249a16976918f6564b8830bc894c89659")
    path = _write(repo / "snapshots" / "0e9e39f249a16976918f6564b8830bc894c89659", DENSE)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    found, looked = find_model_config("meta-llama/Llama-3.1-8B-Instruct", tmp_path / "tok")
    assert found == str(path) and "the Hugging Face cache" in looked
    assert find_model_config("meta-llama/Llama-3.2-1B", None)[0] is None
    assert find_model_config("/path/to/hf_checkpoint", None)[0] is None  # not a repo id


def test_dense_llama3_has_no_experts_and_llama3_rope_does_not_scale(tmp_path):
    model = load_model_config(_write(tmp_path, DENSE))
    assert model.experts == 0
    assert model.max_len() == (131072, "max_position_embeddings")  # vLLM: llama3 not scaled


def test_unknown_expert_layout_is_not_called_dense(tmp_path):
    """NemotronH block_configs / Dbrx ffn_config: experts unknown, no MoE rule fires."""
    nemotron = load_model_config(_write(tmp_path / "a", {**DENSE, "block_configs": [{}]}))
    dbrx = load_model_config(_write(tmp_path / "b", {**DENSE, "ffn_config": {}}))
    assert nemotron.experts is None and dbrx.experts is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({**DENSE, "num_attention_heads": "32"}, "num_attention_heads"),
        ("[1, 2]", "not a JSON object"),
        ("{", "not valid JSON"),
    ],
)
def test_a_bad_config_json_is_one_error_naming_the_file(tmp_path, raw, fragment):
    path = _write(tmp_path, raw)
    with pytest.raises(RecipeError, match=fragment) as info:
        load_model_config(path)
    assert str(path) in str(info.value)


def test_a_bad_config_json_is_exit_2_in_recipe_check(tmp_path, capsys):
    folder = tmp_path / "model"
    _write(folder, {**DENSE, "num_attention_heads": "32"})
    argv = ["recipe", "check", str(TARGET), "-q", "--tokenizers", str(tmp_path)]
    code = main(
        [*argv, f"policy.model_name={folder}", "policy.tokenizer.name=Qwen/Qwen3.5-35B-A3B"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("rlgate: error:") == 1 and "Traceback" not in err
    assert "num_attention_heads" in err and "config.json" in err


# --- recipe check --model-config FILE -----------------------------------------------------

VCFG_TP = "policy.generation.vllm_cfg.tensor_parallel_size"


def _check(tmp_path: Path, model_config: Path, *overrides: str) -> tuple[int, dict]:
    out = tmp_path / "out.json"
    argv = ["recipe", "check", str(TARGET), "-q", "--tokenizers", str(tmp_path / "none")]
    code = main([*argv, "--model-config", str(model_config), "--json", str(out), *overrides])
    doc = json.loads(out.read_text()) if out.exists() else {}
    return code, doc


def test_model_config_file_decides_the_model_rules_and_is_recorded(tmp_path, capsys):
    """A 30-head model: TP 4 (the recipe's own, heads 32 elsewhere) is refused naming it."""
    path = _write(tmp_path / "given", {**DENSE, "num_attention_heads": 30})
    code, doc = _check(tmp_path, path, f"{VCFG_TP}=4")
    report = doc["reports"][0]
    assert code == 1 and report["model_config"] == str(path)
    heads = [f for f in report["findings"] if f["code"] == "vllm-heads-tp"]
    assert len(heads) == 1 and f"model config {path}" in heads[0]["message"]
    (model,) = [c for c in report["checks"] if c["check"] == "model-config"]
    assert model["status"] == "ran" and f"on {path} (--model-config)" in model["reason"]
    assert "does not divide the model's 30 attention heads" in capsys.readouterr().out


def test_model_config_file_takes_precedence_over_the_discovered_one(tmp_path):
    """model_name is a folder with a 32-head config.json; the given 30-head file wins."""
    found = _write(tmp_path / "found", DENSE)
    given = _write(tmp_path / "given", {**DENSE, "num_attention_heads": 30})
    name = f"policy.model_name={found.parent}"
    tok = "policy.tokenizer.name=Qwen/Qwen3.5-35B-A3B"
    _, doc = _check(tmp_path, given, name, tok, f"{VCFG_TP}=4")
    assert doc["reports"][0]["model_config"] == str(given)
    assert [f["code"] for f in doc["reports"][0]["findings"] if "heads" in f["code"]] == [
        "vllm-heads-tp"
    ]


def test_without_model_config_the_discovered_file_is_recorded(tmp_path):
    found = _write(tmp_path / "found", DENSE)
    out = tmp_path / "out.json"
    argv = ["recipe", "check", str(TARGET), "-q", "--tokenizers", str(tmp_path / "none")]
    tok = "policy.tokenizer.name=Qwen/Qwen3.5-35B-A3B"
    main([*argv, "--json", str(out), f"policy.model_name={found.parent}", tok, f"{VCFG_TP}=4"])
    report = json.loads(out.read_text())["reports"][0]
    assert report["model_config"] == str(found)
    (model,) = [c for c in report["checks"] if c["check"] == "model-config"]
    assert model["status"] == "ran" and f"on {found} (found for" in model["reason"]
    assert not [f for f in report["findings"] if f["code"] == "vllm-heads-tp"]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ({**DENSE, "num_hidden_layers": [32]}, "num_hidden_layers"),
        ('{"a": "' + "x" * (5 * 2**20) + '"}', "config.json"),  # above the 4 MiB bound
        (None, "config.json"),  # does not exist
    ],
    ids=["bad-json", "not-object", "bad-type", "too-big", "missing"],
)
def test_a_bad_model_config_file_is_exit_2_with_one_message(tmp_path, capsys, raw, fragment):
    path = tmp_path / "config.json" if raw is None else _write(tmp_path / "given", raw)
    code, doc = _check(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 2 and doc == {}
    assert err.count("rlgate: error:") == 1 and "Traceback" not in err
    assert fragment in err and str(path) in err


def test_the_model_config_runs_once_per_config(tmp_path):
    """The model-config check is one check with one finding per problem (it ran twice)."""
    path = _write(tmp_path / "given", {**DENSE, "num_attention_heads": 30})
    _, doc = _check(tmp_path, path, f"{VCFG_TP}=4")
    report = doc["reports"][0]
    assert [c["check"] for c in report["checks"]].count("model-config") == 1
    assert [f["code"] for f in report["findings"]].count("vllm-heads-tp") == 1
