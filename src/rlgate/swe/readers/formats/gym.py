"""NeMo Gym rollouts (``ng_collect_rollouts`` output, nemo-gym 0.7.0): one run per repeat.

A row is a verify response (``responses_api_agents/swe_agents/app.py``
``SWEBenchVerifyResponse``, ``resources_servers/swebench``): ``reward`` (0/1) and the instance
id at ``instance_id``, ``responses_create_params.metadata.instance_id``,
``instance_config.problem_info.instance_id`` or ``task_id``; ``_ng_rollout_index`` is the
repeat. Infrastructure is Gym's own flags: ``eval_timed_out``, ``agent_timed_out``,
``oom_killed``, ``eval_oom_killed``, an ``agent_error_kind`` that is not a model failure
(``other``: the agent crashed), and a ``mask_sample`` that is not a model failure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.swe.readers._common import build_run, dig, jsonl_lines
from rlgate.swe.readers.registry import Probe, register
from rlgate.swe.records import (
    MAX_RUNS_PER_ARM,
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweRun,
    _as_tests,
    parse_json,
)

ROLLOUT_ID_PATHS: tuple[tuple[str, ...], ...] = (
    ("instance_id",),
    ("responses_create_params", "metadata", "instance_id"),
    ("instance_config", "problem_info", "instance_id"),
    ("task_id",),
)
ROLLOUT_INDEX_KEY = "_ng_rollout_index"


def rollout_instance_id(row: Mapping[str, Any]) -> str | None:
    """The instance id of a Gym row (rollout or input), the first of :data:`ROLLOUT_ID_PATHS`."""
    return next((v for p in ROLLOUT_ID_PATHS if isinstance(v := dig(row, p), str)), None)


# Gym flags that say the environment, not the model, decided the reward.
ROLLOUT_INFRA_FLAGS = ("eval_timed_out", "agent_timed_out", "oom_killed", "eval_oom_killed")
# agent_error_kind values that are model failures even when Gym masks the sample.
ROLLOUT_MODEL_FAILURES = frozenset({"max_iteration", "context_window", "stuck_in_loop"})


def binary_reward(reward: Any) -> bool | None:
    """True/False for a reward of 1/0 (ints or floats within rounding), else None."""
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    if isinstance(reward, int):  # exact: a huge int would overflow math.isclose
        return {0: False, 1: True}.get(reward)
    if math.isclose(reward, 0.0):
        return False
    return True if math.isclose(reward, 1.0) else None


def _rollout_outcome(iid: str, row: Mapping[str, Any], where: str) -> InstanceOutcome:
    reward = row.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise SweError(f"{where}: rollout for {iid} has no numeric 'reward'")
    by_reward = binary_reward(reward)
    if by_reward is None:
        raise SweError(
            f"{where}: reward {reward!r:.40} for {iid} is not 0 or 1 (SWE rewards are binary)"
        )
    resolved = row.get("resolved", by_reward)
    if not isinstance(resolved, bool) or resolved != by_reward:
        raise SweError(
            f"{where}: 'resolved'={resolved!r:.40} contradicts reward={reward} for {iid}"
        )
    if row.get("evaluation_completed") is False:
        if resolved:
            raise SweError(
                f"{where}: contradictory rollout for {iid}: reward {reward} with "
                "evaluation_completed=false (an evaluation that did not complete resolves nothing)"
            )
        return InstanceOutcome(iid, Outcome.ERROR, "evaluation_completed=false")
    if resolved:
        return InstanceOutcome(iid, Outcome.RESOLVED)
    for flag in ROLLOUT_INFRA_FLAGS:
        if row.get(flag) is True:
            return InstanceOutcome(iid, Outcome.INFRA, flag)
    kind = row.get("agent_error_kind")
    if kind is not None and kind not in ROLLOUT_MODEL_FAILURES:
        # swe_agents' _classify_agent_error: "other" is an OpenHands error that is none of the
        # model's failures (a runtime that did not start, the model server, a crash)
        return InstanceOutcome(iid, Outcome.INFRA, f"agent_error_kind={kind!s:.40}")
    if row.get("patch_exists") is False:
        return InstanceOutcome(iid, Outcome.EMPTY_PATCH, "patch_exists=false")
    masked = row.get("mask_sample") is True or dig(row, ("instance_config", "mask_sample"))
    if masked is True and row.get("agent_error_kind") not in ROLLOUT_MODEL_FAILURES:
        return InstanceOutcome(iid, Outcome.INFRA, "mask_sample")
    return InstanceOutcome(iid, Outcome.UNRESOLVED)


def _rollout_labels(
    row: Mapping[str, Any], where: str
) -> tuple[frozenset[str], frozenset[str]] | None:
    inst = dig(row, ("responses_create_params", "metadata", "instance_dict"))
    if isinstance(inst, str):
        inst = parse_json(inst, f"{where}: responses_create_params.metadata.instance_dict")
    source = inst if isinstance(inst, Mapping) else row
    if "FAIL_TO_PASS" in source and "PASS_TO_PASS" in source:
        return _as_tests(source["FAIL_TO_PASS"], where), _as_tests(source["PASS_TO_PASS"], where)
    return None


def _rollout_row(where: str, line: str) -> tuple[str, int | None, dict[str, Any]]:
    """Parse one rollout line into (instance id, rollout index, row)."""
    row = parse_json(line, where, line=True)
    if not isinstance(row, dict):
        raise SweError(f"{where}: expected a JSON object per line, got {type(row).__name__}")
    if "reward" not in row and "model_patch" in row:
        raise SweError(
            f"{where}: this is a predictions file, not results",
            hint="evaluate it first: rlgate swe eval --predictions ...",
        )
    iid = rollout_instance_id(row)
    if iid is None:
        raise SweError(
            f"{where}: cannot find the instance id (looked at "
            f"{', '.join('.'.join(p) for p in ROLLOUT_ID_PATHS)}); keys: {sorted(row)[:20]}"
        )
    index = row.get(ROLLOUT_INDEX_KEY)
    if index is not None and (type(index) is not int or index < 0):
        raise SweError(f"{where}: {ROLLOUT_INDEX_KEY}={index!r:.40} is not an int >= 0")
    return iid, index, row


def rollout_runs(path: Path, universe: DatasetUniverse) -> list[SweRun]:
    """A Gym rollouts file: one run per ``_ng_rollout_index`` (one run without it)."""
    groups: dict[int | None, dict[str, tuple[int, InstanceOutcome]]] = {}
    mismatch: dict[int | None, list[str]] = {}
    names: set[str] = set()
    for lineno, line in jsonl_lines(path):
        where = f"{path}:{lineno}"
        iid, index, row = _rollout_row(where, line)
        if index not in groups and len(groups) >= MAX_RUNS_PER_ARM:
            raise SweError(
                f"{where}: more than {MAX_RUNS_PER_ARM} distinct {ROLLOUT_INDEX_KEY} values "
                "(each is one run)",
                hint="split the repeats into several files, or compare fewer repeats",
            )
        group = groups.setdefault(index, {})
        if iid in group:
            raise SweError(
                f"{where}: {iid} already seen at line {group[iid][0]}"
                + (f" for {ROLLOUT_INDEX_KEY}={index}" if index is not None else ""),
                hint="give one file per seed, or keep Gym's _ng_rollout_index per repeat",
            )
        group[iid] = (lineno, _rollout_outcome(iid, row, where))
        labels = _rollout_labels(row, where)
        if labels and iid in universe.labels and labels != universe.labels[iid]:
            mismatch.setdefault(index, []).append(iid)
        name = dig(row, ("responses_create_params", "metadata", "dataset_name"))
        if isinstance(name, str):
            names.add(name)
    if not groups:
        raise SweError(f"{path}: no rollouts (empty file)")
    if None in groups and len(groups) > 1:
        raise SweError(f"{path}: some rows have {ROLLOUT_INDEX_KEY} and some do not")
    runs = []
    for index in sorted(groups, key=lambda i: -1 if i is None else i):
        label = str(path) if index is None else f"{path}#rollout{index}"
        found = {iid: outcome for iid, (_, outcome) in groups[index].items()}
        runs.append(
            build_run(
                label,
                InputFormat.GYM_ROLLOUTS,
                found,
                universe,
                scope=frozenset(found),
                source=str(path),
                dataset_name=", ".join(sorted(names)) or None,
                label_mismatch=mismatch.get(index, ()),
            )
        )
    return runs


@register(
    InputFormat.GYM_ROLLOUTS,
    order=95,  # the catch-all for .jsonl files: its errors say what a rollout row holds
    claims=lambda p: not p.is_dir and p.suffix == ".jsonl",
    shape="NeMo Gym rollouts .jsonl (reward, instance id)",
)
def read_rollouts(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """NeMo Gym rollouts (``ng_collect_rollouts``)."""
    return rollout_runs(probe.path, universe)
