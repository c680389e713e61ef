"""NeMo RL's own published GRPO configs pass ``rlgate recipe check`` (warnings allowed).

NeMo RL runs its published configs nightly, so an ERROR on one of them is a false alarm
unless it names a real upstream problem, with the evidence (``KNOWN_UPSTREAM``). NeMo RL's
YAML files are not vendored into rlgate; point ``NEMO_RL_DIR`` at a NeMo RL checkout
(verified against NVIDIA-NeMo/RL 7ea279a). Without it these tests skip and say so.
Offline, served checks whose tokenizer is not under the tokenizer root are reported as
not run (exit 3 for that config), which is fine here: the assertion is on ERROR findings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlgate.checks.recipe import check_recipe_file
from rlgate.cli.app import main

NEMO_RL = os.environ.get("NEMO_RL_DIR")
needs_nemo_rl = pytest.mark.skipif(not NEMO_RL, reason="set NEMO_RL_DIR to a NeMo RL checkout")

# The published GRPO configs (issue 11): top-level GRPO examples, the nightly/release GRPO
# recipes, and everything under examples/nemo_gym/.
PUBLISHED = (
    "examples/configs/grpo*.yaml",
    "examples/configs/recipes/llm/grpo-*.yaml",
    "examples/nemo_gym/**/*.yaml",
)

# Files under examples/nemo_gym/ that are not GRPO configs: refused with exit 2, by design.
NOT_GRPO_PREFIXES = ("distillation_", "prefetch_")

# ERRORs that name a real upstream problem at 7ea279a, with the evidence.
# These three configs serve `tool_parser: nemotron_json` and leave the plugin that would
# register it commented out (`# tool_parser_plugin: ???  # This is set to the path for
# Nemotron Nano v2`); vLLM 0.25.1 has no such parser, so OpenAIServingChat's
# ParserManager.get_tool_parser raises TypeError at server start. NeMo RL's nightly recipe
# derived from them (recipes/llm/gdpo-qwen2.5-1.5b-1n8g-gym-multireward.yaml) overrides
# tool_parser: hermes and passes.
KNOWN_UPSTREAM = {
    "examples/nemo_gym/grpo_workplace_assistant_nemotron_nano_v2_9b.yaml": {"unknown-parser"},
    "examples/nemo_gym/gdpo_multireward.yaml": {"unknown-parser"},
    "examples/nemo_gym/gdpo_example_tool_call_multireward.yaml": {"unknown-parser"},
}
# The Nemotron 3 Ultra GRPO configs give cluster.num_nodes as the whole Slurm allocation,
# Gym's GPU nodes included (student: 256 = 64 training + 172 vLLM + 20 Gym, "read by
# ultra_launch.sh to size the SLURM allocation"). NeMo RL counts cluster.num_nodes as training
# + generation only (grpo.py::setup: train_nodes = num_nodes - generation num_nodes; Gym's
# env.nemo_gym.num_gpu_nodes are extra Ray nodes, ray.sub: "cluster.num_nodes, plus
# env.nemo_gym.num_gpu_nodes"), so as published they train on 84 nodes (336 GPUs; the
# reasoning teacher 70 nodes, 280 GPUs), which TP 8 x CP 8 = 64 and EP x ETP do not divide:
# Policy.__init__ raises. ultra_launch.sh overrides cluster.num_nodes=NUM_TRAIN + NUM_GEN.
# For the same reason their cluster.segment_size 16 does not divide those 84 (70) training
# nodes (virtual_cluster.py::select_segment_nodes raises on the NVL domains segment_size is
# for); the launcher's NUM_TRAIN_NODES 64 it does, and ultra_launch.sh itself refuses node
# counts that segment_size does not divide ("is not divisible by SEGMENT_SIZE").
KNOWN_UPSTREAM |= {
    f"examples/nemo_gym/nemotron-3-ultra/{name}.yaml": {
        "parallel-world",
        "megatron-expert-world",
        "cluster-segment-size",
    }
    for name in ("student_rlvr1", "student_rlvr2", "reasoning_teacher")
}


def published_configs(root: Path) -> list[Path]:
    """Every published GRPO-area config of a NeMo RL checkout, sorted, no duplicates."""
    return sorted({p for pattern in PUBLISHED for p in root.glob(pattern) if p.is_file()})


@needs_nemo_rl
def test_every_published_grpo_config_in_one_call(tmp_path, tokenizers_root, gate_record):
    root = Path(NEMO_RL)
    files = published_configs(root)
    assert len(files) > 100, f"{root}: expected NeMo RL's published configs, found {len(files)}"
    out = tmp_path / "published.json"
    argv = ["recipe", "check", *map(str, files), "-q", "--tokenizers", str(tokenizers_root)]
    code = main([*argv, "--json", str(out)])
    doc = json.loads(out.read_text())
    reports = {Path(r["recipe"]).relative_to(root).as_posix(): r for r in doc["reports"]}
    assert len(reports) == len(files)

    not_grpo = {k for k in reports if Path(k).name.startswith(NOT_GRPO_PREFIXES)}
    for key in not_grpo:
        assert reports[key]["status"] == "invalid", key
        assert "not a GRPO config" in reports[key]["error"], reports[key]["error"]
    grpo = {k: r for k, r in reports.items() if k not in not_grpo}
    crashed = {k: r["error"] for k, r in grpo.items() if r["status"] in ("invalid", "error")}
    assert not crashed, crashed

    errors = {
        k: sorted(f"{f['code']} [{f['key']}]: {f['message']}" for f in r["findings"])
        for k, r in grpo.items()
        if any(f["severity"] == "error" for f in r["findings"])
    }
    error_codes = {
        k: {f["code"] for f in r["findings"] if f["severity"] == "error"} for k, r in grpo.items()
    }
    unexpected = {k: v for k, v in errors.items() if error_codes[k] != KNOWN_UPSTREAM.get(k)}
    assert not unexpected, json.dumps(unexpected, indent=1)
    stale = {k for k, codes in KNOWN_UPSTREAM.items() if error_codes.get(k) != codes}
    assert not stale, f"known upstream problems no longer reported (fixed upstream?): {stale}"

    statuses = [r["status"] for r in grpo.values()]
    gate_record(
        nemo_rl_configs=len(files),
        grpo_configs=len(grpo),
        compatible=statuses.count("compatible"),
        incomplete=statuses.count("incomplete"),
        known_upstream=len(KNOWN_UPSTREAM),
        exit_code=code,
    )
    assert code == doc["exit_code"] == (2 if not_grpo else 1)


# The SWE configs with every check run (their tokenizers are in the tokenizer root).
# swe2 starts from a local SWE1 checkpoint; check it with the base model.
SWE_CONFIGS = {
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


@needs_nemo_rl
@pytest.mark.parametrize("name", list(SWE_CONFIGS), ids=list(SWE_CONFIGS))
def test_nemo_rl_swe_config_is_compatible(name, tokenizers_root):
    rel, overrides = SWE_CONFIGS[name]
    report = check_recipe_file(Path(NEMO_RL) / rel, overrides, tokenizers_root)
    assert report.ok, "\n".join(str(f) for f in report.errors)
    assert not report.skipped, report.skipped  # every check ran
    # Its never-read keys are reported as warnings, not errors.
    assert any(f.code == "unread-key" for f in report.findings)


# Start-up rules added for issue 19, each on a published config broken by overrides the way
# NeMo RL would refuse it: (code, published config, overrides, the key the finding names).
SWE_NIGHTLY = SWE_CONFIGS["swe1_16n8g_async_gym_nightly"][0]  # Megatron TP2 PP2 CP4, Gym
MATH_1B = "examples/configs/grpo_math_1B.yaml"  # DTensor, colocated vLLM
V1 = ["policy.dtensor_cfg._v2=false"]
OVR = "policy.megatron_cfg.model_overrides"
STARTUP_MUTATIONS = [
    (
        "megatron-vpp-pp1",
        SWE_NIGHTLY,
        [
            "policy.megatron_cfg.pipeline_model_parallel_size=1",
            f"++{OVR}.virtual_pipeline_model_parallel_size=2",
        ],
        f"{OVR}.virtual_pipeline_model_parallel_size",
    ),
    (
        "megatron-colocated-reshard",
        SWE_NIGHTLY,
        [
            "policy.generation.backend=megatron",
            "policy.generation.colocated.enabled=true",
            "++policy.megatron_cfg.peft.enabled=true",
        ],
        "policy.megatron_cfg.peft.enabled",
    ),
    (
        "megatron-model-overrides-conflict",
        SWE_NIGHTLY,
        [f"++{OVR}.sequence_parallel=false"],
        f"{OVR}.sequence_parallel",
    ),
    (
        "megatron-pretrained-format",
        SWE_NIGHTLY,
        ["++policy.pretrained_checkpoint={format:nemo,path:/ckpt}"],
        "policy.pretrained_checkpoint.format",
    ),
    (
        "dtensor-v1-vlm",
        MATH_1B,
        [*V1, "++policy.is_vlm=true", "++env.should_use_nemo_gym=true"],
        "policy.sequence_packing.enabled",
    ),
    (
        "dtensor-v1-reward-model",
        MATH_1B,
        [*V1, "++policy.reward_model_cfg={enabled:true,reward_model_type:bradley_terry}"],
        "policy.sequence_packing.enabled",
    ),
    (
        "dtensor-v1-scheduler",
        MATH_1B,
        [*V1, "policy.scheduler=[{name:torch.optim.lr_scheduler.LinearLR,kwargs:{}},{at:50}]"],
        "policy.scheduler.1",
    ),
    (
        "vllm-real-quant-export",
        SWE_NIGHTLY,
        ["++policy.generation.real_quant=true"],
        "policy.generation.real_quant_export_cpu_offload",
    ),
    (
        "nixl-worker-cls",
        SWE_NIGHTLY,
        [
            "++policy.generation.refit_transport=nixl",
            "++policy.generation.vllm_kwargs.worker_cls=my.Worker",
        ],
        "policy.generation.vllm_kwargs.worker_cls",
    ),
    (
        "vllm-video-kwargs",
        SWE_NIGHTLY,
        ["++policy.generation.vllm_cfg.video={num_frames:8}"],
        "policy.generation.vllm_kwargs.limit_mm_per_prompt",
    ),
    (
        "nccl-reshard-pipeline-layout",
        SWE_NIGHTLY,
        [
            "++policy.generation.refit_transport=nccl_reshard",
            f"++{OVR}.account_for_loss_in_pipeline_split=true",
        ],
        f"{OVR}.account_for_loss_in_pipeline_split",
    ),
    (
        "megatron-model-overrides-field",
        SWE_NIGHTLY,
        [
            f"++{OVR}.moe_router_topk_scaling=2.0"
        ],  # Megatron's field is moe_router_topk_scaling_factor
        f"{OVR}.moe_router_topk_scaling",
    ),
    (
        "nixl-expert-shard-eplb",
        SWE_NIGHTLY,
        [
            "++policy.generation.refit_transport=nixl",
            "++policy.generation.refit_cfg.nixl.shard_expert_weights=true",
            "++policy.generation.vllm_kwargs.enable_eplb=true",
            "policy.generation.vllm_cfg.expert_parallel_size=2",
        ],
        "policy.generation.vllm_kwargs.enable_eplb",
    ),
    (
        "grpo-thinking-tags",
        SWE_NIGHTLY,
        [
            "++reward_penalties.penalize_malformed_think_tag=true",
            "++env.nemo_gym.thinking_tags=['<think>']",
        ],
        "env.nemo_gym.thinking_tags",
    ),
]


MOPD = "examples/configs/recipes/llm/mopd-qwen3-1.7b-3n8g-megatron-pack.yaml"  # OPD teachers
TEACHER = "on_policy_distillation.non_colocated_teachers.default_teacher_cfg"
NANOV3_SEGMENTS = (
    "examples/configs/recipes/llm/grpo-nanov3-30BA3B-4n4g-megatron_sync_colocated.yaml"
)
STARTUP_MUTATIONS += [
    (
        "opd-teachers-placement",
        MOPD,
        ["policy.generation.backend=sglang"],  # Gym forces vLLM's async engine on
        "on_policy_distillation.non_colocated_teachers.enabled",
    ),
    ("opd-teachers-placement", MOPD, [f"{TEACHER}.gpus_per_node=16"], f"{TEACHER}.gpus_per_node"),
    ("opd-teachers-placement", MOPD, [f"{TEACHER}.num_nodes=3"], f"{TEACHER}.num_nodes"),
    ("cluster-segment-size", NANOV3_SEGMENTS, ["cluster.segment_size=3"], "cluster.segment_size"),
    (
        "fleet-health-backend",
        MATH_1B,
        ["++async_rl.generation_fleet_health.enabled=true", "policy.generation.backend=megatron"],
        "async_rl.generation_fleet_health.enabled",
    ),
    (
        "vllm-required-keys",
        MATH_1B,
        ["~policy.generation.val_temperature"],
        "policy.generation.val_temperature",
    ),
    (
        "nccl-reshard-worker",
        MATH_1B,
        ["++policy.generation.refit_transport=nccl_reshard"],
        "policy.generation.refit_transport",
    ),
]

# Megatron-core TransformerConfig.__post_init__ on the published SWE nightly (Megatron, MoE).
STARTUP_MUTATIONS += [
    (
        "megatron-recompute-modules",
        SWE_NIGHTLY,
        [
            "++policy.megatron_cfg.recompute_granularity=selective",
            "++policy.megatron_cfg.recompute_modules=[core_attn,attn]",
        ],
        "policy.megatron_cfg.recompute_modules",
    ),
    (
        "megatron-offload-modules",
        SWE_NIGHTLY,
        [
            "++policy.megatron_cfg.fine_grained_activation_offloading=true",
            "++policy.megatron_cfg.offload_modules=[attn_proj]",
        ],
        "policy.megatron_cfg.offload_modules",
    ),
    (
        "megatron-moe-dispatcher",
        SWE_NIGHTLY,
        ["policy.megatron_cfg.moe_enable_deepep=true"],
        "policy.megatron_cfg.moe_token_dispatcher_type",
    ),
    (
        "megatron-pipeline-stage-layers",
        SWE_NIGHTLY,
        ["policy.megatron_cfg.num_layers_in_first_pipeline_stage=0"],
        "policy.megatron_cfg.num_layers_in_first_pipeline_stage",
    ),
    (
        "megatron-fp8-mode",
        SWE_NIGHTLY,
        [
            "policy.megatron_cfg.fp8_cfg.enabled=true",
            "policy.megatron_cfg.fp8_cfg.fp8_recipe=custom",
        ],
        "policy.megatron_cfg.fp8_cfg.fp8_recipe",
    ),
    (
        "megatron-moe-router",
        SWE_NIGHTLY,
        [
            "++policy.megatron_cfg.moe_router_group_topk=4",
            "++policy.megatron_cfg.moe_router_num_groups=2",
        ],
        "policy.megatron_cfg.moe_router_group_topk",
    ),
    (
        "megatron-cuda-graph",
        SWE_NIGHTLY,
        ["++policy.megatron_cfg.cuda_graph_impl=local"],
        "policy.megatron_cfg.cuda_graph_impl",
    ),
]


def _startup_codes(rel: str, overrides: list[str]) -> dict[str, set[str]]:
    from rlgate.checks.registry import load_recipe
    from rlgate.checks.startup import AREAS, check_area

    recipe = load_recipe(Path(str(NEMO_RL)) / rel, overrides, strict=False)
    found: dict[str, set[str]] = {}
    for area in AREAS:
        for f in check_area(area)(recipe):
            found.setdefault(f.code, set()).add(f.key)
    return found


@needs_nemo_rl
@pytest.mark.parametrize(
    ("code", "rel", "overrides", "key"),
    STARTUP_MUTATIONS,
    ids=[f"{m[0]}:{m[3].rpartition('.')[2]}" for m in STARTUP_MUTATIONS],
)
def test_startup_rule_rejects_a_broken_published_config(code, rel, overrides, key):
    assert code not in _startup_codes(rel, [])  # the published config itself is clean
    assert key in _startup_codes(rel, overrides).get(code, set())
