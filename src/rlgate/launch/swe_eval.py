"""``rlgate swe eval --backend gym --launch slurm|ray|local``: the Gym plan as one launched job.

The job is the plan of :func:`rlgate.swe.backends.plan_eval`, run as ``rlgate swe eval`` runs
it here: ``ng_run`` in the background until its log shows the ready line, then
``ng_collect_rollouts``, then the server is stopped, whatever happened. rlgate writes it as
``<run>/launch/swe_eval_job.sh`` (:func:`job_script`: every word of every command quoted by
:mod:`rlgate.launch.shell` from the plan's :class:`~rlgate.core.commands.Command` argv) and
the job's command is ``bash <that script>``, from the NeMo RL checkout (Slurm: ray.sub's
``COMMAND``; Ray: the job's entrypoint; local: ``driver_command.sh``); the launcher's own
backends submit it, so site config, manifest and ``rlgate watch`` are those of ``rlgate
launch``.

The manifest (kind ``swe_eval``) records the evaluation itself in ``config``
(:func:`eval_config`), its rollouts to grade as ``target_step``, and as ``recipe`` the
evaluation's name with the hash of its input rows. ``rlgate watch`` reads the progress as
the graded rollouts in the output directory (:func:`graded`, read only; the evaluation is
validated again from the manifest, which is input). A relaunch resumes: the new plan counts
what the output directory already holds, and Gym skips it (``+resume_from_cache=true``).

NeMo-Skills is not launched here: ``ns eval --cluster`` submits itself through its own
cluster config.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlgate.core.errors import InfraError, LaunchError, RlgateError
from rlgate.core.io import write_text_atomic
from rlgate.launch.job import LaunchPlan
from rlgate.launch.manifest import (
    Backend,
    GitInfo,
    RecipeRef,
    RunKind,
    RunManifest,
    RunStatus,
    load_manifest,
)
from rlgate.launch.plan import (
    _default_run_dir,
    _fresh_run_dir,
    _shell_command,
    backend_for,
    launch,
    plan_manifest,
)
from rlgate.launch.shell import Words, code, comment, script
from rlgate.launch.site import SiteConfig
from rlgate.swe.backends import (
    GYM_ROLLOUTS,
    SERVER_READY_TIMEOUT_S,
    ClusterEval,
    EvalPlan,
    progress,
)
from rlgate.swe.backends import Backend as SweBackend

__all__ = [
    "JOB_SCRIPT",
    "LEASE",
    "LEASE_LOCK",
    "eval_config",
    "eval_from_manifest",
    "graded",
    "job_script",
    "launch_swe_eval",
    "live_writer",
    "plan_swe_launch",
    "refuse_live_writer",
    "swe_manifest",
]

JOB_SCRIPT = "launch/swe_eval_job.sh"
#: In the output directory: ``{"run_dir": ...}`` of the last launch into it, so that a second
#: launch (or a run here) finds a job that may still write there. Not a ``.json`` file: no
#: reader of the output directory takes it for results.
LEASE = ".rlgate_launch"
LEASE_LOCK = ".rlgate_launch.lock"
_LIVE = (RunStatus.SUBMITTED, RunStatus.RUNNING, RunStatus.STALLED)
#: Minutes the job gets on top of the plan's wall-time bound (the server's start, at most).
STARTUP_MINUTES = math.ceil(SERVER_READY_TIMEOUT_S / 60)
_NOT_LAUNCHED = (
    "--launch is for --backend gym: ns eval submits itself through its own cluster config "
    "(--cluster), and the docker backend runs here"
)
_STOP = (
    'stop_servers() {{ for pid in ${{servers[@]+"${{servers[@]}}"}}; do '
    'kill -INT -- "-$pid" 2>/dev/null || kill -INT "$pid" 2>/dev/null || continue; '
    'for _ in $(seq 1 60); do kill -0 "$pid" '
    '2>/dev/null || break; sleep 1; done; kill -KILL -- "-$pid" 2>/dev/null || kill -KILL '
    '"$pid" 2>/dev/null || true; done; }}'
)
#: A background server in a process group of its own (``setsid``; its pid is the group's id,
#: since a background job of a non-interactive bash is never a group leader), so that the
#: servers it spawns are stopped with it.
_GROUP = (
    'own_group() {{ if command -v setsid >/dev/null 2>&1; then exec setsid "$@"; fi; exec "$@"; }}'
)
_WAIT = (
    "wait_ready() {{ local pid=$1 log=$2 pattern=$3 limit=$4 name=$5; local deadline=$((SECONDS "
    '+ limit)); until grep -Eq -- "$pattern" "$log" 2>/dev/null; do if ! kill -0 "$pid" '
    '2>/dev/null; then wait "$pid"; local rc=$?; echo "rlgate: error: $name exited with $rc '
    'before it was ready; $log:" >&2; tail -n 10 "$log" >&2; return 1; fi; if (( SECONDS >= '
    'deadline )); then echo "rlgate: error: $name was not ready after $limit s (log: $log)" '
    ">&2; return 1; fi; sleep 1; done; }}"
)


def job_script(plan: EvalPlan, *, server_timeout_s: int = SERVER_READY_TIMEOUT_S) -> str:
    """The job: the plan's commands with ``rlgate swe eval``'s semantics, as a bash script.

    A background command's output goes to ``<output dir>/<program>.log``; the job waits for
    its ready line (``grep -E``: :data:`rlgate.swe.backends.GYM_READY_ERE`), exits 3 when it
    ends or times out first, and stops every server on exit as Ctrl-C would: SIGINT to the
    server's process group, then SIGKILL to the group after 60 s. ``ng_run`` shuts down the
    servers it spawned on SIGINT (nemo-gym 0.7.0 ``nemo_gym/cli/env.py``: ``RunHelper.run_forever``
    catches ``KeyboardInterrupt`` and calls ``RunHelper.shutdown``, which sends each server
    SIGINT and kills it after ``_GRACEFUL_SHUTDOWN_TIMEOUT_SEC``); on SIGTERM it would die
    and leave them running. The job's exit status is the failing command's.
    """
    out = plan.eval.output_dir.resolve()
    lines = [
        comment(f"Written by `rlgate swe eval --backend {plan.eval.backend.value} --launch`:"),
        comment(
            f"  {plan.remaining} of {plan.total} rollouts to run; results {plan.results.resolve()}"
        ),
        code("set -u"),
        code("mkdir -p {out}", out=out),
        code("servers=()"),
        code(_STOP),
        code(_WAIT),
        code(_GROUP),
        code("trap stop_servers EXIT"),
    ]
    for cmd, background, ready in zip(plan.commands, plan.background, plan.ready, strict=True):
        program = cmd.argv[0]
        if background:
            log = out / f"{program}.log"
            lines.append(
                code("own_group {argv} > {log} 2>&1 &", argv=Words(cmd.argv, wrap=True), log=log)
            )
            lines.append(code('servers+=("$!")'))
            if ready is not None:
                lines.append(
                    code(
                        'wait_ready "$!" {log} {pattern} {limit} {name} || exit 3',
                        log=log,
                        pattern=ready.pattern,
                        limit=server_timeout_s,
                        name=program,
                    )
                )
            continue
        lines.append(code("{argv}", argv=Words(cmd.argv, wrap=True)))
        lines.append(
            code(
                'rc=$?; if [ "$rc" -ne 0 ]; then echo {said} >&2; exit "$rc"; fi',
                said=f"rlgate: error: {program} failed; relaunch to resume",
            )
        )
    return script(*lines)


def eval_config(e: ClusterEval) -> dict[str, Any]:
    """``e`` as the manifest's ``config`` (JSON): what :func:`eval_from_manifest` reads back."""
    return {
        "backend": e.backend.value,
        "model": e.model,
        "output_dir": str(e.output_dir.resolve()),
        "instance_ids": list(e.instance_ids),
        "seeds": e.seeds,
        "server_url": e.server_url,
        "server_gpus": e.server_gpus,
        "concurrency": e.concurrency,
        "minutes_per_instance": e.minutes_per_instance,
        "cpus_per_instance": e.cpus_per_instance,
        "gym_input": str(e.gym_input.resolve()) if e.gym_input else None,
        "gym_config": e.gym_config,
        "gym_agent": e.gym_agent,
        "container_formatter": e.container_formatter,
        "cluster": e.cluster,
        "agent_framework": e.agent_framework,
        "overrides": list(e.overrides),
    }


