"""MLPerf-logging run logs: ``:::MLLOG {json}`` lines, as NeMo RL's MLPerf branch writes them.

``tracked_stats`` keys are mapped onto NeMo RL tag names (:data:`MLPERF_TAGS`); other lines
(console output) are ignored. A torn last line (no line break after it) of a live log is
dropped with a warning; a corrupt line anywhere else, or a ``metadata.step`` that is not a
non-negative integer below 2**63 (``5.7``, ``NaN``, ``1e300``), is a MetricsError. The
metadata (``hyperparameters``, ``run_status``, ``eval_steps``, ``last_step``) is kept for the
completion check.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rlgate.core.errors import MetricsError
from rlgate.core.io import json_number, read_text
from rlgate.runs.records import (
    MAX_STEP,
    Merger,
    RunMetrics,
    SourceKind,
    log_warnings,
    no_scalars,
    summarise_conflicts,
)
from rlgate.runs.registry import RunFormat, RunSource, register

__all__ = ["MLLOG_PREFIX", "MLPERF_TAGS", "MlperfLog", "load_mlperf_log"]

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


@dataclass
class _MlperfState:
    merger: Merger = field(default_factory=Merger)
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
        raise no_scalars(file, f"{len(mllog_lines)} {MLLOG_PREFIX} line(s) (no tracked_stats)")
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
    warnings.extend(summarise_conflicts(conflicts))
    log_warnings(warnings)
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


@register
class MlperfLog(RunFormat):
    """A regular file with a line starting with ``:::MLLOG``."""

    name = "mlperf_log"
    kind = SourceKind.MLPERF_LOG
    order = 30
    shape = "an MLPerf log (:::MLLOG lines)"

    def detect(self, source: RunSource) -> bool:
        """``:::MLLOG`` in the first 4 KiB, else at the start of any line."""
        if not source.is_file or source.path is None or source.fragment is not None:
            return False
        text = source.head().decode("utf-8", errors="replace")
        return MLLOG_PREFIX in text or _has_mllog(source.path)

    def read(self, source: RunSource) -> RunMetrics:
        """:func:`load_mlperf_log` on the file."""
        assert source.path is not None
        return load_mlperf_log(source.path)


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
