"""rlgate.checks.startup: NeMo RL's start-up asserts as rules, each tied to the inventory.

Two kinds of test:

* the rule table against ``src/rlgate/data/nemo_rl_asserts.json`` (tools/assert_inventory.py's
  classified inventory of NeMo RL 7ea279a, Megatron-core, Megatron Bridge and vLLM): every
  source a rule cites is one inventoried site, every config-decidable site that names a rule
  is cited by it;
* each rule on rlgate's own target recipe, broken by one Hydra override the way NeMo RL would
  refuse it: the rule reports the key and the value and cites its source; the unbroken recipe
  raises none of these findings (NeMo RL's published configs: tests/functional/
  test_nemo_rl_configs.py).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import math
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.checks import recipe_rules, startup
from rlgate.checks.recipe import CONFIG_CHECKS
from rlgate.checks.registry import load_recipe
from rlgate.checks.startup import AREAS, Config, Source, check_area, rules
from rlgate.core.resources import RECIPES
from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import Recipe, recipe_files
from rlgate.recipe.schema import load_schema

CLASSES = ("config", "model", "runtime", "not-on-path")
TARGET = RECIPES / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
PINS = {
    "NVIDIA-NeMo/RL": "7ea279abfbeb698b092856d0dab61e7cf39bc909",
    "NVIDIA/Megatron-LM": "14346b65a2d0790e451919858f7771078105c5f0",
    "NVIDIA-NeMo/Megatron-Bridge": "8c46dc4259080c510b7455f43e836fdff222c5d3",
}


def inventory() -> dict[str, Any]:
    path = resources.files("rlgate") / "data" / "nemo_rl_asserts.json"
    return json.loads(path.read_text(encoding="utf-8"))


def cited_sources() -> list[tuple[str, Source]]:
    """(rule code, source) for the registry's rules and recipe_rules' older ones."""
    out = [(r.code, s) for r in [*rules(), *startup.model_rules()] for s in r.sources]
    return out + [(code, s) for code, srcs in recipe_rules.SOURCES.items() for s in srcs]


def _text(site: dict[str, Any]) -> str:
    return " | ".join((site["test"], site["when"], site["message"]))


def citation_problems(sources: list[tuple[str, Source]], sites: list[dict[str, Any]]) -> list[str]:
    """What is wrong between the rules' citations and the classified sites (none: consistent)."""
    problems = []
    cites: dict[str, set[str]] = {}
    for code, src in sources:
        hits = [
            s
            for s in sites
            if (s["repo"], s["file"], s["function"]) == (src.repo, src.file, src.function)
            and src.cites in _text(s)
        ]
        if len(hits) != 1:
            problems.append(f"{code}: {src.where} {src.cites!r} matches {len(hits)} sites")
            continue
        site = hits[0]
        cites.setdefault(code, set()).add(site["id"])
        says = {"assert": "asserts", "raise": f"raises {site['test']}"}.get(site["kind"])
        if says and not (src.says + " ").startswith(says + " "):
            problems.append(f"{code}: {src.where} says {src.says!r}, the site {says!r}")
        if site["class"] not in ("config", "model") or code not in site["rules"]:
            problems.append(f"{code}: {src.where} site {site['id']} does not name the rule")
    schema = load_schema()
    for site in sites:
        for code in site["rules"]:
            if code.startswith("keys:"):
                info = schema.keys.get(code.removeprefix("keys:"), {})
                if info.get("type", "any") == "any" and "enum" not in info:
                    problems.append(f"{site['id']}: the key schema does not type {code}")
            elif site["id"] not in cites.get(code, set()):
                problems.append(f"{site['id']} names {code}, which does not cite it")
    return problems


class TestInventory:
    def test_every_rule_cites_one_inventoried_site_that_names_it(self):
        assert citation_problems(cited_sources(), inventory()["sites"]) == []

    def test_a_rule_citing_a_site_the_inventory_lacks_fails(self):
        gone = Source("nemo_rl/algorithms/grpo.py", "setup", "no such message anywhere")
        problems = citation_problems([*cited_sources(), ("made-up", gone)], inventory()["sites"])
        assert problems == [
            "made-up: nemo_rl/algorithms/grpo.py::setup 'no such message anywhere' matches 0 sites"
        ]

    def test_a_site_naming_a_rule_that_does_not_cite_it_fails(self):
        sites = inventory()["sites"]
        runtime = next(s for s in sites if s["class"] == "runtime")
        sites = [dict(s, rules=["backend-both"]) if s is runtime else s for s in sites]
        problems = citation_problems(cited_sources(), sites)
        assert problems == [f"{runtime['id']} names backend-both, which does not cite it"]

    def test_every_site_is_classified_and_says_why_unless_a_rule_decides_it(self):
        sites = inventory()["sites"]
        assert {s["class"] for s in sites} <= set(CLASSES)
        unexplained = [s["id"] for s in sites if not s["rules"] and not s["why"]]
        assert unexplained == []

    def test_inventory_is_of_the_pinned_commits_and_the_installed_vllm(self):
        from importlib.metadata import version

        sources = inventory()["sources"]
        assert {repo: sources[repo]["ref"] for repo in PINS} == PINS
        assert sources["vllm"]["ref"] == version("vllm")

    def test_rule_codes_are_unique_across_both_rule_modules(self):
        registry = {r.code for r in [*rules(), *startup.model_rules()]}
        assert len(registry) == len(rules()) + len(startup.model_rules())
        assert not registry & set(recipe_rules.SOURCES)


OPD_ON = (
    "{enabled:true,teacher_model_by_agent_name:{t:Qwen/Qwen3-1.7B},"
    "non_colocated_teachers:{enabled:true}}"
)
TEACHER = "on_policy_distillation.non_colocated_teachers.default_teacher_cfg"

# CUDA-graph mutations: ``++`` keys of policy.megatron_cfg (TARGET sets activation_checkpointing).
M = "++policy.megatron_cfg"


def _selective(modules: str, *more: str) -> list[str]:
    """Selective recompute of ``modules``, and ``more`` megatron_cfg overrides."""
    return [f"{M}.recompute_granularity=selective", f"{M}.recompute_modules={modules}"] + [
        f"{M}.{m}" for m in more
    ]


def _offload(modules: str, *more: str) -> list[str]:
    """Fine-grained activation offloading of ``modules``, and ``more`` megatron_cfg overrides."""
    return [
        f"{M}.fine_grained_activation_offloading=true",
        f"{M}.offload_modules={modules}",
        *(f"{M}.{m}" for m in more),
    ]


