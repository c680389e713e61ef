"""Readers for the SWE-bench result shapes: :func:`load_runs` and :func:`load_arm`.

Each reader turns one input into :class:`~rlgate.swe.records.SweRun` records that cover the
whole dataset universe (the shapes are listed in :mod:`rlgate.swe.records`). Read-only and pure:
no subprocess, no Docker, no ``swebench.harness`` import (its package import pulls in docker);
the few harness constants needed are mirrored below and checked against swebench in the unit
tests. Every problem with an input raises SweError naming the file (and line, for JSONL).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.core.io import read_text
from rlgate.swe.records import (
    MAX_RUNS_PER_ARM,
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweArm,
    SweRun,
    _as_tests,
    _examples,
    _read_json,
    is_plain_text,
    parse_json,
)

__all__ = ["eval_record_report", "final_report_lists", "load_arm", "load_runs", "read_path"]

logger = logging.getLogger(__name__)

# Mirrors of swebench.harness.constants (5.0.2); a unit test checks they agree.
LOG_REPORT = "report.json"
LOG_INSTANCE = "run_instance.log"
LOG_RUN_METADATA = "run.json"
RUN_EVALUATION_LOG_DIR = Path("logs/run_evaluation")
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
# written by `rlgate swe eval` (rlgate.swe.harness) in its run directory
EVAL_RECORD = "rlgate_swe_eval.json"

FINAL_REPORT_KEYS = (
    "completed_ids",
    "submitted_ids",
    "resolved_ids",
    "unresolved_ids",
    "empty_patch_ids",
    "error_ids",
)
OPTIONAL_LISTS = ("incomplete_ids", "infra_failure_ids", "ambiguous_failure_ids")
# make_run_report files each instance under exactly one of these ...
EXCLUSIVE_LISTS = (
    "resolved_ids",
    "unresolved_ids",
    "empty_patch_ids",
    "error_ids",
    "incomplete_ids",
)
# ... and classifies only unresolved and error instances into these.
CLASSIFIED_LISTS = ("infra_failure_ids", "ambiguous_failure_ids")
_COUNT_KEYS = {
    "resolved_instances": "resolved_ids",
    "unresolved_instances": "unresolved_ids",
    "empty_patch_instances": "empty_patch_ids",
    "error_instances": "error_ids",
    "completed_instances": "completed_ids",
    "infra_failure_instances": "infra_failure_ids",
    "ambiguous_failure_instances": "ambiguous_failure_ids",
}
ROLLOUT_ID_PATHS: tuple[tuple[str, ...], ...] = (
    ("instance_id",),
    ("responses_create_params", "metadata", "instance_id"),
    ("instance_config", "problem_info", "instance_id"),
    ("task_id",),
)
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
# Gym flags that say the environment, not the model, decided the reward.
ROLLOUT_INFRA_FLAGS = ("eval_timed_out", "agent_timed_out", "oom_killed", "eval_oom_killed")
# agent_error_kind values that are model failures even when Gym masks the sample.
ROLLOUT_MODEL_FAILURES = frozenset({"max_iteration", "context_window", "stuck_in_loop"})


# --- building runs -----------------------------------------------------------------


def _build_run(
    label: str,
    fmt: InputFormat,
    found: dict[str, InstanceOutcome],
    universe: DatasetUniverse,
    *,
    scope: frozenset[str] | None,
    source: str | None = None,
    dataset_name: str | None = None,
    label_mismatch: Iterable[str] = (),
) -> SweRun:
    unknown = (set(found) | (scope or set())) - set(universe.repos)
    if unknown:
        raise SweError(
            f"{label}: {len(unknown)} instance id(s) are not in the dataset {universe.source}: "
            f"{_examples(unknown)}",
            hint="pass the --dataset (revision) these results were produced on",
        )
    outcomes = {
        iid: found.get(iid, InstanceOutcome(iid, Outcome.MISSING, "not in this run"))
        for iid in universe.ids
    }
    return SweRun(
        label=label,
        source=source or label,
        input_format=fmt,
        outcomes=outcomes,
        scope=scope,
        dataset_name=dataset_name,
        label_mismatch=tuple(sorted(set(label_mismatch))),
    )


# report.json flags that swebench 5.0.2's get_eval_report (swebench/harness/grading.py)
# never sets on a resolved instance: it returns before grading when the patch is None or
# the test output is missing (infra), and sets patch_successfully_applied before resolved.
_NOT_WITH_RESOLVED = {
    "patch_is_None": True,
    "patch_exists": False,
    "patch_successfully_applied": False,
    "infra_failure": True,
}


def _classify_entry(iid: str, entry: Any, where: str) -> InstanceOutcome:
    """Classify one ``report.json``-style entry (``resolved``, ``patch_exists`` …)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("resolved"), bool):
        raise SweError(f"{where}: entry for {iid} needs a boolean 'resolved'; got {entry!r:.200}")
    reason = entry.get("infra_failure_reason")
    if reason is not None and not isinstance(reason, str):
        raise SweError(f"{where}: infra_failure_reason of {iid} must be a string: {reason!r:.80}")
    if entry["resolved"]:
        if clash := [f"{k}={v}" for k, v in _NOT_WITH_RESOLVED.items() if entry.get(k) is v]:
            raise SweError(
                f"{where}: contradictory entry for {iid}: resolved=true with "
                f"{', '.join(clash)} (swebench's get_eval_report never writes both)"
            )
        return InstanceOutcome(iid, Outcome.RESOLVED)
    if entry.get("patch_is_None") is True or entry.get("patch_exists") is False:
        return InstanceOutcome(iid, Outcome.EMPTY_PATCH, "no patch")
    if entry.get("infra_failure") is True:
        return InstanceOutcome(iid, Outcome.INFRA, reason)
    return InstanceOutcome(iid, Outcome.UNRESOLVED)


