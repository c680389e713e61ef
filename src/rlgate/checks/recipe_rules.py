"""The config rules of ``rlgate recipe check``: RL keys x Gym x async x topology x batch.

Each ``check_*`` function is pure over a loaded :class:`~rlgate.recipe.load.Recipe` and
returns :class:`~rlgate.recipe.findings.Finding`s.

Every rule that says "NeMo RL asserts X" was read in NeMo RL's code at 7ea279a and its
message names the file and function (``grpo.py::setup``...). Runtime asserts NeMo RL only
hits after allocating a cluster are errors; keys NeMo RL or Gym accept but never read are
warnings, so NeMo RL's own published configs pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, Literal

from rlgate.checks.startup import Source
from rlgate.core.errors import RecipeError
from rlgate.core.text import one_line
from rlgate.recipe.findings import Finding, Severity
from rlgate.recipe.load import Recipe, flatten, get_path
from rlgate.serving.gym import GymServer, check_server_keys, gym_servers, vllm_model_config
from rlgate.serving.setup import (
    serving_chat_parameters,
)
from rlgate.serving.templates import SERVING_KWARGS

__all__ = [
    "SOURCES",
    "CheckSkipped",
    "chat_server_not_applicable",
    "check_async",
    "check_batch",
    "check_gym",
    "check_lengths",
    "check_mandatory",
    "check_parser_names",
    "check_ranges",
    "check_sampling",
    "check_serving_kwargs",
    "check_topology",
    "check_unresolved",
    "parser_problem",
]

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


# Where the rules come from (NeMo RL @ 7ea279a).
GRPO_SETUP = "nemo_rl/algorithms/grpo.py::setup"


GRPO_ASYNC = "nemo_rl/algorithms/grpo.py::async_grpo_train"


RUN_GYM = "examples/nemo_gym/run_grpo_nemo_gym.py::main"


RUN_GRPO = "examples/run_grpo.py::main"


GYM_ROLLOUT = "nemo_rl/experience/rollouts.py::run_async_nemo_gym_rollout"


GYM_SETUP = "nemo_rl/environments/nemo_gym.py::setup_nemo_gym_config"


ASYNC_ROLLOUTS = "nemo_rl/models/generation/interfaces.py::should_use_async_rollouts"


CHAT_SERVER = (
    "nemo_rl/models/generation/vllm/vllm_worker_async.py::"
    "VllmAsyncGenerationWorkerImpl._setup_vllm_openai_api_server"
)


SHARD = "nemo_rl/distributed/batched_data_dict.py::BatchedDataDict.shard_by_batch_size"


_G, _RUN_GYM, _RUN_GRPO = (
    "nemo_rl/algorithms/grpo.py",
    "examples/nemo_gym/run_grpo_nemo_gym.py",
    "examples/run_grpo.py",
)
_ROLLOUTS, _ASYNC = "nemo_rl/experience/rollouts.py", "async_grpo_train"
_UNSUPPORTED = (
    "use_dynamic_sampling",
    "reward_scaling",
    "reward_shaping",
    "use_multiple_dataloader",
)

#: The inventoried NeMo RL sites (tools/assert_inventory.py) each rule of this module decides,
#: as rlgate.checks.startup's rules cite theirs; tests/unit/test_startup_rules.py checks both.
SOURCES: dict[str, tuple[Source, ...]] = {
    "dynamo-inflight": (
        Source(_G, "setup", "in_flight_weight_updates must be false when", "raises ValueError"),
    ),
    "val-sampling": (
        Source(_G, "setup", "differing from the train sampling params is only supported"),
    ),
    "gym-val-top-k": (Source(_G, "setup", "generation.val_top_k is not supported"),),
    "value-range": (
        Source(_G, "setup", "grpo.val_num_generations_per_prompt must be >= 1"),
        Source(
            _ROLLOUTS,
            "run_async_nemo_gym_rollout",
            "num_generations must be greater than",
            "raises ValueError",
        ),
        Source(
            _ROLLOUTS,
            "run_async_multi_turn_rollout_groups",
            "num_generations must be greater",
            "raises ValueError",
        ),
        Source(
            "nemo_rl/distributed/virtual_cluster.py",
            "RayVirtualCluster.__init__",
            "num_gpus_per_node must be greater than 0",
        ),
    ),
    "batch-size-on-policy": (
        Source(_G, "setup", "force_on_policy_ratio requires train_global_batch_size =="),
    ),
    "batch-size-multiple": (
        Source(
            "nemo_rl/distributed/batched_data_dict.py",
            "BatchedDataDict.shard_by_batch_size",
            "is not a multiple of batch_size ({batch_size})",
        ),
    ),
    "topology-policy-nodes": (Source(_G, "setup", "policy_nodes must be > 0, but got"),),
    "topology-policy-gpus": (Source(_G, "setup", "must be > 0 when cluster.num_nodes = 1"),),
    "topology-generation-gpus": (Source(_G, "setup", "must be explicitly set to a value > 0"),),
    "topology-single-node": (Source(_G, "setup", "must be 1 or set to null"),),
    "topology-train-gpus": (Source(_G, "setup", "No enough GPUs for training"),),
    "topology-generation-nodes": (
        Source(_G, "setup", "must be > 0 when cluster.num_nodes > 1"),
        Source(_G, "setup", "Non-colocated mode requires train_nodes > 0"),
    ),
    "topology-gpus-per-node": (
        Source(_G, "setup", "must be explicitly set and equal to cluster.gpus_per_node"),
    ),
    "async-backend": (Source(_G, _ASYNC, "Async GRPO supports the vLLM, Megatron"),),
    "async-engine": (Source(_G, _ASYNC, "Async GRPO requires Dynamo, Megatron, or an async"),),
    "async-importance-sampling": (
        Source(_G, _ASYNC, "Importance sampling correction must be enabled for async GRPO"),
    ),
    "async-r3-data-plane": (
        Source(
            _G,
            _ASYNC,
            "policy.router_replay.enabled=true with async GRPO",
            "raises NotImplementedError",
        ),
    ),
    "async-colocated": (Source(_G, _ASYNC, "Colocated async GRPO is only supported"),),
    "async-unsupported": tuple(
        Source(
            runner, "main", f"{name} is not supported with async GRPO", "raises NotImplementedError"
        )
        for runner in (_RUN_GYM, _RUN_GRPO)
        for name in _UNSUPPORTED
    ),
    "gym-max-val-samples": (
        Source(
            _RUN_GYM,
            "main",
            "A non-null `grpo.max_val_samples` parameter is not supported",
            "raises ValueError",
        ),
    ),
    "gym-top-k": (Source(_ROLLOUTS, "run_async_nemo_gym_rollout", "Top k is not supported"),),
    "gym-training-model": (
        Source(
            "nemo_rl/environments/nemo_gym.py",
            "NemoGym._postprocess_nemo_gym_to_nemo_rl_result",
            "NeMo Gym returned a result with no generation data",
            "raises ValueError",
        ),
    ),
}
SOURCES["gym-token-ids"] = SOURCES["gym-training-model"]
# Decided with the model's tokenizer (rlgate.checks.served.check_thinking).
SOURCES["think-token-ids"] = (
    Source(
        _ROLLOUTS, "apply_reward_penalties", "think_close must both be set", "raises ValueError"
    ),
)


def _int(cfg: dict[str, Any], key: str) -> int | None:
    """``cfg[key]`` when it is an int (not a bool); else None (the schema types values)."""
    value = get_path(cfg, key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_async(cfg: dict[str, Any]) -> bool:
    return get_path(cfg, "grpo.async_grpo.enabled") is True


def _uses_gym(cfg: dict[str, Any]) -> bool:
    return get_path(cfg, "env.should_use_nemo_gym") is True


def _backend(cfg: dict[str, Any]) -> Any:
    return get_path(cfg, "policy.generation.backend")


def chat_server_not_applicable(cfg: dict[str, Any]) -> str | None:
    """Why the served (template/parser) checks do not apply, or None when they do.

    They apply when NeMo RL serves chat through vLLM's OpenAI server: the NeMo Gym path
    (``setup_nemo_gym_config`` forces ``vllm_cfg.expose_http_server``) or an explicit
    ``expose_http_server: true``, with the vLLM backend.
    """
    backend = _backend(cfg)
    exposed = get_path(cfg, "policy.generation.vllm_cfg.expose_http_server") is True
    if not (_uses_gym(cfg) or exposed):
        return "no chat server: NeMo Gym is off and vllm_cfg.expose_http_server is not set"
    if backend != "vllm":
        return (
            f"generation backend {backend!r} serves chat with its own server; rlgate models "
            "vLLM's (OpenAIServingChat with its tool and reasoning parsers)"
        )
    return None


def check_async(recipe: Recipe) -> list[Finding]:
    """What the async GRPO and Gym entry points assert or raise before the first step."""
    cfg, out = recipe.config, []
    gen = get_path(cfg, "policy.generation", {})
    gen = gen if isinstance(gen, dict) else {}
    backend = gen.get("backend")
    if backend == "dynamo" and get_path(cfg, "grpo.async_grpo.in_flight_weight_updates") is True:
        out.append(
            Finding(
                "dynamo-inflight",
                ERROR,
                "grpo.async_grpo.in_flight_weight_updates",
                f"{GRPO_SETUP} raises ValueError for backend 'dynamo' with "
                "in_flight_weight_updates: true (managed Dynamo drains rollouts before refit)",
            )
        )
    if _is_async(cfg):
        if backend not in ("vllm", "megatron", "trtllm", "dynamo"):
            out.append(
                Finding(
                    "async-backend",
                    ERROR,
                    "policy.generation.backend",
                    f"{GRPO_ASYNC} asserts backend in vllm, megatron, trtllm, dynamo; "
                    f"got {backend!r}",
                )
            )
        engine = {"vllm": "vllm_cfg", "trtllm": "trtllm_cfg"}.get(str(backend))
        # The Gym entry point forces vllm_cfg.async_engine (setup_nemo_gym_config).
        forced = backend == "vllm" and _uses_gym(cfg)
        if engine and not forced and get_path(gen, f"{engine}.async_engine") is not True:
            out.append(
                Finding(
                    "async-engine",
                    ERROR,
                    f"policy.generation.{engine}.async_engine",
                    f"{GRPO_ASYNC} asserts {ASYNC_ROLLOUTS}: backend {backend!r} needs "
                    f"{engine}.async_engine: true for async GRPO",
                )
            )
        if get_path(gen, "colocated.enabled") is True and backend != "megatron":
            out.append(
                Finding(
                    "async-colocated",
                    ERROR,
                    "policy.generation.colocated.enabled",
                    f"{GRPO_ASYNC} asserts 'Colocated async GRPO is only supported for the "
                    "Megatron generation backend'; set colocated.enabled: false and give "
                    "generation its own GPUs",
                )
            )
        if get_path(cfg, "loss_fn.use_importance_sampling_correction") is not True:
            out.append(
                Finding(
                    "async-importance-sampling",
                    ERROR,
                    "loss_fn.use_importance_sampling_correction",
                    f"{GRPO_ASYNC} asserts loss_fn.use_importance_sampling_correction "
                    "('must be enabled for async GRPO'; ClippedPGLossConfig defaults it to "
                    "false)",
                )
            )
        age = _int(cfg, "grpo.async_grpo.max_trajectory_age_steps")
        inflight = get_path(cfg, "grpo.async_grpo.in_flight_weight_updates") is True
        if age is not None and age > 1 and not inflight:
            out.append(
                Finding(
                    "async-age-without-inflight",
                    WARNING,
                    "grpo.async_grpo.max_trajectory_age_steps",
                    f"max_trajectory_age_steps={age} without in_flight_weight_updates: "
                    f"{GRPO_ASYNC} warns that the extra age gives no performance benefit",
                )
            )
        runner = RUN_GYM if _uses_gym(cfg) else RUN_GRPO
        for key in (
            "grpo.use_dynamic_sampling",
            "grpo.reward_scaling.enabled",
            "grpo.reward_shaping.enabled",
            "data.use_multiple_dataloader",
        ):
            if get_path(cfg, key) is True:
                out.append(
                    Finding(
                        "async-unsupported",
                        ERROR,
                        key,
                        f"{key}: true with async GRPO: {runner} raises NotImplementedError",
                    )
                )
        data_plane = get_path(cfg, "data_plane")
        if (
            get_path(cfg, "policy.router_replay.enabled") is True
            and isinstance(data_plane, dict)
            and data_plane.get("enabled") is True
        ):
            out.append(
                Finding(
                    "async-r3-data-plane",
                    ERROR,
                    "policy.router_replay.enabled",
                    f"router replay (R3) with data_plane.enabled: {GRPO_ASYNC} raises "
                    "NotImplementedError (use the single-controller entry point)",
                )
            )
    if _uses_gym(cfg):
        if get_path(cfg, "grpo.max_val_samples") is not None:
            out.append(
                Finding(
                    "gym-max-val-samples",
                    ERROR,
                    "grpo.max_val_samples",
                    f"{RUN_GYM} raises ValueError on a non-null grpo.max_val_samples (it sets "
                    "it to the validation set size)",
                )
            )
        if gen.get("top_k"):
            out.append(
                Finding(
                    "gym-top-k",
                    ERROR,
                    "policy.generation.top_k",
                    f"top_k={gen.get('top_k')!r}: {GYM_ROLLOUT} asserts top_k is unset "
                    "('Top k is not supported ... in NeMo-Gym path')",
                )
            )
        for key in ("stop_strings", "stop_token_ids"):
            if gen.get(key):
                out.append(
                    Finding(
                        "gym-stop",
                        WARNING,
                        f"policy.generation.{key}",
                        f"{GYM_SETUP} sets {key} to null on the NeMo Gym path; the value is "
                        "ignored",
                    )
                )
    return out


def check_sampling(recipe: Recipe) -> list[Finding]:
    """Sampling parameters: validation overrides (``setup``) and greedy training."""
    cfg, out = recipe.config, []
    gen = get_path(cfg, "policy.generation", {})
    gen = gen if isinstance(gen, dict) else {}
    pairs = [(f"val_{k}", k) for k in ("temperature", "top_p", "top_k")]
    differs = [v for v, t in pairs if v in gen and t in gen and gen[v] != gen[t]]
    gym_vllm = _uses_gym(cfg) and gen.get("backend") == "vllm"
    if differs and not gym_vllm:
        out.append(
            Finding(
                "val-sampling",
                ERROR,
                f"policy.generation.{differs[0]}",
                f"{', '.join(differs)} differ from the training values: {GRPO_SETUP} asserts "
                "validation-only sampling is used only for vLLM NeMo-Gym rollouts",
            )
        )
    if _uses_gym(cfg) and gen.get("val_top_k"):
        out.append(
            Finding(
                "gym-val-top-k",
                ERROR,
                "policy.generation.val_top_k",
                f"val_top_k={gen['val_top_k']!r} on the NeMo Gym path: {GRPO_SETUP} asserts "
                f"it is null when it differs from top_k, and {GYM_ROLLOUT} asserts no top_k "
                "on every validation rollout",
            )
        )
    temperature = gen.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        if temperature == 0:
            out.append(
                Finding(
                    "greedy-sampling",
                    WARNING,
                    "policy.generation.temperature",
                    "temperature 0 samples greedily: every generation of a prompt is the "
                    "same, so GRPO's group advantages are zero (NeMo RL does not refuse it)",
                )
            )
    return out


def check_batch(recipe: Recipe) -> list[Finding]:
    """Training batch vs ``policy.train_global_batch_size``.

    One GRPO step trains on ``num_prompts_per_step x num_generations_per_prompt`` samples
    (async GRPO skips a step whose replay-buffer batch has another size, "Unexpected
    training batch size", ``async_grpo_train``). ``Policy.train`` splits that batch into
    global batches of ``train_global_batch_size`` (one optimizer step each) with
    ``BatchedDataDict.shard_by_batch_size``, which asserts the batch is a multiple of it.
    Equality is required only by ``loss_fn.force_on_policy_ratio`` (``setup``).
    """
    cfg, out = recipe.config, []
    prompts = _int(cfg, "grpo.num_prompts_per_step")
    gens = _int(cfg, "grpo.num_generations_per_prompt")
    gbs = _int(cfg, "policy.train_global_batch_size")
    if prompts is None or gens is None or gbs is None or prompts < 1 or gens < 1 or gbs < 1:
        return out  # types: schema; ranges: check_ranges
    samples, key = prompts * gens, "policy.train_global_batch_size"
    product = f"num_prompts_per_step x num_generations_per_prompt = {prompts} x {gens} = {samples}"
    if get_path(cfg, "loss_fn.force_on_policy_ratio") is True:
        if gbs != samples:
            out.append(
                Finding(
                    "batch-size-on-policy",
                    ERROR,
                    key,
                    f"loss_fn.force_on_policy_ratio: true and train_global_batch_size {gbs} != "
                    f"{product}: {GRPO_SETUP} asserts 'force_on_policy_ratio requires "
                    "train_global_batch_size == num_prompts_per_step * "
                    "num_generations_per_prompt'",
                )
            )
        return out
    if samples % gbs:
        out.append(
            Finding(
                "batch-size-multiple",
                ERROR,
                key,
                f"{product} is not a multiple of train_global_batch_size {gbs}: Policy.train "
                f"(nemo_rl/models/policy/lm_policy.py) asserts it in {SHARD} ('Total batch "
                f"size ({samples}) is not a multiple of batch_size ({gbs})')",
            )
        )
    elif gbs < samples:
        out.append(
            Finding(
                "batch-size",
                INFO,
                key,
                f"{product} in global batches of {gbs}: {samples // gbs} optimizer steps per "
                "GRPO step (the later ones off-policy; loss_fn.force_on_policy_ratio would "
                "require equality)",
            )
        )
    return out


# (key, minimum, what NeMo RL does with a smaller value) -- values NeMo RL cannot use.
_RANGES: tuple[tuple[str, int, str], ...] = (
    (
        "grpo.num_prompts_per_step",
        1,
        f"it is the train dataloader's batch_size ({GRPO_SETUP}); torch's DataLoader raises "
        "ValueError for a batch_size below 1",
    ),
    (
        "grpo.num_generations_per_prompt",
        1,
        f"no sample is generated per prompt ({GYM_ROLLOUT} raises 'num_generations must be "
        "greater than zero')",
    ),
    (
        "grpo.val_num_generations_per_prompt",
        1,
        f"{GRPO_SETUP} asserts 'grpo.val_num_generations_per_prompt must be >= 1'",
    ),
    (
        "grpo.max_num_steps",
        1,
        "the training loop (`while ... < max_num_steps`, grpo.py::grpo_train and "
        "async_grpo_train) runs no step",
    ),
    (
        "grpo.max_num_epochs",
        1,
        "the training loop (`while current_epoch < max_num_epochs`, grpo.py::grpo_train) "
        "runs no step",
    ),
    (
        "policy.train_global_batch_size",
        1,
        f"Policy.train splits each step's batch into global batches of this size ({SHARD})",
    ),
    (
        "policy.train_micro_batch_size",
        1,
        "Policy.train splits global batches into micro-batches of this size",
    ),
    (
        "policy.max_total_sequence_length",
        1,
        "no sequence fits",
    ),
    (
        "cluster.num_nodes",
        1,
        f"{GRPO_SETUP} places the policy on these nodes",
    ),
    (
        "cluster.gpus_per_node",
        1,
        f"{GRPO_SETUP} places the policy on these GPUs",
    ),
)


def check_ranges(recipe: Recipe) -> list[Finding]:
    """Counts and sizes below the minimum NeMo RL can run with (negative, zero)."""
    out = []
    for key, minimum, effect in _RANGES:
        value = _int(recipe.config, key)
        if value is not None and value < minimum:
            out.append(
                Finding(
                    "value-range",
                    ERROR,
                    key,
                    f"{key}={value} must be >= {minimum}: {effect}",
                )
            )
    return out


def _rm_resources(cfg: dict[str, Any]) -> tuple[int, int]:
    """Nodes and GPUs per node of a reward-model environment the data uses (``setup``)."""
    data = get_path(cfg, "data", {})
    names = set()
    for split in ("train", "validation", "default"):
        entries = data.get(split) if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, dict) and "env_name" in entry:
                names.add(entry["env_name"])
    if "reward_model" not in names:
        return 0, 0
    return (
        _int(cfg, "env.reward_model.resources.num_nodes") or 0,
        _int(cfg, "env.reward_model.resources.gpus_per_node") or 0,
    )


def _topology_not_applicable(cfg: dict[str, Any]) -> str | None:
    opd = get_path(cfg, "on_policy_distillation")
    if isinstance(opd, dict) and get_path(opd, "non_colocated_teachers.enabled") is True:
        return "non-colocated on-policy-distillation teachers: their placement is not modelled"
    return None


def check_topology(recipe: Recipe) -> list[Finding]:
    """The cluster split ``grpo.py::setup`` asserts (policy, generation, reward model)."""
    cfg, out = recipe.config, []
    total, gpn = _int(cfg, "cluster.num_nodes"), _int(cfg, "cluster.gpus_per_node")
    if total is None or gpn is None or total < 1 or gpn < 1:
        return out  # types: schema; ranges: check_ranges
    rm_nodes, rm_gpn = _rm_resources(cfg)
    policy_nodes = 1 if total == 1 else total - rm_nodes
    res_key = "policy.generation.colocated.resources"
    if policy_nodes < 1:
        return [
            Finding(
                "topology-policy-nodes",
                ERROR,
                "cluster.num_nodes",
                f"{GRPO_SETUP} asserts policy_nodes > 0: cluster.num_nodes {total} - reward "
                f"model nodes {rm_nodes} = {policy_nodes}",
            )
        ]
    if get_path(cfg, "policy.generation.colocated.enabled", True) is not False:
        if total == 1 and gpn - rm_gpn < 1:
            out.append(
                Finding(
                    "topology-policy-gpus",
                    ERROR,
                    "cluster.gpus_per_node",
                    f"{GRPO_SETUP} asserts policy GPUs per node > 0 on one node: "
                    f"{gpn} - reward model {rm_gpn}",
                )
            )
        return out
    res = get_path(cfg, res_key, {})
    res = res if isinstance(res, dict) else {}
    inf_nodes, inf_gpn = res.get("num_nodes"), res.get("gpus_per_node")
    if policy_nodes == 1:
        if not isinstance(inf_gpn, int) or inf_gpn < 1:
            out.append(
                Finding(
                    "topology-generation-gpus",
                    ERROR,
                    f"{res_key}.gpus_per_node",
                    f"{GRPO_SETUP} asserts generation gpus_per_node is set and > 0 when the "
                    f"policy has one node and generation is not colocated; got {inf_gpn!r}",
                )
            )
        elif gpn - inf_gpn - (rm_gpn if total == 1 else 0) < 1:
            out.append(
                Finding(
                    "topology-train-gpus",
                    ERROR,
                    f"{res_key}.gpus_per_node",
                    f"{GRPO_SETUP} asserts GPUs are left for training on the single policy "
                    f"node: cluster.gpus_per_node {gpn} - generation {inf_gpn}"
                    + (f" - reward model {rm_gpn}" if total == 1 and rm_gpn else ""),
                )
            )
        if inf_nodes not in (None, 1):
            out.append(
                Finding(
                    "topology-single-node",
                    ERROR,
                    f"{res_key}.num_nodes",
                    f"{GRPO_SETUP} asserts generation num_nodes is null or 1 when the policy "
                    f"has one node and generation is not colocated; got {inf_nodes!r}",
                )
            )
        return out
    if not isinstance(inf_nodes, int) or isinstance(inf_nodes, bool) or inf_nodes < 1:
        out.append(
            Finding(
                "topology-generation-nodes",
                ERROR,
                f"{res_key}.num_nodes",
                f"{GRPO_SETUP} asserts generation num_nodes > 0 when cluster.num_nodes > 1 and "
                f"generation is not colocated; got {inf_nodes!r}",
            )
        )
    elif policy_nodes - inf_nodes < 1:
        out.append(
            Finding(
                "topology-generation-nodes",
                ERROR,
                f"{res_key}.num_nodes",
                f"{GRPO_SETUP} asserts train_nodes > 0: {policy_nodes} policy nodes - "
                f"{inf_nodes} generation nodes leaves none for training",
            )
        )
    if inf_gpn != gpn:
        out.append(
            Finding(
                "topology-gpus-per-node",
                ERROR,
                f"{res_key}.gpus_per_node",
                f"{GRPO_SETUP} asserts generation gpus_per_node ({inf_gpn!r}) equals "
                f"cluster.gpus_per_node ({gpn}) when cluster.num_nodes > 1",
            )
        )
    return out


def check_lengths(recipe: Recipe) -> list[Finding]:
    """Sequence lengths: max_total_sequence_length vs vLLM's max_model_len and max_new_tokens."""
    cfg, out = recipe.config, []
    total = _int(cfg, "policy.max_total_sequence_length")
    model_len = _int(cfg, "policy.generation.vllm_cfg.max_model_len")
    new_tokens = _int(cfg, "policy.generation.max_new_tokens")
    if total is not None and model_len is not None and total > model_len:
        out.append(
            Finding(
                "budget-model-len",
                WARNING,
                "policy.generation.vllm_cfg.max_model_len",
                f"max_total_sequence_length {total} > vLLM max_model_len {model_len}: the "
                f"engine truncates at its own limit ({GYM_ROLLOUT} only warns)",
            )
        )
    if total is not None and new_tokens is not None and new_tokens > total:
        out.append(
            Finding(
                "budget-new-tokens",
                WARNING,
                "policy.generation.max_new_tokens",
                f"max_new_tokens {new_tokens} > max_total_sequence_length {total}",
            )
        )
    return out


def check_serving_kwargs(recipe: Recipe) -> list[Finding]:
    """Keys of http_server_serving_chat_kwargs must be OpenAIServingChat parameters."""
    out = []
    kwargs = get_path(recipe.config, SERVING_KWARGS) or {}
    if isinstance(kwargs, dict) and kwargs:
        allowed = sorted(serving_chat_parameters())
        for key in kwargs:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                out.append(
                    Finding(
                        "serving-kwarg",
                        ERROR,
                        f"{SERVING_KWARGS}.{key}",
                        f"vLLM's OpenAIServingChat has no parameter {key!r}: {CHAT_SERVER} "
                        f"passes these kwargs to it as **kwargs and the server fails to start"
                        f"{hint}",
                    )
                )
    for key in ("tool_parser", "reasoning_parser", "chat_template"):
        if get_path(recipe.config, f"policy.generation.vllm_cfg.{key}") is not None:
            out.append(
                Finding(
                    "serving-kwarg-level",
                    ERROR,
                    f"policy.generation.vllm_cfg.{key}",
                    f"{key} belongs in {SERVING_KWARGS}: {CHAT_SERVER} reads it only there, "
                    "so under vllm_cfg it is ignored",
                )
            )
    return out


def _parser_names() -> dict[str, tuple[str, ...]]:
    from rlgate.serving.parsers import reasoning_parser_names, tool_parser_names

    return {"tool": tool_parser_names(), "reasoning": reasoning_parser_names()}


def _served_parser_names(recipe: Recipe) -> list[tuple[str, str]]:
    """(kind, name) of the parsers vLLM's chat server looks up at start-up."""
    kwargs = get_path(recipe.config, SERVING_KWARGS)
    if not isinstance(kwargs, dict):
        return []
    out = []
    # ParserManager.get_tool_parser looks the tool parser up only with auto tools on
    # (NeMo RL's server defaults enable_auto_tools to True).
    if kwargs.get("tool_parser") and kwargs.get("enable_auto_tools", True) is not False:
        out.append(("tool", str(kwargs["tool_parser"])))
    if kwargs.get("reasoning_parser"):
        out.append(("reasoning", str(kwargs["reasoning_parser"])))
    return out


def parser_problem(recipe: Recipe) -> str | None:
    """Why the served parsers cannot be built here (unknown name or plugin), or None."""
    names = _parser_names() if _served_parser_names(recipe) else {}
    for kind, name in _served_parser_names(recipe):
        if name in names[kind]:
            continue
        plugin = get_path(recipe.config, f"policy.generation.vllm_cfg.{kind}_parser_plugin")
        if plugin:
            return (
                f"{kind} parser {name!r} is registered by the plugin {plugin!r} "
                f"(vllm_cfg.{kind}_parser_plugin); rlgate does not run plugin code"
            )
        return f"{kind} parser {name!r} is not in vLLM's registry"
    return None


def check_parser_names(recipe: Recipe) -> list[Finding]:
    """The serving kwargs' parser names exist in vLLM's registries (or come from a plugin)."""
    out = []
    names = _parser_names() if _served_parser_names(recipe) else {}
    for kind, name in _served_parser_names(recipe):
        if name in names[kind]:
            continue
        if get_path(recipe.config, f"policy.generation.vllm_cfg.{kind}_parser_plugin"):
            continue  # registered by a plugin at server start; reported as a skip
        close = difflib.get_close_matches(name, names[kind], n=3)
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else f"a parser from a plugin needs policy.generation.vllm_cfg.{kind}_parser_plugin "
            f"(registered: {', '.join(names[kind])})"
        )
        out.append(
            Finding(
                "unknown-parser",
                ERROR,
                f"{SERVING_KWARGS}.{kind}_parser",
                f"unknown {kind} parser {name!r}: vLLM's chat server, which {CHAT_SERVER} "
                f"builds, fails to start (vllm/parser/parser_manager.py::ParserManager."
                f"get_{kind}_parser: 'has not been registered'); {hint}",
            )
        )
    return out


