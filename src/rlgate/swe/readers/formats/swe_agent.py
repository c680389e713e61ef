"""SWE-agent ``sweagent run-batch`` output, graded by the swebench harness.

Read from SWE-agent/SWE-agent at commit 3ea751c087f32b16e039a2233dd6eefecef325d5:

* ``sweagent/run/run_batch.py``: ``RunBatch`` writes ``<output_dir>/<id>/<id>.traj`` (the
  trajectory, ``info.exit_status`` and ``info.submission``), ``<id>/<id>.pred``
  (``run/common.py`` ``save_predictions``: ``{model_name_or_path, instance_id,
  model_patch}``), ``run_batch_exit_statuses.yaml`` (``run/_progress.py``:
  ``{instances_by_exit_status: {status: [ids]}, total_cost}``; ``Uncaught <Exception>`` for an
  instance that raised, e.g. its environment did not start, which leaves no ``.pred``;
  ``skipped (<status>)`` for one a resumed run did not redo) and, at the end,
  ``preds.json`` (``run/merge_predictions.py``: the ``.pred`` files keyed by instance id).
* the agent's statuses (``sweagent/agent/agents.py``, ``forward_with_handling``):
  ``submitted``, and on an error ``exit_<why>`` or, when a patch could still be extracted,
  ``submitted (exit_<why>)``: ``exit_cost``, ``exit_context``, ``exit_format``,
  ``exit_forfeit`` (the model's), ``exit_total_execution_time``, ``exit_command_timeout``
  (timeouts), ``exit_api`` (the model server), ``exit_environment_error`` (SWE-ReX),
  ``exit_error`` (anything else raised).
* resolution: SWE-agent grades ``preds.json`` with sb-cli (``--instances.evaluate``) or the
  swebench harness; rlgate reads the harness final report in the output directory.
* SWE-agent 0.x (``run.py``) wrote ``trajectories/<user>/<run name>/`` instead: ``args.yaml``,
  ``all_preds.jsonl`` (one prediction per line) and ``<id>.traj`` beside them; a real one is
  the repository's ``tests/test_data/trajectories/gpt4__swe-bench-dev-easy_first_only__…``
  (copied to rlgate's ``tests/unit/data/swe_agent_0.x``).

Model failures: ``submitted``, ``exit_cost``, ``exit_context``, ``exit_format``,
``exit_forfeit`` (as Gym's ``max_iteration`` / ``context_window``); every other status is
infrastructure (timeouts as Gym's ``agent_timed_out``, crashes, the environment, the API).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.swe.readers._agent_output import (
    AgentStatus,
    graded_run,
    merge_statuses,
    predictions,
    statuses_from_yaml,
)
from rlgate.swe.readers._common import instance_id_of, jsonl_objects
from rlgate.swe.readers.registry import Probe, register
from rlgate.swe.records import DatasetUniverse, InputFormat, SweRun, _read_json

MODEL_STATUSES = frozenset(
    {"submitted", "exit_cost", "exit_context", "exit_format", "exit_forfeit"}
)
PREDS = "preds.json"
STATUS_FILE = "run_batch_exit_statuses.yaml"
CONFIG_FILE = "run_batch.config.yaml"
LEGACY_PREDS = "all_preds.jsonl"  # SWE-agent 0.x
LEGACY_ARGS = "args.yaml"
_WRAPPED = re.compile(r"(?:submitted|skipped) \((?P<inner>.+)\)")


def is_infra(status: str) -> bool:
    """True when SWE-agent's exit status is the environment's failure, not the model's."""
    while m := _WRAPPED.fullmatch(status):  # submitted (exit_cost), skipped (submitted (...))
        status = m.group("inner")
    return status not in MODEL_STATUSES


def _trajectory_statuses(directory: Path, *, legacy: bool = False) -> list[AgentStatus]:
    found = []
    for path in sorted(directory.glob("*.traj" if legacy else "*/*.traj")):
        iid = path.stem if legacy else path.parent.name
        if path.name != f"{iid}.traj":
            continue
        doc = _read_json(path, "SWE-agent trajectory")
        info = doc.get("info") if isinstance(doc, dict) else None
        status = info.get("exit_status") if isinstance(info, dict) else None
        if status is None:  # run_batch redoes such a trajectory (should_skip): not finished
            continue
        if not isinstance(status, str):
            raise SweError(f"{path}: info.exit_status must be a string, got {status!r:.80}")
        found.append(AgentStatus(iid, status, is_infra(status), str(path)))
    return found


def _claims(probe: Probe) -> bool:
    return probe.is_dir and (
        (probe.path / STATUS_FILE).is_file()
        or (probe.path / CONFIG_FILE).is_file()
        or ((probe.path / LEGACY_ARGS).is_file() and (probe.path / LEGACY_PREDS).is_file())
    )


def _legacy_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """``all_preds.jsonl`` of SWE-agent 0.x, keyed by instance id (an id twice is refused)."""
    preds: dict[str, dict[str, Any]] = {}
    seen_at: dict[str, str] = {}
    for where, row in jsonl_objects(path):
        iid = instance_id_of(row, where)
        if iid in preds:
            raise SweError(f"{where}: {iid} already predicted at {seen_at[iid]}")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise SweError(f"{where}: model_patch of {iid} must be a string or null")
        preds[iid], seen_at[iid] = row, where
    return preds


@register(
    InputFormat.SWE_AGENT,
    order=31,
    claims=_claims,
    shape="a SWE-agent run-batch output directory (preds.json, run_batch_exit_statuses.yaml, "
    "<id>/<id>.traj; 0.x: all_preds.jsonl, args.yaml) with the harness report of its predictions",
)
def read_swe_agent(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """A ``sweagent run-batch`` output directory and its harness report."""
    directory = probe.path
    if not (directory / STATUS_FILE).is_file() and not (directory / CONFIG_FILE).is_file():
        return [
            graded_run(
                directory,
                universe,
                InputFormat.SWE_AGENT,
                tool="SWE-agent",
                preds=_legacy_predictions(directory / LEGACY_PREDS),
                predictions_file=LEGACY_PREDS,
                statuses=merge_statuses(_trajectory_statuses(directory, legacy=True)),
            )
        ]
    if not (directory / PREDS).is_file():
        raise SweError(
            f"{directory}: a SWE-agent output directory without {PREDS}",
            hint="run-batch merges the .pred files into preds.json when it ends; if it did "
            f"not finish, `sweagent merge-preds {directory}` writes it",
        )
    layers = [_trajectory_statuses(directory)]
    if (directory / STATUS_FILE).is_file():
        layers.insert(0, list(statuses_from_yaml(directory / STATUS_FILE, is_infra).values()))
    return [
        graded_run(
            directory,
            universe,
            InputFormat.SWE_AGENT,
            tool="SWE-agent",
            preds=predictions(directory / PREDS),
            predictions_file=PREDS,
            statuses=merge_statuses(*layers),
        )
    ]