def _tests_seen(iid: str, status: dict[str, Any], key: str, where: str) -> frozenset[str]:
    part = status.get(key) or {}
    if not isinstance(part, dict):
        raise SweError(f"{where}: {iid}: tests_status.{key} is not an object: {part!r:.100}")
    names: set[str] = set()
    for outcome in ("success", "failure"):
        value = part.get(outcome, [])
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise SweError(
                f"{where}: {iid}: tests_status.{key}.{outcome} must be a list of test names"
            )
        names.update(value)
    return frozenset(names)


def _labels_differ(iid: str, entry: Any, universe: DatasetUniverse, where: str) -> bool:
    """True when a report's graded F2P/P2P tests differ from the dataset's labels."""
    status = entry.get("tests_status") if isinstance(entry, dict) else None
    if status is None:
        return False
    if not isinstance(status, dict):
        raise SweError(f"{where}: {iid}: tests_status is not an object: {status!r:.100}")
    seen = tuple(_tests_seen(iid, status, k, where) for k in ("FAIL_TO_PASS", "PASS_TO_PASS"))
    return iid in universe.labels and seen != universe.labels[iid]


# --- final report ------------------------------------------------------------------


def final_report_lists(path: Path | str, doc: Any) -> dict[str, set[str]]:
    """The id lists of a harness final report, checked against swebench 5.0.2's invariants.

    ``make_run_report`` (swebench/harness/reporting.py) files each dataset instance under
    exactly one of :data:`EXCLUSIVE_LISTS` and classifies only unresolved and error
    instances as infra/ambiguous failures; a report that breaks this was hand-edited or
    merged, and reading it would silently pick one of two outcomes. Raises SweError.
    """
    if not isinstance(doc, dict):
        raise SweError(
            f"{path}: a swebench final report is a JSON object, got {type(doc).__name__}"
        )
    missing = [k for k in FINAL_REPORT_KEYS if k not in doc]
    if missing:
        raise SweError(
            f"{path}: swebench final report is missing {', '.join(missing)}",
            hint="the file is truncated or not a `swebench.harness.run_evaluation` report",
        )
    lists: dict[str, set[str]] = {}
    for key in (*FINAL_REPORT_KEYS, *OPTIONAL_LISTS):
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SweError(f"{path}: {key} must be a list of instance ids, got {value!r:.100}")
        lists[key] = set(value)
        if len(lists[key]) != len(value):
            twice = {v for v in value if value.count(v) > 1}
            raise SweError(f"{path}: {key} lists the same id twice: {_examples(twice)}")
    for count_key, list_key in _COUNT_KEYS.items():
        if count_key in doc and (
            type(doc[count_key]) is not int or doc[count_key] != len(lists[list_key])
        ):
            raise SweError(
                f"{path}: inconsistent report: {count_key}={doc[count_key]!r:.40} but "
                f"{list_key} lists {len(lists[list_key])} ids (corrupt or hand-edited?)"
            )
    for i, first in enumerate(EXCLUSIVE_LISTS):
        for second in EXCLUSIVE_LISTS[i + 1 :]:
            if both := lists[first] & lists[second]:
                raise SweError(
                    f"{path}: contradictory report: {_examples(both)} listed in both {first} "
                    f"and {second}",
                    hint="swebench's make_run_report files each instance under exactly one of "
                    f"{', '.join(EXCLUSIVE_LISTS)}; regenerate the report instead of editing "
                    "or merging it",
                )
    failed = lists["unresolved_ids"] | lists["error_ids"]
    for key in CLASSIFIED_LISTS:
        if stray := lists[key] - failed:
            raise SweError(
                f"{path}: contradictory report: {_examples(stray)} in {key} but in neither "
                "unresolved_ids nor error_ids (swebench classifies only failed instances)"
            )
    reasons = doc.get("failure_reasons") or {}
    if not isinstance(reasons, dict) or not all(isinstance(v, str) for v in reasons.values()):
        raise SweError(
            f"{path}: failure_reasons must map instance ids to reason strings, got {reasons!r:.100}"
        )
    return lists


