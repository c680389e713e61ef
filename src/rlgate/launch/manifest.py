"""The run manifest: what was launched, from which code, where its logs are, how it ended.

``rlgate launch`` writes ``<run_dir>/rlgate_manifest.json`` before it submits anything, and
``rlgate watch`` updates it when the run ends; the convergence and perf tiers then read the
run's ``log_dir``. The manifest is self-contained: a watcher needs nothing else (no site
config) to find the job again.

Invariants:

* written only through :func:`rlgate.core.io.write_json_atomic` (``schema_version``, atomic);
* loading validates every field (pydantic, ``extra="forbid"``), so a truncated, hand-edited
  or foreign file is a clear :class:`~rlgate.core.errors.LaunchError`, never half-read;
* a manifest describes the directory it is in: its ``run_dir`` must be that directory and
  every path it records (logs, checkpoints, driver log, Slurm logs) must lie inside it, so
  ``rlgate watch`` never writes (manifest, copied driver log) anywhere else, whatever a
  moved, copied or crafted manifest says;
* job ids are in their backend's own form (:data:`SLURM_JOB_ID`, :data:`RAY_JOB_ID`, the
  local pid), so none can reach ``scancel``/``squeue``/``sacct`` as an option; a local run
  also records its process's start time and launch token, without which
  :func:`rlgate.launch.local.prove_ours` signals nothing;
* secrets never enter it: environment variables named in the site config's ``pass_env`` are
  recorded by name only.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlgate.core.errors import LaunchError
from rlgate.core.io import SCHEMA_VERSION, read_json, write_json_atomic
from rlgate.core.validate import PositiveInt, problems

__all__ = [
    "MANIFEST_NAME",
    "RAY_JOB_ID",
    "SLURM_JOB_ID",
    "Backend",
    "GitInfo",
    "RecipeRef",
    "RunKind",
    "RunManifest",
    "RunStatus",
    "load_manifest",
    "now_utc",
    "write_manifest",
]

MANIFEST_NAME = "rlgate_manifest.json"
_HINT = f"pass a run directory created by `rlgate launch` (it holds {MANIFEST_NAME})"

# A job handle: a Slurm job id, a pid, a Ray submission id, each in its backend's own form
# (RunManifest._job_handles): no spaces, quotes or separators, never an option.
JobId = Annotated[str, Field(max_length=200)]
#: Slurm's job ids as scancel/squeue/sacct read them: a job (``4242``), an array task
#: (``4242_7``) or a heterogeneous job's component (``4242+1``); ids start at 1.
SLURM_JOB_ID = re.compile(r"[1-9][0-9]{0,9}(?:_[0-9]{1,10}|\+[0-9]{1,10})?")
#: Ray job submission ids: rlgate's ``rlgate-<run name>``, or one Ray generated.
RAY_JOB_ID = re.compile(r"rlgate-[A-Za-z0-9._+@-]{1,200}|raysubmit_[A-Za-z0-9]{1,64}")


class Backend(Enum):
    """Where a run executes."""

    SLURM = "slurm"
    RAY = "ray"
    LOCAL = "local"


class RunKind(Enum):
    """What a launched job is, and so how ``rlgate watch`` reads its progress."""

    TRAIN = "train"  # a recipe's NeMo RL run: steps from its metrics under log_dir
    # ``rlgate swe eval --launch``: graded rollouts in the output dir ``config`` names (read
    # only); ``recipe`` names the evaluation and hashes its input rows, ``target_step`` is
    # instances x seeds (rlgate.launch.swe_eval)
    SWE_EVAL = "swe_eval"


class RunStatus(Enum):
    """Lifecycle of a launched run, as last recorded."""

    SUBMITTED = "submitted"  # handed to the backend, not yet seen running
    RUNNING = "running"
    COMPLETED = "completed"  # exit 0 and the target step was logged
    STOPPED_SHORT = "stopped_short"  # ended without error before the target step
    FAILED = "failed"  # the job failed (non-zero exit, killed, Slurm/Ray failure state)
    LOST = "lost"  # the backend no longer knows the job and no exit status was recorded
    STALLED = "stalled"  # running, but no new step for longer than its stall limit


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
    kind: RunKind = RunKind.TRAIN
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
    target_step: PositiveInt
    steps_per_run: PositiveInt
    runs: PositiveInt
    nodes: PositiveInt
    gpus_per_node: PositiveInt
    minutes: PositiveInt | None
    gpu_hours: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None
    nemo_rl: GitInfo
    gym: GitInfo
    versions: dict[str, str]
    job_ids: list[JobId] = []
    ray_address: str | None = None
    pid: PositiveInt | None = None
    pid_start: Annotated[int, Field(strict=True, ge=0)] | None = None  # /proc start time
    # random, also in the local wrapper's environment: proves the process is rlgate's
    launch_token: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    slurm_log_root: str | None = None  # ray.sub's BASE_LOG_DIR
    submitted_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    exit_status: int | None = None
    last_step: int | None = None
    message: str | None = None

    @model_validator(mode="after")
    def _job_handles(self) -> RunManifest:
        """Job ids in their backend's own form: they become scancel/squeue/sacct arguments."""
        for i, job in enumerate(self.job_ids):
            if self.backend is Backend.SLURM and not SLURM_JOB_ID.fullmatch(job):
                raise ValueError(
                    f"job_ids[{i}] {job!r} is not a Slurm job id (4242, array task 4242_7, "
                    "het component 4242+1)"
                )
            if self.backend is Backend.RAY and (i > 0 or not RAY_JOB_ID.fullmatch(job)):
                raise ValueError(
                    f"job_ids[{i}] {job!r} is not the Ray job of a run (one id: "
                    "rlgate-<run name> or raysubmit_<id>)"
                )
            if self.backend is Backend.LOCAL and (
                not job.isdigit() or (self.pid is not None and job != str(self.pid))
            ):
                raise ValueError(f"job_ids[{i}] {job!r} is not the local run's pid ({self.pid})")
        return self

    @model_validator(mode="after")
    def _no_nul(self) -> RunManifest:
        """No string anywhere holds a NUL byte: every one may become a path or an argv word."""
        if where := _nul_at(self.model_dump(mode="json"), ""):
            raise ValueError(f"{where} holds a NUL byte (no path, word or name can)")
        return self

    @model_validator(mode="after")
    def _paths_inside_run_dir(self) -> RunManifest:
        if not posixpath.isabs(self.run_dir) or "\x00" in self.run_dir:
            raise ValueError(f"run_dir {self.run_dir!r} is not an absolute path")
        root = posixpath.normpath(self.run_dir)
        for key in ("log_dir", "checkpoint_dir", "driver_log", "slurm_log_root"):
            value = getattr(self, key)
            if value is None:
                continue
            path = posixpath.normpath(posixpath.join(root, value))
            if "\x00" in value or posixpath.commonpath([root, path]) != root:
                raise ValueError(f"{key} {value!r} is outside the run directory {root}")
        return self


