"""The local backend: the driver command in a detached process on this machine (one node).

What it writes into the run directory::

    launch/driver_command.sh   COMMAND byte for byte, run with bash (as ray.sub runs it)
    launch/local_wrapper.sh    exports the site env, runs it, records the exit status
    launch/exit_status         the driver's exit status, written atomically when it ends
    driver.log                 the driver's stdout and stderr

The wrapper leads its own session (so ``rlgate launch`` returns at once and the run outlives
the launching shell) and its environment carries a random launch token,
``RLGATE_LAUNCH_TOKEN``, that the manifest records too, and the run directory it was launched
for, ``RLGATE_RUN_DIR`` (resolved). ``rlgate watch`` follows it by pid and
reads the exit status file. A process that is gone without an exit status was killed (OOM
killer, ``kill -9``, reboot): ``failed``.

A manifest is input (it can be copied, edited or written by hand), so rlgate polls and signals
a process only when the manifest proves rlgate started it (:func:`prove_ours`): the process
with the recorded pid has the recorded start time (no pid reuse), leads its own session and
process group (the wrapper, not a process inside it or elsewhere), and has the manifest's
launch token and the manifest's run directory in its environment (``/proc/<pid>/environ``,
readable only for one's own processes; a process's environment cannot be changed from
outside, so another run's pid, start time and token copied into this directory's manifest
prove nothing). Anything else is refused with a :class:`~rlgate.core.errors.LaunchError` (exit 2)
and nothing is signalled; a pid whose start time differs, or a process that exits while it is
read (``/proc`` answers ENOENT or ESRCH), is a run that ended.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rlgate.core.commands import command
from rlgate.core.errors import LaunchError
from rlgate.core.io import write_text_atomic
from rlgate.core.text import one_line
from rlgate.launch.job import JobState, LaunchPlan, Phase
from rlgate.launch.manifest import RunManifest, now_utc
from rlgate.launch.shell import code, comment, export, script

__all__ = ["RUN_DIR_ENV", "TOKEN_ENV", "LocalBackend", "process_start_time", "prove_ours"]

EXIT_FILE = "launch/exit_status"
#: The environment variable holding the run's launch token (also in the manifest).
TOKEN_ENV = "RLGATE_LAUNCH_TOKEN"
#: The environment variable holding the run directory the process was launched for.
RUN_DIR_ENV = "RLGATE_RUN_DIR"
# Starts the wrapper in its own session (pid = session = process group), prints its pid and
# waits for rlgate to read its start time, then exits: the wrapper outlives it, detached.
_SPAWN = (
    "import subprocess, sys; "
    "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
    "stderr=subprocess.DEVNULL, start_new_session=True); "
    "print(p.pid, flush=True); sys.stdin.read()"
)
_NOT_OURS_HINT = (
    "rlgate signals only a process it launched itself for this run directory (pid, start "
    "time and launch token of the manifest must match); stop it yourself if it is yours"
)


_DEAD = ("Z", "X")  # zombie, dead (proc(5) state)


@dataclass(frozen=True, slots=True)
class _Stat:
    state: str
    group: int
    session: int
    start: int


def _stat(pid: int) -> _Stat | None:
    """Fields of ``/proc/<pid>/stat`` (proc(5)): state, pgrp, session, starttime."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may contain spaces
    if len(fields) < 20:
        return None
    return _Stat(fields[0], int(fields[2]), int(fields[3]), int(fields[19]))


def process_start_time(pid: int) -> int | None:
    """The start time of a live, non-zombie process from ``/proc`` (None if gone or a zombie)."""
    stat = _stat(pid)
    return None if stat is None or stat.state in _DEAD else stat.start


def _not_ours(manifest: RunManifest, why: str) -> LaunchError:
    return LaunchError(
        f"process {manifest.pid} was not started by rlgate for {manifest.run_dir}: {why}; "
        "nothing was signalled",
        hint=_NOT_OURS_HINT,
    )