def _final_report(path: Path, doc: Any, universe: DatasetUniverse) -> SweRun:
    lists = final_report_lists(path, doc)
    logs = _sibling_logs(path, universe)
    reasons: dict[str, str] = doc.get("failure_reasons") or {}
    found: dict[str, InstanceOutcome] = {}
    for key, outcome in (
        ("unresolved_ids", Outcome.UNRESOLVED),
        ("resolved_ids", Outcome.RESOLVED),
        ("empty_patch_ids", Outcome.EMPTY_PATCH),
        ("error_ids", Outcome.ERROR),
    ):
        for iid in lists[key]:
            found[iid] = InstanceOutcome(iid, outcome, reasons.get(iid))
    for iid in lists["error_ids"]:
        logged = logs.outcomes.get(iid) if logs else None  # None: not in the dataset
        if logged and logged.outcome is Outcome.PATCH_FAILED:
            found[iid] = logged
    for iid in lists["infra_failure_ids"]:
        found[iid] = InstanceOutcome(iid, Outcome.INFRA, reasons.get(iid))
    scope = frozenset(set().union(*lists.values()))
    return _build_run(
        str(path),
        InputFormat.FINAL_REPORT,
        found,
        universe,
        scope=scope,
        dataset_name=logs.dataset_name if logs else None,
        label_mismatch=logs.label_mismatch if logs else (),
    )


def _sibling_logs(report: Path, universe: DatasetUniverse) -> SweRun | None:
    """The harness logs next to a final report (``--report_dir .`` layout), if any."""
    root = report.parent / RUN_EVALUATION_LOG_DIR
    if not root.is_dir():
        return None
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        suffix = f".{run_dir.name}.json"
        if report.name.endswith(suffix):
            model_dir = run_dir / report.name[: -len(suffix)]
            if model_dir.is_dir() and _is_model_dir(model_dir):
                logger.info("reading harness logs %s next to %s", model_dir, report)
                return _log_dir(model_dir, universe)
    return None


# --- harness log directory ------------------------------------------------------------


def _is_model_dir(path: Path) -> bool:
    return any(
        (child / LOG_REPORT).is_file() or (child / LOG_INSTANCE).is_file()
        for child in path.iterdir()
        if child.is_dir()
    )


def _resolve_model_dir(path: Path) -> Path:
    if _is_model_dir(path):
        return path
    models = sorted(d for d in path.iterdir() if d.is_dir() and _is_model_dir(d))
    if len(models) == 1:
        return models[0]
    if models:
        raise SweError(
            f"{path}: holds logs of {len(models)} models ({', '.join(m.name for m in models)})",
            hint="pass one model directory per run",
        )
    raise SweError(
        f"{path}: not a harness log directory (no <instance>/{LOG_REPORT} or {LOG_INSTANCE})",
        hint="pass logs/run_evaluation/<run_id> or logs/run_evaluation/<run_id>/<model>",
    )