def _nul_at(value: Any, where: str) -> str | None:
    """The dotted place of the first string (value or key) in ``value`` with a NUL byte."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    items: Any = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        place = f"{where}.{key}" if where else str(key)
        if (isinstance(key, str) and "\x00" in key) or (found := _nul_at(item, place)):
            return found or place.replace("\x00", "\\0")
    return None


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
        LaunchError: the file is missing, not JSON, of another schema version, invalid, or
            describes another directory than the one it is in.
    """
    given = Path(run_dir)
    path = given if given.is_file() else given / MANIFEST_NAME
    if not path.is_file():
        raise LaunchError(f"no run manifest at {path}", hint=_HINT)
    doc = read_json(path, what="run manifest", error=LaunchError, hint=_HINT)
    if not isinstance(doc, dict):
        raise LaunchError(f"{path}: a run manifest is a JSON object, got {type(doc).__name__}")
    version = doc.pop("schema_version", None)
    if version != SCHEMA_VERSION:
        raise LaunchError(
            f"{path}: schema_version {version!r}, this rlgate reads {SCHEMA_VERSION}",
            hint="watch the run with the rlgate version that launched it",
        )
    try:
        manifest = RunManifest.model_validate(doc)
    except ValidationError as exc:
        raise LaunchError(f"{path}: invalid run manifest:\n{problems(exc)}", hint=_HINT) from None
    holder = path.parent
    try:
        same = os.path.samefile(holder, manifest.run_dir)
    except OSError:
        same = False
    if not same:
        raise LaunchError(
            f"{path}: the manifest is for run directory {manifest.run_dir!r}, not for "
            f"{holder.resolve()}, where it is (moved, copied or foreign)",
            hint="watch the run in the directory it was launched in; rlgate writes only "
            "inside the run directory its manifest names",
        )
    return manifest
