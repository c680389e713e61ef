"""The records every launch backend shares: the resolved plan, a job's state, the protocol.

:mod:`rlgate.launch.plan` builds a :class:`LaunchPlan`; the backends
(:mod:`rlgate.launch.slurm`, :mod:`rlgate.launch.ray_jobs`, :mod:`rlgate.launch.local`)
implement :class:`LaunchBackend` over it; nothing here imports a backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

from rlgate.core.errors import LaunchError
from rlgate.core.text import one_line
from rlgate.launch.budget import gpu_hours
from rlgate.launch.manifest import Backend, RunKind, RunManifest
from rlgate.launch.site import PLAIN_PATH, SiteConfig
from rlgate.recipe.load import Recipe

__all__ = ["JobState", "LaunchBackend", "LaunchPlan", "Phase", "check_plain_path"]


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """A fully resolved launch: what runs, where, on what, for how long."""

    backend: Backend
    recipe: Recipe | None  # loaded with every override NeMo RL will receive (None: not a run)
    run_dir: Path
    log_dir: Path
    checkpoint_dir: Path
    argv: tuple[str, ...]  # the driver's argv
    command: str  # ``cd <workdir> && argv`` as one shell string (ray.sub's COMMAND)
    workdir: Path | None  # the NeMo RL checkout (None with a custom entrypoint)
    user_overrides: tuple[str, ...]
    launch_overrides: tuple[str, ...]
    env: Mapping[str, str]
    pass_env: tuple[str, ...]
    target_step: int
    steps_per_run: int
    runs: int
    nodes: int
    gpus_per_node: int
    minutes: int | None
    site: SiteConfig
    kind: RunKind = RunKind.TRAIN
    title: str = ""  # what the job is, when it is not a recipe's run (comments, messages)
    mounts: tuple[Path, ...] = ()  # more directories the job must see (Slurm: mounted)
    # files written under the run directory before submitting (relative path -> text)
    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What the job runs, in a few words: the recipe's name, else :attr:`title`."""
        return self.recipe.name if self.recipe is not None else self.title

    @property
    def gpu_hours(self) -> float | None:
        """``runs * nodes * gpus_per_node * minutes / 60`` (None without a time limit)."""
        if self.minutes is None:
            return None
        return gpu_hours(
            runs=self.runs, nodes=self.nodes, gpus_per_node=self.gpus_per_node, minutes=self.minutes
        )

    @property
    def name(self) -> str:
        """The run's name: its directory's name."""
        return self.run_dir.name


def check_plain_path(path: Path | str, what: str, *, hint: str) -> None:
    """Refuse a path with characters outside :data:`rlgate.launch.site.PLAIN_PATH` (why: there)."""
    bad = sorted({c for c in str(path) if not PLAIN_PATH.fullmatch(c)})
    if bad:
        raise LaunchError(
            f"{what} {one_line(repr(str(path)))} holds {one_line(repr(''.join(bad)))}: NeMo RL's "
            "override parser, Slurm, pyxis mounts or ray.sub's generated scripts would "
            "interpret them",
            hint=hint,
        )


class Phase(Enum):
    """A job's state as its backend reports it."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"  # the backend lost track of it (e.g. no Slurm accounting)

    @property
    def terminal(self) -> bool:
        """True when the job will not change any more."""
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.UNKNOWN)


@dataclass(frozen=True, slots=True)
class JobState:
    """One poll of a job."""

    phase: Phase
    exit_status: int | None = None
    message: str = ""
    started_at: str | None = None
    ended_at: str | None = None


class LaunchBackend(Protocol):
    """What every backend implements."""

    def render(self, plan: LaunchPlan) -> str:
        """The exact script or request ``submit`` would use (``--dry-run`` prints it)."""
        ...

    def submit(self, plan: LaunchPlan, manifest: RunManifest) -> RunManifest:
        """Start the run; return the manifest with the job's handle filled in."""
        ...

    def poll(self, manifest: RunManifest) -> JobState:
        """The job's current state."""
        ...

    def sync_logs(self, manifest: RunManifest) -> None:
        """Bring the local copy of the driver log up to date (no-op where it is a file)."""
        ...

    def log_files(self, manifest: RunManifest) -> list[Path]:
        """The run's logs that exist, the driver log first (for failure triage)."""
        ...

    def cancel(self, manifest: RunManifest) -> str:
        """Cancel the job (a stalled run); return what was done, in a few words."""
        ...
