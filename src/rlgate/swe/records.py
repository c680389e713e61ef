"""SWE-bench result records: the dataset universe, runs (seeds) and arms, and their loading.

Inputs (one path = one run, except Gym rollouts with ``_ng_rollout_index``,
which give one run per index, and NeMo-Skills results directories, one run per seed),
detected by shape (:mod:`rlgate.swe.readers.registry`):

* the harness final report ``<model>.<run_id>.json`` (``resolved_ids`` …);
* a harness log directory ``logs/run_evaluation/<run_id>[/<model>]`` holding
  ``<instance>/report.json``;
* a per-instance mapping ``{instance_id: {"resolved": bool, ...}}`` (merged
  ``report.json`` files, the leaderboard's per-instance format);
* NeMo Gym rollouts JSONL (``reward`` plus the instance id at ``instance_id``,
  ``responses_create_params.metadata.instance_id``,
  ``instance_config.problem_info.instance_id`` or ``task_id``);
* a ``rlgate swe eval`` run directory (read as the final report its
  ``rlgate_swe_eval.json`` names);
* NeMo-Skills ``output[-rs<seed>].jsonl`` (``swe-bench-metrics``) or its results directory
  (one run per seed); mini-swe-agent and SWE-agent output directories (``preds.json``,
  trajectories, exit statuses) with the harness report of those predictions; an OpenHands
  evaluation directory (``output.jsonl`` and ``eval_infer.sh``'s ``report.json``).

Invariants:

* Pure: reads files only. Running the harness (Docker, subprocess) lives in
  :mod:`rlgate.swe.harness`; this module does not even import ``swebench.harness``
  (its package import pulls in docker), it mirrors the few constants it needs.
* The denominator is always the dataset universe: every universe id gets
  exactly one :class:`Outcome` per run, and missing, empty-patch, patch-failed
  and error instances count as not resolved and are reported by category.
* Anything unrecognised, truncated, inconsistent or naming ids outside the
  universe raises :class:`~rlgate.core.errors.SweError` naming the file.

The readers live in :mod:`rlgate.swe.readers` (one module per format); the before/after
comparison in :mod:`rlgate.swe.compare`; JSON, JUnit and the summary table in
:mod:`rlgate.swe.report`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rlgate.core.errors import InfraError, SweError
from rlgate.core.text import one_line

__all__ = [
    "INFRA_OUTCOMES",
    "MAX_INSTANCES",
    "MAX_RUNS_PER_ARM",
    "VERIFIED_IDS_SHA256",
    "DatasetUniverse",
    "InputFormat",
    "InstanceOutcome",
    "InstanceSet",
    "Outcome",
    "SweArm",
    "SweRun",
    "is_plain_text",
    "load_universe",
]

_EXAMPLES = 5

#: Largest instance set rlgate compares (SWE-bench Verified has 500, SWE-bench 2,294):
#: the bootstrap and permutation costs grow with instances x resamples.
MAX_INSTANCES = 100_000
#: Runs (seeds, Gym repeats) per arm: each holds one outcome per instance.
MAX_RUNS_PER_ARM = 256
#: Longest instance id or repository name accepted.
MAX_ID_CHARS = 256


class Outcome(Enum):
    """What happened to one instance in one run."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    EMPTY_PATCH = "empty_patch"  # the model produced no patch
    PATCH_FAILED = "patch_failed"  # the patch did not apply (a model failure)
    ERROR = "error"  # harness error: no readable report (timeout, crash, image)
    INFRA = "infra"  # classified environment fault (OOM, Docker, network)
    MISSING = "missing"  # in the dataset, absent from the run


#: Outcomes that measure the environment rather than the model.
INFRA_OUTCOMES = frozenset({Outcome.ERROR, Outcome.INFRA, Outcome.MISSING})


class InputFormat(Enum):
    """The result formats :func:`rlgate.swe.readers.load_runs` recognises (one reader each)."""

    FINAL_REPORT = "final_report"
    LOG_DIR = "log_dir"
    INSTANCE_MAP = "instance_map"
    GYM_ROLLOUTS = "gym_rollouts"
    NEMO_SKILLS = "nemo_skills"
    MINI_SWE_AGENT = "mini_swe_agent"
    SWE_AGENT = "swe_agent"
    OPENHANDS = "openhands"


@dataclass(frozen=True, slots=True)
class InstanceOutcome:
    """One instance's outcome in one run, with the harness's reason if any."""

    instance_id: str
    outcome: Outcome
    reason: str | None = None


