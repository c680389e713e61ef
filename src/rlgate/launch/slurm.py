"""The Slurm backend: an sbatch submission of NeMo RL's ``ray.sub`` (nemo-rl.md §1.4, §7).

``ray.sub`` reads its inputs from the environment of ``sbatch``: ``CONTAINER``, ``MOUNTS``,
``COMMAND`` (written to ``driver_command.sh`` and run by ``bash`` in the head container from
the submit directory), ``GPUS_PER_NODE``, ``BASE_LOG_DIR`` (logs go to
``$BASE_LOG_DIR/$SLURM_JOB_ID-logs/``, with ``-$SLURM_RESTART_COUNT`` on requeue: the
driver's output is ``ray-driver.log``; ``ENDED`` marks a failed bring-up). rlgate writes the
submission as a script, ``<run>/launch/sbatch.sh``, and runs it; ``--dry-run`` prints the same
script. Like ``tools/launch``, a run of more steps than one job reaches is a chain of
``ceil(steps / steps_per_run)`` jobs of the same name under ``--dependency=singleton``; each
resumes from the run's checkpoint directory.

Following a job uses ``squeue`` while it is queued or running, then ``sacct`` for its final
state and exit code; a stalled chain is cancelled with ``scancel -- <ids>``. Every command is
built by :func:`rlgate.core.commands.command`, its job ids Slurm's own numeric forms
(:data:`rlgate.launch.manifest.SLURM_JOB_ID`), after ``--`` or inside ``--jobs=``, so no
id can be read as an option. Without Slurm accounting the state is ``unknown`` and the verdict rests
on the ``ENDED`` marker and the run's metrics.

A manifest is input, so a job id in it proves nothing by itself: rlgate submits every job of a
run with ``--chdir=<run directory>`` and ``--job-name=<prefix>:<run name>``, and trusts a
job's state, or cancels it, only when Slurm says the job has that work directory and name
(``squeue --format=%i|%T|%j|%Z``, ``sacct --format=...,JobName,WorkDir``; :func:`_check_ours`).
A job of another run directory, another user's or one submitted by hand is refused (exit 2)
and nothing is cancelled.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rlgate.core.commands import Command, Options, command
from rlgate.core.errors import InfraError, LaunchError
from rlgate.core.io import write_text_atomic
from rlgate.core.text import one_line
from rlgate.launch.job import JobState, LaunchPlan, Phase, check_plain_path
from rlgate.launch.manifest import SLURM_JOB_ID, RunManifest
from rlgate.launch.shell import Words, code, comment, export, require_env, script
from rlgate.launch.site import SLURM_NAME, SiteConfig, SlurmSite

__all__ = [
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "SlurmBackend",
    "SlurmJob",
    "container_mounts",
    "format_time_limit",
    "parse_job_ids",
    "parse_sacct",
    "parse_squeue",
    "render_sbatch_script",
]

SLURM_LOG_SUBDIR = "slurm"
_ACTIVE = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "RESIZING"}
_JOB_ID = re.compile(r"^(\d+)(?:;\S+)?$")
#: What squeue prints of a job (its id, state, name and work directory; no width given, so
#: each field in full, src/squeue/print.c ``_print_str``), and the sacct fields read.
SQUEUE_FORMAT = "%i|%T|%j|%Z"
SACCT_FIELDS = "JobIDRaw,State,ExitCode,Start,End,JobName,WorkDir"
_NOT_OURS_HINT = (
    "rlgate follows and cancels only the jobs it submitted for the run directory it is "
    "pointed at (their work directory is the run directory, their name <prefix>:<run name>); "
    "cancel the job yourself if it is yours"
)


def format_time_limit(minutes: int) -> str:
    """Minutes as Slurm's ``H:MM:SS``."""
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def _covered(path: Path, mounts: list[str]) -> bool:
    for mount in mounts:
        src = Path(mount.split(":", 1)[0])
        if path == src or src in path.parents:
            return True
    return False


def container_mounts(plan: LaunchPlan, slurm: SlurmSite) -> str:
    """``MOUNTS`` for ray.sub: the site's mounts plus the run, recipe and NeMo RL dirs.

    The container must see the recipe chain, write the run's logs and checkpoints, run from
    the NeMo RL checkout and see ``plan.mounts`` (an SWE eval's input, output and images);
    each is mounted at its own path unless a site mount covers it.
    A path rlgate adds must be plain (``rlgate.launch.site.PLAIN_PATH``): ``MOUNTS`` is a
    ``,``-separated list of ``SRC:DST`` that ray.sub pastes unquoted into ``srun`` arguments.
    (The site's own mounts are checked when the site config is loaded.)
    """
    mounts = list(slurm.mounts)
    needs: list[tuple[str, Path | None]] = [("run directory", plan.run_dir)]
    if plan.recipe is not None:
        sources = [str(s.parent) for s in plan.recipe.sources]
        needs.append(("recipe folder", Path(os.path.commonpath(sources))))
    needs.append(("NeMo RL checkout", plan.workdir))
    needs.extend(("job's directory", path) for path in plan.mounts)
    for what, needed in needs:
        if needed is not None and not _covered(needed, mounts):
            check_plain_path(
                needed,
                f"the {what}, mounted into the container as",
                hint="add a site slurm.mounts entry that covers it, or move it to a plain path",
            )
            mounts.append(f"{needed}:{needed}")
    return ",".join(mounts)


