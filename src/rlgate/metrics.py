"""Read a NeMo RL run's scalar metrics into a typed :class:`RunMetrics` record.

Three inputs are accepted, detected by :func:`load_run`:

* a NeMo RL ``logger.log_dir`` (or any directory): every ``**/events*tfevents*`` file,
  ordered by mtime like ``tests/json_dump_tb_logs.py``, so the ``exp_NNN/`` dirs of a
  resumed run merge in order;
* a ``metrics.json`` in ``json_dump_tb_logs.py``'s format ``{tag: {step_str: value}}``;
* an MLPerf-logging run log (``:::MLLOG {json}`` lines, as NeMo RL's MLPerf branch writes
  them); ``tracked_stats`` keys are mapped onto NeMo RL tag names (:data:`MLPERF_TAGS`).

Invariants:

* Scalars only. Images, histograms, hparams and non-scalar tensors are skipped.
* A tag/step written twice keeps the later value (later file, or later record in a file);
  differing values are recorded as :class:`Conflict` records and summarised in ``warnings``.
* Steps that go backwards inside one event file are recorded as :class:`StepAnomaly`
  (the ``data_integrity`` check fails on them); they are never silently reordered.
* The TFRecord framing is parsed here: every header and payload CRC32C is verified
  (vectorised with numpy, see :mod:`rlgate._tfrecord`). A CRC mismatch anywhere is a
  :class:`~rlgate._errors.MetricsError`; an incomplete record at the very end of a file
  (a live run, or a writer that was killed) is dropped with a warning, since every record
  before it is intact.
* NaN/inf values are kept as they are: the checks report them as FAIL with the step.
* ``ray/*`` tags (NeMo RL's GPU monitor) are indexed by seconds, not training steps;
  :data:`TIME_INDEXED_PREFIXES` names them so that step windows are refused on them.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rlgate._errors import MetricsError
from rlgate._tfrecord import read_event_file

__all__ = [
    "MLPERF_TAGS",
    "TIME_INDEXED_PREFIXES",
    "Conflict",
    "MetricSeries",
    "RunMetrics",
    "SourceKind",
    "StepAnomaly",
    "load_metrics_json",
    "load_mlperf_log",
    "load_run",
    "load_tensorboard_dir",
    "to_metrics_json",
]

logger = logging.getLogger(__name__)

TIME_INDEXED_PREFIXES = ("ray/",)
EVENT_GLOB = "**/events*tfevents*"
MLLOG_PREFIX = ":::MLLOG"

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
    """One scalar tag: strictly increasing integer steps and their float values."""

    tag: str
    steps: np.ndarray
    values: np.ndarray

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
            ``run_status`` ("success"/"aborted"/None) and ``last_step`` (int).
    """

    source: Path
    kind: SourceKind
    series: Mapping[str, MetricSeries]
    files: tuple[Path, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    anomalies: tuple[StepAnomaly, ...] = ()
    warnings: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

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


def missing_tag_hint(tag: str, tags: Iterable[str]) -> str:
    """Did-you-mean text for a missing tag."""
    close = difflib.get_close_matches(tag, list(tags), n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "the run does not log it; check the tag name against NeMo RL's metric names"


# --- merging -------------------------------------------------------------------------


@dataclass
class _Merger:
    """Accumulates (step, value) chunks per tag, later chunks winning."""

    chunks: dict[str, list[tuple[np.ndarray, np.ndarray, str]]] = field(default_factory=dict)
    anomalies: list[StepAnomaly] = field(default_factory=list)

    def add(self, tag: str, steps: np.ndarray, values: np.ndarray, source: str) -> None:
        if steps.size > 1:
            bad = np.flatnonzero(np.diff(steps) <= 0)
            for i in bad[:20]:
                self.anomalies.append(StepAnomaly(tag, source, int(steps[i + 1]), int(steps[i])))
        self.chunks.setdefault(tag, []).append((steps, values, source))

    def finish(self) -> tuple[dict[str, MetricSeries], list[Conflict]]:
        series: dict[str, MetricSeries] = {}
        conflicts: list[Conflict] = []
        for tag, chunks in self.chunks.items():
            series[tag], found = _merge_chunks(tag, chunks)
            conflicts.extend(found)
        return series, conflicts


def _merge_chunks(
    tag: str, chunks: list[tuple[np.ndarray, np.ndarray, str]]
) -> tuple[MetricSeries, list[Conflict]]:
    steps = np.concatenate([c[0] for c in chunks]).astype(np.int64, copy=False)
    values = np.concatenate([c[1] for c in chunks]).astype(np.float64, copy=False)
    origin = np.concatenate([np.full(c[0].size, i) for i, c in enumerate(chunks)])
    order = np.lexsort((np.arange(steps.size), steps))  # by step, then arrival order
    steps, values, origin = steps[order], values[order], origin[order]
    keep = np.ones(steps.size, dtype=bool)
    keep[:-1] = steps[1:] != steps[:-1]  # the last arrival of each step wins
    conflicts: list[Conflict] = []
    dup = np.flatnonzero(~keep)
    for i in dup:
        old, new = values[i], values[i + 1]
        same = old == new or (math.isnan(old) and math.isnan(new))
        if not same:
            conflicts.append(
                Conflict(
                    tag,
                    int(steps[i]),
                    float(old),
                    float(new),
                    chunks[origin[i]][2],
                    chunks[origin[i + 1]][2],
                )
            )
    return MetricSeries(tag, steps[keep], values[keep]), conflicts


def _summarise_conflicts(conflicts: list[Conflict]) -> list[str]:
    if not conflicts:
        return []
    shown = ", ".join(f"{c.tag}@{c.step}: {c.old:g}->{c.new:g}" for c in conflicts[:5])
    more = f" (+{len(conflicts) - 5} more)" if len(conflicts) > 5 else ""
    return [
        f"{len(conflicts)} tag/step(s) logged twice with different values; the later file "
        f"wins (as json_dump_tb_logs.py does): {shown}{more}"
    ]


# --- TensorBoard ---------------------------------------------------------------------


def load_tensorboard_dir(path: str | os.PathLike[str]) -> RunMetrics:
    """Read every event file under ``path`` (or one event file), oldest mtime first."""
    root = Path(path)
    if root.is_file():
        files = [root]
    else:
        files = sorted(root.glob(EVENT_GLOB), key=lambda p: (p.stat().st_mtime, str(p)))
        files = [f for f in files if f.is_file()]
    if not files:
        raise MetricsError(
            f"no TensorBoard event files (events*tfevents*) under {root}",
            hint="pass NeMo RL's logger.log_dir (it holds exp_NNN/tensorboard/), a "
            "metrics.json written by json_dump_tb_logs.py, or an MLPerf :::MLLOG log",
        )
    merger = _Merger()
    warnings: list[str] = []
    for file in files:
        scalars = read_event_file(file)
        warnings.extend(scalars.warnings)
        for tag, (steps, values) in scalars.series.items():
            merger.add(tag, steps, values, str(file))
    series, conflicts = merger.finish()
    if not series:
        warnings.append(f"no scalar values in {len(files)} event file(s) under {root}")
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
    )


def _log_warnings(warnings: list[str]) -> None:
    # INFO, not WARNING: the notes travel in RunMetrics.warnings to the report, JSON and JUnit;
    # logging them as warnings would print them twice through logging's last-resort handler.
    for text in warnings:
        logger.info("%s", text)


# --- metrics.json --------------------------------------------------------------------


def load_metrics_json(path: str | os.PathLike[str]) -> RunMetrics:
    """Read ``json_dump_tb_logs.py`` output: ``{tag: {step_str: value}}``."""
    file = Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MetricsError(
            f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}",
            hint="a truncated metrics.json usually means json_dump_tb_logs.py was interrupted",
        ) from exc
    if not isinstance(doc, dict):
        raise MetricsError(
            f"{file}: expected an object {{tag: {{step: value}}}}, got {type(doc).__name__}"
        )
    merger = _Merger()
    for tag, points in doc.items():
        if not isinstance(points, dict):
            raise MetricsError(
                f"{file}: metric {tag!r} must map step strings to numbers, "
                f"got {type(points).__name__}",
                hint="is this a metrics.json from json_dump_tb_logs.py?",
            )
        steps, values = [], []
        for key, value in points.items():
            steps.append(_parse_step(file, tag, key))
            values.append(_parse_value(file, tag, key, value))
        order = np.argsort(np.asarray(steps, dtype=np.int64), kind="stable")
        merger.add(
            tag,
            np.asarray(steps, dtype=np.int64)[order],
            np.asarray(values, dtype=np.float64)[order],
            str(file),
        )
    series, _ = merger.finish()  # JSON object keys are unique: no conflicts possible
    return RunMetrics(
        source=file, kind=SourceKind.METRICS_JSON, series=MappingProxyType(series), files=(file,)
    )