def prove_ours(manifest: RunManifest) -> bool:
    """True when the manifest's process is alive and provably the wrapper rlgate launched.

    False when it has ended (gone, a zombie, gone while its ``/proc`` entries were read, or
    its pid now belongs to a process started at another time). Needs ``/proc``.

    Raises:
        LaunchError: a live process has the pid but the manifest cannot prove it is the run's
            (no start time or launch token recorded, not a session leader, token absent, or
            launched for another run directory than the manifest's).
    """
    pid = manifest.pid
    if pid is None:
        return False
    first = _stat(pid)
    if first is None or first.state in _DEAD:
        return False
    if manifest.pid_start is None:
        raise _not_ours(manifest, "the manifest records no start time for it")
    if first.start != manifest.pid_start:
        return False  # the run ended and the pid was reused
    if not (first.group == first.session == pid):
        raise _not_ours(manifest, "it does not lead its own session (rlgate's wrapper does)")
    if manifest.launch_token is None:
        raise _not_ours(manifest, "the manifest records no launch token")
    deadline = time.monotonic() + 1.0
    while True:
        denied: PermissionError | None = None
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except PermissionError as exc:  # EACCES/EPERM: another user's process, if still there
            denied, environ = exc, b""
        except OSError:  # ENOENT, ESRCH: it exited (and was reaped) since its stat was read
            return False
        again = _stat(pid)
        if again is None or again.start != first.start or again.state in _DEAD:
            return False  # ended while we read
        if denied is not None:
            why = f"its environment cannot be read ({denied.strerror})"
            raise _not_ours(manifest, why) from None
        if environ:
            break
        # an exiting process has released its memory (an empty environ) before it becomes a
        # zombie: wait for that; a live process with no environment at all is not the run's
        if time.monotonic() > deadline:
            raise _not_ours(manifest, "its environment is empty")
        time.sleep(0.02)
    items = environ.split(b"\0")
    wanted = f"{TOKEN_ENV}={manifest.launch_token}".encode()
    if not any(hmac.compare_digest(item, wanted) for item in items):
        raise _not_ours(manifest, "the manifest's launch token is not in its environment")
    launched_for = _environ_value(items, RUN_DIR_ENV)
    if launched_for is None:
        raise _not_ours(manifest, f"its environment names no run directory ({RUN_DIR_ENV})")
    here = os.path.realpath(manifest.run_dir)
    if launched_for != os.fsencode(here):
        shown = one_line(os.fsdecode(launched_for))[:300]
        raise _not_ours(manifest, f"it was launched for run directory {shown}, not {here}")
    return True


def _environ_value(items: list[bytes], name: str) -> bytes | None:
    """The value of ``name`` among ``/proc/<pid>/environ``'s ``NAME=value`` items."""
    prefix = f"{name}=".encode()
    return next((item[len(prefix) :] for item in items if item.startswith(prefix)), None)


def _wrapper(plan: LaunchPlan) -> str:
    """The wrapper script; every value in it is quoted by :mod:`rlgate.launch.shell`.

    It writes only inside ``<run>/launch/`` (created fresh by ``rlgate launch``) and
    ``<run>/driver.log``; the exit status goes to a ``mktemp`` file renamed into place.
    """
    run = plan.run_dir
    launch_dir = run / "launch"
    return script(
        comment(f"rlgate launch --backend local: {plan.label} -> {run}"),
        code("cd {workdir}", workdir=plan.workdir or run),
        *(export(key, value) for key, value in sorted(plan.env.items())),
        code(
            "bash {driver} > {log} 2>&1",
            driver=launch_dir / "driver_command.sh",
            log=run / "driver.log",
        ),
        code("rc=$?"),
        code(
            'tmp=$(mktemp {pattern}) && printf \'%s\\n\' "$rc" > "$tmp" && '
            'mv -f "$tmp" {exit_file}',
            pattern=launch_dir / ".exit_status.XXXXXX",
            exit_file=run / EXIT_FILE,
        ),
        code('exit "$rc"'),
    )