class InstanceSet(Enum):
    """Which instance set a universe is: only the full Verified set may be called Verified."""

    VERIFIED = "swe-bench-verified"  # exactly the 500 ids of SWE-bench Verified
    VERIFIED_SUBSET = "verified-subset"  # a proper subset of those ids
    UNKNOWN = "unknown"  # any other set (other benchmark, hand-made, ids outside Verified)


#: sha256 of the 500 SWE-bench Verified instance ids, sorted and joined by newlines
#: (``DatasetUniverse.ids_sha256`` of the v5 Verified parquet; the ids ship as package data
#: ``data/swe_verified_instances.json``, provenance in ``data/README.md``).
VERIFIED_IDS_SHA256 = "fad0fdea4fc2315e9b78cdf80882a32e32393297052e502e0e63c79ad648fb85"
VERIFIED_IDS_FILE = Path(__file__).parents[1] / "data" / "swe_verified_instances.json"


def verified_ids() -> frozenset[str]:
    """The 500 SWE-bench Verified instance ids (bundled package data)."""
    rows = json.loads(VERIFIED_IDS_FILE.read_text(encoding="utf-8"))
    return frozenset(row["instance_id"] for row in rows)


def classify_instance_set(ids: Iterable[str]) -> InstanceSet:
    """Name the instance set ``ids`` is: full Verified, a subset of it, or unknown."""
    ordered = sorted(set(ids))
    if hashlib.sha256("\n".join(ordered).encode()).hexdigest() == VERIFIED_IDS_SHA256:
        return InstanceSet.VERIFIED
    if ordered and set(ordered) < verified_ids():
        return InstanceSet.VERIFIED_SUBSET
    return InstanceSet.UNKNOWN


@dataclass(frozen=True, slots=True)
class DatasetUniverse:
    """The instance set every run is scored against, pinned by content hashes."""

    source: str
    ids: tuple[str, ...]
    repos: dict[str, str]
    labels: dict[str, tuple[frozenset[str], frozenset[str]]]
    file_sha256: str | None
    ids_sha256: str
    labels_sha256: str | None

    @property
    def n(self) -> int:
        """Number of instances (the denominator)."""
        return len(self.ids)

    @property
    def instance_set(self) -> InstanceSet:
        """Which set this is (full Verified, a subset of it, or unknown)."""
        if self.ids_sha256 == VERIFIED_IDS_SHA256:
            return InstanceSet.VERIFIED
        return classify_instance_set(self.ids)


@dataclass(frozen=True, slots=True)
class SweRun:
    """One evaluation run (one seed) of one model, covering the whole universe."""

    label: str
    source: str
    input_format: InputFormat
    outcomes: dict[str, InstanceOutcome]
    scope: frozenset[str] | None  # ids the run was asked to evaluate, if known
    dataset_name: str | None  # what the run says it was graded against
    label_mismatch: tuple[str, ...]  # ids graded with tests other than the dataset's

    def ids(self, outcome: Outcome) -> list[str]:
        """Sorted ids with ``outcome``."""
        return sorted(i for i, o in self.outcomes.items() if o.outcome is outcome)

    def count(self, outcome: Outcome) -> int:
        """Number of instances with ``outcome``."""
        return sum(1 for o in self.outcomes.values() if o.outcome is outcome)

    def resolved_vector(self, ids: Sequence[str]) -> NDArray[np.bool_]:
        """Boolean resolved vector in the order of ``ids``."""
        return np.fromiter(
            (self.outcomes[i].outcome is Outcome.RESOLVED for i in ids), dtype=bool, count=len(ids)
        )

    @property
    def infra_count(self) -> int:
        """Harness errors + classified infra faults + missing instances."""
        return sum(1 for o in self.outcomes.values() if o.outcome in INFRA_OUTCOMES)

    @property
    def infra_error_rate(self) -> float:
        """:attr:`infra_count` over the universe size."""
        return self.infra_count / len(self.outcomes)


@dataclass(frozen=True, slots=True)
class SweArm:
    """The runs (seeds) of one model."""

    name: str
    runs: tuple[SweRun, ...]


# --- small readers -------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sha256_json(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _examples(ids: Iterable[str]) -> str:
    items = sorted(ids)
    more = f" ... (+{len(items) - _EXAMPLES} more)" if len(items) > _EXAMPLES else ""
    return ", ".join(items[:_EXAMPLES]) + more