def _log_dir(path: Path, universe: DatasetUniverse) -> SweRun:
    model_dir = _resolve_model_dir(path)
    found: dict[str, InstanceOutcome] = {}
    mismatch: list[str] = []
    for inst in sorted(d for d in model_dir.iterdir() if d.is_dir()):
        iid, report = inst.name, inst / LOG_REPORT
        if report.is_file():
            doc = _read_json(report)
            if not isinstance(doc, dict) or iid not in doc:
                raise SweError(f"{report}: expected a report keyed by {iid!r}")
            found[iid] = _classify_entry(iid, doc[iid], str(report))
            if _labels_differ(iid, doc[iid], universe, str(report)):
                mismatch.append(iid)
        elif (inst / LOG_INSTANCE).is_file():
            # a log, not data: a crashed writer may leave torn or binary bytes in it
            text = read_text(
                inst / LOG_INSTANCE, what="harness log", error=SweError, errors="replace"
            )
            if APPLY_PATCH_FAIL in text:
                found[iid] = InstanceOutcome(iid, Outcome.PATCH_FAILED, "patch did not apply")
            else:
                found[iid] = InstanceOutcome(iid, Outcome.ERROR, f"no {LOG_REPORT}")
    meta = model_dir.parent / LOG_RUN_METADATA
    dataset_name = None
    if meta.is_file():
        doc = _read_json(meta, "harness run metadata")
        dataset_name = doc.get("dataset") if isinstance(doc, dict) else None
        if dataset_name is not None and not isinstance(dataset_name, str):
            raise SweError(f"{meta}: 'dataset' must be a dataset name, got {dataset_name!r:.80}")
    return _build_run(
        str(path),
        InputFormat.LOG_DIR,
        found,
        universe,
        scope=None,
        dataset_name=dataset_name,
        label_mismatch=mismatch,
    )


# --- per-instance mapping -------------------------------------------------------------


def _instance_map(path: Path, doc: dict[str, Any], universe: DatasetUniverse) -> SweRun:
    found = {iid: _classify_entry(iid, entry, str(path)) for iid, entry in doc.items()}
    mismatch = [iid for iid, e in doc.items() if _labels_differ(iid, e, universe, str(path))]
    return _build_run(
        str(path),
        InputFormat.INSTANCE_MAP,
        found,
        universe,
        scope=frozenset(doc),
        label_mismatch=mismatch,
    )


# --- NeMo Gym rollouts ------------------------------------------------------------------


def _dig(row: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    node: Any = row
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _binary_reward(reward: Any) -> bool | None:
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
    by_reward = _binary_reward(reward)
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
    if row.get("patch_exists") is False:
        return InstanceOutcome(iid, Outcome.EMPTY_PATCH, "patch_exists=false")
    masked = row.get("mask_sample") is True or _dig(row, ("instance_config", "mask_sample"))
    if masked is True and row.get("agent_error_kind") not in ROLLOUT_MODEL_FAILURES:
        return InstanceOutcome(iid, Outcome.INFRA, "mask_sample")
    return InstanceOutcome(iid, Outcome.UNRESOLVED)


def _rollout_labels(
    row: Mapping[str, Any], where: str
) -> tuple[frozenset[str], frozenset[str]] | None:
    inst = _dig(row, ("responses_create_params", "metadata", "instance_dict"))
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
    iid = next((v for p in ROLLOUT_ID_PATHS if isinstance(v := _dig(row, p), str)), None)
    if iid is None:
        raise SweError(
            f"{where}: cannot find the instance id (looked at "
            f"{', '.join('.'.join(p) for p in ROLLOUT_ID_PATHS)}); keys: {sorted(row)[:20]}"
        )
    index = row.get(ROLLOUT_INDEX_KEY)
    if index is not None and (type(index) is not int or index < 0):
        raise SweError(f"{where}: {ROLLOUT_INDEX_KEY}={index!r:.40} is not an int >= 0")
    return iid, index, row


def _jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines of a JSONL file, strictly UTF-8."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SweError(
                    f"{path}:{lineno}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                    hint="a rollouts file is JSON Lines in UTF-8; is it binary or compressed?",
                ) from None
            if line.strip():
                yield lineno, line


