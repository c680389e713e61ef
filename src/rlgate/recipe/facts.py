"""Facts of a recipe's NeMo RL config that gate bounds are relative to (:class:`RunContext`).

Target step, sequence limits, agent turns, GPU count, the stop metric: read once from the
resolved config (with ``--max-steps``/``rlgate.convergence.target_step`` overrides).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.core.errors import RecipeError
from rlgate.recipe.spec import (
    GateSpec,
)

__all__ = ["RunContext", "context_from_config"]


@dataclass(frozen=True, slots=True)
class RunContext:
    """Facts from the recipe's NeMo RL config that bounds are relative to."""

    recipe: str
    target_step: int | None = None
    max_total_sequence_length: int | None = None
    max_model_len: int | None = None
    agent_max_turns: int | None = None
    num_gpus: int | None = None
    stop_metric: str | None = None
    stop_threshold: float | None = None
    tool_call_metrics_logged: bool = False
    base_dir: Path = Path(".")

    @property
    def token_limit(self) -> int | None:
        """The per-sample token ceiling: the smaller of the two configured limits."""
        limits = [x for x in (self.max_total_sequence_length, self.max_model_len) if x]
        return min(limits) if limits else None


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None  # unresolved interpolations and the like


def _agent_max_turns(config: Mapping[str, Any]) -> int | None:
    servers = _get(config, "env.nemo_gym")
    found: dict[str, int] = {}
    if isinstance(servers, Mapping):
        for name, server in servers.items():
            turns = _int(_get(server, "responses_api_agents.swe_agents.agent_max_turns"))
            if turns is not None and isinstance(server, Mapping):
                found[str(name)] = turns
    train = [v for k, v in found.items() if k.endswith("_train")]
    if train:
        return max(train)
    return max(found.values()) if found else None


def context_from_config(
    config: Mapping[str, Any],
    *,
    recipe: str,
    gate: GateSpec,
    max_steps: int | None = None,
    base_dir: Path = Path("."),
) -> RunContext:
    """Derive target step, token limits, agent turns and cluster size from a NeMo RL config."""
    conv = gate.convergence
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 1):
        raise RecipeError(f"--max-steps must be a positive step count, got {max_steps!r}")
    target = (
        max_steps
        if max_steps is not None
        else (conv.target_step if conv and conv.target_step else None)
        or _int(_get(config, "grpo.max_num_steps"))
    )
    if target is not None and target < 1:
        raise RecipeError(
            f"recipe {recipe}: grpo.max_num_steps = {target} is not a positive step count, "
            "so no run can be judged complete against it",
            hint="set grpo.max_num_steps (or rlgate.convergence.target_step) to the run's "
            "last step",
        )
    nodes, per_node = (
        _int(_get(config, "cluster.num_nodes")),
        _int(_get(config, "cluster.gpus_per_node")),
    )
    turns = conv.agentic.agent_max_turns if conv and conv.agentic else None
    threshold = _get(config, "grpo.stop_at_validation_threshold")
    adv = [
        _get(config, f"grpo.{k}")
        for k in ("invalid_tool_call_advantage", "malformed_thinking_advantage")
    ]
    return RunContext(
        recipe=recipe,
        target_step=target,
        max_total_sequence_length=_int(_get(config, "policy.max_total_sequence_length")),
        max_model_len=_int(_get(config, "policy.generation.vllm_cfg.max_model_len")),
        agent_max_turns=turns or _agent_max_turns(config),
        num_gpus=nodes * per_node if nodes and per_node else None,
        stop_metric=_get(config, "grpo.stop_at_validation_metric"),
        stop_threshold=float(threshold) if isinstance(threshold, int | float) else None,
        tool_call_metrics_logged=any(a is not None for a in adv),
        base_dir=base_dir,
    )


def is_finite_number(value: Any) -> bool:
    """True for an int/float that is not NaN/inf."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
