"""W&B runs (``logger.wandb_enabled=True``): recognised, and refused with what to do instead.

NeMo RL's ``WandbLogger`` calls ``wandb.init(dir=<log_dir>/wandb)``, so a run's local files
are ``<log_dir>/wandb/wandb/{run,offline-run}-<time>-<id>/run-<id>.wandb`` (an online run
keeps the file too, for ``wandb sync``). That file is W&B's transaction log: an internal,
undocumented format that wandb >= 0.19 reads only in its Go core (``wandb-core``); the
Python reader (``wandb.sdk.internal.datastore``) and ``wandb sync --view`` are gone from
the wandb 0.31 installed here, and W&B's public API (``wandb.Api().run(...).history()``)
reads a W&B server, not local files. So rlgate does not parse it (a reader of its own for a
private format would gate releases on a guess); a directory holding one, or the file
itself, is exit 2 saying how to get a readable form. A log dir that also holds TensorBoard
event files (NeMo RL's test suites turn both on) is read as TensorBoard: that format comes
first in detection.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from rlgate.core.errors import MetricsError
from rlgate.runs.records import RunMetrics
from rlgate.runs.registry import RunFormat, RunSource, register

__all__ = ["Wandb", "wandb_files"]

RUN_FILE = "run-*.wandb"
_DEPTH = 5  # <log_dir>/exp_NNN/wandb/wandb/run-*/run-*.wandb


def wandb_files(root: Path, limit: int = 3) -> list[Path]:
    """Up to ``limit`` W&B transaction logs under ``root`` (links not followed, depth 5)."""
    found: list[Path] = []
    base = len(root.parts)
    for top, dirs, names in os.walk(root):
        if len(Path(top).parts) - base >= _DEPTH:
            dirs[:] = []
        found += [Path(top) / n for n in sorted(names) if fnmatch.fnmatchcase(n, RUN_FILE)]
        if len(found) >= limit:
            break
    return found[:limit]


@register
class Wandb(RunFormat):
    """A directory holding W&B run files (``run-<id>.wandb``), or one such file."""

    name = "wandb"
    order = 50
    shape = ""  # not offered in hints: it is refused

    def detect(self, source: RunSource) -> bool:
        """A ``run-*.wandb`` file, or a directory with one within five levels."""
        path = source.path
        if path is None or source.fragment is not None:
            return False
        if path.is_file():
            return fnmatch.fnmatchcase(path.name, RUN_FILE)
        return path.is_dir() and bool(wandb_files(path, limit=1))

    def read(self, source: RunSource) -> RunMetrics:
        """Refuse, naming the file and what to pass instead."""
        assert source.path is not None
        files = [source.path] if source.path.is_file() else wandb_files(source.path)
        shown = ", ".join(str(f) for f in files)
        raise MetricsError(
            f"{source.path}: a W&B run ({shown}) and no TensorBoard event files; rlgate cannot "
            "read W&B's run files (an internal format only wandb's Go core reads)",
            hint="run NeMo RL with logger.tensorboard_enabled=True beside "
            "logger.wandb_enabled=True (its test suites do) and pass logger.log_dir, or log "
            "to MLflow (logger.mlflow_enabled=True), or export the run's history from W&B "
            "(wandb.Api().run(PATH).scan_history()) as a metrics.json {tag: {step: value}}",
        )