def eval_from_manifest(manifest: RunManifest) -> ClusterEval:
    """The evaluation a ``swe_eval`` manifest records, validated as the CLI's is.

    Raises:
        LaunchError: the manifest's ``config`` is not such an evaluation, or its target is
            not that evaluation's instances x seeds.
    """
    doc = dict(manifest.config)
    try:
        e = ClusterEval(
            backend=SweBackend(doc.pop("backend")),
            output_dir=Path(doc.pop("output_dir")),
            instance_ids=tuple(doc.pop("instance_ids")),
            gym_input=Path(g) if (g := doc.pop("gym_input")) is not None else None,
            overrides=tuple(doc.pop("overrides")),
            **doc,
        )
    except RlgateError as exc:
        raise LaunchError(f"{manifest.run_dir}: the manifest's evaluation: {exc.message}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LaunchError(
            f"{manifest.run_dir}: the manifest's config is not an SWE evaluation ({exc!r:.200})"
        ) from None
    if manifest.target_step != len(e.instance_ids) * e.seeds:
        raise LaunchError(
            f"{manifest.run_dir}: the manifest's target of {manifest.target_step} rollouts is "
            f"not its evaluation's {len(e.instance_ids)} instances x {e.seeds} seed(s)"
        )
    return e


def graded(manifest: RunManifest) -> tuple[int, float | None, str]:
    """The evaluation's graded rollouts in the output dir, its results' mtime, what is not counted.

    What is not counted is :attr:`rlgate.swe.backends.Progress.notes`, joined. Read with the
    plan's own parser (:func:`rlgate.swe.backends.progress`); nothing is written.

    Raises:
        LaunchError: the manifest is not such an evaluation, or its input rows
            (``--gym-input``) are not the ones launched (the manifest's hash of them).
    """
    e = eval_from_manifest(manifest)
    _same_rows(manifest, e)
    done = progress(e)
    results = e.output_dir / GYM_ROLLOUTS
    try:
        updated = results.stat().st_mtime
    except OSError:
        updated = None
    return len(done.done), updated, "; ".join(done.notes)


