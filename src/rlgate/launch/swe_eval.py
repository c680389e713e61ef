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
import errno
import fcntl
import hashlib
import json
import math
import os
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlgate.core.errors import InfraError, LaunchError, RlgateError
from rlgate.core.io import write_text_atomic
from rlgate.core.text import one_line
from rlgate.launch.job import LaunchPlan
from rlgate.launch.local import process_start_time
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
    gym_writes,
    images_folder,
    progress,
)
from rlgate.swe.backends import Backend as SweBackend

__all__ = [
    "JOB_SCRIPT",
    "LEASE",
    "LEASE_LOCK",
    "SUPERVISOR",
    "eval_config",
    "eval_from_manifest",
    "graded",
    "job_script",
    "launch_swe_eval",
    "live_writer",
    "plan_swe_launch",
    "refuse_live_writer",
    "refuse_symlinked_outputs",
    "swe_manifest",
    "writing_here",
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
#: A server's supervisor, run as ``bash -c SUPERVISOR own_group <pid> <argv...>`` in a session
#: of its own (``setsid``): it starts the server (a compound command in the background, so
#: that SIGINT is not ignored as bash ignores it for a background simple command), ignores
#: SIGINT itself, and when ``<pid>`` (the job's shell, or ``rlgate swe eval``) is gone while
#: the server runs -- killed with SIGKILL, with its process group, by the OOM killer; a zombie
#: not yet reaped counts as gone (``/proc/<pid>/stat``) -- stops the group as Ctrl-C would
#: (SIGINT, SIGKILL after 60 s). Its exit status is the server's. A pid reused by another
#: process after the job's death would keep the server up (not handled).
SUPERVISOR = (
    'alive() { kill -0 "$1" 2>/dev/null || return 1; [ -r /proc/$1/stat ] || return 0; '
    'local s; s=$(< "/proc/$1/stat"); s=${s##*) }; [ "${s%% *}" != Z ]; }; '
    'job=$1; shift; ( exec "$@" ) & server=$!; trap "" INT; '
    'while alive "$job" && kill -0 "$server" 2>/dev/null; do sleep 1; done; '
    'if kill -0 "$server" 2>/dev/null; then kill -INT -- "-$$" 2>/dev/null; '
    'for _ in $(seq 1 60); do kill -0 "$server" 2>/dev/null || break; sleep 1; done; '
    'kill -KILL -- "-$$"; fi; wait "$server"'
)
#: A background server in a process group of its own, under :data:`SUPERVISOR` (its pid is
#: the group's: a background job of a non-interactive bash is never a group leader, so
#: ``setsid`` does not fork), so that the servers it spawns are stopped with it. Without
#: ``setsid`` it stays in the job's group, which a kill of the job then reaches.
_GROUP = (
    "own_group() {{ if command -v setsid >/dev/null 2>&1; then exec setsid bash -c "
    '"$supervise" own_group "$$" "$@"; fi; exec "$@"; }}'
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
        code("supervise={text}", text=SUPERVISOR),
        code(_GROUP),
        code("trap stop_servers EXIT"),
    ]
    for cmd, background, ready in zip(plan.commands, plan.background, plan.ready, strict=True):
        program = cmd.argv[0]
        if background:
            log = out / f"{program}.log"
            lines.append(
                code(
                    "if [ -L {log} ]; then echo {said} >&2; exit 2; fi",
                    log=log,
                    said=f"rlgate: error: {log} is a symbolic link; never written through",
                )
            )
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
    if e.container_formatter and (folder := images_folder(e.container_formatter)) is not None:
        dirs.append(("--container-formatter's images folder", folder))
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


def _lease_doc(out: Path) -> dict[str, Any] | None:
    """The output directory's lease as a JSON object, or None (none, or not one: ignored)."""
    path = out / LEASE
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size > 4096:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def live_writer(output_dir: Path) -> str | None:
    """Who may still write ``output_dir``, by its lease, in a few words; else None.

    The lease is input. A launch's (``run_dir``) counts only when it names a run directory
    whose manifest is a ``swe_eval`` of this very output directory, last recorded live
    (submitted, running, stalled), and whose backend still reports the job pending or
    running. A run here's (``pid``, ``pid_start``, ``host``) counts when that process still
    runs on this host with that start time, or runs on another host (it cannot be asked from
    here). A lease that is not a regular file, unreadable, foreign, or of a run that ended is
    ignored.

    Raises:
        InfraError: the backend cannot be asked (Slurm commands, the Ray dashboard).
    """
    out = output_dir.resolve()
    doc = _lease_doc(out)
    if doc is None:
        return None
    if "pid" in doc:
        pid, start, host = doc.get("pid"), doc.get("pid_start"), doc.get("host")
        if type(pid) is not int or type(start) is not int or not isinstance(host, str):
            return None
        if host != socket.gethostname():
            return f"`rlgate swe eval` (pid {pid} on host {one_line(host)[:100]})"
        if pid > 0 and process_start_time(pid) == start:
            return f"`rlgate swe eval` (pid {pid}, still running here)"
        return None
    try:
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
    if state.phase.terminal:
        return None
    job = " ".join(manifest.job_ids) or "?"
    return (
        f"run {manifest.run_dir} ({manifest.backend.value} job {job}, which its backend still "
        "runs or queues)"
    )


def refuse_symlinked_outputs(output_dir: Path) -> None:
    """LaunchError when a file the evaluation writes in ``output_dir`` is a symbolic link.

    The server's log, the rollouts and Gym's sidecars (:func:`rlgate.swe.backends.gym_writes`)
    and the lease: writing one would write (or truncate) the file it points to.
    """
    for path in (*gym_writes(output_dir), output_dir / LEASE, output_dir / LEASE_LOCK):
        if path.is_symlink():
            raise LaunchError(
                f"--output-dir {output_dir}: {path.name} is a symbolic link (to "
                f"{one_line(os.readlink(path))[:200]}): the evaluation writes that file and never "
                "writes through a link",
                hint=f"remove the link {path}, or use another --output-dir",
            )


def refuse_live_writer(output_dir: Path) -> None:
    """LaunchError when a job or a run here may still write ``output_dir`` (:func:`live_writer`)."""
    try:
        live = live_writer(output_dir)
    except InfraError as exc:
        raise InfraError(
            f"cannot tell whether the job last launched into {output_dir} still writes there: "
            f"{exc.message}",
            hint="nothing was run or launched; ask where its backend answers (the cluster's "
            f"login node), or, if that job is gone, remove {output_dir.resolve() / LEASE}",
        ) from None
    if live is not None:
        raise LaunchError(
            f"--output-dir {output_dir.resolve()} is being written by {live}: two writers "
            "would write the same rollouts",
            hint=f"wait for it to end (a launch: rlgate watch RUN_DIR); then the same command "
            f"resumes from what it graded; a lease left by a run that is gone: remove "
            f"{output_dir.resolve() / LEASE}",
        )


@contextlib.contextmanager
def _launch_lock(out: Path) -> Iterator[None]:
    """Hold the output directory's lock (one ``rlgate`` launching or running into it at once).

    The lock file is opened without following a symlink and must be a regular file.
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(out / LEASE_LOCK, flags, 0o666)
    except OSError as exc:
        raise LaunchError(
            f"--output-dir {out}: cannot open its lock {LEASE_LOCK} ({exc.strerror}): a symlink "
            "or another kind of file there is refused",
            hint=f"remove {out / LEASE_LOCK}",
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LaunchError(
                f"--output-dir {out}: its lock {LEASE_LOCK} is not a regular file",
                hint=f"remove {out / LEASE_LOCK}",
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                # the file system has no flock (Lustre without -o flock, some NFS): the lease
                # alone says who writes; two rlgate starting at the same instant are not kept apart
                print(
                    one_line(
                        f"rlgate: warning: the file system of --output-dir {out} cannot lock "
                        f"({exc.strerror}): going on with its lease only"
                    ),
                    file=sys.stderr,
                )
                yield
                return
            raise LaunchError(
                f"another rlgate holds --output-dir {out} right now (launching into it, or "
                "running the evaluation here)",
                hint="let it finish; then the same command sees what it did",
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def writing_here(output_dir: Path) -> Iterator[None]:
    """Hold ``output_dir`` for a run of the plan on this machine (``rlgate swe eval``).

    Under the lock for the whole run: refused while a writer is live; the lease names this
    process (pid, its start time, the host) until it ends, then is removed.
    """
    out = output_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with _launch_lock(out):
        refuse_live_writer(out)
        me = {"pid": os.getpid(), "pid_start": process_start_time(os.getpid()) or 0,
              "host": socket.gethostname()}  # fmt: skip
        write_text_atomic(out / LEASE, json.dumps(me) + "\n")
        try:
            yield
        finally:
            if _lease_doc(out) == me:  # ours still: this run has ended
                (out / LEASE).unlink(missing_ok=True)


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
