"""Joint validation of a NeMo RL GRPO config: RL keys x Gym x template x parsers x async.

Each ``check_*`` function is pure over a loaded :class:`~rlgate.recipes.Recipe` (or its
:class:`~rlgate.serving.ServingSetup`) and returns :class:`~rlgate.findings.Finding`s.
Template and parser verdicts are *measured*: a probe conversation is rendered with the
served template and parsed back with the served vLLM parsers. Runtime asserts NeMo RL
only hits after allocating a cluster are reported here as errors, with the assert's
meaning; keys NeMo RL or Gym accept but never read are warnings, so NeMo RL's own
working configs pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlgate.findings import Finding, Severity
from rlgate.gym import check_server_keys
from rlgate.recipes import Recipe, flatten, get_path, load_recipe
from rlgate.schema import check_keys
from rlgate.serving import (
    ServingSetup,
    check_budget,
    check_contiguity,
    check_data,
    check_parsers,
    check_thinking,
    check_tool_call_in_reasoning,
    serving_chat_parameters,
    serving_setup,
)
from rlgate.templates import SERVING_KWARGS

__all__ = ["CompatReport", "check_recipe", "check_recipe_file"]

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


def _is_async(cfg: dict[str, Any]) -> bool:
    return bool(get_path(cfg, "grpo.async_grpo.enabled"))


def _uses_gym(cfg: dict[str, Any]) -> bool:
    return bool(get_path(cfg, "env.should_use_nemo_gym"))


def check_async(recipe: Recipe) -> list[Finding]:
    """What ``async_grpo_train`` and the Gym rollout path assert only at runtime."""
    cfg, out = recipe.config, []
    gen = get_path(cfg, "policy.generation", {}) or {}
    backend = gen.get("backend")
    if _is_async(cfg):
        if backend not in ("vllm", "megatron", "trtllm", "dynamo"):
            out.append(
                Finding(
                    "async-backend",
                    ERROR,
                    "policy.generation.backend",
                    f"async GRPO supports vllm, megatron, trtllm, dynamo; got {backend!r}",
                )
            )
        if get_path(cfg, "policy.generation.colocated.enabled") and backend != "megatron":
            out.append(
                Finding(
                    "async-colocated",
                    ERROR,
                    "policy.generation.colocated.enabled",
                    "async GRPO asserts non-colocated generation unless the backend is megatron; "
                    "set colocated.enabled: false and give generation its own nodes",
                )
            )
        if not get_path(cfg, "loss_fn.use_importance_sampling_correction"):
            out.append(
                Finding(
                    "async-importance-sampling",
                    ERROR,
                    "loss_fn.use_importance_sampling_correction",
                    "async GRPO asserts importance-sampling correction ('must be enabled "
                    "for async GRPO')",
                )
            )
        age = get_path(cfg, "grpo.async_grpo.max_trajectory_age_steps", 1) or 1
        inflight = get_path(cfg, "grpo.async_grpo.in_flight_weight_updates")
        if age > 1 and not inflight:
            out.append(
                Finding(
                    "async-age-without-inflight",
                    WARNING,
                    "grpo.async_grpo.max_trajectory_age_steps",
                    f"max_trajectory_age_steps={age} without in_flight_weight_updates: NeMo "
                    "RL warns; generation stalls at every refit",
                )
            )
        if backend == "dynamo" and inflight:
            out.append(
                Finding(
                    "async-dynamo-inflight",
                    ERROR,
                    "grpo.async_grpo.in_flight_weight_updates",
                    "the dynamo backend requires in_flight_weight_updates: false",
                )
            )
        for key in (
            "grpo.use_dynamic_sampling",
            "grpo.reward_scaling.enabled",
            "grpo.reward_shaping.enabled",
            "data.use_multiple_dataloader",
        ):
            if get_path(cfg, key):
                out.append(
                    Finding(
                        "async-unsupported",
                        ERROR,
                        key,
                        f"{key}: true raises NotImplementedError in async GRPO",
                    )
                )
        if get_path(cfg, "policy.router_replay.enabled") and get_path(cfg, "data_plane.enabled"):
            out.append(
                Finding(
                    "async-r3-data-plane",
                    ERROR,
                    "policy.router_replay.enabled",
                    "router replay (R3) with data_plane.enabled raises NotImplementedError",
                )
            )
    if _uses_gym(cfg):
        if get_path(cfg, "grpo.max_val_samples") is not None:
            out.append(
                Finding(
                    "gym-max-val-samples",
                    ERROR,
                    "grpo.max_val_samples",
                    "run_grpo_nemo_gym.py raises on a non-null grpo.max_val_samples (it is "
                    "set to the validation set size)",
                )
            )
        if gen.get("top_k") not in (None, 0):
            out.append(
                Finding(
                    "gym-top-k",
                    ERROR,
                    "policy.generation.top_k",
                    f"top_k={gen.get('top_k')!r}: the NeMo Gym rollout path asserts top_k "
                    "is unset (not OpenAI-compatible)",
                )
            )
        if gen.get("temperature") == 0:
            out.append(
                Finding(
                    "gym-greedy",
                    ERROR,
                    "policy.generation.temperature",
                    "greedy decoding is asserted against on the NeMo Gym path",
                )
            )
        for key in ("stop_strings", "stop_token_ids"):
            if gen.get(key):
                out.append(
                    Finding(
                        "gym-stop",
                        WARNING,
                        f"policy.generation.{key}",
                        f"{key} is forced to null on the NeMo Gym path; the value is ignored",
                    )
                )
        if get_path(cfg, "policy.generation.val_top_k") is not None:
            out.append(
                Finding(
                    "gym-val-top-k",
                    ERROR,
                    "policy.generation.val_top_k",
                    "val_top_k is rejected on the vLLM + Gym path",
                )
            )
    return out


def check_topology(recipe: Recipe) -> list[Finding]:
    """Cluster split and batch-size arithmetic that ``setup()`` asserts."""
    cfg, out = recipe.config, []
    nodes, gpn = get_path(cfg, "cluster.num_nodes"), get_path(cfg, "cluster.gpus_per_node")
    if not get_path(cfg, "policy.generation.colocated.enabled", True):
        res = get_path(cfg, "policy.generation.colocated.resources", {}) or {}
        gen_nodes, gen_gpn = res.get("num_nodes"), res.get("gpus_per_node")
        if isinstance(nodes, int) and nodes > 1:
            if not isinstance(gen_nodes, int) or gen_nodes < 1 or gen_nodes >= nodes:
                out.append(
                    Finding(
                        "topology-generation-nodes",
                        ERROR,
                        "policy.generation.colocated.resources.num_nodes",
                        "multi-node non-colocated needs 1 <= generation nodes < cluster.num_nodes "
                        f"({nodes}); got {gen_nodes!r}",
                    )
                )
            if gen_gpn != gpn:
                out.append(
                    Finding(
                        "topology-gpus-per-node",
                        ERROR,
                        "policy.generation.colocated.resources.gpus_per_node",
                        f"generation gpus_per_node ({gen_gpn}) must equal cluster.gpus_per_node "
                        f"({gpn})",
                    )
                )
        elif gen_nodes not in (None, 1):
            out.append(
                Finding(
                    "topology-single-node",
                    ERROR,
                    "policy.generation.colocated.resources.num_nodes",
                    f"single-node non-colocated needs resources.num_nodes null or 1; "
                    f"got {gen_nodes}",
                )
            )
    prompts, gens = (
        get_path(cfg, "grpo.num_prompts_per_step"),
        get_path(cfg, "grpo.num_generations_per_prompt"),
    )
    gbs = get_path(cfg, "policy.train_global_batch_size")
    if all(isinstance(v, int) for v in (prompts, gens, gbs)) and gbs != prompts * gens:
        out.append(
            Finding(
                "batch-size",
                ERROR,
                "policy.train_global_batch_size",
                f"train_global_batch_size {gbs} != num_prompts_per_step x "
                "num_generations_per_prompt "
                f"= {prompts * gens}: every step is skipped ('Unexpected training batch size')",
            )
        )
    return out


def check_serving_kwargs(recipe: Recipe) -> list[Finding]:
    """Keys of http_server_serving_chat_kwargs must be OpenAIServingChat parameters."""
    kwargs = get_path(recipe.config, SERVING_KWARGS) or {}
    allowed = sorted(serving_chat_parameters())
    out = []
    for key in kwargs if isinstance(kwargs, dict) else ():
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            out.append(
                Finding(
                    "serving-kwarg",
                    ERROR,
                    f"{SERVING_KWARGS}.{key}",
                    f"vLLM's OpenAIServingChat has no parameter {key!r}: NeMo RL passes these "
                    f"kwargs straight to it and the server fails to start{hint}",
                )
            )
    for key in ("tool_parser", "reasoning_parser", "chat_template"):
        if get_path(recipe.config, f"policy.generation.vllm_cfg.{key}") is not None:
            out.append(
                Finding(
                    "serving-kwarg-level",
                    ERROR,
                    f"policy.generation.vllm_cfg.{key}",
                    f"{key} belongs in {SERVING_KWARGS}; under vllm_cfg it is ignored",
                )
            )
    return out


def check_gym(setup: ServingSetup) -> list[Finding]:
    """Gym server configs validated against nemo-gym's own pydantic models."""
    cfg, out = setup.recipe.config, []
    if not _uses_gym(cfg):
        return out
    paths = get_path(cfg, "env.nemo_gym.config_paths") or []
    if not any(str(p).endswith("_for_training.yaml") for p in paths):
        out.append(
            Finding(
                "gym-training-model",
                ERROR,
                "env.nemo_gym.config_paths",
                "no *_for_training.yaml model config: NeMo RL requires Gym's policy model "
                "to return token ids (vllm_model_for_training.yaml)",
            )
        )
    if setup.gym_model is not None and not setup.gym_model.config.get(
        "return_token_id_information"
    ):
        out.append(
            Finding(
                "gym-token-ids",
                ERROR,
                f"env.nemo_gym.{setup.gym_model.instance}",
                "Gym's policy model must set return_token_id_information: true for training",
            )
        )
    for server in setup.servers:
        for f in check_server_keys(server):
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
    return out