def _same_rows(manifest: RunManifest, e: ClusterEval) -> None:
    """The input rows are the ones the manifest hashed at launch, or LaunchError."""
    launched = manifest.recipe.sha256
    if e.gym_input is None or launched == "unknown":
        return
    now = _sha256(e.gym_input)
    if now == "unknown":
        raise LaunchError(
            f"{manifest.run_dir}: {e.gym_input}, the rows launched, cannot be read: the "
            "progress of this evaluation cannot be told",
            hint="restore the file the evaluation was launched with",
        )
    if now != launched:
        raise LaunchError(
            f"{manifest.run_dir}: {e.gym_input} changed since the launch (sha256 {now[:12]}, "
            f"launched with {launched[:12]}): the rollouts in {e.output_dir} are not counted "
            "against other rows",
            hint="restore the rows launched, or launch the new rows into a new --output-dir",
        )


def _workdir(backend: Backend, given: str | os.PathLike[str] | None) -> Path | None:
    if given:
        return Path(given).expanduser().resolve()
    if backend is Backend.SLURM:
        raise LaunchError(
            "--launch slurm submits NeMo RL's ray.sub: pass --nemo-rl-dir",
            hint="or set nemo_rl_dir in the site config",
        )
    return Path.cwd().resolve() if backend is Backend.LOCAL else None