class CheckSkipped(Exception):
    """A check could not run (entirely or for part of the config) on this machine."""

    def __init__(self, reason: str, findings: Sequence[Finding] = ()) -> None:
        super().__init__(reason)
        self.reason, self.findings = reason, list(findings)


def _gym_setup(recipe: Recipe) -> tuple[list[GymServer], GymServer | None]:
    """Gym's server configs for this recipe; CheckSkipped when the installed Gym lacks one."""
    nemo_gym = get_path(recipe.config, "env.nemo_gym")
    if not _uses_gym(recipe.config) or not isinstance(nemo_gym, dict):
        return [], None
    try:
        servers = gym_servers(nemo_gym)
    except RecipeError as exc:
        raise CheckSkipped(
            f"NeMo Gym config not resolvable with the installed nemo-gym {_gym_version()}: "
            f"{exc.message}"
        ) from exc
    return servers, vllm_model_config(servers)


def _gym_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nemo-gym")
    except PackageNotFoundError:
        return "(not installed)"


def check_gym(recipe: Recipe) -> list[Finding]:
    """Gym server configs validated against nemo-gym's own pydantic models.

    Raises:
        CheckSkipped: a config file or server module is missing from the installed nemo-gym
            (its findings so far are attached).
    """
    out: list[Finding] = []
    servers, gym_model = _gym_setup(recipe)
    if not servers:
        return out
    no_ids = (
        "NemoGym._postprocess_nemo_gym_to_nemo_rl_result (nemo_rl/environments/nemo_gym.py) "
        "trains only on output items carrying generation_token_ids and raises 'NeMo Gym "
        "returned a result with no generation data' when none does"
    )
    if gym_model is None:
        out.append(
            Finding(
                "gym-training-model",
                ERROR,
                "env.nemo_gym.config_paths",
                "no responses_api_models.vllm_model server for the policy (Gym's "
                "vllm_model_for_training.yaml, which sets return_token_id_information: true): "
                f"{no_ids}",
            )
        )
    elif gym_model.config.get("return_token_id_information") is not True:
        out.append(
            Finding(
                "gym-token-ids",
                ERROR,
                f"env.nemo_gym.{gym_model.instance}",
                "Gym's policy model must set return_token_id_information: true (use "
                f"vllm_model_for_training.yaml): {no_ids}",
            )
        )
    unimportable = []
    for server in servers:
        if not server.overridden:
            continue  # nothing set here to validate: do not import the server's module
        try:
            key_findings = check_server_keys(server)
        except RecipeError as exc:
            unimportable.append(exc.message)
            continue
        except Exception as exc:  # importing a Gym server runs its module (deps, downloads)
            unimportable.append(
                f"cannot import Gym server {server.server_type}.{server.implementation}: "
                f"{type(exc).__name__}: {one_line(exc)[:200]}"
            )
            continue
        for f in key_findings:
            sev = ERROR if f.suggestion else WARNING
            what = f"did you mean {f.suggestion}?" if f.suggestion else "Gym ignores it"
            out.append(
                Finding(
                    "gym-key",
                    sev,
                    f.path,
                    f"{f.model} (nemo-gym) has no field {f.path.rsplit('.', 1)[-1]!r}: {what}",
                )
            )
        for key, value in server.config.items():
            if value == "???" and key in server.overridden | {
                "container_formatter",
                "dataset_path",
            }:
                out.append(
                    Finding(
                        "gym-missing",
                        ERROR,
                        f"env.nemo_gym.{server.instance}.{server.server_type}.{server.implementation}.{key}",
                        "mandatory Gym value (???) is not set",
                    )
                )
    if unimportable:
        raise CheckSkipped(
            f"keys of {len(unimportable)} Gym server(s) not validated: {'; '.join(unimportable)} "
            f"(install the server's dependencies next to nemo-gym {_gym_version()})",
            out,
        )
    return out