def _slurm_site(plan: LaunchPlan) -> SlurmSite:
    if plan.site.slurm is None:
        raise LaunchError(
            "the slurm backend needs a site config with a slurm: block (account, partition, "
            "container, mounts)",
            hint="pass --site FILE (see ci/site.example.yaml) or set RLGATE_SITE",
        )
    return plan.site.slurm


def _check(plan: LaunchPlan, slurm: SlurmSite) -> None:
    if plan.workdir is None:
        raise LaunchError(
            "the slurm backend submits NeMo RL's ray.sub: pass --nemo-rl-dir",
            hint="or set nemo_rl_dir in the site config",
        )
    # sbatch runs from the checkout; ray.sub passes it unquoted (--container-workdir=...).
    check_plain_path(
        plan.workdir, "--nemo-rl-dir", hint="use a checkout path of letters, digits and ._+@/-"
    )
    if not (plan.workdir / slurm.ray_sub).is_file():
        raise LaunchError(f"{plan.workdir / slurm.ray_sub} not found (site slurm.ray_sub)")
    if plan.minutes is None:
        raise LaunchError(
            "a Slurm job needs a time limit: pass --minutes",
            hint="or set slurm.default_minutes in the site config",
        )
    if slurm.max_minutes is not None and plan.minutes > slurm.max_minutes:
        raise LaunchError(
            f"--minutes {plan.minutes} exceeds the partition limit of {slurm.max_minutes}",
            hint="use --steps-per-run to split the run into chained jobs",
        )


def render_sbatch_script(plan: LaunchPlan) -> str:
    """The submission script for ``plan`` (what ``--dry-run`` prints and ``launch`` runs)."""
    slurm = _slurm_site(plan)
    _check(plan, slurm)
    assert plan.workdir is not None and plan.minutes is not None  # checked above
    log_root = plan.run_dir / SLURM_LOG_SUBDIR
    exports = {
        "CONTAINER": slurm.container,
        "MOUNTS": container_mounts(plan, slurm),
        "GPUS_PER_NODE": str(plan.gpus_per_node),
        "BASE_LOG_DIR": str(log_root),
        "COMMAND": plan.command,
    }
    clash = sorted(set(plan.env) & set(exports))
    if clash:  # the site config refuses these names; a plan built by hand might not
        raise LaunchError(f"the site env may not set {clash}: rlgate sets them for ray.sub")
    sbatch = command(
        "sbatch --parsable --nodes={nodes} {gres} --time={time} --account={account} "
        "--partition={partition} --job-name={prefix}:{name} --dependency=singleton "
        "--chdir={run_dir} --output={log_root}/slurm-%j.out {extra} {ray_sub}",
        nodes=plan.nodes,
        gres=Options((f"--gres=gpu:{plan.gpus_per_node}",) if slurm.gres else ()),
        time=format_time_limit(plan.minutes),
        account=slurm.account,
        partition=slurm.partition,
        prefix=slurm.job_name_prefix,
        name=plan.name,
        run_dir=plan.run_dir,
        log_root=log_root,
        extra=Options(slurm.extra_sbatch_args),
        ray_sub=slurm.ray_sub,
        error=LaunchError,
    )
    budget = (
        f"{plan.runs} job(s) x {plan.nodes} nodes x {plan.gpus_per_node} GPUs x "
        f"{plan.minutes} min = {plan.gpu_hours:g} GPU-hours"
    )
    return script(
        comment("Written by `rlgate launch --backend slurm`: submits NeMo RL's ray.sub for"),
        comment(
            f"  recipe  {plan.recipe.name} ({plan.recipe.path})"
            if plan.recipe is not None
            else f"  job     {plan.label}"
        ),
        comment(f"  run     {plan.run_dir}  (target step {plan.target_step})"),
        comment(f"  budget  {budget}"),
        comment(
            "ray.sub runs COMMAND in the head container from the submit directory and logs the"
        ),
        comment(
            "driver to $BASE_LOG_DIR/<jobid>-logs/ray-driver.log. Running this again submits again."
        ),
        code("set -euo pipefail"),
        code("cd {workdir}", workdir=plan.workdir),
        *(export(key, value) for key, value in exports.items()),
        *(export(key, value) for key, value in sorted(plan.env.items())),
        *(require_env(name) for name in plan.pass_env),
        code('mkdir -p "$BASE_LOG_DIR"'),
        code("for _ in $(seq 1 {runs}); do", runs=plan.runs),
        code("  sbatch {args}", args=Words(sbatch.argv[1:], wrap=True)),
        code("done"),
    )