def _job_dirs(e: ClusterEval) -> tuple[Path, ...]:
    """The directories the job reads and writes: output, input rows, the .sif images.

    Each as the host resolves it (``..`` and symlinks followed), so that the mount names the
    folder the job will use; the file system's root is never one.

    Raises:
        LaunchError: a directory is ``/`` (e.g. ``--container-formatter /{instance_id}.sif``
            or ``/sif/../{instance_id}.sif``).
    """
    dirs = [("--output-dir", e.output_dir.resolve())]
    if e.gym_input is not None:
        dirs.append(("--gym-input's folder", e.gym_input.resolve().parent))
    if e.container_formatter and e.container_formatter.startswith("/"):
        prefix = e.container_formatter.split("{", 1)[0]
        folder = prefix if prefix.endswith("/") else os.path.dirname(prefix)
        dirs.append(("--container-formatter's images folder", Path(folder).resolve()))
    for what, d in dirs:
        if d == Path(d.anchor):
            raise LaunchError(
                f"{what} is {d}: the job would mount the whole file system into the container",
                hint="name a folder of its own (the .sif images: the folder holding them)",
            )
    paths = [d for _, d in dirs]
    # a directory inside another one listed is seen through it
    return tuple(
        d
        for i, d in enumerate(paths)
        if not any(o in d.parents or (o == d and j < i) for j, o in enumerate(paths))
    )


def plan_swe_launch(
    plan: EvalPlan,
    *,
    backend: Backend,
    site: SiteConfig,
    run_dir: str | os.PathLike[str] | None = None,
    nodes: int = 1,
    gpus_per_node: int = 8,
    minutes: int | None = None,
    nemo_rl_dir: str | os.PathLike[str] | None = None,
) -> LaunchPlan:
    """The launch of ``plan``'s remaining rollouts as one job of ``nodes`` x ``gpus_per_node``.

    The time limit defaults to the plan's wall-time bound plus the server's start.

    Raises:
        LaunchError: not a Gym plan, a run directory that is not fresh or that holds the
            output dir, no NeMo RL checkout for Slurm, a bad size, a mount of ``/``.
    """
    e = plan.eval
    if e.backend is not SweBackend.GYM:
        raise LaunchError(_NOT_LAUNCHED)
    for option, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if isinstance(value, bool) or value < 1:
            raise LaunchError(f"{option} must be a positive integer, got {value!r}")
    name = f"swe-{e.output_dir.name}"
    run = _fresh_run_dir(Path(run_dir) if run_dir else _default_run_dir(site, name))
    out = e.output_dir.resolve()
    if out == run or run in out.parents:
        raise LaunchError(
            f"--output-dir {out} is inside the run directory {run}, which must be new: the "
            "evaluation's output outlives one run (a relaunch resumes from it in a new run dir)",
            hint="pass an --output-dir outside --run-dir",
        )
    workdir = _workdir(backend, nemo_rl_dir or site.nemo_rl_dir)
    argv = ("bash", str(run / JOB_SCRIPT))
    limit = minutes if minutes is not None else math.ceil(plan.wall_hours * 60) + STARTUP_MINUTES
    return LaunchPlan(
        backend=backend,
        recipe=None,
        run_dir=run,
        log_dir=run,
        checkpoint_dir=run,
        argv=argv,
        command=_shell_command(argv, workdir),
        workdir=workdir,
        user_overrides=tuple(e.overrides),
        launch_overrides=(),
        env=dict(site.env),
        pass_env=tuple(site.pass_env),
        target_step=plan.total,
        steps_per_run=plan.total,
        runs=1,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        minutes=limit,
        site=site,
        kind=RunKind.SWE_EVAL,
        title=f"swe eval {e.backend.value} of {e.model} (output {e.output_dir.resolve()})",
        mounts=_job_dirs(e),
        files={JOB_SCRIPT: job_script(plan)},
    )