# code -> (overrides on TARGET, key, severity, fragment of the message)
MUTATIONS: dict[str, list[tuple[list[str], str, str]]] = {
    # training
    "backend-both": [(["policy.dtensor_cfg.enabled=true"], "policy.dtensor_cfg.enabled", "both")],
    "backend-none": [
        (["policy.megatron_cfg.enabled=false"], "policy.megatron_cfg.enabled", "neither")
    ],
    "parallel-world": [
        (
            ["policy.megatron_cfg.tensor_model_parallel_size=3"],
            "policy.megatron_cfg.tensor_model_parallel_size",
            "PP 1 x CP 2 x TP 3 = 6 against a training world of 16 GPUs: DP = 16/6",
        ),
        (
            ["policy.megatron_cfg.context_parallel_size=16"],
            "policy.megatron_cfg.tensor_model_parallel_size",
            "= 32 against a training world of 16 GPUs (DP would be below 1)",
        ),
    ],
    "megatron-expert-world": [
        (
            ["policy.megatron_cfg.expert_model_parallel_size=32"],
            "policy.megatron_cfg.expert_model_parallel_size",
            "expert TP 1 x EP 32 x PP 1 = 32 does not divide the training world of 16",
        )
    ],
    "dynamic-batching-pp": [
        (
            [
                "policy.dynamic_batching.enabled=true",
                "policy.sequence_packing.enabled=false",
                "policy.megatron_cfg.pipeline_model_parallel_size=2",
            ],
            "policy.dynamic_batching.enabled",
            "pipeline_model_parallel_size=2",
        )
    ],
    "dynamic-batching-packing": [
        (["policy.dynamic_batching.enabled=true"], "policy.dynamic_batching.enabled", "both")
    ],
    "dynamic-batching-mb-tokens": [
        (
            [
                "policy.dynamic_batching.enabled=true",
                "policy.sequence_packing.enabled=false",
                "policy.dynamic_batching.train_mb_tokens=1024",
            ],
            "policy.dynamic_batching.train_mb_tokens",
            "train_mb_tokens 1024 < max_total_sequence_length",
        )
    ],
    "megatron-cp-packing": [
        (["policy.sequence_packing.enabled=false"], "policy.sequence_packing.enabled", "=2")
    ],
    "megatron-cp-fused-logprobs": [
        (
            ["++policy.megatron_cfg.use_fused_linear_logprobs=true"],
            "policy.megatron_cfg.use_fused_linear_logprobs",
            "context_parallel_size=2",
        )
    ],
    "fused-logprobs-packing": [
        (
            ["++policy.megatron_cfg.use_fused_linear_logprobs=true"],
            "policy.megatron_cfg.use_fused_linear_logprobs",
            "sequence_packing",
        )
    ],
    "fused-logprobs-filtering": [
        (
            ["++policy.megatron_cfg.use_fused_linear_logprobs=true", "policy.generation.top_p=0.9"],
            "policy.megatron_cfg.use_fused_linear_logprobs",
            "top_p=0.9",
        )
    ],
    "fused-logprobs-overlap-param-gather": [
        (
            [
                "++policy.megatron_cfg.use_fused_linear_logprobs=true",
                "policy.megatron_cfg.distributed_data_parallel_config.overlap_param_gather=true",
            ],
            "policy.megatron_cfg.distributed_data_parallel_config.overlap_param_gather",
            "overlap_param_gather",
        )
    ],
    "logprob-chunk-defer-fp32": [
        (
            ["policy.megatron_cfg.defer_fp32_logits=false"],
            "policy.megatron_cfg.defer_fp32_logits",
            "logprob_chunk_size=2048",
        )
    ],
    "optimizer-cpu-offload": [
        (
            [
                "policy.megatron_cfg.optimizer.optimizer_cpu_offload=true",
                "policy.megatron_cfg.optimizer.optimizer_offload_fraction=0",
            ],
            "policy.megatron_cfg.optimizer.optimizer_offload_fraction",
            "optimizer_offload_fraction=0",
        )
    ],
    "megatron-moe-tp-without-sp": [
        (
            ["policy.megatron_cfg.sequence_parallel=false"],
            "policy.megatron_cfg.sequence_parallel",
            "expert_model_parallel_size=16",
        )
    ],
    "megatron-inference-optimized-sp": [
        (
            [
                "++policy.megatron_cfg.transformer_impl=inference_optimized",
                "policy.megatron_cfg.sequence_parallel=false",
            ],
            "policy.megatron_cfg.sequence_parallel",
            "inference_optimized with TP 2",
        )
    ],
    "megatron-reward-model": [
        (["++policy.reward_model_cfg.enabled=true"], "policy.reward_model_cfg.enabled", "")
    ],
    "megatron-recompute-granularity": [
        (
            ["++policy.megatron_cfg.recompute_granularity=layer"],
            "policy.megatron_cfg.recompute_granularity",
            "'layer'",
        )
    ],
    "megatron-attention-backend": [
        (
            ["++policy.megatron_cfg.attention_backend=flash_attn"],
            "policy.megatron_cfg.attention_backend",
            "'flash_attn'",
        )
    ],
    "megatron-optimizer-precision": [
        (
            [
                "++policy.megatron_cfg.optimizer.use_precision_aware_optimizer=true",
                "policy.megatron_cfg.optimizer.bf16=false",
            ],
            "policy.megatron_cfg.optimizer.bf16",
            "precision bfloat16",
        )
    ],
    "megatron-yarn-rope-scaling": [
        (
            ["++policy.hf_config_overrides.rope_scaling={rope_type:yarn,factor:4.0}"],
            "policy.hf_config_overrides.rope_scaling",
            "without rope_theta",
        )
    ],
    "policy-draft": [(["++policy.draft.enabled=true"], "policy.draft.enabled", "packing")],
    "megatron-peft": [
        (["++policy.megatron_cfg.peft.enabled=true"], "policy.megatron_cfg.peft.dim", "dim")
    ],
    "megatron-fp8-cfg": [
        (
            [
                "policy.megatron_cfg.fp8_cfg.enabled=true",
                "~policy.megatron_cfg.fp8_cfg.fp8_recipe",
            ],
            "policy.megatron_cfg.fp8_cfg",
            "fp8_cfg enabled without fp8_recipe",
        )
    ],
    "megatron-activation-offload": [
        (
            ["++policy.megatron_cfg.fine_grained_activation_offloading=true"],
            "policy.megatron_cfg.offload_modules",
            "offload_modules=None",
        )
    ],
    # sharding (DP = 16 / (TP 2 x CP 2) = 4)
    "batch-data-parallel": [
        (
            ["policy.train_global_batch_size=62", "loss_fn.force_on_policy_ratio=false"],
            "policy.train_global_batch_size",
            "train_global_batch_size 62 is not a multiple of the data-parallel size 4",
        ),
        (
            [
                "grpo.num_prompts_per_step=9",
                "grpo.num_generations_per_prompt=7",
                "policy.train_global_batch_size=64",
                "loss_fn.force_on_policy_ratio=false",
            ],
            "grpo.num_prompts_per_step",
            "= 63 is not a multiple of the data-parallel size 4",
        ),
    ],
    "batch-micro": [
        (
            [
                "policy.sequence_packing.enabled=false",
                "policy.megatron_cfg.context_parallel_size=1",
                "policy.train_micro_batch_size=3",
            ],
            "policy.train_micro_batch_size",
            "64 / 8 = 8 samples, not a multiple of train_micro_batch_size 3",
        )
    ],
    # loss
    "loss-gspo-token-level": [
        (["loss_fn.sequence_level_importance_ratios=true"], "loss_fn.token_level_loss", "")
    ],
    "loss-cispo": [
        (["++loss_fn.use_cispo=true"], "loss_fn.force_on_policy_ratio", "force_on_policy_ratio")
    ],
    "loss-tis-without-is": [
        (
            ["loss_fn.use_importance_sampling_correction=false"],
            "loss_fn.use_importance_sampling_correction",
            "'tis'",
        )
    ],
    "loss-tis-settings": [
        (
            ["loss_fn.truncated_importance_sampling_type=icepop"],
            "loss_fn.truncated_importance_sampling_ratio_min",
            "'icepop' without",
        ),
        (
            ["loss_fn.truncated_importance_sampling_type=null"],
            "loss_fn.truncated_importance_sampling_type",
            "truncated_importance_sampling_ratio=5.0 without a",
        ),
    ],
    "loss-dual-clip": [(["loss_fn.ratio_clip_c=1.0"], "loss_fn.ratio_clip_c", "ratio_clip_c=1")],
    "loss-skip-reference-with-kl": [
        (
            ["loss_fn.reference_policy_kl_penalty=0.01"],
            "loss_fn.reference_policy_kl_penalty",
            "reference_policy_kl_penalty=0.01",
        )
    ],
    "loss-kl-in-reward-on-policy": [
        (
            ["loss_fn.use_kl_in_reward=true", "loss_fn.reference_policy_kl_penalty=0.01"],
            "loss_fn.use_kl_in_reward",
            "without grpo.seq_logprob_error_threshold",
        )
    ],
    "loss-kl-type": [
        (["loss_fn.reference_policy_kl_type=k4"], "loss_fn.reference_policy_kl_type", "'k4'")
    ],
    # generation (vLLM TP 4 on 2 nodes x 8 GPUs)
    "vllm-world": [
        (
            ["policy.generation.vllm_cfg.tensor_parallel_size=3"],
            "policy.generation.vllm_cfg.tensor_parallel_size",
            "TP 3 x PP 1 = 3 does not divide the 16 generation GPUs",
        )
    ],
    "vllm-pp-async-engine": [
        (
            [
                "env.should_use_nemo_gym=false",
                "grpo.async_grpo.enabled=false",
                "policy.generation.vllm_cfg.async_engine=false",
                "policy.generation.vllm_cfg.pipeline_parallel_size=2",
            ],
            "policy.generation.vllm_cfg.async_engine",
            "pipeline_parallel_size=2",
        )
    ],
    "vllm-expert-parallel": [
        (
            ["policy.generation.vllm_cfg.expert_parallel_size=6"],
            "policy.generation.vllm_cfg.expert_parallel_size",
            "6 is not a multiple of TP 4",
        ),
        (
            ["policy.generation.vllm_cfg.expert_parallel_size=8"],
            "policy.generation.vllm_cfg.expert_parallel_size",
            "forced on by the NeMo Gym entry point",
        ),
    ],
    "vllm-sampling": [
        (["policy.generation.top_p=0.0"], "policy.generation.top_p", "top_p=0"),
        (["policy.generation.temperature=2.5"], "policy.generation.temperature", "=2.5"),
        (["policy.generation.top_k=0"], "policy.generation.top_k", "top_k=0"),
    ],
    "vllm-gpu-memory-utilization": [
        (
            ["policy.generation.vllm_cfg.gpu_memory_utilization=1.2"],
            "policy.generation.vllm_cfg.gpu_memory_utilization",
            "=1.2",
        )
    ],
    "vllm-kwargs-duplicate": [
        (
            ["++policy.generation.vllm_kwargs.max_model_len=32768"],
            "policy.generation.vllm_kwargs.max_model_len",
            "set from policy.generation.vllm_cfg.max_model_len",
        )
    ],
    "vllm-refit-transport": [
        (
            ["++policy.generation.refit_transport=nccl"],
            "policy.generation.refit_transport",
            "refit_transport 'nccl'",
        )
    ],
    "nixl-expert-shard-eplb": [
        (
            [
                "++policy.generation.refit_transport=nixl",
                "++policy.generation.refit_cfg.nixl.shard_expert_weights=true",
                "++policy.generation.vllm_kwargs.enable_eplb=true",
                "policy.generation.vllm_cfg.expert_parallel_size=4",
            ],
            "policy.generation.vllm_kwargs.enable_eplb",
            "enable_eplb with NIXL shard_expert_weights and vLLM EP 4",
        )
    ],
    "refit-transport-backend": [
        (
            ["policy.generation.backend=megatron", "++policy.generation.refit_transport=nixl"],
            "policy.generation.refit_transport",
            "backend 'megatron'",
        )
    ],
    "async-engine-setting": [
        (
            ["policy.generation.backend=trtllm"],
            "policy.generation.trtllm_cfg.async_engine",
            "trtllm",
        )
    ],
    "gym-http-server": [
        (
            ["policy.generation.backend=megatron"],
            "policy.generation.mcore_generation_config.expose_http_server",
            "backend 'megatron'",
        )
    ],
    "generation-config": [(["policy.generation=null"], "policy.generation", "null")],
    "vlm-skip-tokenizer-init": [
        (
            ["++policy.is_vlm=true", "policy.generation.vllm_cfg.skip_tokenizer_init=true"],
            "policy.generation.vllm_cfg.skip_tokenizer_init",
            "is_vlm",
        )
    ],
    "vllm-metrics-logger": [
        (
            ["policy.generation.vllm_cfg.vllm_metrics_logger_interval=0"],
            "policy.generation.vllm_cfg.vllm_metrics_logger_interval",
            "vllm_metrics_logger_interval=0",
        ),
        (
            ["~policy.generation.vllm_cfg.vllm_metrics_logger_interval"],
            "policy.generation.vllm_cfg.vllm_metrics_logger_interval",
            "without vllm_metrics_logger_interval",
        ),
    ],
    "data-train-split": [(["~data.train"], "data.train", "old format")],
    "sglang-non-colocated": [
        (["policy.generation.backend=sglang"], "policy.generation.colocated.enabled", "sglang")
    ],
    "fleet-health-backend": [
        (
            [
                "++async_rl.generation_fleet_health.enabled=true",
                "policy.generation.backend=megatron",
            ],
            "async_rl.generation_fleet_health.enabled",
            "generation_fleet_health enabled with backend 'megatron'",
        )
    ],
    "vllm-required-keys": [
        (["~policy.generation.max_new_tokens"], "policy.generation.max_new_tokens", "is missing"),
        (["~policy.generation.val_top_p"], "policy.generation.val_top_p", "is missing"),
    ],
    "nccl-reshard-worker": [
        (
            [
                "policy.megatron_cfg.enabled=false",
                "++policy.dtensor_cfg.enabled=true",
                "++policy.generation.refit_transport=nccl_reshard",
            ],
            "policy.generation.refit_transport",
            "refit_transport nccl_reshard with the DTensor training backend",
        )
    ],
    # grpo
    "opd-teachers-placement": [
        (
            [
                f"++on_policy_distillation={OPD_ON}",
                "env.should_use_nemo_gym=false",
                "policy.generation.vllm_cfg.async_engine=false",
            ],
            "on_policy_distillation.non_colocated_teachers.enabled",
            "non-colocated OPD teachers with backend 'vllm' without async rollouts",
        ),
        (
            [f"++on_policy_distillation={OPD_ON}", f"++{TEACHER}.gpus_per_node=16"],
            f"{TEACHER}.gpus_per_node",
            "OPD teacher 't' asks gpus_per_node=16 > cluster.gpus_per_node=8",
        ),
        (
            [f"++on_policy_distillation={OPD_ON}", f"++{TEACHER}.num_nodes=4"],
            f"{TEACHER}.num_nodes",
            "OPD teachers take 4 of cluster.num_nodes=4: 0 left for the policy",
        ),
    ],
    "cluster-segment-size": [
        (
            ["++cluster.segment_size=3"],
            "cluster.segment_size",
            "segment_size 3 does not divide the 2 training nodes",
        )
    ],
    "grpo-batch-multiplier": [(["++grpo.batch_multiplier=2"], "grpo.batch_multiplier", "=2")],
    "grpo-early-stop": [
        (
            ["++grpo.stop_at_validation_metric=accuracy"],
            "grpo.stop_at_validation_threshold",
            "'accuracy' without",
        ),
        (
            [
                "++grpo.stop_at_validation_metric=pass_k",
                "++grpo.stop_at_validation_threshold=0.5",
                "grpo.val_num_generations_per_prompt=1",
            ],
            "grpo.val_num_generations_per_prompt",
            "'pass_k' with val_num_generations_per_prompt=1",
        ),
    ],
    "grpo-message-advantage-without-gym": [
        (
            ["env.should_use_nemo_gym=false", "++grpo.invalid_tool_call_advantage=-1.0"],
            "grpo.invalid_tool_call_advantage",
            "=-1.0",
        )
    ],
    "grpo-reward-penalties-without-gym": [
        (
            [
                "env.should_use_nemo_gym=false",
                "++reward_penalties.penalize_empty_final_answer=true",
            ],
            "reward_penalties.penalize_empty_final_answer",
            "without env.should_use_nemo_gym",
        )
    ],
    "grpo-unwanted-token-ids": [
        (
            ["++reward_penalties.penalize_unwanted_tokens=true"],
            "reward_penalties.token_ids.unwanted",
            "",
        )
    ],
    "async-trajectory-age": [
        (
            ["grpo.async_grpo.max_trajectory_age_steps=0"],
            "grpo.async_grpo.max_trajectory_age_steps",
            "= 0 prompts",
        )
    ],
    "vllm-fp8-importance-sampling": [
        (
            [
                "policy.generation.vllm_cfg.precision=fp8",
                "loss_fn.use_importance_sampling_correction=false",
            ],
            "loss_fn.use_importance_sampling_correction",
            "fp8",
        )
    ],
    "vllm-fp8-kv-cache": [
        (
            ["policy.generation.vllm_cfg.kv_cache_dtype=fp8"],
            "policy.generation.vllm_cfg.kv_cache_dtype",
            "with precision 'bfloat16'",
        )
    ],
    "grpo-multimodal-dedup": [
        (
            ["++grpo.deduplicate_multimodal_data=true", "policy.generation.backend=megatron"],
            "grpo.deduplicate_multimodal_data",
            "backend 'megatron'",
        )
    ],
    "grpo-multiple-dataloader": [
        (
            ["data.use_multiple_dataloader=true", "++data.num_prompts_per_dataloader=3"],
            "data.num_prompts_per_dataloader",
            "num_prompts_per_step 8 is not a multiple of num_prompts_per_dataloader 3",
        )
    ],
    "grpo-dynamic-sampling-batches": [
        (
            ["grpo.use_dynamic_sampling=true", "++grpo.dynamic_sampling_max_gen_batches=0"],
            "grpo.dynamic_sampling_max_gen_batches",
            "=0",
        )
    ],
    "grpo-advantage-estimator": [
        (["grpo.adv_estimator.name=ppo"], "grpo.adv_estimator.name", "'ppo'")
    ],
    # checkpointing and logging
    "checkpoint-metric-name": [
        (["checkpointing.metric_name=val_reward"], "checkpointing.metric_name", "'val_reward'")
    ],
    "checkpoint-model-save-format": [
        (
            ["policy.dtensor_cfg._v2=false"],
            "checkpointing.model_save_format",
            "'safetensors' without policy.dtensor_cfg._v2",
        )
    ],
    "logger-section": [
        (["~logger.tensorboard"], "logger.tensorboard", "tensorboard_enabled"),
        (["~logger.gpu_monitoring.flush_interval"], "logger.gpu_monitoring", "flush_interval"),
    ],
}
# DTensor V1 (dtensor_cfg._v2: false) on the target's cluster.
DTENSOR_V1 = [
    "policy.megatron_cfg.enabled=false",
    "policy.dtensor_cfg.enabled=true",
    "policy.dtensor_cfg._v2=false",
]
MUTATIONS |= {
    "dtensor-cp-packing": [
        (
            [*DTENSOR_V1, "policy.dtensor_cfg.context_parallel_size=2"],
            "policy.sequence_packing.enabled",
            "context_parallel_size=2 with sequence packing",
        )
    ],
    "dtensor-cp-sp": [
        (
            [
                *DTENSOR_V1,
                "policy.sequence_packing.enabled=false",
                "policy.dtensor_cfg.context_parallel_size=2",
                "policy.dtensor_cfg.tensor_parallel_size=2",
                "policy.dtensor_cfg.sequence_parallel=true",
            ],
            "policy.dtensor_cfg.sequence_parallel",
            "tensor_parallel_size=2 and sequence_parallel",
        )
    ],
    "dtensor-v1-lora": [
        (
            [*DTENSOR_V1, "++policy.dtensor_cfg.lora_cfg.enabled=true"],
            "policy.dtensor_cfg.lora_cfg.enabled",
            "_v2: false",
        )
    ],
    "dtensor-v1-dp-replicate": [
        (
            [*DTENSOR_V1, "++policy.dtensor_cfg.dp_replicate_size=2"],
            "policy.dtensor_cfg.dp_replicate_size",
            "dp_replicate_size=2",
        )
    ],
    "policy-precision": [
        ([*DTENSOR_V1, "policy.precision=bf16"], "policy.precision", "precision 'bf16'")
    ],
}
# Megatron model fields, colocated Megatron generation, refit and video set-up, DTensor V1.
MCORE_COLOCATED = ["policy.generation.backend=megatron", "policy.generation.colocated.enabled=true"]
OVERRIDES = "policy.megatron_cfg.model_overrides"
VIDEO = "++policy.generation.vllm_cfg.video={num_frames:8}"
MUTATIONS |= {
    "megatron-vpp-pp1": [
        (
            [f"++{OVERRIDES}.virtual_pipeline_model_parallel_size=2"],
            f"{OVERRIDES}.virtual_pipeline_model_parallel_size",
            "virtual_pipeline_model_parallel_size=2 with pipeline_model_parallel_size=1",
        )
    ],
    "megatron-colocated-reshard": [
        (
            [*MCORE_COLOCATED, "++policy.megatron_cfg.peft.enabled=true"],
            "policy.megatron_cfg.peft.enabled",
            "(reshard) and PEFT",
        ),
        (
            [*MCORE_COLOCATED, "++policy.draft.enabled=true"],
            "policy.draft.enabled",
            "(reshard) and a draft model",
        ),
        (
            [
                *MCORE_COLOCATED,
                "policy.megatron_cfg.pipeline_model_parallel_size=2",
                f"++{OVERRIDES}.virtual_pipeline_model_parallel_size=2",
            ],
            f"{OVERRIDES}.virtual_pipeline_model_parallel_size",
            "(reshard) and virtual_pipeline_model_parallel_size=2",
        ),
    ],
    "megatron-model-overrides-field": [
        (
            [f"++{OVERRIDES}.num_layer=40"],  # Megatron's field is num_layers
            f"{OVERRIDES}.num_layer",
            "model_overrides.num_layer is a field of no Megatron Bridge model provider",
        )
    ],
    "megatron-model-overrides-conflict": [
        (
            [f"++{OVERRIDES}.sequence_parallel=false"],
            f"{OVERRIDES}.sequence_parallel",
            "duplicates the first-class policy.megatron_cfg.sequence_parallel",
        )
    ],
    "megatron-pretrained-format": [
        (
            ["++policy.pretrained_checkpoint={format:nemo,path:/ckpt}"],
            "policy.pretrained_checkpoint.format",
            "format 'nemo'",
        )
    ],
    "dtensor-v1-vlm": [
        (
            [*DTENSOR_V1, "++policy.is_vlm=true"],
            "policy.sequence_packing.enabled",
            "policy.is_vlm with sequence packing",
        ),
        (
            [
                *DTENSOR_V1,
                "++policy.is_vlm=true",
                "policy.sequence_packing.enabled=false",
                "policy.dtensor_cfg.context_parallel_size=2",
            ],
            "policy.dtensor_cfg.context_parallel_size",
            "policy.is_vlm with context_parallel_size=2",
        ),
    ],
    "dtensor-v1-reward-model": [
        (
            [
                *DTENSOR_V1,
                "++policy.reward_model_cfg={enabled:true,reward_model_type:bradley_terry}",
            ],
            "policy.sequence_packing.enabled",
            "reward_model_cfg with sequence packing",
        ),
        (
            [
                *DTENSOR_V1,
                "policy.sequence_packing.enabled=false",
                "++policy.reward_model_cfg={enabled:true,reward_model_type:pairwise}",
            ],
            "policy.reward_model_cfg.reward_model_type",
            "reward_model_type 'pairwise'",
        ),
    ],
    "dtensor-v1-scheduler": [
        (
            [
                *DTENSOR_V1,
                "++policy.scheduler=[{name:torch.optim.lr_scheduler.LinearLR,kwargs:{}},{x:1}]",
            ],
            "policy.scheduler.1",
            "policy.scheduler[1] has neither name nor milestones",
        )
    ],
    "vllm-real-quant-export": [
        (
            ["++policy.generation.real_quant=true"],
            "policy.generation.real_quant_export_cpu_offload",
            "real_quant_export_cpu_offload=None",
        ),
        (
            [
                "++policy.generation.real_quant=true",
                "++policy.generation.real_quant_export_cpu_offload=false",
            ],
            "policy.generation.real_quant_export_cpu_offload",
            "=false with not colocated",
        ),
    ],
    "nixl-worker-cls": [
        (
            [
                "++policy.generation.refit_transport=nixl",
                "++policy.generation.vllm_kwargs.worker_cls=my.Worker",
            ],
            "policy.generation.vllm_kwargs.worker_cls",
            "worker_cls='my.Worker'",
        )
    ],
    "vllm-video-kwargs": [
        (
            [VIDEO],
            "policy.generation.vllm_kwargs.limit_mm_per_prompt",
            "limit_mm_per_prompt=None",
        ),
        (
            [VIDEO, "++policy.generation.vllm_kwargs.limit_mm_per_prompt={video:3}"],
            "policy.generation.vllm_kwargs.limit_mm_per_prompt.video",
            "limit_mm_per_prompt.video=3",
        ),
        (
            [
                VIDEO,
                "++policy.generation.vllm_kwargs.limit_mm_per_prompt={video:{count:1}}",
                "++policy.generation.vllm_kwargs.media_io_kwargs=3",
            ],
            "policy.generation.vllm_kwargs.media_io_kwargs",
            "media_io_kwargs=3",
        ),
    ],
    "nccl-reshard-pipeline-layout": [
        (
            [
                "++policy.generation.refit_transport=nccl_reshard",
                "policy.megatron_cfg.pipeline_model_parallel_size=2",
                f"++{OVERRIDES}.account_for_loss_in_pipeline_split=true",
            ],
            f"{OVERRIDES}.account_for_loss_in_pipeline_split",
            "nccl_reshard with PP 2",
        )
    ],
    "grpo-thinking-tags": [
        (
            [
                "++reward_penalties.penalize_malformed_think_tag=true",
                "++env.nemo_gym.thinking_tags=['<think>']",
            ],
            "env.nemo_gym.thinking_tags",
            "thinking_tags=['<think>']",
        )
    ],
}
# Warnings: NeMo RL accepts these unless the run's environment or metrics say otherwise.
# Megatron-core's TransformerConfig.__post_init__ on what setup_model_config copies.
SELECTIVE = [
    "policy.megatron_cfg.activation_checkpointing=true",
    "++policy.megatron_cfg.recompute_granularity=selective",
]
OFFLOADING = ["++policy.megatron_cfg.fine_grained_activation_offloading=true"]
MUTATIONS |= {
    "megatron-recompute-modules": [
        (
            [*SELECTIVE, "++policy.megatron_cfg.recompute_modules=[core_attn,attention]"],
            "policy.megatron_cfg.recompute_modules",
            "recompute_modules ['attention'] are not among",
        ),
        (
            [
                *SELECTIVE,
                "++policy.megatron_cfg.recompute_modules=[moe,core_attn]",
                *OFFLOADING,
                "++policy.megatron_cfg.offload_modules=[expert_fc1,core_attn]",
            ],
            "policy.megatron_cfg.offload_modules",
            "offload_modules ['expert_fc1'] inside the MoE layer",
        ),
        (
            [
                *SELECTIVE,
                "++policy.megatron_cfg.recompute_modules=[layernorm]",
                "++policy.megatron_cfg.fp8_cfg={enabled:true,fp8:e4m3,fp8_recipe:delayed,fp8_param:false}",
            ],
            "policy.megatron_cfg.recompute_modules",
            "recompute_modules ['layernorm'] with fp8_cfg.fp8_recipe 'delayed'",
        ),
    ],
    "megatron-offload-modules": [
        (
            [*OFFLOADING, "++policy.megatron_cfg.offload_modules=[core_attn,mlp]"],
            "policy.megatron_cfg.offload_modules",
            "offload_modules ['mlp'] are not among",
        ),
        (
            [*OFFLOADING, "++policy.megatron_cfg.offload_modules=[attn_proj]"],
            "policy.megatron_cfg.offload_modules",
            "attn_proj without core_attn",
        ),
        (
            [*OFFLOADING, "++policy.megatron_cfg.offload_modules=[fused_group_mlp]"],
            "policy.megatron_cfg.offload_modules",
            "fused_group_mlp without use_transformer_engine_op_fuser",
        ),
    ],
    "megatron-moe-dispatcher": [
        (
            [
                "++policy.megatron_cfg.moe_enable_deepep=true",
                "++policy.megatron_cfg.moe_token_dispatcher_type=alltoall",
            ],
            "policy.megatron_cfg.moe_token_dispatcher_type",
            "moe_enable_deepep with moe_token_dispatcher_type 'alltoall'",
        ),
        (
            [
                "++policy.megatron_cfg.moe_token_dispatcher_type=alltoall",
                "++policy.megatron_cfg.moe_flex_dispatcher_backend=ncclep",
            ],
            "policy.megatron_cfg.moe_token_dispatcher_type",
            "moe_flex_dispatcher_backend 'ncclep' with moe_token_dispatcher_type 'alltoall'",
        ),
    ],
    "megatron-pipeline-stage-layers": [
        (
            ["++policy.megatron_cfg.num_layers_in_last_pipeline_stage=0"],
            "policy.megatron_cfg.num_layers_in_last_pipeline_stage",
            "num_layers_in_last_pipeline_stage=0",
        )
    ],
    "megatron-fp8-mode": [
        (
            [
                "++policy.megatron_cfg.fp8_cfg={enabled:true,fp8:null,fp8_recipe:blockwise,fp8_param:true}"
            ],
            "policy.megatron_cfg.fp8_cfg.fp8",
            "fp8_cfg.fp8_param with fp8_cfg.fp8=None",
        ),
        (
            [
                "++policy.megatron_cfg.fp8_cfg={enabled:true,fp8:e4m3,fp8_recipe:custom,fp8_param:false}"
            ],
            "policy.megatron_cfg.fp8_cfg.fp8_recipe",
            "fp8_cfg.fp8_recipe 'custom'",
        ),
    ],
    "megatron-moe-router": [
        (
            ["++policy.megatron_cfg.moe_router_load_balancing_type=[aux_loss,seq_aux_loss]"],
            "policy.megatron_cfg.moe_router_load_balancing_type",
            "without a moe_aux_loss_coeff list of 2",
        ),
        (
            [
                "++policy.megatron_cfg.moe_router_group_topk=4",
                "++policy.megatron_cfg.moe_router_num_groups=null",
            ],
            "policy.megatron_cfg.moe_router_num_groups",
            "moe_router_group_topk=4 with moe_router_num_groups=None",
        ),
        (
            [
                "++policy.megatron_cfg.moe_router_group_topk=4",
                "++policy.megatron_cfg.moe_router_num_groups=2",
            ],
            "policy.megatron_cfg.moe_router_group_topk",
            "moe_router_group_topk=4 above moe_router_num_groups=2",
        ),
    ],
    "megatron-cuda-graph": [
        (
            ["++policy.megatron_cfg.cuda_graph_impl=cudagraph"],
            "policy.megatron_cfg.cuda_graph_impl",
            "'cudagraph' is not one of",
        ),
        (
            [
                "++policy.megatron_cfg.cuda_graph_impl=local",
                "policy.megatron_cfg.activation_checkpointing=true",
                "++policy.megatron_cfg.recompute_granularity=full",
            ],
            "policy.megatron_cfg.cuda_graph_impl",
            "cuda_graph_impl 'local' with activation_checkpointing (full recompute)",
        ),
    ],
    "megatron-cuda-graph-modules": [
        (
            [f"{M}.cuda_graph_impl=transformer_engine", f"{M}.inference_cuda_graph_scope=block"],
            "policy.megatron_cfg.inference_cuda_graph_scope",
            "inference_cuda_graph_scope 'block' with cuda_graph_impl 'transformer_engine'",
        ),
        (
            [f"{M}.cuda_graph_impl=full_iteration", f"{M}.cuda_graph_modules=[attn]"],
            "policy.megatron_cfg.cuda_graph_modules",
            "cuda_graph_modules ['attn'] with cuda_graph_impl 'full_iteration'",
        ),
        (
            [f"{M}.cuda_graph_impl=transformer_engine", f"{M}.cuda_graph_modules=[moe,moe_router]"],
            "policy.megatron_cfg.cuda_graph_modules",
            "both moe and moe_router",
        ),
        (
            [f"{M}.cuda_graph_impl=transformer_engine", f"{M}.cuda_graph_modules=[moe_preprocess]"],
            "policy.megatron_cfg.cuda_graph_modules",
            "moe_preprocess alone",
        ),
        (
            _selective(
                "[moe]", "cuda_graph_impl=transformer_engine", "cuda_graph_modules=[moe_router]"
            ),
            "policy.megatron_cfg.recompute_modules",
            "recompute_modules 'moe' with the moe_router CUDA graph",
        ),
        (
            _selective(
                "[core_attn]",
                "cuda_graph_impl=transformer_engine",
                "cuda_graph_modules=[attn]",
                "model_overrides.attention_dropout=0.1",
            ),
            "policy.megatron_cfg.recompute_modules",
            "'core_attn' graphed with attention_dropout",
        ),
        (
            _selective(
                "[mlp]",
                "cuda_graph_impl=transformer_engine",
                "cuda_graph_modules=[mlp]",
                "model_overrides.hidden_dropout=0.1",
            ),
            "policy.megatron_cfg.recompute_modules",
            "graphed with hidden_dropout",
        ),
        (
            _selective(
                "[moe]",
                "cuda_graph_impl=full_iteration",
                "model_overrides.moe_input_jitter_eps=0.01",
            ),
            "policy.megatron_cfg.recompute_modules",
            "'moe' graphed with moe_input_jitter_eps",
        ),
        (
            _offload("[core_attn]", "cuda_graph_impl=local", "cuda_graph_modules=[attn]"),
            "policy.megatron_cfg.offload_modules",
            "offload_modules ['core_attn'] with cuda_graph_impl 'local'",
        ),
        (
            _offload("[moe_act]", "cuda_graph_impl=local"),
            "policy.megatron_cfg.cuda_graph_modules",
            "no cuda_graph_modules (whole-layer capture)",
        ),
        (
            _offload("[moe_act]", "cuda_graph_impl=local", "cuda_graph_modules=[moe]"),
            "policy.megatron_cfg.offload_modules",
            "offload_modules with the local moe CUDA graph",
        ),
        (
            _offload(
                "[core_attn]", "cuda_graph_impl=transformer_engine", "cuda_graph_modules=[moe]"
            ),
            "policy.megatron_cfg.cuda_graph_modules",
            "cuda_graph_modules 'moe' with fine_grained_activation_offloading",
        ),
        (
            _offload(
                "[core_attn]", "cuda_graph_impl=transformer_engine", "cuda_graph_warmup_steps=0"
            ),
            "policy.megatron_cfg.cuda_graph_warmup_steps",
            "cuda_graph_warmup_steps=0 with fine_grained_activation_offloading",
        ),
    ],
}

