"""swebench 5.0.2 harness results, and ``rlgate swe eval`` run directories.

A run directory is read as the final report its record names. The harness formats:

* the final report ``<model>.<run_id>.json`` (``make_run_report``,
  swebench/harness/reporting.py), with the harness logs next to it when they are there;
* a log directory ``logs/run_evaluation/<run_id>[/<model>]`` of ``<instance>/report.json``
  (``get_eval_report``, swebench/harness/grading.py) and ``run_instance.log``;
* a per-instance map ``{instance_id: {"resolved": bool, ...}}`` (merged ``report.json``
  files, the leaderboard's per-instance format).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.core.io import read_text
from rlgate.swe.readers._common import (
    APPLY_PATCH_FAIL,
    LOG_INSTANCE,
    LOG_REPORT,
    LOG_RUN_METADATA,
    RUN_EVALUATION_LOG_DIR,
    build_run,
    classify_entry,
    labels_differ,
)
from rlgate.swe.readers.registry import Probe, register
from rlgate.swe.records import (
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweRun,
    _examples,
    _read_json,
    is_plain_text,
)

logger = logging.getLogger(__name__)

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


def is_final_report(doc: Any) -> bool:
    """True for a JSON document with the final report's shape (``resolved_ids``)."""
    return isinstance(doc, dict) and "resolved_ids" in doc


def final_report_run(
    path: Path,
    doc: Any,
    universe: DatasetUniverse,
    *,
    logs: Path | None = None,
    fmt: InputFormat = InputFormat.FINAL_REPORT,
    label: str | None = None,
) -> SweRun:
    """A final report as one run; ``logs`` is its model's log directory (default: next to it)."""
    lists = final_report_lists(path, doc)
    if logs is not None and logs.is_dir() and _is_model_dir(logs):
        logged: SweRun | None = _log_dir(logs, universe)
    else:
        logged = _sibling_logs(path, universe) if logs is None else None
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
        seen = logged.outcomes.get(iid) if logged else None  # None: not in the dataset
        if seen and seen.outcome is Outcome.PATCH_FAILED:
            found[iid] = seen
    for iid in lists["infra_failure_ids"]:
        found[iid] = InstanceOutcome(iid, Outcome.INFRA, reasons.get(iid))
    scope = frozenset(set().union(*lists.values()))
    return build_run(
        label or str(path),
        fmt,
        found,
        universe,
        scope=scope,
        source=str(path),
        dataset_name=logged.dataset_name if logged else None,
        label_mismatch=logged.label_mismatch if logged else (),
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
        hint="pass logs/run_evaluation/<run_id> or logs/run_evaluation/<run_id>/<model>, or a "
        "results directory of a tool rlgate reads (rlgate swe compare --help)",
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
            found[iid] = classify_entry(iid, doc[iid], str(report))
            if labels_differ(iid, doc[iid], universe, str(report)):
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
    return build_run(
        str(path),
        InputFormat.LOG_DIR,
        found,
        universe,
        scope=None,
        dataset_name=dataset_name,
        label_mismatch=mismatch,
    )


# --- rlgate swe eval run directory ------------------------------------------------------


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


@register(
    InputFormat.FINAL_REPORT,
    order=10,
    claims=lambda p: (
        (p.is_dir and (p.path / EVAL_RECORD).is_file())
        or (not p.is_dir and p.suffix != ".jsonl" and is_final_report(p.doc()))
    ),
    shape="a swebench final report <model>.<run_id>.json (resolved_ids, ...) or an "
    "`rlgate swe eval` run directory",
)
def read_final_report(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """A final report file, or the one an ``rlgate swe eval`` run directory's record names."""
    path = eval_record_report(probe.path) if probe.is_dir else probe.path
    doc = _read_json(path) if probe.is_dir else probe.doc()
    return [final_report_run(path, doc, universe)]


def _is_instance_map(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and all(isinstance(v, dict) for v in doc.values())
        and any("resolved" in v for v in doc.values())
    )  # an entry without "resolved" is named by classify_entry


@register(
    InputFormat.INSTANCE_MAP,
    order=80,
    claims=lambda p: not p.is_dir and p.suffix != ".jsonl" and _is_instance_map(p.doc()),
    shape="a per-instance mapping {instance_id: {resolved: bool}}",
)
def read_instance_map(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """Merged ``report.json`` entries keyed by instance id."""
    path, doc = probe.path, probe.doc()
    found = {iid: classify_entry(iid, entry, str(path)) for iid, entry in doc.items()}
    mismatch = [iid for iid, e in doc.items() if labels_differ(iid, e, universe, str(path))]
    return [
        build_run(
            str(path),
            InputFormat.INSTANCE_MAP,
            found,
            universe,
            scope=frozenset(doc),
            label_mismatch=mismatch,
        )
    ]


@register(
    InputFormat.LOG_DIR,
    order=90,  # the catch-all for directories: its errors say what a log directory holds
    claims=lambda p: p.is_dir,
    shape="a harness log directory logs/run_evaluation/<run_id>[/<model>]",
)
def read_log_dir(probe: Probe, universe: DatasetUniverse) -> list[SweRun]:
    """A harness log directory (one model's ``<instance>/report.json`` files)."""
    return [_log_dir(probe.path, universe)]