def parse_job_ids(stdout: str) -> list[str]:
    """Job ids from ``sbatch --parsable`` output (``jobid`` or ``jobid;cluster`` per line)."""
    return [m.group(1) for line in stdout.splitlines() if (m := _JOB_ID.match(line.strip()))]


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as squeue or sacct prints it."""

    state: str  # RUNNING, PENDING, COMPLETED, CANCELLED ("CANCELLED by 1234": the first word)
    owner: str  # "<job name>|<work directory>" as printed (a foreign name may hold a '|')
    exit_status: int | None = None  # sacct's ExitCode ``code:signal``: the code
    start: str = ""
    end: str = ""


def parse_squeue(stdout: str) -> dict[str, SlurmJob]:
    """``squeue --noheader --format=%i|%T|%j|%Z`` output -> {job id: job}."""
    out: dict[str, SlurmJob] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3:
            out[parts[0]] = SlurmJob(parts[1], parts[2])
    return out


def parse_sacct(stdout: str) -> dict[str, SlurmJob]:
    """``sacct --noheader --parsable2 --format=JobIDRaw,State,ExitCode,Start,End,JobName,WorkDir``.

    ``State`` may read ``CANCELLED by 1234``; ``ExitCode`` is ``code:signal``.
    """
    out: dict[str, SlurmJob] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 5)
        if len(parts) < 6:
            continue
        code = parts[2].split(":", 1)[0]
        out[parts[0]] = SlurmJob(
            state=parts[1].split()[0] if parts[1].strip() else "",
            owner=parts[5],
            exit_status=int(code) if code.isascii() and code.isdigit() else None,
            start=parts[3],
            end=parts[4],
        )
    return out


def _check_ours(manifest: RunManifest, job_id: str, job: SlurmJob) -> None:
    """Refuse a job rlgate did not submit for this run directory (Slurm's record says so).

    rlgate submits with ``--chdir=<run_dir>`` (resolved and plain, so it holds no ``|``) and
    ``--job-name=<prefix>:<run name>``: the record must end in ``|<run_dir>`` and what is
    left must be such a name.
    """
    run_dir = manifest.run_dir
    name, sep, work_dir = job.owner.rpartition("|")
    wanted = re.compile(rf"{SLURM_NAME}:{re.escape(Path(run_dir).name)}")
    if sep and work_dir == run_dir and wanted.fullmatch(name):
        return
    raise LaunchError(
        f"Slurm job {job_id} was not submitted by rlgate for {run_dir} (Slurm gives its name "
        f"and work directory as {one_line(job.owner)[:300]!r}); nothing was cancelled",
        hint=_NOT_OURS_HINT,
    )


def _run(cmd: Command) -> subprocess.CompletedProcess[str]:
    program = cmd.argv[0]
    try:
        return subprocess.run(cmd.argv, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError as exc:
        raise InfraError(
            f"{program} not found: Slurm commands are not available on this host",
            hint="run rlgate launch/watch --backend slurm on a Slurm login node",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise InfraError(f"{program} did not answer within 120 s (Slurm controller?)") from exc


def _jobs(manifest: RunManifest, ids: list[str]) -> list[str]:
    """``ids`` if each is a Slurm job id (the manifest checked; this is the last gate)."""
    for job in ids:
        if not SLURM_JOB_ID.fullmatch(job):
            raise LaunchError(f"{manifest.run_dir}: job id {job!r:.80} is not a Slurm job id")
    return ids


class SlurmBackend:
    """Submit and follow ray.sub jobs."""

    def __init__(self, site: SiteConfig) -> None:
        self.site = site

    def render(self, plan: LaunchPlan) -> str:
        """The sbatch submission script."""
        return render_sbatch_script(plan)

    def submit(self, plan: LaunchPlan, manifest: RunManifest) -> RunManifest:
        """Write ``launch/sbatch.sh``, run it, record the job ids."""
        script = write_text_atomic(plan.run_dir / "launch" / "sbatch.sh", self.render(plan))
        proc = _run(command("bash {script}", script=script.resolve(), error=LaunchError))
        ids = parse_job_ids(proc.stdout)
        if proc.returncode != 0 or len(ids) != plan.runs:
            done = f"; jobs submitted before it failed: {ids} (scancel them)" if ids else ""
            raise LaunchError(
                f"sbatch failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}{done}"
            )
        return manifest.model_copy(
            update={
                "job_ids": ids,
                "slurm_log_root": str(plan.run_dir / SLURM_LOG_SUBDIR),
            }
        )

    def _queued(self, manifest: RunManifest) -> dict[str, SlurmJob]:
        """The run's jobs squeue still lists (queued, running, completing), each proven ours."""
        ids = _jobs(manifest, manifest.job_ids)
        proc = _run(
            command(
                "squeue --noheader --format={format} --jobs={ids}",
                format=SQUEUE_FORMAT,
                ids=",".join(ids),
                error=LaunchError,
            )
        )
        if proc.returncode != 0 and "invalid job id" not in proc.stderr.lower():
            raise InfraError(f"squeue failed: {proc.stderr.strip()}")
        listed = parse_squeue(proc.stdout) if proc.returncode == 0 else {}
        queued = {i: listed[i] for i in ids if i in listed}
        for job_id, job in queued.items():
            _check_ours(manifest, job_id, job)
        return queued

    def poll(self, manifest: RunManifest) -> JobState:
        """Poll ``squeue`` while queued or running, then ``sacct`` and ray.sub's ENDED marker."""
        states = [job.state for job in self._queued(manifest).values()]
        if states:
            running = any(s in _ACTIVE for s in states)
            return JobState(Phase.RUNNING if running else Phase.PENDING, message=",".join(states))
        return self._final(manifest)

    def _final(self, manifest: RunManifest) -> JobState:
        last = _jobs(manifest, manifest.job_ids)[-1]
        ended = [p for p in self._job_log_dirs(manifest, last) if (p / "ENDED").exists()]
        acct = _run(
            command(
                "sacct --noheader --parsable2 --allocations --format={fields} --jobs={job}",
                fields=SACCT_FIELDS,
                job=last,
                error=LaunchError,
            )
        )
        record = parse_sacct(acct.stdout).get(last) if acct.returncode == 0 else None
        if record is not None:  # Slurm's record of a job decides only if it is the run's
            _check_ours(manifest, last, record)
        if ended:
            return JobState(
                Phase.FAILED,
                exit_status=record.exit_status if record else None,
                message=f"ray.sub wrote {ended[0] / 'ENDED'}: a node or srun failed",
            )
        if record is None:
            why = acct.stderr.strip() or f"job {last} not in sacct"
            return JobState(Phase.UNKNOWN, message=f"no Slurm accounting record ({why})")
        state, code = record.state, record.exit_status
        phase = Phase.SUCCEEDED if state == "COMPLETED" and code == 0 else Phase.FAILED
        message = "" if phase is Phase.SUCCEEDED else f"job {last} ended {state} (exit {code})"
        return JobState(
            phase, exit_status=code, message=message, started_at=record.start, ended_at=record.end
        )

    @staticmethod
    def _job_log_dirs(manifest: RunManifest, job_id: str) -> list[Path]:
        root = Path(manifest.slurm_log_root or Path(manifest.run_dir) / SLURM_LOG_SUBDIR)
        found = [*root.glob(f"{job_id}-logs"), *root.glob(f"{job_id}-*-logs")]
        return sorted(found, key=lambda p: p.lstat().st_mtime, reverse=True)

    def sync_logs(self, manifest: RunManifest) -> None:
        """Nothing to do: ray.sub writes the logs into the run directory."""

    def cancel(self, manifest: RunManifest) -> str:
        """``scancel`` every job of the chain still queued or running (later ones wait on it).

        Only jobs squeue lists with the run's work directory and name (:func:`_check_ours`;
        else LaunchError, nothing cancelled); a job it no longer lists has ended.
        """
        queued = list(self._queued(manifest))
        if not queued:
            return "no job of the chain was still queued or running"
        cmd = command("scancel -- {ids}", ids=queued, error=LaunchError)
        proc = _run(cmd)
        if proc.returncode != 0:
            raise InfraError(f"{cmd} failed: {proc.stderr.strip()}")
        return str(cmd)

    def log_files(self, manifest: RunManifest) -> list[Path]:
        """The last job's ``ray-driver.log`` and every job's ``slurm-<id>.out``."""
        found: list[Path] = []
        for job_id in reversed(manifest.job_ids):
            for log_dir in self._job_log_dirs(manifest, job_id):
                if (log_dir / "ray-driver.log").is_file():
                    found.append(log_dir / "ray-driver.log")
        root = Path(manifest.slurm_log_root or Path(manifest.run_dir) / SLURM_LOG_SUBDIR)
        found.extend(
            p for i in reversed(manifest.job_ids) if (p := root / f"slurm-{i}.out").is_file()
        )
        return found