WARNINGS: dict[str, list[tuple[list[str], str, str]]] = {
    "tp-logprob-batch": [
        (
            [
                "policy.megatron_cfg.tensor_model_parallel_size=4",
                "policy.logprob_batch_size=2",
                "loss_fn.force_on_policy_ratio=false",
            ],
            "policy.logprob_batch_size",
            "NRL_IGNORE_TP_ACCURACY_CHECK=1",
        )
    ],
    "checkpoint-metric-without-validation": [
        (
            ["checkpointing.metric_name=val:accuracy", "grpo.val_period=0"],
            "checkpointing.metric_name",
            "grpo.val_period 0",
        )
    ],
}


# bridge (Megatron Bridge's ConfigContainer.validate; the target: DP 4, train_global_batch_size
# 64, max_num_steps 20, scheduler lr_decay_iters 1000000, lr_warmup_iters 0, weight decay 0.0).
S = "policy.megatron_cfg.scheduler"
MUTATIONS |= {
    "bridge-scheduler-max-steps": [([f"++{S}.max_steps=0"], f"{S}.max_steps", "max_steps 0")],
    "bridge-scheduler-weight-decay": [
        ([f"{S}.start_weight_decay=-0.1"], f"{S}.start_weight_decay", "-0.1 < 0"),
        (
            [f"{S}.start_weight_decay=0.1"],
            f"{S}.end_weight_decay",
            "end_weight_decay 0.0 < start_weight_decay 0.1",
        ),
    ],
    "bridge-scheduler-override": [
        (
            [f"++{S}.use_checkpoint_opt_param_scheduler=true"],
            f"{S}.use_checkpoint_opt_param_scheduler",
            "both true",
        )
    ],
    "bridge-scheduler-iters-samples": [
        (
            [f"++{S}.lr_warmup_samples=8"],
            f"{S}.lr_warmup_samples",
            "sample-based lr_warmup_samples beside iteration-based lr_decay_iters",
        ),
        (
            [f"{S}.lr_decay_iters=null", f"++{S}.lr_decay_samples=1000"],
            f"{S}.lr_decay_samples",
            "lr_decay_samples in iteration-based training",
        ),
        (
            [f"{S}.lr_decay_iters=null", f"++{S}.lr_warmup_samples=8"],
            f"{S}.lr_warmup_samples",
            "lr_warmup_samples in iteration-based training",
        ),
    ],
    "bridge-scheduler-warmup-fraction": [
        (
            [f"++{S}.lr_warmup_fraction=0.1", f"{S}.lr_warmup_iters=5"],
            f"{S}.lr_warmup_fraction",
            "lr_warmup_fraction with lr_warmup_iters 5",
        )
    ],
    "bridge-scheduler-decay-steps": [
        ([f"{S}.lr_decay_iters=0"], f"{S}.lr_decay_iters", "lr_decay_iters 0"),
        (
            [f"{S}.lr_decay_iters=null", "grpo.max_num_steps=0"],
            "grpo.max_num_steps",
            "max_num_steps 0 with no scheduler.lr_decay_iters",
        ),
    ],
    "bridge-global-batch-dp": [
        (
            ["policy.train_global_batch_size=66"],
            "policy.train_global_batch_size",
            "train_global_batch_size 66 is not a multiple of the data-parallel size 4",
        )
    ],
    "bridge-optimizer-bf16-fp16": [
        (
            ["policy.megatron_cfg.optimizer.fp16=true"],
            "policy.megatron_cfg.optimizer.fp16",
            "optimizer.bf16 and optimizer.fp16 both true",
        )
    ],
    "bridge-activation-offload-impl": [
        (
            _offload("[core_attn]", "transformer_impl=local"),
            "policy.megatron_cfg.transformer_impl",
            "fine_grained_activation_offloading with transformer_impl 'local'",
        )
    ],
    "bridge-cuda-graph-local": [
        (
            [f"{M}.cuda_graph_impl=local", f"{M}.cuda_graph_modules=[moe_preprocess]"],
            "policy.megatron_cfg.cuda_graph_modules",
            "cuda_graph_impl 'local' with cuda_graph_modules ['moe_preprocess']",
        ),
        (
            [f"{M}.cuda_graph_impl=local"],
            "policy.megatron_cfg.cuda_graph_impl",
            "cuda_graph_impl 'local' with inference_cuda_graph_scope None",
        ),
    ],
}
WARNINGS |= {
    "bridge-scheduler-max-steps-iters": [
        (
            [f"++{S}.max_steps=10"],
            f"{S}.max_steps",
            "scheduler.max_steps 10 < grpo.max_num_steps 20",
        )
    ],
    "bridge-activation-offload-env": [
        (
            _offload("[core_attn]"),
            "policy.megatron_cfg.env_vars",
            "without env_vars.NVTE_CPU_OFFLOAD_V1 '1'",
        )
    ],
}


