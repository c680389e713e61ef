"""OpenHands SWE-bench evaluation output, graded by ``eval_infer.sh`` (the swebench harness).

Read from All-Hands-AI/OpenHands at commit 156d0686c46aafb0fa9d291da6421fb6f64dddc0:

* ``evaluation/benchmarks/swe_bench/run_infer.py`` (``process_instance``) and
  ``evaluation/utils/shared.py`` (``EvalOutput``, ``_process_instance_wrapper``) write one
  line per instance to ``output.jsonl``: ``instance_id``, ``test_result.git_patch``,
  ``instruction``, ``metadata``, ``history``, ``metrics``, ``instance`` and ``error`` (the
  agent state's ``last_error``, e.g. ``RuntimeError: Agent reached maximum iteration…``, or
  ``Timeout after N seconds`` with an empty ``test_result`` when the instance hit its
  wall-clock limit);
* ``evaluation/benchmarks/swe_bench/scripts/eval_infer.sh`` converts it to
  ``output.swebench.jsonl`` (``scripts/eval/convert_oh_output_to_swe_json.py``), runs
  ``swebench.harness.run_evaluation`` and moves the final report to ``report.json`` and the
  model's harness logs to ``eval_outputs/<id>/`` next to ``output.jsonl``.

``error`` is classified as NeMo Gym's swe_agents (which runs OpenHands) classifies it
(``responses_api_agents/swe_agents/app.py`` ``_classify_agent_error``, nemo-gym 0.7.0):
``maximum iteration``, a context window, ``stuck in a loop`` (and OpenHands' ``maximum
budget``) are the model's failures and its patch is graded as is; any other error is
infrastructure (a timeout, a runtime that did not start or disconnected, the model server,
an agent crash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.swe.readers._agent_output import AgentStatus, graded_run
from rlgate.swe.readers._common import jsonl_objects
from rlgate.swe.readers.registry import Probe, register
from rlgate.swe.records import DatasetUniverse, InputFormat, SweRun, check_instance_id

OUTPUT = "output.jsonl"
REPORT = "report.json"
LOGS = "eval_outputs"


def agent_error_kind(error: str) -> str:
    """Gym's ``_classify_agent_error`` (swe_agents, nemo-gym 0.7.0), mirrored; a test compares."""
    if "maximum iteration" in error:
        return "max_iteration"
    if "ContextWindow" in error or "context window" in error.lower():
        return "context_window"
    if "stuck in a loop" in error.lower():
        return "stuck_in_loop"
    return "other"


def is_infra(error: str) -> bool:
    """True when an OpenHands ``error`` is the environment's failure, not the model's."""
    return agent_error_kind(error) == "other" and "maximum budget" not in error


def _rows(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, AgentStatus]]:
    rows: dict[str, dict[str, Any]] = {}
    statuses: dict[str, AgentStatus] = {}
    seen_at: dict[str, str] = {}
    for where, row in jsonl_objects(path):
        if "test_result" not in row:
            raise SweError(
                f"{where}: an OpenHands output line needs test_result; keys: {sorted(row)[:12]}"
            )
        iid = check_instance_id(row.get("instance_id"), where)
        if iid in rows:
            raise SweError(
                f"{where}: {iid} already seen at {seen_at[iid]}",
                hint="OpenHands writes one line per instance (eval_infer's update_output_with_eval "
                "refuses duplicates too)",
            )
        if not isinstance(row["test_result"], dict):
            raise SweError(f"{where}: test_result of {iid} must be an object")
        error = row.get("error")
        if error is not None and not isinstance(error, str):
            raise SweError(f"{where}: error of {iid} must be a string or null, got {error!r:.80}")
        rows[iid], seen_at[iid] = row, where
        if error:
            statuses[iid] = AgentStatus(iid, error, is_infra(error), where)
    if not rows:
        raise SweError(f"{path}: no rows (empty file)")
    return rows, statuses


def _directory(probe: Probe) -> Path:
    return probe.path if probe.is_dir else probe.path.parent


def _claims(probe: Probe) -> bool:
    if probe.is_dir:
        output = probe.path / OUTPUT
        return output.is_file() and "test_result" in Probe(output).first_keys()
    return probe.suffix == ".jsonl" and {"test_result", "instance_id"} <= probe.first_keys()


@register(
    InputFormat.OPENHANDS,
    order=32,
    claims=_claims,
    shape="an OpenHands evaluation directory (output.jsonl, eval_infer.sh's report.json and "
    "eval_outputs/), or its output.jsonl",
)
def read_openhands(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """An OpenHands ``output.jsonl`` and the harness report ``eval_infer.sh`` put beside it."""
    directory = _directory(probe)
    output = directory / OUTPUT if probe.is_dir else probe.path
    rows, statuses = _rows(output)
    return [
        graded_run(
            directory,
            universe,
            InputFormat.OPENHANDS,
            tool="OpenHands",
            preds=rows,
            predictions_file=output.name,
            statuses=statuses,
            logs=directory / LOGS,
            grade_hint="grade it as OpenHands does: evaluation/benchmarks/swe_bench/scripts/"
            f"eval_infer.sh {output} (it writes report.json next to it)",
        )
    ]