def check_unresolved(recipe: Recipe) -> list[Finding]:
    """Interpolations that only resolve where the run starts, one warning per cause."""
    by_reason: dict[str, list[str]] = {}
    for u in recipe.unresolved:
        by_reason.setdefault(u.reason, []).append(u.key)
    return [
        Finding(
            "unresolved-interpolation",
            WARNING,
            keys[0],
            f"{reason}: {len(keys)} key(s) keep their ${{...}} expression here "
            f"({', '.join(keys)}); they must resolve where the run starts",
        )
        for reason, keys in by_reason.items()
    ]


def check_mandatory(recipe: Recipe) -> list[Finding]:
    """Values left as ``???`` (OmegaConf's mandatory marker) fail at NeMo RL start-up."""
    return [
        Finding("missing-value", ERROR, key, "mandatory value (???) is not set")
        for key, value in flatten(recipe.config).items()
        if value == "???"
    ]


class CompatReport:
    """All findings for one recipe."""

    def __init__(
        self, recipe: Recipe, findings: Sequence[Finding], setup: ServingSetup | None
    ) -> None:
        self.recipe, self.findings, self.setup = recipe, list(findings), setup

    @property
    def errors(self) -> list[Finding]:
        """Findings that make the config incompatible."""
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def ok(self) -> bool:
        """True when there is no error."""
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``rlgate recipe check --json``)."""
        return {
            "recipe": str(self.recipe.path),
            "name": self.recipe.name,
            "overrides": list(self.recipe.overrides),
            "compatible": self.ok,
            "tokenizer": self.setup.tokenizer_source if self.setup else None,
            "template": {"source": self.setup.template.source, "sha256": self.setup.template.sha256}
            if self.setup
            else None,
            "profile": self.setup.profile().as_dict() if self.setup else None,
            "findings": [f.as_dict() for f in self.findings],
        }


def check_recipe(
    recipe: Recipe, tokenizer_root: str | Path | None, setup: ServingSetup | None = None
) -> CompatReport:
    """Run every check on a loaded recipe (``setup`` reuses an already resolved serving setup)."""
    findings = check_unresolved(recipe)
    findings += (
        check_mandatory(recipe)
        + check_keys(recipe.config)
        + check_async(recipe)
        + check_topology(recipe)
        + check_serving_kwargs(recipe)
    )
    setup = setup or serving_setup(recipe, tokenizer_root)
    steps: list[Callable[[ServingSetup], list[Finding]]] = [
        check_gym,
        check_data,
        check_parsers,
        check_tool_call_in_reasoning,
        check_thinking,
        check_budget,
        check_contiguity,
    ]
    for step in steps:
        findings += step(setup)
    return CompatReport(recipe, findings, setup)


def check_recipe_file(
    path: str | Path, overrides: Sequence[str] = (), tokenizer_root: str | Path | None = None
) -> CompatReport:
    """Load ``path`` with ``overrides`` and run every check."""
    return check_recipe(load_recipe(path, overrides), tokenizer_root)
