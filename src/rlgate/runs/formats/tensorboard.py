"""TensorBoard event files: NeMo RL's ``logger.log_dir`` (``exp_NNN/tensorboard/``) or one file.

Every ``**/events*tfevents*`` file, ordered by mtime like ``tests/json_dump_tb_logs.py``, so
the ``exp_NNN/`` dirs of a multi-job run (NeMo RL's ``get_next_experiment_dir`` makes one per
job) merge in order; symlinked directories are followed as ``glob(..., recursive=True)`` does
there, and a symlink loop is an error naming it. The TFRecord framing and the protobufs are
parsed by :mod:`rlgate.runs.tfrecord` (every CRC verified, streaming). A directory that no
other format detects is read here (the fallback): its error says there are no event files.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from types import MappingProxyType

from rlgate.core.errors import MetricsError
from rlgate.runs.records import (
    EXP_DIR,
    Merger,
    RunMetrics,
    SourceKind,
    log_warnings,
    no_scalars,
    summarise_conflicts,
)
from rlgate.runs.registry import RunFormat, RunSource, register, shapes_hint
from rlgate.runs.tfrecord import read_event_file

__all__ = ["EVENT_GLOB", "TensorBoard", "event_files", "load_tensorboard_dir"]

EVENT_GLOB = "events*tfevents*"


def event_files(root: Path) -> list[Path]:
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
        exp = next((p for p in f.parts if EXP_DIR.fullmatch(p)), None)
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


def load_tensorboard_dir(
    path: str | os.PathLike[str], found: list[Path] | None = None
) -> RunMetrics:
    """Read every event file under ``path`` (or one event file), oldest mtime first.

    ``found``: the event files :func:`event_files` already listed (detection did).
    """
    root = Path(path)
    if root.is_file():
        files = [root]
    else:
        listed = found if found is not None else event_files(root)
        files = sorted(listed, key=lambda p: (p.stat().st_mtime, str(p)))
    if not files:
        raise MetricsError(
            f"no TensorBoard event files (events*tfevents*) under {root}",
            hint=f"{shapes_hint()}; NeMo RL writes event files with "
            "logger.tensorboard_enabled=True",
        )
    merger = Merger()
    warnings: list[str] = _order_warning(files)
    for file in files:
        scalars = read_event_file(file)
        warnings.extend(scalars.warnings)
        index = merger.source(str(file))
        for tag, (steps, values) in scalars.series.items():
            merger.add(tag, steps, values, index)
    series, conflicts, segments = merger.finish()
    if not series:
        raise no_scalars(root, f"{len(files)} event file(s)")
    warnings.extend(summarise_conflicts(conflicts))
    log_warnings(warnings)
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


@register
class TensorBoard(RunFormat):
    """A directory holding event files, or one ``*tfevents*`` file."""

    name = "tensorboard"
    kind = SourceKind.TENSORBOARD
    order = 10
    shape = "NeMo RL's logger.log_dir (TensorBoard event files under exp_NNN/tensorboard/)"
    fallback = True

    def detect(self, source: RunSource) -> bool:
        """A directory with an event file under it, or a file named like one."""
        if source.path is None or source.fragment is not None:
            return False
        if source.is_dir:
            files = event_files(source.path)
            source.memo["event_files"] = files
            return bool(files)
        return "tfevents" in source.path.name

    def read(self, source: RunSource) -> RunMetrics:
        """:func:`load_tensorboard_dir` on the source."""
        assert source.path is not None
        return load_tensorboard_dir(source.path, source.memo.get("event_files"))
