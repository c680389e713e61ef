"""Read a NeMo RL run's scalar metrics into a typed :class:`RunMetrics` record.

:func:`load_run` is the one entry point: the input's format is detected by the registry
(:mod:`rlgate.runs.registry`), whose formats are the modules of :mod:`rlgate.runs.formats`
(``tensorboard``: a ``logger.log_dir`` or an event file; ``metrics_json``:
``json_dump_tb_logs.py``'s output; ``mlperf``: an ``:::MLLOG`` log; and the logger
back-ends added there). The record and its helpers are :mod:`rlgate.runs.records`; the
names below are re-exported so that callers import one module.

Invariants every format keeps:

* Scalars only. Images, histograms, hparams and non-scalar tensors are skipped.
* A tag/step written twice keeps the later value (later file, or later record in a file);
  differing values are recorded as :class:`Conflict` records and summarised in ``warnings``.
  Every kept value remembers the file it came from (:attr:`MetricSeries.origin`) and every
  file's step range per tag is kept (:attr:`RunMetrics.segments`), so that
  :func:`run_progress` can judge a run on its *latest attempt* and on contiguous steps.
* Steps that go backwards inside one event file are recorded as :class:`StepAnomaly`
  (the ``data_integrity`` check fails on them); they are never silently reordered.
* The TFRecord framing is parsed by rlgate: every header and payload CRC32C is verified
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

import os

from rlgate.runs.formats.metrics_json import load_metrics_json
from rlgate.runs.formats.mlperf import MLPERF_TAGS, load_mlperf_log
from rlgate.runs.formats.tensorboard import load_tensorboard_dir
from rlgate.runs.records import (
    TIME_INDEXED_PREFIXES,
    Conflict,
    MetricSeries,
    Progress,
    RunMetrics,
    Segment,
    SourceKind,
    StepAnomaly,
    missing_tag_hint,
    run_progress,
    to_metrics_json,
)
from rlgate.runs.registry import read_run

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
    "missing_tag_hint",
    "run_progress",
    "to_metrics_json",
]


def load_run(path: str | os.PathLike[str]) -> RunMetrics:
    """Load a log dir, an event file, a metrics.json or an MLPerf log (detected by content).

    Or any other registered format (:func:`rlgate.runs.registry.read_run`).
    """
    return read_run(path)
