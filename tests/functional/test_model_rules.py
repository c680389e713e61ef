"""Model rules (rlgate.checks.startup.model) on the real Qwen3-Coder-30B-A3B ``config.json``.

Each rule: rlgate's target recipe pointed at the real config (``policy.model_name`` a folder
holding it) and broken by one override, or at a copy with one field changed, is refused
naming the key and citing the source; the real config with the recipe's own values passes.
Without a ``config.json`` the check reports the rules as not run (exit 3 when one insists).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlgate.checks.recipe import check_recipe_file
from rlgate.checks.registry import load_recipe
from rlgate.checks.startup import check_model, model_rules
from rlgate.core.resources import RECIPES
from rlgate.serving.model_config import load_model_config

TARGET = RECIPES / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
CODER = "qwen3-coder-30b-a3b-instruct"
VCFG = "policy.generation.vllm_cfg"
MCFG = "policy.megatron_cfg"
DTENSOR = [
    f"{MCFG}.enabled=false",
    "++policy.dtensor_cfg.enabled=true",
    "++policy.dtensor_cfg._v2=true",
    "++policy.dtensor_cfg.context_parallel_size=2",
]
OFFLOAD = [
    f"++{MCFG}.fine_grained_activation_offloading=true",
    f"++{MCFG}.offload_modules=[expert_fc1,core_attn]",
]
RESHARD = ["++policy.generation.refit_transport=nccl_reshard"]
NIXL_SHARD = [
    "++policy.generation.refit_transport=nixl",
    "++policy.generation.refit_cfg.nixl.shard_expert_weights=true",
]
FP8_CHECKPOINT = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
QWEN35 = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"}
NO_EXPERTS = {"num_experts": None, "num_experts_per_tok": None, "moe_intermediate_size": None}
# a dense model: no expert key AND a model type whose transformers defaults hold none (a
# qwen3_moe config.json without num_experts is 128 experts: its class's default)
DENSE = {**NO_EXPERTS, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
IOPT = f"++{MCFG}.transformer_impl=inference_optimized"
SELECTIVE = [f"++{MCFG}.recompute_granularity=selective"]  # the recipe checkpoints activations
TE_GRAPH = [f"++{MCFG}.cuda_graph_impl=transformer_engine"]
GEN = "policy.generation.mcore_generation_config"
MEGATRON_GEN = ["policy.generation.backend=megatron", "policy.generation.colocated.enabled=false"]


@pytest.fixture
def coder(tokenizers_root: Path) -> Path:
    return tokenizers_root / CODER / "config.json"


def _copy(coder: Path, tmp_path: Path, **changes: Any) -> Path:
    """A model folder whose config.json is the real one with ``changes`` (None: removed)."""
    raw = json.loads(coder.read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(raw))
    return folder


def _model(folder: Path, overrides: list[str], root: Path | None = None) -> Any:
    recipe = load_recipe(TARGET, [f"policy.model_name={folder}", *overrides], strict=False)
    return check_model(recipe, root)


# (code, overrides, changed config.json fields, key, fragment)
MUTATIONS = {
    "vllm-heads-tp": (
        [f"{VCFG}.tensor_parallel_size=3"],
        {},
        f"{VCFG}.tensor_parallel_size",
        "tensor_parallel_size 3 does not divide the model's 32 attention heads",
    ),
    "vllm-ep-dense": (
        [f"{VCFG}.expert_parallel_size=4"],
        DENSE,
        f"{VCFG}.expert_parallel_size",
        "but the model has no experts",
    ),
    "vllm-max-model-len": (
        [f"{VCFG}.max_model_len=300000"],
        {},
        f"{VCFG}.max_model_len",
        "max_model_len 300000 is above the model's maximum length 262144 (max_position_embeddings",
    ),
    "vllm-dcp-kv-heads": (
        [
            f"{VCFG}.tensor_parallel_size=4",
            "++policy.generation.vllm_kwargs.decode_context_parallel_size=2",
        ],
        {},
        f"{VCFG}.tensor_parallel_size",
        "needs vLLM TP above the model's 4 KV heads (TP 4)",
    ),
    "megatron-moe-offload-dense": (
        OFFLOAD,
        DENSE,
        f"{MCFG}.offload_modules",
        "offload_modules ['expert_fc1'] are MoE-only, but the model has no experts",
    ),
    "dtensor-gemma3-context-parallel": (
        DTENSOR,
        {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]},
        "policy.dtensor_cfg.context_parallel_size",
        "context_parallel_size 2 on a Gemma3 model (model_type 'gemma3_text')",
    ),
    "vllm-quantized-load-format": (
        [f"++{VCFG}.load_format=auto"],
        {"architectures": ["GptOssForCausalLM"], "quantization_config": {"quant_method": "mxfp4"}},
        f"{VCFG}.load_format",
        "load_format 'auto' on a quantized GptOssForCausalLM checkpoint",
    ),
    "nixl-expert-shard-tp": (
        [
            "++policy.generation.refit_transport=nixl",
            "++policy.generation.refit_cfg.nixl.shard_expert_weights=true",
            f"{VCFG}.tensor_parallel_size=4",
            f"++{VCFG}.expert_parallel_size=1",
        ],
        {"moe_intermediate_size": 770},
        f"{VCFG}.tensor_parallel_size",
        "the model's moe_intermediate_size 770 is not divisible by 4",
    ),
    "vllm-pp-architecture": (
        [f"{VCFG}.pipeline_parallel_size=2"],
        {"architectures": ["Gemma3nForCausalLM"], "model_type": "gemma3n_text"},
        f"{VCFG}.pipeline_parallel_size",
        "pipeline_parallel_size 2 on Gemma3nForCausalLM, whose vLLM 0.25.1 implementation does "
        "not support pipeline parallelism",
    ),
    "vllm-mm-torch-shm": (
        ["++policy.generation.vllm_kwargs.mm_tensor_ipc=torch_shm"],
        QWEN35,
        "policy.generation.vllm_kwargs.mm_tensor_ipc",
        "torch_shm' on the multimodal Qwen3_5MoeForConditionalGeneration with 4 GPUs per vLLM",
    ),
    "nixl-expert-shard-quantized": (
        NIXL_SHARD,
        FP8_CHECKPOINT,
        "policy.model_name",
        "with a quantized checkpoint (fp8) on a MoE model (128 experts): the expert weight "
        "layout needs unquantized Triton",
    ),
    "nixl-expert-shard-moe-backend": (
        [*NIXL_SHARD, "policy.generation.vllm_kwargs.moe_backend=auto"],
        {},
        "policy.generation.vllm_kwargs.moe_backend",
        "with moe_backend 'auto': vLLM tries FlashInfer before Triton on CUDA GPUs other than "
        "Hopper",
    ),
    "nccl-reshard-layer-split": (
        [*RESHARD, f"{MCFG}.pipeline_model_parallel_size=5"],
        {},
        f"{MCFG}.pipeline_model_parallel_size",
        "the model's 48 layers (num_hidden_layers) less the even stages leave 48 layers for 5",
    ),
    "megatron-heads-tp": (
        [],
        {"num_attention_heads": 33},
        f"{MCFG}.tensor_model_parallel_size",
        "Megatron TP 2 does not divide the model's 33 attention heads",
    ),
    "megatron-ep-dense": (
        [],
        DENSE,
        f"{MCFG}.expert_model_parallel_size",
        "expert_model_parallel_size 16 on a model without experts",
    ),
    "megatron-gdn-heads-tp": (
        [],
        {"model_type": "qwen3_next", "linear_num_key_heads": 6, "linear_num_value_heads": 32},
        f"{MCFG}.tensor_model_parallel_size",
        "TP 2 x CP 2 = 4 does not divide the model's 6 gated delta net heads "
        "(linear_num_key_heads)",
    ),
    "megatron-pp-layer-split": (
        [
            f"{MCFG}.pipeline_model_parallel_size=4",
            f"++{MCFG}.num_layers_in_first_pipeline_stage=11",
        ],
        {},
        f"{MCFG}.pipeline_model_parallel_size",
        "leave 37 layers, not divisible by the 3 middle stages (PP 4)",
    ),
    "megatron-shared-expert-overlap": (
        [f"++{MCFG}.moe_shared_expert_overlap=true", f"{MCFG}.moe_token_dispatcher_type=allgather"],
        {"model_type": "qwen3_next", "shared_expert_intermediate_size": 512},
        f"{MCFG}.moe_token_dispatcher_type",
        "moe_shared_expert_overlap with moe_token_dispatcher_type 'allgather' on a model with "
        "shared experts (intermediate size 512)",
    ),
    # bridge: the target's Megatron CP 2 against a length not divisible by 2 x CP = 4
    "megatron-cp-seq-length": (
        [],
        {"max_position_embeddings": 262146},
        f"{MCFG}.context_parallel_size",
        "max_position_embeddings 262146 (the provider's seq_length) is not a multiple of 2 x CP",
    ),
    # Megatron-core's TransformerConfig.__post_init__ on what Megatron Bridge's bridge sets
    "megatron-inference-optimized-moe": (
        [IOPT, f"{MCFG}.expert_tensor_parallel_size=2"],
        {},
        f"{MCFG}.expert_tensor_parallel_size",
        "inference_optimized with expert_tensor_parallel_size 2 on a MoE model (128 experts)",
    ),
    "megatron-inference-optimized-layers": (
        [IOPT],
        {"model_type": "qwen3_next"},
        f"{MCFG}.transformer_impl",
        "on a qwen3_next model, whose Megatron Bridge provider has zero-centred RMSNorm gamma",
    ),
    "megatron-recompute-model-modules": (
        [*SELECTIVE, f"++{MCFG}.recompute_modules=[core_attn,moe_act]"],
        DENSE,
        f"{MCFG}.recompute_modules",
        "recompute_modules has moe_act but moe_grouped_gemm is off (a dense model)",
    ),
    "megatron-bias-activation-fusion": (
        [f"{MCFG}.bias_activation_fusion=true"],
        {"hidden_act": "relu2"},
        f"{MCFG}.bias_activation_fusion",
        "bias_activation_fusion on a model whose activation is squared_relu",
    ),
    "megatron-dsa-rope-fusion": (
        [f"{MCFG}.apply_rope_fusion=true"],
        {"model_type": "glm_moe_dsa"},
        f"{MCFG}.apply_rope_fusion",
        "apply_rope_fusion on a DeepSeek sparse attention model",
    ),
    "megatron-dsv4-pipeline-layout": (
        [
            f"{MCFG}.pipeline_model_parallel_size=2",
            f"++{MCFG}.num_layers_in_first_pipeline_stage=20",
        ],
        {"model_type": "deepseek_v4"},
        f"{MCFG}.num_layers_in_first_pipeline_stage",
        "num_layers_in_first_pipeline_stage with PP 2 on DeepSeek-V4",
    ),
    "megatron-moe-bias-etp": (
        [f"{MCFG}.expert_tensor_parallel_size=2"],
        {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"]},
        f"{MCFG}.expert_tensor_parallel_size",
        "expert_tensor_parallel_size 2 on GPT-OSS, whose experts have linear bias",
    ),
    "megatron-router-groups-experts": (
        [f"++{MCFG}.moe_router_num_groups=12", f"++{MCFG}.moe_router_group_topk=2"],
        {},
        f"{MCFG}.moe_router_num_groups",
        "moe_router_num_groups 12 does not divide the model's 128 routed experts",
    ),
    "megatron-cuda-graph-moe": (
        [*TE_GRAPH, f"++{MCFG}.cuda_graph_modules=[attn,mlp]"],
        {},
        f"{MCFG}.cuda_graph_modules",
        "cuda_graph_modules has mlp, but every layer of the model is MoE",
    ),
    "megatron-allgather-variable-seq": (
        [f"{MCFG}.moe_token_dispatcher_type=allgather"],
        {"model_type": "kimi_k3"},
        f"{MCFG}.moe_token_dispatcher_type",
        "moe_token_dispatcher_type allgather on Kimi K3, whose provider sets variable_seq_lengths",
    ),
}


def test_every_model_rule_has_a_mutation():
    assert {r.code for r in model_rules()} == set(MUTATIONS)


@pytest.mark.parametrize("code", sorted(MUTATIONS))
def test_mutation_is_refused_naming_key_value_and_source(code, coder, tmp_path):
    overrides, changes, key, fragment = MUTATIONS[code]
    result = _model(_copy(coder, tmp_path, **changes), overrides)
    mine = [f for f in result.findings if f.code == code]
    assert result.state == "ran" and mine, result
    assert any(f.key == key and fragment in f.message for f in mine), [str(f) for f in mine]
    rule = next(r for r in model_rules() if r.code == code)
    assert all(f.severity is rule.severity for f in mine)
    assert any(s.where in f.message and s.cites in f.message for f in mine for s in rule.sources)


@pytest.mark.parametrize("code", sorted(MUTATIONS))
def test_the_real_config_passes_where_the_mutation_needs_a_changed_one(code, coder, tmp_path):
    """The same overrides on the real (MoE, 32-head, 262144-token, 48-layer) config."""
    overrides, changes, _, _ = MUTATIONS[code]
    if not changes:  # an override-only mutation: the recipe's own values instead
        overrides = [o for o in overrides if "refit_transport" in o or "load_format" in o]
    result = _model(coder.parent, overrides)
    assert result.state == "ran" and result.findings == []


@pytest.mark.parametrize(
    ("overrides", "code", "fragment"),
    [
        ([f"{VCFG}.max_model_len=262144"], None, ""),
        ([f"{VCFG}.tensor_parallel_size=8"], None, ""),
        (
            [
                f"{VCFG}.tensor_parallel_size=8",
                "++policy.generation.vllm_kwargs.decode_context_parallel_size=4",
            ],
            "vllm-dcp-kv-heads",
            "decode_context_parallel_size 4 > TP 8 // 4 KV heads",
        ),
        ([*RESHARD, f"{MCFG}.pipeline_model_parallel_size=4"], None, ""),
        (
            [
                *RESHARD,
                f"{MCFG}.pipeline_model_parallel_size=4",
                f"++{MCFG}.num_layers_in_first_pipeline_stage=11",
                f"++{MCFG}.num_layers_in_last_pipeline_stage=11",
            ],
            None,
            "",
        ),
        (
            [
                *RESHARD,
                f"{MCFG}.pipeline_model_parallel_size=4",
                f"++{MCFG}.num_layers_in_first_pipeline_stage=11",
            ],
            ("nccl-reshard-layer-split", "megatron-pp-layer-split"),
            "less the first 11, last None stages leave 37 layers for 3 pipeline stages",
        ),
        (
            [
                *RESHARD,
                f"{MCFG}.pipeline_model_parallel_size=2",
                f"++{MCFG}.num_layers_in_first_pipeline_stage=20",
                f"++{MCFG}.num_layers_in_last_pipeline_stage=20",
            ],
            ("nccl-reshard-layer-split", "megatron-pp-layer-split"),
            "assign 40 of the model's 48 layers",
        ),
        ([f"{MCFG}.tensor_model_parallel_size=8"], None, ""),  # 32 heads, 4 KV heads
        (
            [f"{MCFG}.tensor_model_parallel_size=3"],  # and neither divides 4 KV heads
            ("megatron-heads-tp", "megatron-heads-tp"),
            "Megatron TP 3 does not divide the model's 32 attention heads",
        ),
        (
            [
                f"{MCFG}.pipeline_model_parallel_size=4",
                f"++{MCFG}.num_layers_in_first_pipeline_stage=12",
                f"++{MCFG}.num_layers_in_last_pipeline_stage=12",
            ],
            None,
            "",
        ),
    ],
)
def test_boundaries_on_the_real_config(coder, overrides, code, fragment):
    found = _model(coder.parent, overrides).findings
    codes = (code,) if isinstance(code, str) else code or ()
    assert sorted(f.code for f in found) == sorted(codes), found
    assert not codes or fragment in next(f for f in found if f.code == codes[0]).message


def test_gdn_heads_divisible_by_tp_cp_pass(coder, tmp_path):
    """Qwen3.5-35B-A3B's 16 key / 32 value heads against the recipe's TP 2 x CP 2 and TP 8."""
    folder = _copy(
        coder, tmp_path, model_type="qwen3_next", linear_num_key_heads=16, linear_num_value_heads=32
    )
    assert _model(folder, []).findings == []
    assert _model(folder, [f"{MCFG}.tensor_model_parallel_size=8"]).findings == []
    over = _model(
        folder, [f"{MCFG}.tensor_model_parallel_size=8", f"{MCFG}.context_parallel_size=4"]
    )
    assert [f.code for f in over.findings] == ["megatron-gdn-heads-tp"]  # 16 % 32
    (tmp_path / "other").mkdir()
    other = _copy(coder, tmp_path / "other", linear_num_key_heads=6)  # qwen3_moe: no GDN layers
    assert _model(other, []).findings == []


def test_yarn_scaling_raises_the_limit_as_vllm_does(coder, tmp_path):
    """rope yarn factor 4 over original 32768: vLLM derives 131072 (_get_and_verify_max_len)."""
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    folder = _copy(coder, tmp_path, max_position_embeddings=32768, rope_scaling=rope)
    assert _model(folder, [f"{VCFG}.max_model_len=131072"]).findings == []
    over = _model(folder, [f"{VCFG}.max_model_len=131073"]).findings
    assert [f.code for f in over] == ["vllm-max-model-len"]
    assert "maximum length 131072" in over[0].message


def test_nested_text_config_is_read_as_vllm_reads_it(coder, tmp_path):
    """Qwen3.5 (transformers' Qwen3_5MoeConfig): the language model's fields in text_config."""
    raw = json.loads(coder.read_text())
    text = {
        k: raw.pop(k)
        for k in (
            "num_attention_heads",
            "num_key_value_heads",
            "num_hidden_layers",
            "max_position_embeddings",
            "num_experts",
        )
    }
    nested = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            **text,
            "num_attention_heads": 16,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e7},
        },
        "vision_config": {"depth": 27},
    }
    (tmp_path / "config.json").write_text(json.dumps(nested))
    model = load_model_config(tmp_path / "config.json")
    assert (model.model_type, model.text.num_attention_heads, model.experts) == (
        "qwen3_5_moe",
        16,
        128,
    )
    assert model.max_len() == (262144, "max_position_embeddings")
    found = _model(tmp_path, [f"{VCFG}.tensor_parallel_size=32"]).findings
    assert [f.key for f in found] == [f"{VCFG}.tensor_parallel_size"]
    assert "16 attention heads" in found[0].message


def test_found_in_the_tokenizer_root_by_the_model_id(tokenizers_root):
    recipe = load_recipe(
        TARGET,
        ["policy.model_name=Qwen/Qwen3-Coder-30B-A3B-Instruct", f"{VCFG}.tensor_parallel_size=3"],
        strict=False,
    )
    result = check_model(recipe, tokenizers_root)
    assert [f.code for f in result.findings] == ["vllm-heads-tp"]
    assert str(tokenizers_root / CODER / "config.json") in result.findings[0].message


def test_without_config_json_insisting_rules_are_not_run_exit_3(tokenizers_root):
    """Qwen3.5's folder has no config.json: MoE-only offload modules cannot be checked."""
    report = check_recipe_file(TARGET, OFFLOAD, tokenizers_root)
    status = {c.name: c for c in report.checks}["model-config"]
    assert status.status == "skipped" and report.exit_code == 3 and report.errors == []
    assert "no config.json for 'Qwen/Qwen3.5-35B-A3B'" in status.reason
    assert "megatron-moe-offload-dense" in status.reason and "not run" in status.reason


def test_without_config_json_ordinary_rules_are_named_not_run_and_do_not_block(tokenizers_root):
    """TP > 1 and a max_model_len hold in every published config: named, not exit 3."""
    report = check_recipe_file(TARGET, [], tokenizers_root)
    status = {c.name: c for c in report.checks}["model-config"]
    assert status.status == "not-applicable" and report.exit_code == 0
    assert "vllm-heads-tp" in status.reason and "vllm-max-model-len" in status.reason
    assert "not run" in status.reason


NO_EP = [f"{MCFG}.expert_model_parallel_size=1"]  # Megatron EP on a dense model: its own rule


@pytest.mark.parametrize(
    ("overrides", "changes", "key", "fragment", "source"),
    [
        (  # MoE: the layout each vLLM rank advertises refuses quantized expert layers
            [*NIXL_SHARD, f"{VCFG}.precision=fp8"],
            {},
            f"{VCFG}.precision",
            "precision 'fp8' on a MoE model (128 experts)",
            0,
        ),
        (
            [*NIXL_SHARD, "++policy.generation.vllm_kwargs.quantization=awq"],
            {},
            "policy.generation.vllm_kwargs.quantization",
            "vllm_kwargs.quantization 'awq' on a MoE model",
            0,
        ),
        (
            [*NIXL_SHARD, "policy.generation.vllm_kwargs.moe_backend=flashinfer_cutlass"],
            {},
            "policy.generation.vllm_kwargs.moe_backend",
            "moe_backend 'flashinfer_cutlass' on a MoE model (128 experts)",
            0,
        ),
        (  # dense: no expert layer to advertise, but the first refit refuses fp8
            [*NIXL_SHARD, *NO_EP, f"{VCFG}.precision=fp8"],
            DENSE,
            f"{VCFG}.precision",
            "refuses an fp8 vLLM model at its first refit",
            1,
        ),
        ([*NIXL_SHARD, *NO_EP], {**DENSE, **FP8_CHECKPOINT}, "policy.model_name", "(fp8)", 1),
    ],
)
def test_nixl_sharded_expert_refit_refuses_quantized_weights(
    coder, tmp_path, overrides, changes, key, fragment, source
):
    found = _model(_copy(coder, tmp_path, **changes), overrides).findings
    rule = next(r for r in model_rules() if r.code == "nixl-expert-shard-quantized")
    assert [(f.code, f.key) for f in found] == [("nixl-expert-shard-quantized", key)], found
    assert fragment in found[0].message and rule.sources[source].cites in found[0].message


@pytest.mark.parametrize(
    ("overrides", "changes"),
    [
        (  # the GPU decides: nixl-expert-shard-moe-backend warns
            [*NIXL_SHARD, "policy.generation.vllm_kwargs.moe_backend=auto"],
            {},
        ),
        ([*NIXL_SHARD], {**DENSE, "quantization_config": {"quant_method": "awq"}}),  # no experts
        ([*NIXL_SHARD, "++policy.generation.vllm_kwargs.quantization=awq"], DENSE),
        (  # NeMo RL clears a GPT-OSS checkpoint's quantization (vllm_worker.py::_load_model)
            [*NIXL_SHARD, f"++{VCFG}.load_format=dummy"],
            {
                "architectures": ["GptOssForCausalLM"],
                "quantization_config": {"quant_method": "mxfp4"},
            },
        ),
        ([f"{VCFG}.precision=fp8"], {}),  # no sharded expert refit
    ],
)
def test_nixl_sharded_expert_refit_accepts(coder, tmp_path, overrides, changes):
    found = _model(_copy(coder, tmp_path, **changes), overrides).findings
    assert [f for f in found if f.code == "nixl-expert-shard-quantized"] == []


@pytest.mark.parametrize(
    ("overrides", "changes", "code"),
    [
        ([f"{VCFG}.pipeline_parallel_size=2"], QWEN35, None),  # Qwen3.5 supports PP in vLLM
        ([f"{VCFG}.pipeline_parallel_size=2"], {"architectures": ["NoSuchForCausalLM"]}, None),
        (  # vLLM's Transformers backend resolves another class: not decided here
            [
                f"{VCFG}.pipeline_parallel_size=2",
                "++policy.generation.vllm_kwargs.model_impl=transformers",
            ],
            {"architectures": ["Gemma3nForCausalLM"]},
            None,
        ),
        (  # hf_overrides.architectures is what vLLM resolves
            [
                f"{VCFG}.pipeline_parallel_size=2",
                "++policy.generation.vllm_kwargs.hf_overrides={architectures:[Gemma3nForCausalLM]}",
            ],
            {},
            "vllm-pp-architecture",
        ),
        (  # torch_shm with one GPU per engine is allowed
            [
                f"{VCFG}.tensor_parallel_size=1",
                "++policy.generation.vllm_kwargs.mm_tensor_ipc=torch_shm",
            ],
            QWEN35,
            None,
        ),
        (  # the data-parallel engines count too (world_size_across_dp)
            [
                f"{VCFG}.tensor_parallel_size=1",
                "++policy.generation.vllm_kwargs.mm_tensor_ipc=torch_shm",
                "++policy.generation.vllm_kwargs.data_parallel_size=2",
            ],
            QWEN35,
            "vllm-mm-torch-shm",
        ),
    ],
)
def test_vllm_registry_rules_resolve_the_architecture_as_vllm_does(
    coder, tmp_path, overrides, changes, code
):
    found = _model(_copy(coder, tmp_path, **changes), overrides).findings
    assert [f.code for f in found] == ([code] if code else []), found


@pytest.mark.parametrize(
    ("overrides", "changes"),
    [
        ([*NIXL_SHARD], {}),  # the recipe's moe_backend: triton
        ([*NIXL_SHARD, "policy.generation.vllm_kwargs.moe_backend=auto"], DENSE),
        (  # quantized: the error of nixl-expert-shard-quantized instead
            [*NIXL_SHARD, "policy.generation.vllm_kwargs.moe_backend=auto"],
            FP8_CHECKPOINT,
        ),
        (  # LoRA makes vLLM use Triton (select_unquantized_moe_backend)
            [
                *NIXL_SHARD,
                "policy.generation.vllm_kwargs.moe_backend=auto",
                "++policy.generation.vllm_kwargs.enable_lora=true",
            ],
            {},
        ),
        (  # GPT-OSS's SWIGLUOAI activation puts FlashInfer after Triton
            [*NIXL_SHARD, "~policy.generation.vllm_kwargs.moe_backend"],
            {"architectures": ["GptOssForCausalLM"]},
        ),
    ],
)
def test_auto_moe_backend_warning_only_where_the_gpu_decides(coder, tmp_path, overrides, changes):
    found = _model(_copy(coder, tmp_path, **changes), overrides).findings
    assert [f for f in found if f.code == "nixl-expert-shard-moe-backend"] == [], found


def test_auto_moe_backend_is_a_warning_also_when_unset(coder):
    found = _model(coder.parent, [*NIXL_SHARD, "~policy.generation.vllm_kwargs.moe_backend"])
    assert [(f.code, f.severity.value) for f in found.findings] == [
        ("nixl-expert-shard-moe-backend", "warning")
    ]


def test_a_moe_config_that_leaves_its_experts_out_is_moe_by_its_class_s_defaults(coder, tmp_path):
    """transformers fills a key the file leaves out with its config class's default, and vLLM
    and Megatron Bridge read that object: qwen3_moe without num_experts is 128 experts."""
    from rlgate.serving.model_config import load_model_config

    doc = {**json.loads(coder.read_text()), **NO_EXPERTS}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    assert load_model_config(path).experts == 128
    dense = tmp_path / "dense.json"
    dense.write_text(json.dumps({k: v for k, v in {**doc, **DENSE}.items() if v is not None}))
    assert load_model_config(dense).experts == 0
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({**{k: v for k, v in doc.items() if v is not None},
                                   "model_type": "not_a_transformers_type"}))  # fmt: skip
    assert load_model_config(unknown).experts is None