def _sha256(path: Path | None) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path else "unknown"
    except OSError:
        return "unknown"


def swe_manifest(launch_plan: LaunchPlan, plan: EvalPlan) -> RunManifest:
    """The manifest of the launched evaluation (status ``submitted``, no job id yet)."""
    e = plan.eval
    rows = e.gym_input.resolve() if e.gym_input else None
    digest = _sha256(rows)
    return plan_manifest(
        launch_plan,
        kind=RunKind.SWE_EVAL,
        recipe=RecipeRef(
            name=f"swe-eval-{e.backend.value}",
            path=str(rows or ""),
            sha256=digest,
            sources={str(rows): digest} if rows else {},
        ),
        config=eval_config(e),
        unresolved=[],
        launch_overrides=[],
        gym=GitInfo(path=None, commit="unknown", reason="the container's NeMo Gym"),
    )


def live_writer(output_dir: Path) -> RunManifest | None:
    """The launched run that may still write ``output_dir``, by its lease; else None.

    The lease is input: it counts only when it names a run directory whose manifest is a
    ``swe_eval`` of this very output directory, last recorded live (submitted, running,
    stalled), and whose backend still reports the job pending or running. A lease that is
    unreadable, foreign or names a run that ended is ignored.

    Raises:
        InfraError: the backend cannot be asked (Slurm commands, the Ray dashboard).
    """
    out = output_dir.resolve()
    try:
        doc = json.loads((out / LEASE).read_text(encoding="utf-8"))
        run_dir = doc["run_dir"]
        manifest = load_manifest(run_dir) if isinstance(run_dir, str) else None
    except (OSError, ValueError, TypeError, KeyError, LaunchError):
        return None
    if (
        manifest is None
        or manifest.kind is not RunKind.SWE_EVAL
        or manifest.config.get("output_dir") != str(out)
        or manifest.status not in _LIVE
    ):
        return None
    state = backend_for(manifest.backend).poll(manifest)
    return None if state.phase.terminal else manifest


def refuse_live_writer(output_dir: Path) -> None:
    """LaunchError when a launched job may still write ``output_dir`` (:func:`live_writer`)."""
    try:
        live = live_writer(output_dir)
    except InfraError as exc:
        raise InfraError(
            f"cannot tell whether the job last launched into {output_dir} still writes there: "
            f"{exc.message}",
            hint="nothing was launched; retry when the cluster answers",
        ) from None
    if live is not None:
        raise LaunchError(
            f"--output-dir {output_dir.resolve()} is being written by run {live.run_dir} "
            f"({live.backend.value} job {' '.join(live.job_ids) or '?'}, which its backend "
            "still runs or queues): two jobs would write the same rollouts",
            hint=f"wait for it (rlgate watch {live.run_dir}); a relaunch after it ends "
            "resumes from what it graded",
        )


@contextlib.contextmanager
def _launch_lock(out: Path) -> Iterator[None]:
    """Hold the output directory's launch lock (one ``rlgate`` launching into it at a time)."""
    with (out / LEASE_LOCK).open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise LaunchError(
                f"another rlgate is launching into --output-dir {out} right now",
                hint="let it finish; then a launch sees its job",
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def launch_swe_eval(launch_plan: LaunchPlan, plan: EvalPlan) -> RunManifest:
    """Create the output directory (the container mounts it), then launch the job.

    Under the output directory's lock: refused while a job launched into it may still write
    there (:func:`refuse_live_writer`); the lease names the new run once it is submitted.
    """
    out = plan.eval.output_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with _launch_lock(out):
        refuse_live_writer(out)
        manifest = launch(launch_plan, swe_manifest(launch_plan, plan))
        write_text_atomic(out / LEASE, json.dumps({"run_dir": manifest.run_dir}) + "\n")
    return manifest
