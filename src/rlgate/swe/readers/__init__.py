"""Readers for the SWE-bench result formats: :func:`load_runs` and :func:`load_arm`.

Each reader turns one input into :class:`~rlgate.swe.records.SweRun` records that cover the
whole dataset universe. The formats are one module each in :mod:`rlgate.swe.readers.formats`,
registered with their detection in :mod:`rlgate.swe.readers.registry` (the one place a format
is recognised). Read-only and pure: no subprocess, no Docker, no ``swebench.harness`` import
(its package import pulls in docker); the few harness constants needed are mirrored and
checked against swebench in the unit tests. Every problem with an input raises SweError naming
the file (and line, for JSONL).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rlgate.core.errors import SweError
from rlgate.swe.readers._common import (
    APPLY_PATCH_FAIL,
    LOG_INSTANCE,
    LOG_REPORT,
    LOG_RUN_METADATA,
    RUN_EVALUATION_LOG_DIR,
)
from rlgate.swe.readers.formats.harness_report import (
    EVAL_RECORD,
    eval_record_report,
    final_report_lists,
)
from rlgate.swe.readers.registry import detect, readers
from rlgate.swe.records import MAX_RUNS_PER_ARM, DatasetUniverse, SweArm, SweRun

__all__ = [
    "APPLY_PATCH_FAIL",
    "EVAL_RECORD",
    "LOG_INSTANCE",
    "LOG_REPORT",
    "LOG_RUN_METADATA",
    "RUN_EVALUATION_LOG_DIR",
    "eval_record_report",
    "final_report_lists",
    "load_arm",
    "load_runs",
    "read_path",
    "readers",
]


def read_path(p: Path, universe: DatasetUniverse) -> list[SweRun]:
    """Detect the format of ``p`` (:func:`~rlgate.swe.readers.registry.detect`) and read it."""
    reader, probe = detect(p)
    return reader.read(probe, universe)


def load_runs(path: str | os.PathLike[str], universe: DatasetUniverse) -> list[SweRun]:
    """Read one input path into one run (several for Gym repeats and NeMo-Skills seeds).

    The format is detected by shape; anything else raises
    :class:`~rlgate.core.errors.SweError` naming the file.
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
                hint="each path is one run (a Gym rollouts file one per _ng_rollout_index, a "
                "NeMo-Skills results directory one per seed); compare fewer seeds/repeats",
            )
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise SweError(f"the {name} arm lists the same run twice: {labels}")
    return SweArm(name, tuple(runs))
