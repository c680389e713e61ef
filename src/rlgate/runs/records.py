"""The typed record of a run's scalar metrics, shared by every run-input format.

:class:`RunMetrics` (series, files, conflicts, anomalies, warnings, segments) is what every
reader of :mod:`rlgate.runs.formats` returns; :class:`Merger` is how they build it (later
values win, conflicts and backwards steps recorded, never resolved silently), and
:func:`run_progress` judges how far a run got on its latest attempt. The invariants the
readers keep are listed in :mod:`rlgate.runs.metrics`.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from rlgate.core.errors import MetricsError

__all__ = [
    "EXP_DIR",
    "MAX_STEP",
    "TIME_INDEXED_PREFIXES",
    "Conflict",
    "Merger",
    "MetricSeries",
    "Progress",
    "RunMetrics",
    "Segment",
    "SourceKind",
    "StepAnomaly",
    "log_warnings",
    "missing_tag_hint",
    "no_scalars",
    "run_progress",
    "summarise_conflicts",
    "to_metrics_json",
]

logger = logging.getLogger("rlgate.runs.metrics")

TIME_INDEXED_PREFIXES = ("ray/",)
MAX_STEP = (1 << 63) - 1  # TensorBoard's Event.step is an int64
EXP_DIR = re.compile(r"exp_\d+")


class SourceKind(Enum):
    """What kind of input a run was read from."""

    TENSORBOARD = "tensorboard"
    METRICS_JSON = "metrics_json"
    MLPERF_LOG = "mlperf_log"
    MLFLOW = "mlflow"


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
        source: the path given by the user (a store's URL, its password masked).
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

    source: Path | str
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
        exp = next((p for p in rel.parts if EXP_DIR.fullmatch(p)), None)
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
class Merger:
    """Accumulates (step, value) chunks per tag, later chunks winning.

    Every reader feeds it: ``source(name)`` per file (or store), ``add`` per chunk of one
    tag (steps as the file logged them: backwards steps become :class:`StepAnomaly`), then
    ``finish`` merges (a later chunk wins a step; differing values become
    :class:`Conflict` records) and returns the series and their :class:`Segment` s.
    """

    sources: list[str] = field(default_factory=list)
    chunks: dict[str, list[tuple[np.ndarray, np.ndarray, int]]] = field(default_factory=dict)
    anomalies: list[StepAnomaly] = field(default_factory=list)

    @property
    def _origin_dtype(self) -> type:
        return np.uint16 if len(self.sources) <= 0xFFFF else np.uint32

    def source(self, name: str) -> int:
        """Register one file (or store) the chunks come from; its index."""
        self.sources.append(name)
        return len(self.sources) - 1

    def add(self, tag: str, steps: np.ndarray, values: np.ndarray, source: int) -> None:
        """One chunk of ``tag`` from ``source``, in logged order."""
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
        """The merged series, the conflicts found, and each tag's per-source segments."""
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


def summarise_conflicts(conflicts: list[Conflict]) -> list[str]:
    """One warning line for the conflicts (none when there are none)."""
    if not conflicts:
        return []
    shown = ", ".join(f"{c.tag}@{c.step}: {c.old:g}->{c.new:g}" for c in conflicts[:5])
    more = f" (+{len(conflicts) - 5} more)" if len(conflicts) > 5 else ""
    return [
        f"{len(conflicts)} tag/step(s) logged twice with different values; the later file "
        f"wins (as json_dump_tb_logs.py does): {shown}{more}"
    ]


def no_scalars(source: Path, what: str) -> MetricsError:
    """The error for an input that holds no scalar at all."""
    return MetricsError(
        f"{source}: no scalar metrics in {what}",
        hint="a run that has not logged a training step yet cannot be judged",
    )


def log_warnings(warnings: list[str]) -> None:
    """Log a reader's notes at INFO (they also travel in :attr:`RunMetrics.warnings`)."""
    # INFO, not WARNING: the notes travel in RunMetrics.warnings to the report, JSON and JUnit;
    # logging them as warnings would print them twice through logging's last-resort handler.
    for text in warnings:
        logger.info("%s", text)


def to_metrics_json(run: RunMetrics) -> dict[str, dict[str, float]]:
    """``json_dump_tb_logs.py``'s output for ``run`` (tags and steps sorted)."""
    return {tag: run.series[tag].as_dict() for tag in run.tags}
