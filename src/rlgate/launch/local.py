"""The local backend: the driver command in a detached process on this machine (one node).

What it writes into the run directory::

    launch/driver_command.sh   COMMAND byte for byte, run with bash (as ray.sub runs it)
    launch/local_wrapper.sh    exports the site env, runs it, records the exit status
    launch/exit_status         the driver's exit status, written atomically when it ends
    driver.log                 the driver's stdout and stderr

The wrapper starts in its own session and is detached, so ``rlgate launch`` returns at once
and the run outlives the launching shell. ``rlgate watch`` follows it by pid, guarded
against pid reuse by the process start time, and reads the exit status file. A process that
is gone without an exit status was killed (OOM killer, ``kill -9``, reboot): ``failed``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from rlgate.core.errors import LaunchError
from rlgate.core.io import write_text_atomic
from rlgate.launch.job import JobState, LaunchPlan, Phase
from rlgate.launch.manifest import RunManifest, now_utc
from rlgate.launch.shell import code, comment, export, script

__all__ = ["LocalBackend", "process_start_time"]

EXIT_FILE = "launch/exit_status"
_SPAWN = 'bash "$1" </dev/null >/dev/null 2>&1 & echo $!'


def process_start_time(pid: int) -> int | None:
    """The start time of a live, non-zombie process from ``/proc`` (None if gone or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may contain spaces
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return int(fields[19])  # field 22 of proc(5): starttime


def _wrapper(plan: LaunchPlan) -> str:
    """The wrapper script; every value in it is quoted by :mod:`rlgate.launch.shell`.

    It writes only inside ``<run>/launch/`` (created fresh by ``rlgate launch``) and
    ``<run>/driver.log``; the exit status goes to a ``mktemp`` file renamed into place.
    """
    run = plan.run_dir
    launch_dir = run / "launch"
    return script(
        comment(f"rlgate launch --backend local: {plan.recipe.name} -> {run}"),
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
                f"{plan.recipe.name}: cluster.num_nodes is {plan.nodes}; the local backend "
                "runs on this one machine",
                hint="use --backend slurm or ray, or override cluster.num_nodes=1 (and a "
                "one-node topology)",
            )
        return f"{_wrapper(plan)}# launch/driver_command.sh:\n{plan.command}\n"

    def submit(self, plan: LaunchPlan, manifest: RunManifest) -> RunManifest:
        """Write the scripts and start the wrapper detached; record its pid."""
        self.render(plan)
        launch_dir = plan.run_dir / "launch"
        write_text_atomic(launch_dir / "driver_command.sh", plan.command)
        wrapper = write_text_atomic(launch_dir / "local_wrapper.sh", _wrapper(plan))
        proc = subprocess.run(
            ["bash", "-c", _SPAWN, "rlgate-local", str(wrapper)],
            cwd=plan.run_dir,
            capture_output=True,
            text=True,
            start_new_session=True,
            timeout=60,
            check=False,
        )
        try:
            pid = int(proc.stdout.strip())
        except ValueError:
            raise LaunchError(
                f"could not start the local run: {proc.stderr.strip() or proc.stdout!r}"
            ) from None
        return manifest.model_copy(
            update={
                "job_ids": [str(pid)],
                "pid": pid,
                "pid_start": process_start_time(pid),
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
        """SIGTERM the run's process group, SIGKILL it if it is still there after ``grace`` s."""
        if not self._alive(manifest):  # gone, or its pid now belongs to another process
            return f"process {manifest.pid} had already ended"
        assert manifest.pid is not None
        group = os.getpgid(manifest.pid)  # the wrapper leads its own session (see submit)
        os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self._alive(manifest):
            time.sleep(0.1)
        if self._alive(manifest):
            os.killpg(group, signal.SIGKILL)
            return f"process group {group} killed (SIGKILL after {grace:g} s)"
        return f"process group {group} terminated (SIGTERM)"

    @staticmethod
    def _alive(manifest: RunManifest) -> bool:
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
        start = process_start_time(manifest.pid)
        if start is None:
            return False
        return manifest.pid_start is None or start == manifest.pid_start


def _finished(exit_file: Path) -> JobState:
    text = exit_file.read_text(encoding="utf-8").strip()
    try:
        status = int(text)
    except ValueError:
        return JobState(Phase.FAILED, message=f"{exit_file} is corrupt: {text[:40]!r}")
    phase = Phase.SUCCEEDED if status == 0 else Phase.FAILED
    message = "" if status == 0 else f"driver exited with status {status}"
    return JobState(phase, exit_status=status, message=message)