def _parse_step(file: Path, tag: str, key: str) -> int:
    try:
        return int(key)
    except ValueError:
        raise MetricsError(
            f"{file}: metric {tag!r} has a non-integer step key {key!r}",
            hint="steps must be integer strings, as json_dump_tb_logs.py writes them",
        ) from None


def _parse_value(file: Path, tag: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetricsError(f"{file}: metric {tag!r} at step {key} is not a number: {value!r}")
    return float(value)


# --- MLPerf logs ---------------------------------------------------------------------


@dataclass
class _MlperfState:
    merger: _Merger = field(default_factory=_Merger)
    points: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    run_status: str | None = None
    last_step: int | None = None
    eval_step: int | None = None
    unmapped: set[str] = field(default_factory=set)

    def point(self, tag: str, step: int, value: Any, where: str) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise MetricsError(f"{where}: {tag} at step {step} is not a number: {value!r}")
        steps, values = self.points.setdefault(tag, ([], []))
        steps.append(step)
        values.append(float("nan") if value is None else float(value))

    def saw_step(self, step: int | None) -> None:
        if step is not None:
            self.last_step = step if self.last_step is None else max(self.last_step, step)


def load_mlperf_log(path: str | os.PathLike[str]) -> RunMetrics:
    """Read an MLPerf ``:::MLLOG`` run log; other lines (console output) are ignored."""
    file = Path(path)
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    state = _MlperfState()
    warnings: list[str] = []
    mllog_lines = [i for i, line in enumerate(lines) if line.startswith(MLLOG_PREFIX)]
    if not mllog_lines:
        raise MetricsError(f"{file}: no {MLLOG_PREFIX} lines", hint="is this an MLPerf log?")
    for i in mllog_lines:
        try:
            event = json.loads(lines[i][len(MLLOG_PREFIX) :])
        except json.JSONDecodeError as exc:
            if i == mllog_lines[-1] and i == len(lines) - 1:
                warnings.append(f"{file}:{i + 1}: truncated last {MLLOG_PREFIX} line dropped")
                continue
            raise MetricsError(
                f"{file}:{i + 1}: corrupt {MLLOG_PREFIX} line ({exc.msg} at column {exc.colno})",
                hint="only an incomplete last line of a live log is tolerated",
            ) from exc
        _mlperf_event(file, i + 1, event, state)
    for tag, (steps, values) in state.points.items():
        state.merger.add(
            tag, np.asarray(steps, np.int64), np.asarray(values, np.float64), str(file)
        )
    series, conflicts = state.merger.finish()
    if state.unmapped:
        warnings.append(
            "tracked_stats keys without a NeMo RL tag kept as mlperf/<key>: "
            + ", ".join(sorted(state.unmapped))
        )
    warnings.extend(_summarise_conflicts(conflicts))
    _log_warnings(warnings)
    metadata = {
        "hyperparameters": MappingProxyType(state.hyperparameters),
        "run_status": state.run_status,
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
    )


def _mlperf_event(file: Path, lineno: int, event: Any, state: _MlperfState) -> None:
    if not isinstance(event, dict) or "key" not in event:
        raise MetricsError(f"{file}:{lineno}: {MLLOG_PREFIX} payload is not an event object")
    key, value = event["key"], event.get("value")
    meta = event.get("metadata") or {}
    step = meta.get("step")
    step = int(step) if isinstance(step, int | float) else None
    if key == "tracked_stats":
        if step is None or not isinstance(value, dict):
            raise MetricsError(f"{file}:{lineno}: tracked_stats without metadata.step or values")
        for name, v in value.items():
            tag = MLPERF_TAGS.get(name)
            if tag is None:
                state.unmapped.add(name)
                tag = f"mlperf/{name}"
            state.point(tag, step, v, f"{file}:{lineno}")
        state.saw_step(step)
    elif key == "eval_accuracy":
        eval_step = (
            state.eval_step if state.eval_step is not None else _samples_to_step(meta, state)
        )
        if eval_step is None:
            raise MetricsError(f"{file}:{lineno}: eval_accuracy without a step to attach it to")
        state.point(MLPERF_TAGS["eval_accuracy"], eval_step, value, f"{file}:{lineno}")
    elif key in ("eval_start", "eval_stop", "block_stop"):
        state.eval_step = step if key == "eval_start" else state.eval_step
        state.saw_step(step)
    elif key == "run_stop":
        state.run_status = meta.get("status")
    elif key not in _MLPERF_LIFECYCLE and event.get("event_type") == "POINT_IN_TIME":
        state.hyperparameters[key] = value


def _samples_to_step(meta: Mapping[str, Any], state: _MlperfState) -> int | None:
    samples, gbs = meta.get("samples_count"), state.hyperparameters.get("global_batch_size")
    if isinstance(samples, int) and isinstance(gbs, int) and gbs > 0:
        return samples // gbs
    return None


# --- dispatch ------------------------------------------------------------------------


def load_run(path: str | os.PathLike[str]) -> RunMetrics:
    """Load a log dir, an event file, a metrics.json or an MLPerf log (detected by content)."""
    src = Path(path)
    if not src.exists():
        raise MetricsError(f"run not found: {src}")
    if src.is_dir() or "tfevents" in src.name:
        return load_tensorboard_dir(src)
    with src.open("rb") as fh:
        head = fh.read(4096)
    text = head.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        return load_metrics_json(src)
    if MLLOG_PREFIX in text or _has_mllog(src):
        return load_mlperf_log(src)
    raise MetricsError(
        f"cannot tell what {src} is",
        hint="expected NeMo RL's logger.log_dir, an events*tfevents* file, a metrics.json "
        "({tag: {step: value}}) or an MLPerf log (:::MLLOG lines)",
    )


def _has_mllog(src: Path) -> bool:
    with src.open("r", encoding="utf-8", errors="replace") as fh:
        return any(line.startswith(MLLOG_PREFIX) for line in fh)


def to_metrics_json(run: RunMetrics) -> dict[str, dict[str, float]]:
    """``json_dump_tb_logs.py``'s output for ``run`` (tags and steps sorted)."""
    return {tag: run.series[tag].as_dict() for tag in run.tags}