class _DuplicateKey(ValueError):
    """A JSON object names the same key twice (``json`` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise _DuplicateKey(key)
        doc[key] = value
    return doc


def parse_json(text: str, where: str, *, line: bool = False) -> Any:
    """Parse one JSON document of an SWE input; ``where`` names it (file, or file:line).

    ``line`` says the text is one line of a JSONL file (its messages then give the
    column only, and suggest a truncated last line).

    A key repeated in one object is refused: ``json`` keeps the last value silently,
    which in an ``{instance_id: ...}`` map or a final report changes an outcome.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise SweError(
            f"{where}: the key {exc.args[0]!r} appears twice in one JSON object",
            hint="a merged or hand-edited file? each key (instance id, field) must appear once",
        ) from None
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if line else f"at line {exc.lineno} column {exc.colno}"
        raise SweError(
            f"{where}: not valid JSON {at}: {exc.msg}",
            hint="the file looks truncated or corrupt (a torn last line?); regenerate it",
        ) from None
    except ValueError as exc:  # an integer literal longer than Python converts (4,300 digits)
        raise SweError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise SweError(f"{where}: not valid JSON: nested too deeply") from None


def read_text_input(path: Path, what: str = "SWE-bench result") -> str:
    """A user's SWE input file as text: strict UTF-8; missing, directory, unreadable -> SweError."""
    from rlgate.core.io import read_text

    return read_text(path, what=what, error=SweError)


def _read_json(path: Path, what: str = "SWE-bench result") -> Any:
    text = read_text_input(path, what)
    if not text.strip():
        raise SweError(f"{path}: file is empty (truncated write?)")
    return parse_json(text, str(path))


def _as_tests(value: Any, where: str) -> frozenset[str]:
    """A FAIL_TO_PASS/PASS_TO_PASS field (a JSON string in the parquet, or a list of names)."""
    if isinstance(value, str):
        value = parse_json(value, f"{where}: test list", line=True) if value else []
    if value is None:
        return frozenset()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise SweError(f"{where}: a test list must be a list of test names, got {value!r:.100}")
    return frozenset(value)


# --- the dataset universe --------------------------------------------------------


def _dataset_file(path: Path) -> list[Any]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            wanted = ["instance_id", "repo", "FAIL_TO_PASS", "PASS_TO_PASS"]
            names = pq.read_schema(path).names
            return pq.read_table(path, columns=[c for c in wanted if c in names]).to_pylist()
        except Exception as exc:  # ArrowInvalid, OSError...: an unreadable parquet
            raise SweError(f"{path}: cannot read the dataset: {exc}") from exc
    if path.suffix == ".jsonl":
        text = read_text_input(path, "dataset")
        return [
            parse_json(line, f"{path}:{lineno}", line=True)
            for lineno, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    doc = _read_json(path, "dataset")
    if not isinstance(doc, list):
        raise SweError(
            f"{path}: a JSON dataset must be a list of instances, got {type(doc).__name__}"
        )
    return doc


_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:%+\[\]-]{0,63}")


def check_split(split: str) -> str:
    """``split`` if it is a dataset split name (``test``, ``dev``, HF slices ``test[:10%]``).

    It names a file (``<split>.parquet``) in a dataset directory, so a path is refused.
    """
    if not _SPLIT.fullmatch(split) or ".." in split:
        raise SweError(
            f"split {split!r:.80} is not a split name",
            hint="a name such as test or dev (letters, digits, _ . - and HF slices like test[:50])",
        )
    return split


def _looks_local(source: str) -> bool:
    """A --dataset that can only be a local path (a hub name is ``org/name``)."""
    return source.startswith(("/", "./", "../", "~")) or source.endswith(_DATASET_SUFFIXES)


_DATASET_SUFFIXES = (".parquet", ".json", ".jsonl")