class LocalBackend:
    """Run on this machine; one node only."""

    def render(self, plan: LaunchPlan) -> str:
        """The wrapper script and the driver command it runs."""
        if plan.nodes != 1:
            raise LaunchError(
                f"{plan.label}: "
                + (f"cluster.num_nodes is {plan.nodes}" if plan.recipe else f"--nodes {plan.nodes}")
                + "; the local backend "
                "runs on this one machine",
                hint="use --backend slurm or ray, or override cluster.num_nodes=1 (and a "
                "one-node topology)"
                if plan.recipe
                else "use --launch slurm or ray, or --nodes 1",
            )
        return f"{_wrapper(plan)}# launch/driver_command.sh:\n{plan.command}\n"

    def submit(self, plan: LaunchPlan, manifest: RunManifest) -> RunManifest:
        """Write the scripts, start the wrapper in its own session; record pid and token."""
        self.render(plan)
        launch_dir = plan.run_dir / "launch"
        write_text_atomic(launch_dir / "driver_command.sh", plan.command)
        wrapper = write_text_atomic(launch_dir / "local_wrapper.sh", _wrapper(plan))
        token = secrets.token_hex(16)
        bash = shutil.which("bash")
        if bash is None:  # launch() records it as a failed submission
            raise FileNotFoundError(errno.ENOENT, "bash not found on PATH", "bash")
        spawn = command(
            "{python} -c {code} {bash} {wrapper}",
            python=sys.executable,
            code=_SPAWN,
            bash=bash,
            wrapper=wrapper.resolve(),
            error=LaunchError,
        )
        with subprocess.Popen(
            spawn.argv,
            cwd=plan.run_dir,
            env={**os.environ, TOKEN_ENV: token, RUN_DIR_ENV: str(plan.run_dir)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdin and proc.stdout and proc.stderr
            said = proc.stdout.readline().strip()
            # the wrapper is the spawner's child until the spawner exits: its /proc entry
            # (start time) is there even if it has already ended
            pid = int(said) if said.isascii() and said.isdigit() else None
            stat = _stat(pid) if pid is not None else None
            proc.stdin.close()
            err = proc.stderr.read().strip()
        if pid is None:
            why = err.splitlines()[-1] if err else repr(said)
            raise LaunchError(f"could not start the local run: {why[:500]}")
        return manifest.model_copy(
            update={
                "job_ids": [str(pid)],
                "pid": pid,
                "pid_start": stat.start if stat is not None else None,
                "launch_token": token,
                "driver_log": str(plan.run_dir / "driver.log"),
                "started_at": now_utc(),
            }
        )

    def poll(self, manifest: RunManifest) -> JobState:
        """Exit status file first; else is the recorded process still alive."""
        exit_file = Path(manifest.run_dir) / EXIT_FILE
        for attempt in range(2):  # re-read after the liveness check: it may just have ended
            if exit_file.is_file():
                return _finished(exit_file)
            if attempt == 0 and self._alive(manifest):
                return JobState(Phase.RUNNING, started_at=manifest.started_at)
        return JobState(
            Phase.FAILED,
            message=f"process {manifest.pid} ended without recording an exit status "
            "(killed: OOM killer, kill -9 or reboot?)",
        )

    def sync_logs(self, manifest: RunManifest) -> None:
        """Nothing to do: the driver writes ``driver.log`` directly."""

    def log_files(self, manifest: RunManifest) -> list[Path]:
        """``driver.log`` if it exists."""
        log = Path(manifest.run_dir) / "driver.log"
        return [log] if log.is_file() else []

    def cancel(self, manifest: RunManifest, *, grace: float = 10.0) -> str:
        """SIGTERM the run's process group, SIGKILL it if it is still there after ``grace`` s.

        Only a process :func:`prove_ours` proves (else LaunchError, nothing signalled).
        """
        if not Path("/proc/self/stat").is_file():
            raise LaunchError(
                f"cannot prove that process {manifest.pid} is this run's without /proc; "
                "nothing was signalled",
                hint=_NOT_OURS_HINT,
            )
        if not prove_ours(manifest):
            return f"process {manifest.pid} had already ended"
        assert manifest.pid is not None
        group = manifest.pid  # proven: the wrapper leads its own session and process group
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:  # the whole group exited since it was proven
            return f"process {manifest.pid} had already ended"
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self._alive(manifest):
            time.sleep(0.1)
        if self._alive(manifest):
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                return f"process group {group} terminated (SIGTERM)"
            return f"process group {group} killed (SIGKILL after {grace:g} s)"
        return f"process group {group} terminated (SIGTERM)"

    @staticmethod
    def _alive(manifest: RunManifest) -> bool:
        """Is the run's process alive (proven ours, see :func:`prove_ours`)."""
        if manifest.pid is None:
            return False
        if not Path("/proc/self/stat").is_file():  # no procfs (macOS): signal 0 probes the pid
            try:
                os.kill(manifest.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return prove_ours(manifest)


def _finished(exit_file: Path) -> JobState:
    text = exit_file.read_text(encoding="utf-8").strip()
    try:
        status = int(text)
    except ValueError:
        return JobState(Phase.FAILED, message=f"{exit_file} is corrupt: {text[:40]!r}")
    phase = Phase.SUCCEEDED if status == 0 else Phase.FAILED
    message = "" if status == 0 else f"driver exited with status {status}"
    return JobState(phase, exit_status=status, message=message)