def _cases(table):
    return [
        pytest.param(code, *case, id=f"{code}-{i}")
        for code, cases in table.items()
        for i, case in enumerate(cases)
    ]


def _startup_findings(recipe: Recipe) -> list[Finding]:
    return [f for area in AREAS for f in check_area(area)(recipe)]


def _check_case(code, overrides, key, fragment, severity):
    found = [f for f in _startup_findings(load_recipe(TARGET, overrides, strict=False))]
    mine = [f for f in found if f.code == code]
    assert mine, f"{code} not reported for {overrides}: {[str(f) for f in found]}"
    assert any(f.key == key and fragment in f.message for f in mine), [str(f) for f in mine]
    assert all(f.severity is severity for f in mine)
    rule = next(r for r in rules() if r.code == code)
    assert any(s.where in f.message for f in mine for s in rule.sources), mine


@pytest.mark.parametrize(("code", "overrides", "key", "fragment"), _cases(MUTATIONS))
def test_mutation_is_an_error_naming_key_value_and_source(code, overrides, key, fragment):
    _check_case(code, overrides, key, fragment, Severity.ERROR)


@pytest.mark.parametrize(("code", "overrides", "key", "fragment"), _cases(WARNINGS))
def test_accepted_but_risky_mutation_is_a_warning(code, overrides, key, fragment):
    _check_case(code, overrides, key, fragment, Severity.WARNING)