def _dataset_rows(source: str, split: str) -> tuple[list[Any], Path | None]:
    check_split(split)
    path = Path(source).expanduser()
    if path.is_dir():
        if (path / f"{split}.parquet").is_file():
            path = path / f"{split}.parquet"
        elif (path / split / "dataset_info.json").is_file():
            import datasets  # optional and heavy: imported only for this layout

            try:
                return [dict(r) for r in datasets.load_from_disk(str(path / split))], None
            except Exception as exc:  # a corrupt save_to_disk directory
                raise SweError(f"{path / split}: cannot read the dataset: {exc}") from exc
        else:
            raise SweError(f"{path}: no {split}.parquet or {split}/ (save_to_disk) inside")
    if path.is_file():
        return _dataset_file(path), path
    if path.exists() or _looks_local(source):
        kind = "not a file or directory" if path.exists() else "no such file or directory"
        raise SweError(f"dataset {source}: {kind}")
    try:
        import datasets

        return [dict(r) for r in datasets.load_dataset(source, split=split)], None
    except Exception as exc:  # network, auth, unknown name: all mean "not reachable here"
        raise InfraError(
            f"cannot load dataset {source!r} (split {split!r}): {exc}",
            hint="pass --dataset PATH to a local copy (a <split>.parquet, its directory, "
            "or a .json/.jsonl list of instances)",
        ) from exc


def is_plain_text(value: str) -> bool:
    """True for text with no control characters, line breaks or lone surrogates.

    Such text prints on one line, fits in XML and encodes to UTF-8 (a JSON string may
    hold an escaped lone surrogate, which no file name or hash input can).
    """
    if one_line(value) != value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_instance_id(value: Any, where: str, field: str = "instance_id") -> str:
    """``value`` if it can be an instance id (or repo name), else SweError naming ``where``.

    A non-empty string of at most ``MAX_ID_CHARS`` characters without control
    characters or line breaks (they cannot be printed on one line nor written to XML).
    """
    if not isinstance(value, str):
        raise SweError(
            f"{where}: {field} must be a string, got {type(value).__name__} {value!r:.80}"
        )
    if not value.strip() or len(value) > MAX_ID_CHARS or not is_plain_text(value):
        raise SweError(
            f"{where}: {field} {value!r:.120} is not a usable name (empty, longer than "
            f"{MAX_ID_CHARS} characters, or holding control characters or line breaks)"
        )
    return value


def _universe_rows(source: str, rows: list[Any]) -> tuple[dict[str, str], list[Any]]:
    """``{instance_id: repo}`` of the dataset rows, each row checked; the rows as mappings."""
    if not rows:
        raise SweError(f"dataset {source}: no instances")
    if len(rows) > MAX_INSTANCES:
        raise SweError(
            f"dataset {source}: {len(rows):,} instances, more than rlgate compares "
            f"({MAX_INSTANCES:,}; SWE-bench Verified has 500, SWE-bench 2,294)"
        )
    repos: dict[str, str] = {}
    for n, row in enumerate(rows, 1):
        where = f"dataset {source}, instance {n}"
        if not isinstance(row, Mapping) or "instance_id" not in row or "repo" not in row:
            shape = (
                type(row).__name__ if not isinstance(row, Mapping) else f"keys {sorted(row)[:8]}"
            )
            raise SweError(
                f"{where}: every row needs instance_id and repo; got {shape}",
                hint="a dataset is a list of SWE-bench instances (objects with instance_id, "
                "repo, FAIL_TO_PASS, PASS_TO_PASS), e.g. the Verified test.parquet",
            )
        iid = check_instance_id(row["instance_id"], where)
        if iid in repos:
            raise SweError(f"dataset {source}: duplicate instance_id {iid}")
        repos[iid] = check_instance_id(row["repo"], f"{where} ({iid})", "repo")
    return repos, rows


def load_universe(source: str | os.PathLike[str], *, split: str = "test") -> DatasetUniverse:
    """Load the instance universe (ids, repos, test labels) and pin it by sha256."""
    rows, file_path = _dataset_rows(str(source), split)
    repos, rows = _universe_rows(str(source), rows)
    labels: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for row in rows:
        if "FAIL_TO_PASS" in row and "PASS_TO_PASS" in row:
            where = f"dataset {source} ({row['instance_id']})"
            labels[row["instance_id"]] = (
                _as_tests(row["FAIL_TO_PASS"], where),
                _as_tests(row["PASS_TO_PASS"], where),
            )
    ids = tuple(sorted(repos))
    labels_doc = {i: [sorted(f), sorted(p)] for i, (f, p) in labels.items()}
    return DatasetUniverse(
        source=str(source),
        ids=ids,
        repos=repos,
        labels=labels,
        file_sha256=_sha256_file(file_path) if file_path else None,
        ids_sha256=hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        labels_sha256=_sha256_json(labels_doc) if len(labels) == len(ids) else None,
    )
