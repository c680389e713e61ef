"""Read a NeMo RL run's scalar metrics into a typed :class:`RunMetrics` record.

Three inputs are accepted, detected by :func:`load_run`:

* a NeMo RL ``logger.log_dir`` (or any directory): every ``**/events*tfevents*`` file,
  ordered by mtime like ``tests/json_dump_tb_logs.py``, so the ``exp_NNN/`` dirs of a
  multi-job run (NeMo RL's ``get_next_experiment_dir`` makes one per job) merge in order;
  symlinked directories are followed as ``glob(..., recursive=True)`` does there, and a
  symlink loop is an error naming it;
* a ``metrics.json`` in ``json_dump_tb_logs.py``'s format ``{tag: {step_str: value}}``;
* an MLPerf-logging run log (``:::MLLOG {json}`` lines, as NeMo RL's MLPerf branch writes
  them); ``tracked_stats`` keys are mapped onto NeMo RL tag names (:data:`MLPERF_TAGS`).

Invariants:

* Scalars only. Images, histograms, hparams and non-scalar tensors are skipped.
* A tag/step written twice keeps the later value (later file, or later record in a file);
  differing values are recorded as :class:`Conflict` records and summarised in ``warnings``.
  Every kept value remembers the file it came from (:attr:`MetricSeries.origin`) and every
  file's step range per tag is kept (:attr:`RunMetrics.segments`), so that
  :func:`run_progress` can judge a run on its *latest attempt* and on contiguous steps.
* Steps that go backwards inside one event file are recorded as :class:`StepAnomaly`
  (the ``data_integrity`` check fails on them); they are never silently reordered.
* The TFRecord framing is parsed here: every header and payload CRC32C is verified
  (:mod:`rlgate.runs.tfrecord`, streaming: memory follows what is kept, not the file). A CRC
  mismatch anywhere is a :class:`~rlgate.core.errors.MetricsError`; an incomplete record at
  the very end of a file (a live run, or a writer that was killed) is dropped with a
  warning, since every record before it is intact. The same holds for a torn last line
  (no line break after it) of an MLPerf log.
* Input that is not what it claims is a MetricsError naming the file and the value (exit
  2), never a silent change: a metrics.json with invalid UTF-8, a duplicate key, a step
  key that is not a canonical non-negative integer below 2**63 (``"010"``, ``"-1"``,
  ``"1.5"``), a non-numeric value; an MLPerf ``metadata.step`` that is not such an integer
  (``5.7``, ``NaN``, ``1e300``); an input holding no scalar at all.
* NaN/inf values are kept as they are: the checks report them as FAIL with the step.
* ``ray/*`` tags (NeMo RL's GPU monitor) are indexed by seconds, not training steps;
  :data:`TIME_INDEXED_PREFIXES` names them so that step windows are refused on them.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rlgate.core.errors import MetricsError
from rlgate.core.io import json_number, note_input, read_text
from rlgate.runs.tfrecord import read_event_file

__all__ = [
    "MLPERF_TAGS",
    "TIME_INDEXED_PREFIXES",
    "Conflict",
    "MetricSeries",
    "Progress",
    "RunMetrics",
    "Segment",
    "SourceKind",
    "StepAnomaly",
    "load_metrics_json",
    "load_mlperf_log",
    "load_run",
    "load_tensorboard_dir",
    "run_progress",
    "to_metrics_json",
]

logger = logging.getLogger(__name__)

TIME_INDEXED_PREFIXES = ("ray/",)
EVENT_GLOB = "events*tfevents*"
MLLOG_PREFIX = ":::MLLOG"
MAX_STEP = (1 << 63) - 1  # TensorBoard's Event.step is an int64
_CANONICAL_STEP = re.compile(r"(?:0|[1-9][0-9]*)")
_EXP_DIR = re.compile(r"exp_\d+")

# tracked_stats key -> NeMo RL tag, from nemo_rl/algorithms/mlperf_grpo_logging.py
# (NVIDIA-NeMo/RL branch mlperf-training-qwen35-main @3fca04c9b): ``observe_metrics``
# copies train/{loss,reward,grad_norm,global_valid_toks,global_valid_seqs} and
# timing/train/{total_step_time,policy_training,generation,exposed_generation,weight_sync,
# valid_tokens_per_sec_per_gpu}; ``end_eval`` logs timing/validation/total_validation_time
# as tracked_stats.validation_time and val_metrics["accuracy"] as eval_accuracy.
MLPERF_TAGS: Mapping[str, str] = MappingProxyType(
    {
        "reduced_train_loss": "train/loss",
        "reward": "train/reward",
        "grad_norm": "train/grad_norm",
        "global_valid_toks": "train/global_valid_toks",
        "global_valid_seqs": "train/global_valid_seqs",
        "train_step_time": "timing/train/total_step_time",
        "policy_training_time": "timing/train/policy_training",
        "generation_time": "timing/train/generation",
        "exposed_generation_time": "timing/train/exposed_generation",
        "weight_sync_time": "timing/train/weight_sync",
        "valid_tokens_per_sec_per_gpu": "timing/train/valid_tokens_per_sec_per_gpu",
        "validation_time": "timing/validation/total_validation_time",
        "eval_accuracy": "validation/accuracy",
    }
)
_MLPERF_LIFECYCLE = {
    "init_start",
    "init_stop",
    "run_start",
    "run_stop",
    "block_start",
    "block_stop",
    "eval_start",
    "eval_stop",
    "tracked_stats",
    "eval_accuracy",
    "cache_clear",
}


class SourceKind(Enum):
    """What kind of input a run was read from."""

    TENSORBOARD = "tensorboard"
    METRICS_JSON = "metrics_json"
    MLPERF_LOG = "mlperf_log"


@dataclass(frozen=True, slots=True, eq=False)
class MetricSeries:
    """One scalar tag: strictly increasing integer steps and their float values.

    ``origin`` (when known) is, per kept value, the index in :attr:`RunMetrics.files` of
    the file it came from.
    """

    tag: str
    steps: np.ndarray
    values: np.ndarray
    origin: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def last_step(self) -> int:
        """The largest step logged (raises on an empty series)."""
        if not self.steps.size:
            raise MetricsError(f"metric {self.tag!r} has no values")
        return int(self.steps[-1])

    @property
    def time_indexed(self) -> bool:
        """True for GPU-monitor tags whose "step" is seconds since the monitor started."""
        return self.tag.startswith(TIME_INDEXED_PREFIXES)

    def value_at(self, step: int) -> float | None:
        """The value logged at ``step``, or None if that step is absent."""
        idx = int(np.searchsorted(self.steps, step))
        if idx < self.steps.size and int(self.steps[idx]) == step:
            return float(self.values[idx])
        return None

    def as_dict(self) -> dict[str, float]:
        """``{step_str: value}`` exactly as ``json_dump_tb_logs.py`` writes one tag."""
        return {str(int(s)): float(v) for s, v in zip(self.steps, self.values, strict=True)}


@dataclass(frozen=True, slots=True)
class Conflict:
    """A tag/step logged twice with different values; ``new`` (the later one) was kept."""

    tag: str
    step: int
    old: float
    new: float
    old_source: str
    new_source: str


@dataclass(frozen=True, slots=True)
class StepAnomaly:
    """A step that went backwards (or repeated) within one file for one tag."""

    tag: str
    source: str
    step: int
    previous_step: int


@dataclass(frozen=True, slots=True)
class Segment:
    """What one file logged for one tag, before merging: its step range and point count."""

    source: int  # index into RunMetrics.files
    first: int
    last: int
    count: int


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Every scalar series of one run plus where it came from.

    Attributes:
        source: the path given by the user.
        kind: the input format.
        series: tag -> :class:`MetricSeries`.
        files: files read, in merge order.
        conflicts: duplicate tag/steps with differing values (later kept).
        anomalies: non-monotonic steps within one file.
        warnings: human-readable notes (truncated tails, conflicts, unmapped keys).
        metadata: run metadata; for MLPerf logs ``hyperparameters`` (dict),
            ``run_status`` ("success"/"aborted"/None: the first final status logged),
            ``eval_steps`` (steps of the completed evaluations) and ``last_step`` (the
            largest step of a ``tracked_stats`` or evaluation event).
        segments: tag -> per-file :class:`Segment`, in merge order.
    """

    source: Path
    kind: SourceKind
    series: Mapping[str, MetricSeries]
    files: tuple[Path, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    anomalies: tuple[StepAnomaly, ...] = ()
    warnings: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    segments: Mapping[str, tuple[Segment, ...]] = field(default_factory=dict)

    @property
    def tags(self) -> list[str]:
        """Sorted tag names."""
        return sorted(self.series)

    def get(self, tag: str) -> MetricSeries:
        """Return ``tag``'s series or raise a MetricsError with did-you-mean."""
        try:
            return self.series[tag]
        except KeyError:
            raise MetricsError(
                f"metric {tag!r} not found in {self.source}", hint=missing_tag_hint(tag, self.tags)
            ) from None

    def file_label(self, index: int) -> str:
        """Short name of ``files[index]``: its ``exp_NNN`` dir, else its path in the run."""
        if not self.files:
            return str(self.source)
        file = self.files[index]
        try:
            rel = file.relative_to(self.source)
        except ValueError:
            return file.name
        exp = next((p for p in rel.parts if _EXP_DIR.fullmatch(p)), None)
        return exp if exp is not None else (str(rel) if str(rel) != "." else file.name)


def missing_tag_hint(tag: str, tags: Iterable[str]) -> str:
    """Did-you-mean text for a missing tag."""
    close = difflib.get_close_matches(tag, list(tags), n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "the run does not log it; check the tag name against NeMo RL's metric names"


# --- progress: the step a run reached -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a run got on one tag, judged on its latest attempt and on contiguous steps.

    NeMo RL logs train metrics at ``step + 1`` (1-indexed, ``grpo.py``); every job of a
    multi-job run writes its own ``exp_NNN/`` (``get_next_experiment_dir``), and a job
    that resumes from the checkpoint saved after step K (``grpo_save_state.total_steps``
    / ``current_step = K``) logs K+1, K+2, ... again. So the run's history is the latest
    attempt's own steps, preceded by what earlier attempts logged *before* the latest one
    started; steps an earlier attempt logged after that are superseded, and steps logged
    past the latest attempt's last step are stale (a newer job restarted before them).

    Attributes:
        tag: the tag judged.
        reached: the last step of contiguous progress from step 1 (0 when step 1 is
            missing), never past the latest attempt's last step.
        last_logged: the latest attempt's last step.
        gaps: missing step ranges ``(first, last)`` up to ``last_logged`` (at most 10).
        missing: number of missing steps in all gaps.
        attempts: ``(label, first, last, points)`` per file that logged the tag, oldest first.
        notes: restarts, resumes and stale steps, in words.
    """

    tag: str
    reached: int
    last_logged: int
    gaps: tuple[tuple[int, int], ...]
    missing: int
    attempts: tuple[tuple[str, int, int, int], ...]
    notes: tuple[str, ...]

    def describe(self) -> str:
        """One sentence on gaps, attempts, restarts and stale steps (empty when plain)."""
        parts = []
        if self.gaps:
            shown = ", ".join(f"{a}..{b}" if a != b else str(a) for a, b in self.gaps)
            covered = sum(b - a + 1 for a, b in self.gaps)
            more = f" and more ({self.missing} steps in all)" if self.missing > covered else ""
            parts.append(f"missing steps {shown}{more} (last logged step {self.last_logged})")
        if len(self.attempts) > 1:
            runs = ", ".join(f"{label} steps {a}..{b}" for label, a, b, _ in self.attempts)
            parts.append(f"{len(self.attempts)} attempts: {runs}")
        parts += list(self.notes)
        return "; ".join(parts)

    def evidence(self) -> dict[str, Any]:
        """JSON-ready facts for the check result."""
        return {
            "tag": self.tag,
            "reached": self.reached,
            "last_logged": self.last_logged,
            "gaps": [list(g) for g in self.gaps],
            "missing_steps": self.missing,
            "attempts": [
                {"file": label, "first": a, "last": b, "points": n}
                for label, a, b, n in self.attempts
            ],
            "notes": list(self.notes),
        }


def _gaps(steps: np.ndarray, end: int) -> tuple[list[tuple[int, int]], int]:
    """Missing ranges of 1..end given sorted unique ``steps`` (steps < 1 are ignored)."""
    have = steps[(steps >= 1) & (steps <= end)]
    edges = np.concatenate(([0], have, [end + 1]))
    diff = np.diff(edges)
    holes = np.flatnonzero(diff > 1)
    ranges = [(int(edges[i]) + 1, int(edges[i + 1]) - 1) for i in holes[:10]]
    return ranges, int(np.sum(diff[holes] - 1))


def run_progress(run: RunMetrics, tag: str, extra_steps: Sequence[int] = ()) -> Progress | None:
    """The progress of ``run`` on ``tag`` (see :class:`Progress`); None if it is not logged.

    Args:
        run: the run.
        tag: the tag whose steps count as training steps (``train/loss``).
        extra_steps: further steps of the latest attempt that prove training reached them
            (an MLPerf log's evaluation steps, whose train stats are not logged).
    """
    series = run.series.get(tag)
    if (series is None or not len(series)) and not extra_steps:
        return None
    steps = series.steps if series is not None else np.zeros(0, np.int64)
    segments = run.segments.get(tag) or ()
    if not segments and steps.size:
        segments = (Segment(0, int(steps.min()), int(steps.max()), int(steps.size)),)
    latest = segments[-1].source if segments else 0
    if series is not None and series.origin is not None and len(segments) > 1:
        own = steps[series.origin == latest]
    else:
        own = steps
    extra = np.asarray(sorted(set(extra_steps)), dtype=np.int64)
    own = np.union1d(own, extra)
    start, end = int(own.min()), int(own.max())
    earlier = steps[steps < start]  # what earlier attempts logged before the latest began
    history = np.union1d(earlier, own)
    gaps, missing = _gaps(history, end)
    reached = end if not gaps else gaps[0][0] - 1
    attempts = tuple((run.file_label(s.source), s.first, s.last, s.count) for s in segments)
    notes = []
    for i, seg in enumerate(segments[1:], start=1):
        before = max(s.last for s in segments[:i])
        label = run.file_label(seg.source)
        if seg.first <= before:
            redo = f"{seg.first}..{min(seg.last, before)}"
            notes.append(
                f"{label} restarted at step {seg.first} after step {before} had been logged "
                f"(steps {redo} logged again; the later values are kept)"
            )
        elif seg.first > before + 1:
            notes.append(f"{label} started at step {seg.first} after step {before}")
    stale = max((s.last for s in segments[:-1]), default=end)
    if stale > end:
        notes.append(
            f"steps {end + 1}..{stale} were logged by an earlier attempt before the latest "
            f"one ({run.file_label(latest)}) restarted at step {start}: stale, not counted"
        )
    return Progress(tag, reached, end, tuple(gaps), missing, attempts, tuple(notes))


# --- merging -------------------------------------------------------------------------


@dataclass
class _Merger:
    """Accumulates (step, value) chunks per tag, later chunks winning."""

    sources: list[str] = field(default_factory=list)
    chunks: dict[str, list[tuple[np.ndarray, np.ndarray, int]]] = field(default_factory=dict)
    anomalies: list[StepAnomaly] = field(default_factory=list)

    @property
    def _origin_dtype(self) -> type:
        return np.uint16 if len(self.sources) <= 0xFFFF else np.uint32

    def source(self, name: str) -> int:
        self.sources.append(name)
        return len(self.sources) - 1

    def add(self, tag: str, steps: np.ndarray, values: np.ndarray, source: int) -> None:
        if steps.size > 1:
            bad = np.flatnonzero(np.diff(steps) <= 0)
            for i in bad[:20]:
                self.anomalies.append(
                    StepAnomaly(tag, self.sources[source], int(steps[i + 1]), int(steps[i]))
                )
        self.chunks.setdefault(tag, []).append((steps, values, source))

    def finish(
        self,
    ) -> tuple[dict[str, MetricSeries], list[Conflict], dict[str, tuple[Segment, ...]]]:
        series: dict[str, MetricSeries] = {}
        conflicts: list[Conflict] = []
        segments: dict[str, tuple[Segment, ...]] = {}
        for tag in list(self.chunks):
            chunks = self.chunks.pop(tag)  # freed as merged: peak memory stays near one copy
            segments[tag] = tuple(
                Segment(src, int(s.min()), int(s.max()), int(s.size))
                for s, _, src in chunks
                if s.size
            )
            series[tag], found = self._merge(tag, chunks)
            conflicts.extend(found)
        return series, conflicts, segments

    def _merge(
        self, tag: str, chunks: list[tuple[np.ndarray, np.ndarray, int]]
    ) -> tuple[MetricSeries, list[Conflict]]:
        if len(chunks) == 1 and (chunks[0][0].size < 2 or np.all(np.diff(chunks[0][0]) > 0)):
            steps, values, src = chunks[0]  # one file, steps increasing: nothing to merge
            origin = np.full(steps.size, src, dtype=self._origin_dtype)
            return MetricSeries(tag, steps.astype(np.int64), values.astype(np.float64), origin), []
        steps = np.concatenate([c[0] for c in chunks]).astype(np.int64, copy=False)
        values = np.concatenate([c[1] for c in chunks]).astype(np.float64, copy=False)
        origin = np.concatenate([np.full(c[0].size, c[2], self._origin_dtype) for c in chunks])
        order = np.lexsort((np.arange(steps.size), steps))  # by step, then arrival order
        steps, values, origin = steps[order], values[order], origin[order]
        keep = np.ones(steps.size, dtype=bool)
        keep[:-1] = steps[1:] != steps[:-1]  # the last arrival of each step wins
        conflicts: list[Conflict] = []
        for i in np.flatnonzero(~keep):
            old, new = values[i], values[i + 1]
            if not (old == new or (math.isnan(old) and math.isnan(new))):
                conflicts.append(
                    Conflict(
                        tag,
                        int(steps[i]),
                        float(old),
                        float(new),
                        self.sources[origin[i]],
                        self.sources[origin[i + 1]],
                    )
                )
        return MetricSeries(tag, steps[keep], values[keep], origin[keep]), conflicts


def _summarise_conflicts(conflicts: list[Conflict]) -> list[str]:
    if not conflicts:
        return []
    shown = ", ".join(f"{c.tag}@{c.step}: {c.old:g}->{c.new:g}" for c in conflicts[:5])
    more = f" (+{len(conflicts) - 5} more)" if len(conflicts) > 5 else ""
    return [
        f"{len(conflicts)} tag/step(s) logged twice with different values; the later file "
        f"wins (as json_dump_tb_logs.py does): {shown}{more}"
    ]


def _no_scalars(source: Path, what: str) -> MetricsError:
    return MetricsError(
        f"{source}: no scalar metrics in {what}",
        hint="a run that has not logged a training step yet cannot be judged",
    )


# --- TensorBoard ---------------------------------------------------------------------


def _event_files(root: Path) -> list[Path]:
    """Every events*tfevents* file under ``root``, following directory symlinks once."""
    found: dict[tuple[int, int], Path] = {}
    seen_dirs: dict[tuple[int, int], Path] = {}

    def refuse(exc: OSError) -> None:
        raise MetricsError(f"cannot read the run directory {exc.filename}: {exc.strerror}")

    for top, dirs, names in os.walk(root, followlinks=True, onerror=refuse):
        st = os.stat(top)
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:
            if _is_loop(top):
                raise MetricsError(
                    f"symlink loop in the run directory: {top} leads back to {seen_dirs[key]}",
                    hint="remove the link; rlgate follows directory symlinks like "
                    "json_dump_tb_logs.py's recursive glob",
                )
            dirs[:] = []  # the same directory reached twice through links: read it once
            continue
        seen_dirs[key] = Path(top)
        for name in names:
            path = Path(top) / name
            if fnmatch.fnmatchcase(name, EVENT_GLOB) and path.is_file():
                st = path.stat()
                found.setdefault((st.st_dev, st.st_ino), path)
    return list(found.values())


def _is_loop(top: str) -> bool:
    """True when a directory is its own ancestor through a link (``a/b/link -> a``)."""
    real = os.path.realpath(top)
    parent = os.path.dirname(top)
    while parent and parent != os.path.dirname(parent):
        if os.path.realpath(parent) == real:
            return True
        parent = os.path.dirname(parent)
    return False


def _order_warning(files: list[Path]) -> list[str]:
    """A note when mtime order (json_dump_tb_logs.py's) disagrees with exp_NNN order."""
    numbers = []
    for f in files:
        exp = next((p for p in f.parts if _EXP_DIR.fullmatch(p)), None)
        numbers.append(int(exp[4:]) if exp else None)
    known = [n for n in numbers if n is not None]
    if known == sorted(known):
        return []
    order = " < ".join(f"exp_{n:03d}" for n in known)
    return [
        f"event files merged by modification time ({order}), which disagrees with NeMo RL's "
        "exp_NNN job order: a later job's values may have been overwritten by an earlier "
        "one (were the files copied without preserving times?)"
    ]


def load_tensorboard_dir(path: str | os.PathLike[str]) -> RunMetrics:
    """Read every event file under ``path`` (or one event file), oldest mtime first."""
    root = Path(path)
    if root.is_file():
        files = [root]
    else:
        files = sorted(_event_files(root), key=lambda p: (p.stat().st_mtime, str(p)))
    if not files:
        raise MetricsError(
            f"no TensorBoard event files (events*tfevents*) under {root}",
            hint="pass NeMo RL's logger.log_dir (it holds exp_NNN/tensorboard/), a "
            "metrics.json written by json_dump_tb_logs.py, or an MLPerf :::MLLOG log",
        )
    merger = _Merger()
    warnings: list[str] = _order_warning(files)
    for file in files:
        scalars = read_event_file(file)
        warnings.extend(scalars.warnings)
        index = merger.source(str(file))
        for tag, (steps, values) in scalars.series.items():
            merger.add(tag, steps, values, index)
    series, conflicts, segments = merger.finish()
    if not series:
        raise _no_scalars(root, f"{len(files)} event file(s)")
    warnings.extend(_summarise_conflicts(conflicts))
    _log_warnings(warnings)
    return RunMetrics(
        source=root,
        kind=SourceKind.TENSORBOARD,
        series=MappingProxyType(series),
        files=tuple(files),
        conflicts=tuple(conflicts),
        anomalies=tuple(merger.anomalies),
        warnings=tuple(warnings),
        segments=MappingProxyType(segments),
    )


def _log_warnings(warnings: list[str]) -> None:
    # INFO, not WARNING: the notes travel in RunMetrics.warnings to the report, JSON and JUnit;
    # logging them as warnings would print them twice through logging's last-resort handler.
    for text in warnings:
        logger.info("%s", text)


# --- metrics.json --------------------------------------------------------------------


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def load_metrics_json(path: str | os.PathLike[str]) -> RunMetrics:
    """Read ``json_dump_tb_logs.py`` output: ``{tag: {step_str: value}}``."""
    file = Path(path)
    hint = "a truncated metrics.json usually means json_dump_tb_logs.py was interrupted"
    text = read_text(file, what="metrics.json", error=MetricsError)
    try:
        doc = json.loads(text, object_pairs_hook=_unique_object)
    except _Duplicate as dup:
        raise MetricsError(
            f"{file}: key {dup.key!r} appears twice in one object; JSON keeps only the last, "
            "so a value would be dropped silently",
            hint="json_dump_tb_logs.py writes every tag and step once",
        ) from None
    except json.JSONDecodeError as exc:
        raise MetricsError(
            f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}", hint=hint
        ) from exc
    except RecursionError:
        raise MetricsError(f"{file}: not valid metrics.json: nested too deeply") from None
    if not isinstance(doc, dict):
        raise MetricsError(
            f"{file}: expected an object {{tag: {{step: value}}}}, got {type(doc).__name__}"
        )
    merger = _Merger()
    index = merger.source(str(file))
    for tag, points in doc.items():
        if not isinstance(points, dict):
            raise MetricsError(
                f"{file}: metric {tag!r} must map step strings to numbers, "
                f"got {type(points).__name__}",
                hint="is this a metrics.json from json_dump_tb_logs.py?",
            )
        steps = np.fromiter((_parse_step(file, tag, k) for k in points), np.int64, len(points))
        values = np.fromiter(
            (_parse_value(file, tag, k, v) for k, v in points.items()), np.float64, len(points)
        )
        order = np.argsort(steps, kind="stable")
        merger.add(tag, steps[order], values[order], index)
    series, conflicts, segments = merger.finish()
    if not series or not any(len(s) for s in series.values()):
        raise _no_scalars(file, "the file")
    return RunMetrics(
        source=file,
        kind=SourceKind.METRICS_JSON,
        series=MappingProxyType(series),
        files=(file,),
        conflicts=tuple(conflicts),
        anomalies=tuple(merger.anomalies),
        segments=MappingProxyType(segments),
    )


def _parse_step(file: Path, tag: str, key: str) -> int:
    if _CANONICAL_STEP.fullmatch(key) and int(key) <= MAX_STEP:
        return int(key)
    raise MetricsError(
        f"{file}: metric {tag!r} has a step key {key[:40]!r} that is not a non-negative "
        f"integer below 2**63 written plainly",
        hint='steps are written as str(int), as json_dump_tb_logs.py does: "10", not '
        '"010", "+10", "1.5" or "-1"',
    )


def _parse_value(file: Path, tag: str, key: str, value: Any) -> float:
    number = json_number(value)
    if number is None:
        shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
        raise MetricsError(f"{file}: metric {tag!r} at step {key} is not a number: {shown[:60]}")
    return number


# --- MLPerf logs ---------------------------------------------------------------------


@dataclass
class _MlperfState:
    merger: _Merger = field(default_factory=_Merger)
    points: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    run_status: str | None = None
    after_stop: int = 0
    last_step: int | None = None
    eval_step: int | None = None
    eval_steps: list[int] = field(default_factory=list)
    unmapped: set[str] = field(default_factory=set)

    def point(self, tag: str, step: int, value: Any, where: str) -> None:
        number = float("nan") if value is None else json_number(value)
        if number is None:
            shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
            raise MetricsError(f"{where}: {tag} at step {step} is not a number: {shown[:60]}")
        steps, values = self.points.setdefault(tag, ([], []))
        steps.append(step)
        values.append(number)

    def saw_step(self, step: int | None) -> None:
        if step is not None:
            self.last_step = step if self.last_step is None else max(self.last_step, step)


def _read_lines(file: Path) -> tuple[list[str], bool]:
    """The log's lines (a torn multi-byte character is replaced); whether a line break ends it."""
    text = read_text(file, what="MLPerf log", error=MetricsError, errors="replace")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    complete = text.endswith("\n")
    if complete:
        lines.pop()  # the empty string after the last line break
    return lines, complete


def load_mlperf_log(path: str | os.PathLike[str]) -> RunMetrics:
    """Read an MLPerf ``:::MLLOG`` run log; other lines (console output) are ignored."""
    file = Path(path)
    lines, complete = _read_lines(file)
    state = _MlperfState()
    index = state.merger.source(str(file))
    warnings: list[str] = []
    mllog_lines = [i for i, line in enumerate(lines) if line.startswith(MLLOG_PREFIX)]
    if not mllog_lines:
        raise MetricsError(f"{file}: no {MLLOG_PREFIX} lines", hint="is this an MLPerf log?")
    for i in mllog_lines:
        try:
            event = json.loads(lines[i][len(MLLOG_PREFIX) :])
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1 and not complete:
                warnings.append(
                    f"{file}:{i + 1}: truncated last {MLLOG_PREFIX} line dropped (no line "
                    "break after it: the writer stopped mid-line)"
                )
                continue
            raise MetricsError(
                f"{file}:{i + 1}: corrupt {MLLOG_PREFIX} line ({exc.msg} at column {exc.colno})",
                hint="only a torn last line (no line break after it) of a live log is tolerated",
            ) from exc
        except RecursionError:
            raise MetricsError(
                f"{file}:{i + 1}: {MLLOG_PREFIX} payload nested too deeply"
            ) from None
        _mlperf_event(file, i + 1, event, state)
    for tag, (steps, values) in state.points.items():
        state.merger.add(tag, np.asarray(steps, np.int64), np.asarray(values, np.float64), index)
    series, conflicts, segments = state.merger.finish()
    if not series:
        raise _no_scalars(file, f"{len(mllog_lines)} {MLLOG_PREFIX} line(s) (no tracked_stats)")
    if state.unmapped:
        warnings.append(
            "tracked_stats keys without a NeMo RL tag kept as mlperf/<key>: "
            + ", ".join(sorted(state.unmapped))
        )
    if state.after_stop:
        warnings.append(
            f"{state.after_stop} training or evaluation event(s) after run_stop "
            f"(status {state.run_status}); the first run_stop is final"
        )
    warnings.extend(_summarise_conflicts(conflicts))
    _log_warnings(warnings)
    metadata = {
        "hyperparameters": MappingProxyType(state.hyperparameters),
        "run_status": state.run_status,
        "eval_steps": tuple(sorted(set(state.eval_steps))),
        "last_step": state.last_step,
    }
    return RunMetrics(
        source=file,
        kind=SourceKind.MLPERF_LOG,
        series=MappingProxyType(series),
        files=(file,),
        conflicts=tuple(conflicts),
        anomalies=tuple(state.merger.anomalies),
        warnings=tuple(warnings),
        metadata=MappingProxyType(metadata),
        segments=MappingProxyType(segments),
    )


def _mlperf_step(where: str, key: str, meta: Mapping[str, Any]) -> int | None:
    """``metadata.step`` as an int; a value that is not a step is an error, never rounded."""
    if "step" not in meta or meta["step"] is None:
        return None
    step = meta["step"]
    ok = not isinstance(step, bool) and (
        (isinstance(step, int) and 0 <= step <= MAX_STEP)
        or (isinstance(step, float) and step.is_integer() and 0 <= step <= MAX_STEP)
    )
    if not ok:
        shown = repr(step) if not isinstance(step, dict | list) else type(step).__name__
        raise MetricsError(
            f"{where}: {key} has metadata.step {shown[:60]}, not a training step (a "
            "non-negative integer below 2**63)",
            hint="MLPerf logs write the step NeMo RL trained as an integer",
        )
    return int(step)


def _mlperf_event(file: Path, lineno: int, event: Any, state: _MlperfState) -> None:
    where = f"{file}:{lineno}"
    if not isinstance(event, dict) or not isinstance(event.get("key"), str):
        raise MetricsError(f"{where}: {MLLOG_PREFIX} payload is not an event object with a key")
    key, value = event["key"], event.get("value")
    meta = event.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise MetricsError(f"{where}: {key} has metadata of type {type(meta).__name__}")
    step = _mlperf_step(where, key, meta)
    stopped = state.run_status is not None
    if key in ("tracked_stats", "eval_accuracy", "eval_start", "eval_stop") and stopped:
        state.after_stop += 1
    if key == "tracked_stats":
        if step is None or not isinstance(value, dict):
            raise MetricsError(f"{where}: tracked_stats without metadata.step or values")
        for name, v in value.items():
            tag = MLPERF_TAGS.get(name)
            if tag is None:
                state.unmapped.add(name)
                tag = f"mlperf/{name}"
            state.point(tag, step, v, where)
        state.saw_step(step)
    elif key == "eval_accuracy":
        eval_step = (
            state.eval_step if state.eval_step is not None else _samples_to_step(meta, state)
        )
        if eval_step is None:
            raise MetricsError(f"{where}: eval_accuracy without a step to attach it to")
        state.point(MLPERF_TAGS["eval_accuracy"], eval_step, value, where)
    elif key in ("eval_start", "eval_stop"):
        if key == "eval_start":
            state.eval_step = step
        elif step is not None:
            state.eval_steps.append(step)
        state.saw_step(step)
    elif key == "run_stop":
        status = meta.get("status")
        if state.run_status is None:  # the first final status stands: "aborted" is final
            state.run_status = str(status) if status is not None else "unknown"
    elif key not in _MLPERF_LIFECYCLE and event.get("event_type") == "POINT_IN_TIME":
        state.hyperparameters[key] = value


def _samples_to_step(meta: Mapping[str, Any], state: _MlperfState) -> int | None:
    samples, gbs = meta.get("samples_count"), state.hyperparameters.get("global_batch_size")
    if (
        isinstance(samples, int)
        and isinstance(gbs, int)
        and not isinstance(samples, bool)
        and not isinstance(gbs, bool)
        and gbs > 0
        and 0 <= samples // gbs <= MAX_STEP
    ):
        return samples // gbs
    return None


# --- dispatch ------------------------------------------------------------------------


def load_run(path: str | os.PathLike[str]) -> RunMetrics:
    """Load a log dir, an event file, a metrics.json or an MLPerf log (detected by content).

    The run (a directory: everything in it) joins the command's output guard's inputs.
    """
    src = Path(path)
    note_input(src, "run")
    if not src.exists():
        raise MetricsError(f"run not found: {src}")
    if src.is_dir() or "tfevents" in src.name:
        return load_tensorboard_dir(src)
    if not src.is_file():
        raise MetricsError(f"{src} is neither a directory nor a regular file")
    with src.open("rb") as fh:
        head = fh.read(4096)
    text = head.decode("utf-8", errors="replace")
    if text.lstrip().startswith(("{", "[")) or src.suffix.lower() == ".json":
        return load_metrics_json(src)
    if MLLOG_PREFIX in text or _has_mllog(src):
        return load_mlperf_log(src)
    raise MetricsError(
        f"cannot tell what {src} is",
        hint="expected NeMo RL's logger.log_dir, an events*tfevents* file, a metrics.json "
        "({tag: {step: value}}) or an MLPerf log (:::MLLOG lines)",
    )


def _has_mllog(src: Path) -> bool:
    """Whether a line of ``src`` starts with ``:::MLLOG`` (read in 1 MiB chunks)."""
    needle = b"\n" + MLLOG_PREFIX.encode()
    carry = b"\n"  # the file's start counts as a line start
    with src.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            if needle in carry + chunk:
                return True
            carry = chunk[-len(needle) :]
    return False


def to_metrics_json(run: RunMetrics) -> dict[str, dict[str, float]]:
    """``json_dump_tb_logs.py``'s output for ``run`` (tags and steps sorted)."""
    return {tag: run.series[tag].as_dict() for tag in run.tags}