# Each a near miss of a megatron-cuda-graph-modules mutation that Megatron-core's
# __post_init__ accepts and Megatron Bridge's validate_cuda_graph_configuration too.
CUDA_GRAPH_ACCEPTED = [
    [f"{M}.cuda_graph_impl=local", f"{M}.inference_cuda_graph_scope=block"],
    [f"{M}.cuda_graph_impl=full_iteration", f"{M}.cuda_graph_modules=[]"],
    _selective(
        "[core_attn]",
        "cuda_graph_impl=transformer_engine",
        "cuda_graph_modules=[mlp]",
        "model_overrides.attention_dropout=0.1",
    ),
    _selective("[core_attn]", "cuda_graph_impl=full_iteration"),  # no dropout override
    _offload("[core_attn]", "cuda_graph_impl=transformer_engine", "cuda_graph_warmup_steps=1"),
    _offload("[core_attn]", "cuda_graph_impl=none", "cuda_graph_modules=[moe]"),
]
# Near misses Megatron-core accepts but Bridge refuses first: `local` with cuda_graph_modules
# (bridge-cuda-graph-local).
CUDA_GRAPH_BRIDGE_REFUSED = [
    [f"{M}.cuda_graph_impl=local", f"{M}.cuda_graph_modules=[moe_preprocess]"],  # adds moe_router
    _selective("[moe]", "cuda_graph_impl=local", "cuda_graph_modules=[moe_router]"),
    _offload("[moe_act]", "cuda_graph_impl=local", "cuda_graph_modules=[moe_router]"),
]