def check_unresolved(recipe: Recipe) -> list[Finding]:
    """Interpolations: unset ``oc.env`` variables warn; ones that can never resolve are errors."""
    by_reason: dict[tuple[bool, str], list[str]] = {}
    for u in recipe.unresolved:
        by_reason.setdefault((u.fatal, u.reason), []).append(u.key)
    out = []
    for (fatal, reason), keys in by_reason.items():
        if fatal:
            out.append(
                Finding(
                    "unresolvable-interpolation",
                    ERROR,
                    keys[0],
                    f"{reason}: {len(keys)} key(s) can never resolve ({', '.join(keys)}); "
                    "NeMo RL's OmegaConf.to_container(resolve=True) fails at start-up "
                    f"({RUN_GYM})",
                )
            )
        else:
            out.append(
                Finding(
                    "unresolved-interpolation",
                    WARNING,
                    keys[0],
                    f"{reason}: {len(keys)} key(s) keep their ${{...}} expression here "
                    f"({', '.join(keys)}); they must resolve where the run starts",
                )
            )
    return out


def check_mandatory(recipe: Recipe) -> list[Finding]:
    """Values left as ``???`` (OmegaConf's mandatory marker)."""
    return [
        Finding(
            "missing-value",
            ERROR,
            key,
            "mandatory value (???) is not set: NeMo RL's OmegaConf.to_container keeps the "
            "literal '???' and the run starts with it",
        )
        for key, value in flatten(recipe.config).items()
        if value == "???"
    ]


CheckState = Literal["ran", "skipped", "not-applicable"]
