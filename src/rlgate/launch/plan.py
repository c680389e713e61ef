"""Launch a recipe's NeMo RL run on Slurm (``ray.sub``), an existing Ray cluster, or locally.

The run is NeMo RL's own command, as its test suites write it (nemo-rl.md §1.3)::

    cd <nemo-rl> && uv run examples/nemo_gym/run_grpo_nemo_gym.py --config <recipe>
        grpo.max_num_steps=N logger.log_dir=<run>/logs logger.tensorboard_enabled=True
        checkpointing.checkpoint_dir=<run>/ckpts <user overrides>

:func:`plan_launch` turns a recipe plus options into a :class:`LaunchPlan` (pure apart from
reading files and ``git``); a :class:`LaunchBackend` renders it (``--dry-run``), submits it and
polls the job; :func:`launch` writes the run manifest (:mod:`rlgate.launch.manifest`) *before*
submitting, so a failed submission still leaves a record. Backends: ``local`` here,
``slurm`` in :mod:`rlgate.launch.slurm`, ``ray`` in :mod:`rlgate.launch.ray_jobs`.

Invariants:

* site specifics (container, mounts, account, partition, time limits, environment) come from
  a site config file (:mod:`rlgate.launch.site`, ``ci/site.example.yaml``), never from code;
* the recipe is loaded and its overrides applied with :func:`rlgate.checks.registry.load_recipe`
  before anything runs: a typo'd key or an ``oc.env`` variable the run will not have stops
  the launch with exit 2;
* a run directory that already holds files is never reused; user overrides may not redirect
  the keys rlgate sets (steps, log and checkpoint dirs, TensorBoard), which the tiers read.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlgate.checks.registry import load_recipe
from rlgate.core.commands import command
from rlgate.core.errors import LaunchError
from rlgate.core.io import write_text_atomic
from rlgate.core.versions import tested_versions
from rlgate.launch.budget import runs_needed
from rlgate.launch.job import LaunchBackend, LaunchPlan, check_plain_path
from rlgate.launch.manifest import Backend, GitInfo, RecipeRef, RunManifest, RunStatus, now_utc
from rlgate.launch.manifest import write_manifest as _write_manifest
from rlgate.launch.shell import Words, code
from rlgate.launch.site import SiteConfig
from rlgate.recipe.load import Recipe

__all__ = [
    "DEFAULT_ENTRYPOINT",
    "GYM_SUBMODULE",
    "backend_for",
    "initial_manifest",
    "launch",
    "plan_launch",
    "plan_manifest",
    "read_git_info",
]

logger = logging.getLogger(__name__)

DEFAULT_ENTRYPOINT = ("uv", "run", "examples/nemo_gym/run_grpo_nemo_gym.py")
GYM_SUBMODULE = Path("3rdparty/Gym-workspace/Gym")
# Keys rlgate sets on the command line; the tiers read what they point at.
RESERVED_KEYS = {
    "grpo.max_num_steps": "--steps",
    "logger.log_dir": "--run-dir",
    "logger.tensorboard_enabled": "nothing (the tiers read the TensorBoard events)",
    "checkpointing.checkpoint_dir": "--run-dir",
}
_OC_ENV = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)\}")
# A chain longer than this is a typo in --steps-per-run, not a run (each link is a Slurm job).
MAX_CHAINED_JOBS = 100


# --- the plan ----------------------------------------------------------------------------


def _override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0].strip()


def _check_user_overrides(overrides: Sequence[str]) -> None:
    for item in overrides:
        key = _override_key(item)
        if key in RESERVED_KEYS:
            raise LaunchError(
                f"override {item!r} changes {key}, which rlgate sets for the run",
                hint=f"use {RESERVED_KEYS[key]} instead",
            )


@contextlib.contextmanager
def _environ(extra: Mapping[str, str]) -> Iterator[None]:
    """Temporarily add ``extra`` to ``os.environ`` so ``oc.env`` resolves as on the cluster."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _check_resolvable(recipe: Recipe, available: set[str], backend: Backend) -> None:
    """Refuse a run whose config would fail to resolve where it starts."""
    if not recipe.unresolved:
        return
    missing = sorted({m for u in recipe.unresolved for m in _OC_ENV.findall(u.expression)})
    missing = [m for m in missing if m not in available]
    other = [u for u in recipe.unresolved if not _OC_ENV.search(u.expression)]
    if missing:
        where = (
            "the site config's env: or pass_env:"
            if backend is Backend.RAY
            else ("the site config's env:, or export them before launching")
        )
        raise LaunchError(
            f"{recipe.name}: the run would stop at config load: environment variable(s) "
            f"{missing} are not set ({len(recipe.unresolved)} interpolation(s) unresolved)",
            hint=f"set them in {where}",
        )
    if other:
        shown = "; ".join(f"{u.key}: {u.expression} ({u.reason})" for u in other[:3])
        raise LaunchError(f"{recipe.name}: interpolation(s) cannot resolve: {shown}")


