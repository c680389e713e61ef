"""The run manifest: what was launched, from which code, where its logs are, how it ended.

``rlgate launch`` writes ``<run_dir>/rlgate_manifest.json`` before it submits anything, and
``rlgate watch`` updates it when the run ends; the convergence and perf tiers then read the
run's ``log_dir``. The manifest is self-contained: a watcher needs nothing else (no site
config) to find the job again.

Invariants:

* written only through :func:`rlgate._io.write_json_atomic` (``schema_version``, atomic);
* loading validates every field (pydantic, ``extra="forbid"``), so a truncated, hand-edited
  or foreign file is a clear :class:`~rlgate._errors.LaunchError`, never half-read;
* secrets never enter it: environment variables named in the site config's ``pass_env`` are
  recorded by name only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rlgate._errors import LaunchError
from rlgate._io import SCHEMA_VERSION, write_json_atomic

__all__ = [
    "MANIFEST_NAME",
    "Backend",
    "GitInfo",
    "RecipeRef",
    "RunManifest",
    "RunStatus",
    "load_manifest",
    "now_utc",
    "write_manifest",
]

MANIFEST_NAME = "rlgate_manifest.json"


class Backend(Enum):
    """Where a run executes."""

    SLURM = "slurm"
    RAY = "ray"
    LOCAL = "local"


class RunStatus(Enum):
    """Lifecycle of a launched run, as last recorded."""

    SUBMITTED = "submitted"  # handed to the backend, not yet seen running
    RUNNING = "running"
    COMPLETED = "completed"  # exit 0 and the target step was logged
    STOPPED_SHORT = "stopped_short"  # ended without error before the target step
    FAILED = "failed"  # the job failed (non-zero exit, killed, Slurm/Ray failure state)
    LOST = "lost"  # the backend no longer knows the job and no exit status was recorded


class GitInfo(BaseModel):
    """A checkout's commit, or ``"unknown"`` with the reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str | None
    commit: str
    dirty: bool | None = None
    reason: str | None = None


class RecipeRef(BaseModel):
    """The recipe file and every file of its ``defaults:`` chain, with content hashes."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    path: str
    sha256: str
    sources: dict[str, str]  # path -> sha256, child last


class RunManifest(BaseModel):
    """Everything needed to reproduce, follow and judge one launched run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_name: str
    backend: Backend
    status: RunStatus
    run_dir: str
    log_dir: str  # NeMo RL's logger.log_dir: what the convergence/perf tiers read
    checkpoint_dir: str
    driver_log: str | None  # the training driver's stdout/stderr
    recipe: RecipeRef
    config: dict[str, Any]  # the resolved config NeMo RL receives (all overrides applied)
    unresolved: list[str]  # interpolations that could not be resolved at launch time
    user_overrides: list[str]
    launch_overrides: list[str]  # the ones rlgate adds (steps, log and checkpoint dirs)
    command: str  # the driver command (ray.sub's COMMAND)
    workdir: str | None
    env: dict[str, str]  # literal environment from the site config
    pass_env: list[str]  # names only: values come from the launching environment
    target_step: int
    steps_per_run: int
    runs: int
    nodes: int
    gpus_per_node: int
    minutes: int | None
    gpu_hours: float | None
    nemo_rl: GitInfo
    gym: GitInfo
    versions: dict[str, str]
    job_ids: list[str] = []
    ray_address: str | None = None
    pid: int | None = None
    pid_start: int | None = None  # /proc start time, guards against pid reuse
    slurm_log_root: str | None = None  # ray.sub's BASE_LOG_DIR
    submitted_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    exit_status: int | None = None
    last_step: int | None = None
    message: str | None = None


def now_utc() -> str:
    """The current time as an ISO 8601 UTC timestamp (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_manifest(manifest: RunManifest, *, inputs: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """Write ``manifest`` to ``<run_dir>/rlgate_manifest.json`` atomically."""
    path = Path(manifest.run_dir) / MANIFEST_NAME
    return write_json_atomic(path, manifest.model_dump(mode="json"), inputs=inputs)


def load_manifest(run_dir: str | os.PathLike[str]) -> RunManifest:
    """Read and validate ``<run_dir>/rlgate_manifest.json`` (or the manifest file itself).

    Raises:
        LaunchError: the file is missing, not JSON, of another schema version, or invalid.
    """
    given = Path(run_dir)
    path = given if given.is_file() else given / MANIFEST_NAME
    if not path.is_file():
        raise LaunchError(
            f"no run manifest at {path}",
            hint=f"pass a run directory created by `rlgate launch` (it holds {MANIFEST_NAME})",
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LaunchError(f"{path}: not valid JSON ({exc}); the manifest is corrupt") from exc
    if not isinstance(doc, dict):
        raise LaunchError(f"{path}: a run manifest is a JSON object, got {type(doc).__name__}")
    version = doc.pop("schema_version", None)
    if version != SCHEMA_VERSION:
        raise LaunchError(
            f"{path}: schema_version {version!r}, this rlgate reads {SCHEMA_VERSION}",
            hint="watch the run with the rlgate version that launched it",
        )
    try:
        return RunManifest.model_validate(doc)
    except ValidationError as exc:
        raise LaunchError(f"{path}: invalid run manifest: {exc}") from exc
