"""Agent output directories graded by the swebench harness (mini-swe-agent, SWE-agent, OpenHands).

Such an agent writes predictions (``preds.json``, ``output.jsonl``) and a per-instance status
(an exit status, an error); resolution comes from the swebench harness run on those
predictions, whose final report lies in the directory (``--report_dir DIR``), or in an
``rlgate swe eval`` run directory inside it. A run is the final report's outcomes, with each
instance the agent says the environment failed (a crash, a container that did not start, a
timeout) counted as ``infra`` unless it resolved, as Gym's flags are read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlgate.core.errors import SweError
from rlgate.core.text import one_line
from rlgate.swe.readers._common import build_run, instance_id_of
from rlgate.swe.readers.formats.harness_report import (
    EVAL_RECORD,
    eval_record_report,
    final_report_lists,
    final_report_run,
    is_final_report,
)
from rlgate.swe.records import (
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweRun,
    _examples,
    _read_json,
    read_text_input,
)

#: Files in an agent directory that are never a harness report.
_NOT_REPORTS = frozenset({"preds.json", EVAL_RECORD})


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """What the agent said about one instance: its status, and whether it was infrastructure."""

    instance_id: str
    status: str
    infra: bool
    where: str


def read_yaml(path: Path, what: str) -> Any:
    """A small YAML file the agent wrote (strict UTF-8, safe loader); SweError naming it."""
    text = read_text_input(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SweError(f"{path}: not valid YAML: {one_line(str(exc))[:200]}") from None


def statuses_from_yaml(
    path: Path, classify: Any, *, key: str = "instances_by_exit_status"
) -> dict[str, AgentStatus]:
    """``{instance_id: status}`` from a batch progress report ``{key: {status: [ids]}}``."""
    doc = read_yaml(path, "agent exit-status report")
    groups = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(groups, dict):
        raise SweError(f"{path}: expected a mapping {key}: {{exit status: [instance ids]}}")
    found: dict[str, AgentStatus] = {}
    for status, ids in groups.items():
        if not isinstance(status, str) or not isinstance(ids, list):
            raise SweError(f"{path}: {key} must map exit statuses to lists of instance ids")
        for iid in ids:
            instance_id_of({"instance_id": iid}, f"{path} ({status})")
            if iid in found and found[iid].status != status:
                raise SweError(
                    f"{path}: {iid} is listed under two exit statuses: "
                    f"{found[iid].status!r:.60} and {status!r:.60}"
                )
            found[iid] = AgentStatus(iid, status, classify(status), str(path))
    return found


def predictions(path: Path) -> dict[str, dict[str, Any]]:
    """``preds.json`` (``{instance_id: {instance_id, model_name_or_path, model_patch}}``)."""
    doc = _read_json(path, "predictions file")
    if not isinstance(doc, dict):
        raise SweError(f"{path}: expected {{instance_id: prediction}}, got {type(doc).__name__}")
    for iid, pred in doc.items():
        where = f"{path} ({iid!r:.80})"
        if not isinstance(pred, dict):
            raise SweError(f"{where}: a prediction must be an object")
        if pred.get("instance_id", iid) != iid:
            raise SweError(f"{where}: keyed by {iid!r:.80} but names {pred['instance_id']!r:.80}")
        instance_id_of({"instance_id": iid}, where)
        patch = pred.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise SweError(f"{where}: model_patch must be a string or null")
    return doc


def harness_report(
    directory: Path, tool: str, predictions_file: str, grade_hint: str | None = None
) -> Path:
    """The one swebench final report in ``directory`` (or in an ``rlgate swe eval`` run dir)."""
    found = [
        p
        for p in sorted(directory.glob("*.json"))
        if p.is_file() and p.name not in _NOT_REPORTS and is_final_report(_read_json(p))
    ]
    found += [
        eval_record_report(d) for d in sorted(directory.iterdir()) if (d / EVAL_RECORD).is_file()
    ]
    if len(found) > 1:
        raise SweError(
            f"{directory}: {len(found)} SWE-bench harness reports "
            f"({', '.join(p.name for p in found)})",
            hint="keep the report of this directory's predictions only, or pass one of them",
        )
    if not found:
        raise SweError(
            f"{directory}: {tool} predictions ({predictions_file}) without a SWE-bench harness "
            "report: the agent's output says what it submitted, not what resolved",
            hint=grade_hint
            or f"grade them first: rlgate swe eval --predictions {directory / predictions_file} "
            f"--run-id ID --run-dir {directory / 'eval'} (or swebench's run_evaluation with "
            f"--report_dir {directory})",
        )
    return found[0]


def graded_run(
    directory: Path,
    universe: DatasetUniverse,
    fmt: InputFormat,
    *,
    tool: str,
    preds: Mapping[str, Mapping[str, Any]],
    predictions_file: str,
    statuses: Mapping[str, AgentStatus],
    logs: Path | None = None,
    grade_hint: str | None = None,
) -> SweRun:
    """The harness report's run over ``directory``, with the agent's infra statuses applied."""
    report = harness_report(directory, tool, predictions_file, grade_hint)
    doc = _read_json(report)
    lists = final_report_lists(report, doc)
    if lists["submitted_ids"] != set(preds):
        only_report = lists["submitted_ids"] - set(preds)
        only_preds = set(preds) - lists["submitted_ids"]
        raise SweError(
            f"{report}: grades other predictions than {directory / predictions_file} "
            f"(submitted only in the report: {_examples(only_report) or 'none'}; only in the "
            f"predictions: {_examples(only_preds) or 'none'})",
            hint="grade this directory's predictions again; a report of another run would "
            "give its outcomes to this one",
        )
    graded = final_report_run(report, doc, universe, logs=logs, fmt=fmt, label=str(directory))
    found = {i: o for i, o in graded.outcomes.items() if o.outcome is not Outcome.MISSING}
    for iid, status in statuses.items():
        current = found.get(iid)
        if current is not None and current.outcome is Outcome.RESOLVED:
            continue  # resolved first, as Gym's reward is read before its infra flags
        if status.infra:
            found[iid] = InstanceOutcome(iid, Outcome.INFRA, f"{tool}: {status.status}"[:200])
    return build_run(
        str(directory),
        fmt,
        found,
        universe,
        scope=(graded.scope or frozenset()) | frozenset(statuses),
        source=str(directory),
        dataset_name=graded.dataset_name,
        label_mismatch=graded.label_mismatch,
    )


def merge_statuses(*layers: Iterable[AgentStatus]) -> dict[str, AgentStatus]:
    """Statuses from several sources; a later layer replaces an earlier one per instance."""
    merged: dict[str, AgentStatus] = {}
    for layer in layers:
        for status in layer:
            merged[status.instance_id] = status
    return merged