def _rule_check(code: str, overrides: list[str]) -> list[Any]:
    config = Config(load_recipe(TARGET, overrides, strict=False).config)
    return list(next(r for r in rules() if r.code == code).check(config))


@pytest.mark.parametrize("overrides", CUDA_GRAPH_ACCEPTED, ids=lambda o: " ".join(o))
def test_cuda_graph_modules_near_misses_are_accepted(overrides):
    assert _rule_check("megatron-cuda-graph-modules", overrides) == []
    assert _rule_check("bridge-cuda-graph-local", overrides) == []


@pytest.mark.parametrize("overrides", CUDA_GRAPH_BRIDGE_REFUSED, ids=lambda o: " ".join(o))
def test_local_cuda_graph_modules_pass_megatron_core_and_fail_bridge(overrides):
    assert _rule_check("megatron-cuda-graph-modules", overrides) == []
    (found,) = _rule_check("bridge-cuda-graph-local", overrides)
    assert found.key == "policy.megatron_cfg.cuda_graph_modules"


def test_bridge_offload_env_is_quiet_with_the_variable():
    env = "++policy.megatron_cfg.env_vars={NVTE_CPU_OFFLOAD_V1:'1'}"
    assert _rule_check("bridge-activation-offload-env", [*_offload("[core_attn]"), env]) == []