def _required(recipe: Recipe, value: int | None, key: str) -> int:
    """A fact the launch needs (``load_recipe`` already refused a value of the wrong type)."""
    if value is None:
        raise LaunchError(
            f"{recipe.name}: {key} is not set (absent, null or an unresolved interpolation); "
            "a launch needs a positive integer",
            hint=f"set it in the recipe or pass the override {key}=N",
        )
    return value


def _fresh_run_dir(run_dir: Path) -> Path:
    run_dir = run_dir.expanduser().resolve()
    check_plain_path(
        run_dir, "run directory", hint="use letters, digits and . _ + @ / - in --run-dir"
    )
    if run_dir.exists() and not run_dir.is_dir():
        raise LaunchError(
            f"run directory {run_dir} exists and is not a directory",
            hint="rlgate never reuses a run directory; pass a new --run-dir",
        )
    if run_dir.exists() and any(run_dir.iterdir()):
        raise LaunchError(
            f"run directory {run_dir} already exists and is not empty",
            hint="rlgate never reuses a run directory; pass a new --run-dir",
        )
    return run_dir


def _default_run_dir(site: SiteConfig, name: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    plain = re.sub(r"[^A-Za-z0-9._+@-]", "_", name).lstrip(".") or "run"
    return Path(site.runs_root or "rlgate-runs") / f"{plain}-{stamp}"


def _default_minutes(site: SiteConfig, backend: Backend) -> int | None:
    if backend is Backend.SLURM and site.slurm is not None:
        return site.slurm.default_minutes
    return None


def _workdir(
    given: str | os.PathLike[str] | None, backend: Backend, *, custom: bool
) -> Path | None:
    if not given:
        if custom:
            return None
        raise LaunchError(
            "the NeMo RL command runs from a NeMo RL checkout: pass --nemo-rl-dir",
            hint="or set nemo_rl_dir in the site config",
        )
    workdir = Path(given).expanduser().resolve()
    if backend is Backend.RAY:  # the path is on the Ray head node, not necessarily here
        return workdir
    script = workdir / DEFAULT_ENTRYPOINT[-1]
    if not workdir.is_dir() or (not custom and not script.is_file()):
        raise LaunchError(
            f"--nemo-rl-dir {workdir} is not a NeMo RL checkout (no {DEFAULT_ENTRYPOINT[-1]})",
            hint="pass the root of a NeMo RL clone with its submodules",
        )
    return workdir


def _launch_overrides(steps: int, log_dir: Path, ckpt_dir: Path) -> tuple[str, ...]:
    """What NeMo RL's suite scripts pass: steps, log dir, TensorBoard on, checkpoint dir."""
    return (
        f"grpo.max_num_steps={steps}",
        f"logger.log_dir={log_dir}",
        "logger.tensorboard_enabled=True",
        f"checkpointing.checkpoint_dir={ckpt_dir}",
    )


def _shell_command(argv: Sequence[str], workdir: Path | None) -> str:
    """``argv`` as one shell line, run from ``workdir`` (ray.sub's COMMAND), every word quoted."""
    if workdir is None:
        return code("{argv}", argv=Words(argv))
    return code("cd {workdir} && {argv}", workdir=workdir, argv=Words(argv))


def _load_as_the_run_will(
    path: Path, overrides: Sequence[str], site: SiteConfig, backend: Backend
) -> Recipe:
    """Load the recipe with the run's environment; refuse what would not resolve there.

    A ``pass_env`` variable counts as available although it may be unset here: planning
    reads no value, and :func:`launch` refuses to submit until it is set.
    """
    available = set(site.env) | set(site.pass_env)
    if backend is not Backend.RAY:  # sbatch and subprocesses inherit the launching env
        available |= set(os.environ)
    with _environ(site.env):
        recipe = load_recipe(path, overrides)
    _check_resolvable(recipe, available, backend)
    return recipe


def unset_pass_env(names: Sequence[str]) -> list[str]:
    """The ``pass_env`` names that are not set in this environment (in the site's order)."""
    return [name for name in names if name not in os.environ]


def require_pass_env(names: Sequence[str]) -> None:
    """Refuse to submit while a ``pass_env`` variable is unset: the job would start without it.

    Raises:
        LaunchError: naming every unset variable.
    """
    if absent := unset_pass_env(names):
        raise LaunchError(
            f"the site config's pass_env names {absent}, but they are not set here",
            hint="export them before launching, or drop them from pass_env",
        )


def plan_launch(
    recipe_path: str | os.PathLike[str],
    *,
    backend: Backend,
    site: SiteConfig,
    overrides: Sequence[str] = (),
    steps: int | None = None,
    steps_per_run: int | None = None,
    minutes: int | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    nemo_rl_dir: str | os.PathLike[str] | None = None,
    entrypoint: Sequence[str] | None = None,
) -> LaunchPlan:
    """Resolve a launch: load the recipe with every override, derive nodes, runs and command.

    Raises:
        RecipeError: the recipe or an override cannot be loaded or applied.
        LaunchError: a reserved key is overridden, values are missing or inconsistent, or the
            run directory is not fresh.
    """
    _check_user_overrides(overrides)
    for option, value in (
        ("--steps", steps),
        ("--steps-per-run", steps_per_run),
        ("--minutes", minutes),
    ):
        if value is not None and (isinstance(value, bool) or value < 1):
            raise LaunchError(f"{option} must be a positive integer, got {value!r}")
    path = Path(recipe_path).expanduser().resolve()
    base = load_recipe(path, overrides)
    if steps is None:
        steps = _required(base, base.facts.grpo.max_num_steps, "grpo.max_num_steps")
    run = _fresh_run_dir(Path(run_dir) if run_dir else _default_run_dir(site, path.stem))
    log_dir, ckpt_dir = run / "logs", run / "ckpts"
    added = _launch_overrides(steps, log_dir, ckpt_dir)
    recipe = _load_as_the_run_will(path, (*added, *overrides), site, backend)
    per_run = steps if steps_per_run is None else steps_per_run
    if runs_needed(steps, per_run) > MAX_CHAINED_JOBS:
        raise LaunchError(
            f"--steps {steps} at --steps-per-run {per_run} is a chain of "
            f"{runs_needed(steps, per_run)} jobs (at most {MAX_CHAINED_JOBS})",
            hint="let one job reach more steps (--steps-per-run)",
        )
    if per_run < steps and not recipe.facts.checkpointing.enabled:
        raise LaunchError(
            f"{recipe.name}: {runs_needed(steps, per_run)} chained jobs need checkpoints to "
            "resume, but checkpointing.enabled is false",
            hint="pass checkpointing.enabled=true or --steps-per-run >= --steps",
        )
    workdir = _workdir(nemo_rl_dir or site.nemo_rl_dir, backend, custom=entrypoint is not None)
    cluster = recipe.facts.cluster
    argv = (*(entrypoint or DEFAULT_ENTRYPOINT), "--config", str(path), *added, *overrides)
    return LaunchPlan(
        backend=backend,
        recipe=recipe,
        run_dir=run,
        log_dir=log_dir,
        checkpoint_dir=ckpt_dir,
        argv=argv,
        command=_shell_command(argv, workdir),
        workdir=workdir,
        user_overrides=tuple(overrides),
        launch_overrides=added,
        env=dict(site.env),
        pass_env=tuple(site.pass_env),
        target_step=steps,
        steps_per_run=per_run,
        runs=runs_needed(steps, per_run),
        nodes=_required(recipe, cluster.num_nodes, "cluster.num_nodes"),
        gpus_per_node=_required(recipe, cluster.gpus_per_node, "cluster.gpus_per_node"),
        minutes=minutes if minutes is not None else _default_minutes(site, backend),
        site=site,
    )


# --- provenance ----------------------------------------------------------------------------


def read_git_info(path: Path | None) -> GitInfo:
    """``git rev-parse HEAD`` (and whether the tree is dirty) of a checkout, or why not."""
    if path is None:
        return GitInfo(path=None, commit="unknown", reason="no NeMo RL checkout given")
    if not path.is_dir():
        return GitInfo(path=str(path), commit="unknown", reason="directory does not exist")
    try:
        head = subprocess.run(
            command("git -C {path} rev-parse HEAD", path=path.resolve(), error=LaunchError).argv,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if head.returncode != 0:
            why = head.stderr.strip().splitlines()[-1] if head.stderr.strip() else "git failed"
            return GitInfo(path=str(path), commit="unknown", reason=f"not a git checkout: {why}")
        status = subprocess.run(
            command(
                "git -C {path} status --porcelain --untracked-files=no",
                path=path.resolve(),
                error=LaunchError,
            ).argv,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GitInfo(path=str(path), commit="unknown", reason=f"cannot run git: {exc}")
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return GitInfo(path=str(path), commit=head.stdout.strip(), dirty=dirty)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def plan_manifest(plan: LaunchPlan, **what: Any) -> RunManifest:
    """A manifest of ``plan`` before submission (status ``submitted``, no job id yet).

    ``what``: the fields that depend on what is launched (``recipe``, ``config``,
    ``unresolved``, ``launch_overrides``, ``gym``, ``kind``); the rest come from the plan.
    """
    return RunManifest(
        run_name=plan.name,
        backend=plan.backend,
        status=RunStatus.SUBMITTED,
        run_dir=str(plan.run_dir),
        log_dir=str(plan.log_dir),
        checkpoint_dir=str(plan.checkpoint_dir),
        driver_log=None,
        user_overrides=list(plan.user_overrides),
        command=plan.command,
        workdir=str(plan.workdir) if plan.workdir else None,
        env=dict(plan.env),
        pass_env=list(plan.pass_env),
        target_step=plan.target_step,
        steps_per_run=plan.steps_per_run,
        runs=plan.runs,
        nodes=plan.nodes,
        gpus_per_node=plan.gpus_per_node,
        minutes=plan.minutes,
        gpu_hours=plan.gpu_hours,
        nemo_rl=read_git_info(plan.workdir),
        versions=tested_versions(),
        submitted_at=now_utc(),
        **what,
    )


def initial_manifest(plan: LaunchPlan) -> RunManifest:
    """The manifest of ``plan`` before submission (status ``submitted``, no job id yet)."""
    recipe = plan.recipe
    if recipe is None:
        raise LaunchError(f"{plan.label}: not a recipe's run; its launcher writes its manifest")
    gym_dir = plan.workdir / GYM_SUBMODULE if plan.workdir else None
    return plan_manifest(
        plan,
        recipe=RecipeRef(
            name=recipe.name,
            path=str(recipe.path),
            sha256=_sha256(recipe.path),
            sources={str(s): _sha256(s) for s in recipe.sources},
        ),
        config=recipe.config,
        unresolved=[f"{u.key}: {u.expression}" for u in recipe.unresolved],
        launch_overrides=list(plan.launch_overrides),
        gym=read_git_info(gym_dir),
    )


# --- backends ----------------------------------------------------------------------------


def backend_for(kind: Backend, site: SiteConfig | None = None) -> LaunchBackend:
    """The backend implementation for ``kind`` (``site`` is needed to submit, not to poll)."""
    site = site or SiteConfig()
    if kind is Backend.SLURM:
        from rlgate.launch.slurm import SlurmBackend

        return SlurmBackend(site)
    if kind is Backend.RAY:
        from rlgate.launch.ray_jobs import RayBackend

        return RayBackend(site)
    from rlgate.launch.local import LocalBackend

    return LocalBackend()


def launch(plan: LaunchPlan, manifest: RunManifest | None = None) -> RunManifest:
    """Create the run directory, write the manifest, submit, and record the job handle.

    ``manifest``: the one to write for a job that is not a recipe's run (else it is
    :func:`initial_manifest`); ``plan.files`` are written into the run directory first.

    Raises:
        LaunchError: a ``pass_env`` variable is not set (nothing is written), the backend
            refused the plan or the submission failed (the manifest then records status
            ``failed`` and the reason).
        InfraError: the cluster (Slurm commands, Ray dashboard) is unreachable.
    """
    require_pass_env(plan.pass_env)
    backend = backend_for(plan.backend, plan.site)
    backend.render(plan)  # validates the plan against the backend before anything is written
    run = _fresh_run_dir(plan.run_dir)
    if run != plan.run_dir:  # a symlink appeared since planning: never write through it
        raise LaunchError(
            f"run directory {plan.run_dir} now leads to {run} (a symlink was put there after "
            "the launch was planned); nothing was written",
            hint="pass a new --run-dir",
        )
    run.mkdir(parents=True, exist_ok=True)
    (run / "launch").mkdir()
    for name, text in plan.files.items():
        write_text_atomic(run / name, text)
    manifest = manifest or initial_manifest(plan)
    _write_manifest(manifest)
    try:
        manifest = backend.submit(plan, manifest)
    except BaseException as exc:
        failed = manifest.model_copy(
            update={"status": RunStatus.FAILED, "message": f"submission failed: {exc}"}
        )
        _write_manifest(failed)
        if isinstance(exc, OSError):
            raise LaunchError(f"submission failed: {exc}") from exc
        raise
    _write_manifest(manifest)
    logger.info("launched %s (%s): %s", plan.name, plan.backend.value, manifest.job_ids)
    return manifest