# config.json shapes of other architectures, with the field names of transformers' config
# classes (DeepseekV3Config, Qwen3NextConfig, Gemma2Config, NemotronHConfig, GptOssConfig);
# applied over the real Qwen3-Coder file.
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_experts": None,
    "n_routed_experts": 256,
    "n_group": 8,
    "topk_group": 4,
    "kv_lora_rank": 512,
    "first_k_dense_replace": 3,
    "moe_intermediate_size": 2048,
    "n_shared_experts": 1,
}
QWEN3_NEXT = {
    "model_type": "qwen3_next",
    "architectures": ["Qwen3NextForCausalLM"],
    "shared_expert_intermediate_size": 512,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
}
GEMMA2 = {**DENSE, "model_type": "gemma2", "hidden_act": None,
          "hidden_activation": "gelu_pytorch_tanh"}  # fmt: skip
NEMOTRON_H = {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"],
              "hidden_act": None, "mlp_hidden_act": "relu2"}  # fmt: skip
GPT_OSS = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"]}


@pytest.mark.parametrize(
    ("overrides", "changes", "found"),
    [
        # inference_optimized MoE layers: ETP, router dtype, grouped-GEMM backend, mxfp8
        ([IOPT, f"{MCFG}.expert_tensor_parallel_size=2", *NO_EP], DENSE, []),
        (
            [IOPT, f"{MCFG}.moe_router_dtype=fp64"],
            {},
            [("megatron-inference-optimized-moe", f"{MCFG}.moe_router_dtype")],
        ),
        (
            [IOPT, f"++{MCFG}.inference_grouped_gemm_backend=flashinfer"],
            {},
            [("megatron-inference-optimized-moe", f"{MCFG}.inference_grouped_gemm_backend")],
        ),
        ([IOPT, f"++{MCFG}.inference_grouped_gemm_backend=flashinfer"], NEMOTRON_H, []),
        ([IOPT, f"++{MCFG}.inference_grouped_gemm_backend=torch"], {}, []),
        (
            [IOPT, f"++{MCFG}.inference_grouped_gemm_backend=cutlass"],
            NEMOTRON_H,
            [("megatron-inference-optimized-moe", f"{MCFG}.inference_grouped_gemm_backend")],
        ),
        (
            [IOPT, f"++{MCFG}.fp8_cfg={{enabled:true,fp8:mxfp8,fp8_recipe:mxfp8,fp8_param:true}}"],
            {},
            [("megatron-inference-optimized-moe", f"{MCFG}.inference_grouped_gemm_backend")],
        ),
        (  # the generation model: mcore_generation_config over megatron_cfg, named as such
            [
                *MEGATRON_GEN,
                f"++{GEN}.transformer_impl=inference_optimized",
                f"++{GEN}.moe_router_dtype=fp64",
            ],
            {},
            [("megatron-inference-optimized-moe", f"{GEN}.moe_router_dtype")],
        ),
        # inference_optimized layers against the bridge's norms and biases
        (
            [IOPT],
            {**DENSE, "model_type": "qwen2"},
            [("megatron-inference-optimized-layers", f"{MCFG}.transformer_impl")],
        ),
        (
            [IOPT, f"{MCFG}.expert_tensor_parallel_size=1"],
            GPT_OSS,
            [("megatron-inference-optimized-layers", f"{MCFG}.transformer_impl")],
        ),
        ([IOPT], NEMOTRON_H, []),
        # selective recompute of modules the model lacks
        (
            [*SELECTIVE, f"++{MCFG}.recompute_modules=[mla_up_proj]"],
            {},
            [("megatron-recompute-model-modules", f"{MCFG}.recompute_modules")],
        ),
        ([*SELECTIVE, f"++{MCFG}.recompute_modules=[mla_up_proj]"], DEEPSEEK_V3, []),
        ([*SELECTIVE, f"++{MCFG}.recompute_modules=[gdn_norm_out]"], QWEN3_NEXT, []),
        (  # a model type transformers does not know: its bridge is not known either
            [*SELECTIVE, f"++{MCFG}.recompute_modules=[gdn_norm_out,mla_up_proj]"],
            {"model_type": "kimi_k3"},
            [],
        ),
        ([*SELECTIVE, f"++{MCFG}.recompute_modules=[moe_act]"], {}, []),  # the bridge decides
        (
            [
                *SELECTIVE,
                f"++{MCFG}.recompute_modules=[moe_act]",
                f"++{MCFG}.moe_grouped_gemm=false",
            ],
            {},
            [("megatron-recompute-model-modules", f"{MCFG}.recompute_modules")],
        ),
        (
            [
                *SELECTIVE,
                f"++{MCFG}.recompute_modules=[shared_experts]",
                f"{MCFG}.moe_shared_expert_overlap=true",
            ],
            QWEN3_NEXT,
            [("megatron-recompute-model-modules", f"{MCFG}.recompute_modules")],
        ),
        # bias_activation_fusion against the bridge's activation
        ([f"{MCFG}.bias_activation_fusion=true"], {}, []),  # silu
        (
            [f"{MCFG}.bias_activation_fusion=true", *NO_EP],
            GEMMA2,
            [("megatron-bias-activation-fusion", f"{MCFG}.bias_activation_fusion")],
        ),
        (
            [f"{MCFG}.bias_activation_fusion=true"],
            NEMOTRON_H,
            [("megatron-bias-activation-fusion", f"{MCFG}.bias_activation_fusion")],
        ),
        (
            [f"{MCFG}.bias_activation_fusion=true"],
            {"model_type": "kimi_k3"},
            [("megatron-bias-activation-fusion", f"{MCFG}.bias_activation_fusion")],
        ),
        ([f"{MCFG}.bias_activation_fusion=false"], NEMOTRON_H, []),
        # DeepSeek-V4's pipeline layout: only with an uneven stage and PP > 1
        ([f"{MCFG}.pipeline_model_parallel_size=2"], {"model_type": "deepseek_v4"}, []),
        # group-limited routing: megatron_cfg's groups, else the HF config's n_group
        ([f"++{MCFG}.moe_router_num_groups=8", f"++{MCFG}.moe_router_group_topk=2"], {}, []),
        (
            [f"++{MCFG}.moe_router_group_topk=2"],
            {**DEEPSEEK_V3, "n_group": 6, "n_routed_experts": 256},
            [("megatron-router-groups-experts", f"{MCFG}.moe_router_num_groups")],
        ),
        # CUDA-graph modules against the experts
        (
            [*TE_GRAPH, f"++{MCFG}.cuda_graph_modules=[moe_router]", *NO_EP],
            DENSE,
            [("megatron-cuda-graph-moe", f"{MCFG}.cuda_graph_modules")],
        ),
        (
            [*TE_GRAPH, f"++{MCFG}.cuda_graph_modules=[moe]"],
            {},
            [("megatron-cuda-graph-moe", f"{MCFG}.cuda_graph_modules")],
        ),
        ([*TE_GRAPH, f"++{MCFG}.cuda_graph_modules=[attn,moe_router]"], {}, []),
        ([*TE_GRAPH, f"++{MCFG}.cuda_graph_modules=[mlp]"], DEEPSEEK_V3, []),  # 3 dense layers
        ([f"++{MCFG}.cuda_graph_modules=[mlp]"], {}, []),  # no CUDA graph impl
        # the allgather dispatcher on Kimi K3 only
        ([f"{MCFG}.moe_token_dispatcher_type=allgather"], DEEPSEEK_V3, []),
        (
            [*MEGATRON_GEN, f"++{GEN}.moe_token_dispatcher_type=allgather"],
            {"model_type": "kimi_k3"},
            [("megatron-allgather-variable-seq", f"{GEN}.moe_token_dispatcher_type")],
        ),
    ],
)
def test_megatron_rules_on_what_the_bridge_sets(coder, tmp_path, overrides, changes, found):
    """Each rule against the model side its bridge decides, on realistic config.json shapes."""
    ours = {c for c in MUTATIONS if c.startswith("megatron-")} - {
        "megatron-heads-tp", "megatron-ep-dense", "megatron-gdn-heads-tp",
        "megatron-pp-layer-split", "megatron-shared-expert-overlap",
        "megatron-moe-offload-dense",
    }  # fmt: skip
    result = _model(_copy(coder, tmp_path, **changes), overrides)
    assert result.state == "ran", result
    assert [(f.code, f.key) for f in result.findings if f.code in ours] == found, result.findings