def test_every_registered_rule_has_a_mutation():
    assert {r.code for r in rules()} == set(MUTATIONS) | set(WARNINGS)


@pytest.mark.parametrize("path", recipe_files(RECIPES), ids=lambda p: p.stem)
def test_rlgate_recipes_raise_no_startup_finding(path):
    findings = _startup_findings(load_recipe(path, strict=False))
    assert findings == [], "\n".join(map(str, findings))


def test_areas_run_as_recipe_check_checks():
    names = [name for name, _ in CONFIG_CHECKS]
    assert [n for n in names if n in AREAS] == list(AREAS)
    assert {r.area for r in rules()} == set(AREAS)


class TestRegistry:
    def test_a_rule_outside_an_area_module_is_refused(self):
        def check(cfg):
            return []

        check.__module__ = "rlgate.checks.startup.nowhere"
        with pytest.raises(TypeError, match="is not an area"):
            startup.rule("x", Source("f.py", "g", "h"))(check)

    def test_a_rule_without_a_source_is_refused(self):
        with pytest.raises(TypeError, match="name the source"):
            startup.rule("x")

    def test_a_second_rule_with_a_taken_code_is_refused(self):
        def check(cfg):
            return []

        check.__module__ = "rlgate.checks.startup.training"
        with pytest.raises(TypeError, match="registered twice"):
            startup.rule("backend-both", Source("f.py", "g", "h"))(check)