def _rollouts(path: Path, universe: DatasetUniverse) -> list[SweRun]:
    groups: dict[int | None, dict[str, tuple[int, InstanceOutcome]]] = {}
    mismatch: dict[int | None, list[str]] = {}
    names: set[str] = set()
    for lineno, line in _jsonl_lines(path):
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
        name = _dig(row, ("responses_create_params", "metadata", "dataset_name"))
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
            _build_run(
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


# --- detection ----------------------------------------------------------------------------


def eval_record_report(run_dir: Path) -> Path:
    """The final report that a ``rlgate swe eval`` run directory's record names.

    ``final_report`` in :data:`EVAL_RECORD` is resolved against the run directory (not
    the current directory) and must be a file inside it: ``swe eval`` copies the final
    report there, so a path outside, a directory or another record (a loop) is refused.
    """
    record_path = run_dir / EVAL_RECORD
    record = _read_json(record_path, "rlgate swe eval record")
    final = record.get("final_report") if isinstance(record, dict) else None
    if not isinstance(final, str) or not final.strip():
        raise SweError(f"{record_path}: no final_report recorded")
    if not is_plain_text(final):
        raise SweError(f"{record_path}: final_report {final!r:.200} is not a usable path")
    target = run_dir / final  # an absolute `final` replaces run_dir
    try:
        inside = target.resolve().is_relative_to(run_dir.resolve())
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise SweError(
            f"{record_path}: final_report {final!r:.200} cannot be resolved: {exc}"
        ) from None
    if not inside:
        raise SweError(
            f"{record_path}: final_report {final!r:.200} is outside the run directory {run_dir}",
            hint="`rlgate swe eval` keeps the final report in its run directory; "
            "pass the final report file itself to compare one that lives elsewhere",
        )
    if not target.is_file() or target.name == EVAL_RECORD:
        raise SweError(
            f"{record_path}: final_report {final!r:.200} is not a final report file in "
            f"the run directory (looked at {target})",
            hint="paths in the record are relative to the run directory; records of older "
            "rlgate versions were relative to where `swe eval` ran: pass the final report file",
        )
    return target


def read_path(p: Path, universe: DatasetUniverse) -> list[SweRun]:
    """Detect the format of ``p`` and read it into runs."""
    if not p.exists():
        raise SweError(f"{p}: no such file or directory")
    if p.is_dir() and (p / EVAL_RECORD).is_file():
        report = eval_record_report(p)
        return [_final_report(report, _read_json(report), universe)]
    if p.is_dir():
        return [_log_dir(p, universe)]
    if not p.is_file():  # a FIFO or device would block or never end
        raise SweError(f"{p}: not a regular file or directory")
    if p.suffix == ".jsonl":
        return _rollouts(p, universe)
    doc = _read_json(p)
    if isinstance(doc, dict) and "resolved_ids" in doc:
        return [_final_report(p, doc, universe)]
    if (
        isinstance(doc, dict)
        and all(isinstance(v, dict) for v in doc.values())
        and any("resolved" in v for v in doc.values())
    ):  # an entry without "resolved" is named by _classify_entry
        return [_instance_map(p, doc, universe)]
    shape = f"keys {sorted(doc)[:8]}" if isinstance(doc, dict) else type(doc).__name__
    raise SweError(
        f"{p}: unrecognised SWE-bench result ({shape})",
        hint="expected a swebench final report (resolved_ids, ...), a per-instance mapping "
        "{instance_id: {resolved: bool}}, a logs/run_evaluation/<run_id> directory, or "
        "NeMo Gym rollouts .jsonl",
    )


# --- entry points ------------------------------------------------------------------


def load_runs(path: str | os.PathLike[str], universe: DatasetUniverse) -> list[SweRun]:
    """Read one input path into one run (several for Gym rollouts with repeats).

    The format is detected by shape (see the module docstring); anything else
    raises :class:`~rlgate.core.errors.SweError` naming the file.
    """
    return read_path(Path(path), universe)


def load_arm(
    name: str, paths: Sequence[str | os.PathLike[str]], universe: DatasetUniverse
) -> SweArm:
    """Read every path of one arm; each yields one or more runs (seeds)."""
    if not paths:
        raise SweError(f"the {name} arm has no inputs")
    runs: list[SweRun] = []
    for path in paths:
        runs += load_runs(path, universe)
        if len(runs) > MAX_RUNS_PER_ARM:
            raise SweError(
                f"the {name} arm has more than {MAX_RUNS_PER_ARM} runs (after {path})",
                hint="each path is one run (a Gym rollouts file one per _ng_rollout_index); "
                "compare fewer seeds/repeats",
            )
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise SweError(f"the {name} arm lists the same run twice: {labels}")
    return SweArm(name, tuple(runs))
