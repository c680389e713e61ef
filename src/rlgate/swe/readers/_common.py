"""What the SWE result readers share.

Building a run over the universe, swebench's per-instance report entries, JSON Lines, and
nested lookups.

Pure: reads files only (through :mod:`rlgate.core.io` and :mod:`rlgate.swe.records`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rlgate.core.errors import SweError
from rlgate.swe.records import (
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweRun,
    _examples,
    check_instance_id,
    parse_json,
)

# Mirrors of swebench.harness.constants (5.0.2); a unit test checks they agree.
LOG_REPORT = "report.json"
LOG_INSTANCE = "run_instance.log"
LOG_RUN_METADATA = "run.json"
RUN_EVALUATION_LOG_DIR = Path("logs/run_evaluation")
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"


def build_run(
    label: str,
    fmt: InputFormat,
    found: Mapping[str, InstanceOutcome],
    universe: DatasetUniverse,
    *,
    scope: frozenset[str] | None,
    source: str | None = None,
    dataset_name: str | None = None,
    label_mismatch: Iterable[str] = (),
) -> SweRun:
    """One run over the whole universe: ``found`` outcomes, every other id ``missing``.

    Raises SweError when ``found`` or ``scope`` names an id outside the universe.
    """
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


def classify_entry(iid: str, entry: Any, where: str) -> InstanceOutcome:
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


def labels_differ(iid: str, entry: Any, universe: DatasetUniverse, where: str) -> bool:
    """True when a report's graded F2P/P2P tests differ from the dataset's labels."""
    status = entry.get("tests_status") if isinstance(entry, dict) else None
    if status is None:
        return False
    if not isinstance(status, dict):
        raise SweError(f"{where}: {iid}: tests_status is not an object: {status!r:.100}")
    seen = tuple(_tests_seen(iid, status, k, where) for k in ("FAIL_TO_PASS", "PASS_TO_PASS"))
    return iid in universe.labels and seen != universe.labels[iid]


def dig(row: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """``row[k1][k2]…``, or None where a level is missing or not a mapping."""
    node: Any = row
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines of a JSONL file, strictly UTF-8."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SweError(
                    f"{path}:{lineno}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                    hint="a JSON Lines results file is UTF-8 text; is it binary or compressed?",
                ) from None
            if line.strip():
                yield lineno, line


def jsonl_objects(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``file:line``, object) of every non-blank line of a JSONL file; a non-object is refused."""
    for lineno, line in jsonl_lines(path):
        where = f"{path}:{lineno}"
        row = parse_json(line, where, line=True)
        if not isinstance(row, dict):
            raise SweError(f"{where}: expected a JSON object per line, got {type(row).__name__}")
        yield where, row


def instance_id_of(row: Mapping[str, Any], where: str, key: str = "instance_id") -> str:
    """The instance id ``row[key]``, checked as the dataset's ids are."""
    if key not in row:
        raise SweError(f"{where}: no {key!r}; keys: {sorted(row)[:20]}")
    return check_instance_id(row[key], where, key)


def add_once(
    found: dict[str, InstanceOutcome],
    seen_at: dict[str, str],
    outcome: InstanceOutcome,
    where: str,
    *,
    hint: str | None = None,
) -> None:
    """Record one instance's outcome; the same id twice in one run is refused."""
    iid = outcome.instance_id
    if iid in found:
        raise SweError(
            f"{where}: {iid} already seen at {seen_at[iid]} in the same run",
            hint=hint or "each instance has one outcome per run; give one file per seed",
        )
    found[iid] = outcome
    seen_at[iid] = where