def _cluster(nodes: int, gpn: int, gen_nodes: int | None) -> dict[str, Any]:
    colocated = gen_nodes is None
    res = {"num_nodes": gen_nodes, "gpus_per_node": gpn}
    return {
        "cluster": {"num_nodes": nodes, "gpus_per_node": gpn},
        "policy": {"generation": {"colocated": {"enabled": colocated, "resources": res}}},
    }


@settings(derandomize=True, database=None, deadline=None, max_examples=200)
@given(
    nodes=st.integers(2, 64),
    gpn=st.sampled_from([1, 2, 4, 8]),
    gen=st.one_of(st.none(), st.integers(1, 63)),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 2, 4]),
)
def test_parallel_world_fires_exactly_when_policy_init_would_raise(nodes, gpn, gen, tp, pp, cp):
    cfg = _cluster(nodes, gpn, gen)
    cfg["policy"]["megatron_cfg"] = {
        "enabled": True,
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": pp,
        "context_parallel_size": cp,
    }
    # grpo.py::setup: colocated -> every GPU trains; else the training nodes are the rest.
    if gen is not None and gen >= nodes:
        world = None  # the topology rules report it; nothing to compare
    else:
        world = nodes * gpn if gen is None else (nodes - gen) * gpn
    fired = [f for f in _rule("parallel-world").findings(Config(cfg))]
    if world is None:
        assert fired == []
    else:
        model = tp * pp * cp
        assert bool(fired) == (world < model or world % model != 0)


def _rule(code: str):
    return next(r for r in rules() if r.code == code)


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "abc", "${nope}", "???", "fp8", "pass_k", "val_reward", "0.5"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["enabled", "rope_type", "x"]), st.booleans(), max_size=2),
)
_BASE = load_recipe(TARGET, strict=False).config


def _leaves(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaves(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")]


_PATHS = [p for p in _leaves(_BASE) if p.startswith(("policy.", "grpo.", "loss_fn.", "logger."))]
_PATHS = [p for p in _PATHS if "chat_template" not in p]


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        if not isinstance(cfg.get(part), dict):
            cfg[part] = {}
        cfg = cfg[part]
    cfg[leaf] = value


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.tuples(st.sampled_from(_PATHS), JUNK), min_size=1, max_size=5))
def test_rules_never_crash_on_junk_values(replacements):
    cfg = json.loads(json.dumps(_BASE, default=str))
    for path, value in replacements:
        if isinstance(value, float) and not math.isfinite(value):
            value = float(value)
        _set(cfg, path, value)
    config = Config(cfg)
    for r in rules():
        for f in r.findings(config):
            assert isinstance(f, Finding) and f.code == r.code and f.key, f
            assert f.severity is r.severity


def test_recipe_rules_sources_use_the_startup_source_type():
    assert all(isinstance(s, Source) for _, s in cited_sources())
    assert Path(startup.__file__).parent.name == "startup"


NEMO_RL = os.environ.get("NEMO_RL_DIR")
MEGATRON_LM = os.environ.get("MEGATRON_LM_DIR")
MEGATRON_BRIDGE = os.environ.get("MEGATRON_BRIDGE_DIR")
needs_nemo_rl = pytest.mark.skipif(not NEMO_RL, reason="set NEMO_RL_DIR to a NeMo RL checkout")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "assert_inventory_s", REPO / "tools/assert_inventory.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@needs_nemo_rl
class TestAtTheCheckout:
    """Opt-in: the rules' sources against a real NeMo RL checkout (verified at 7ea279a).

    With MEGATRON_LM_DIR (Megatron-LM at the commit NeMo RL's Megatron-Bridge pins) the
    Megatron-core sources are checked too, with MEGATRON_BRIDGE_DIR (Megatron-Bridge at NeMo
    RL's submodule pin) Megatron Bridge's; vLLM's are read from the installed package.
    """

    @pytest.fixture(scope="class")
    def scanned(self, tool):
        scans = [tool.scan(tool.NEMO_RL, Path(NEMO_RL))]
        if MEGATRON_LM:
            scans.append(tool.scan(tool.MEGATRON_LM, Path(MEGATRON_LM)))
        if MEGATRON_BRIDGE:
            scans.append(tool.scan(tool.MEGATRON_BRIDGE, Path(MEGATRON_BRIDGE)))
        vllm_root, _ = tool._installed_vllm()
        scans.append(tool.scan(tool.VLLM, vllm_root))
        return {s.tree.repo: s for s in scans}

    def test_every_cited_source_exists_in_the_checkout(self, tool, scanned):
        implicit = [s for s in inventory()["sites"] if s["kind"] == "implicit"]
        missing = []
        for code, src in cited_sources():
            found = scanned.get(src.repo)
            if found is None:
                continue  # Megatron-LM or Megatron-Bridge not given
            sites = [
                {**dataclasses.asdict(s), "id": "", "class": "config", "rules": [code]}
                for s in found.sites
            ]
            live = [e for e in implicit if tool.implicit_found(found, e) is not None]
            hits = [
                s
                for s in [*sites, *live]
                if (s["repo"], s["file"], s["function"]) == (src.repo, src.file, src.function)
                and src.cites in _text(s)
            ]
            if len(hits) != 1:
                missing.append(f"{code}: {src.where} {src.cites!r} ({len(hits)} sites)")
        assert missing == [], "\n".join(missing)

    def test_the_inventory_has_no_new_or_vanished_site(self, tool, scanned):
        result = tool.diff(list(scanned.values()), inventory())
        assert (result.new, result.vanished) == ([], [])

    def test_vllm_kwargs_rule_knows_every_argument_nemo_rl_passes_itself(self):
        from rlgate.checks.startup.generation import ENGINE_ARGUMENTS

        path = Path(NEMO_RL) / "nemo_rl/models/generation/vllm/vllm_worker.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and ast.unparse(node.func) == "dict"
            and any(k.arg is None and ast.unparse(k.value) == "vllm_kwargs" for k in node.keywords)
        ]
        assert len(calls) == 1
        assert tuple(k.arg for k in calls[0].keywords if k.arg) == ENGINE_ARGUMENTS

    def test_model_overrides_rule_knows_megatron_configs_fields(self):
        from rlgate.checks.startup.training import MEGATRON_CONFIG_FIELDS

        path = Path(NEMO_RL) / "nemo_rl/models/policy/__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        (cls,) = [
            n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MegatronConfig"
        ]
        fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}  # type: ignore[union-attr]
        assert fields == set(MEGATRON_CONFIG_FIELDS)


class TestDocs:
    def test_the_rule_table_of_running_tiers_lists_every_rule(self):
        text = (REPO / "docs" / "running-tiers.md").read_text(encoding="utf-8")
        every = [*rules(), *startup.model_rules()]
        assert [r.code for r in every if f"| `{r.code}` |" not in text] == []

    def test_the_coverage_page_shows_the_tools_numbers_for_the_data(self, tool):
        text = (REPO / "docs" / "recipe-rules-coverage.md").read_text(encoding="utf-8")
        block = text.split(tool.BEGIN)[1].split(tool.END)[0].strip()
        data = inventory()
        assert block == tool.coverage_table(data["sites"], data["sources"])
