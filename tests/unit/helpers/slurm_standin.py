"""Slurm's user commands as stand-ins on PATH: ``sbatch``, ``squeue``, ``sacct``, ``scancel``.

There is no Slurm here. The four share one job table (``jobs.json``) and each records the argv
it was given (``argv/<tool>``, one word per line). They print what Slurm prints for the options
rlgate passes, as Slurm's man pages and source give it:

* ``sbatch --parsable``: ``<id>;<cluster>``; the job's work directory is ``--chdir`` or the
  directory sbatch ran in, its name ``--job-name`` (sbatch.1);
* ``squeue --noheader --format=FMT --jobs=IDS``: one line per listed job, FMT's ``%i %A %T %j
  %Z %u`` replaced by id, job id, state, name, work directory and user, each in full (no width
  given: ``_print_str`` in src/squeue/print.c), the rest kept; only pending, running,
  suspended and completing jobs (``_filter_job``: no ``--states``); a single id squeue does
  not know is ``slurm_load_jobs error: Invalid job id specified``, exit 1 (squeue.c);
* ``sacct --noheader --parsable2 --format=F1,F2,... --jobs=IDS``: the fields joined by ``|``
  (``JobIDRaw JobID State ExitCode Start End JobName WorkDir User``), nothing for an id it
  has no record of (sacct.1);
* ``scancel -- IDS``: a queued or running job becomes ``CANCELLED by <uid>``.

``install`` puts them first on PATH; tests add jobs Slurm would know of (another user's, one
submitted by hand) with :meth:`FakeSlurm.add`.
"""

from __future__ import annotations

import getpass
import json
import os
import stat
import sys
from pathlib import Path

ACTIVE = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STAGE_OUT"}
TOOLS = ("sbatch", "squeue", "sacct", "scancel")
_DIR_ENV = "RLGATE_TEST_FAKE_SLURM"


class FakeSlurm:
    """The job table and argv records of the stand-ins in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def table(self) -> Path:
        return self.root / "jobs.json"

    def jobs(self) -> dict[str, dict[str, str]]:
        return json.loads(self.table.read_text())

    def add(self, job_id: str, *, name: str, work_dir: str, state: str = "RUNNING",
            user: str = "someone-else", exit_code: str = "0:0") -> None:  # fmt: skip
        jobs = self.jobs()
        jobs[job_id] = _job(name, work_dir, state, user, exit_code)
        self.table.write_text(json.dumps(jobs))

    def set_state(self, job_id: str, state: str, exit_code: str = "0:0") -> None:
        jobs = self.jobs()
        jobs[job_id].update(state=state, exit=exit_code, end="2026-01-01T03:10:00")
        self.table.write_text(json.dumps(jobs))

    def argv(self, tool: str) -> list[str] | None:
        """What ``tool`` was last called with (None: never)."""
        record = self.root / "argv" / tool
        return record.read_text().splitlines() if record.exists() else None


def install(tmp_path: Path, monkeypatch) -> FakeSlurm:
    """The four stand-ins first on PATH, sharing an empty job table under ``tmp_path``."""
    root = tmp_path / "fake-slurm"
    (root / "argv").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "jobs.json").write_text("{}")
    for tool in TOOLS:
        path = root / "bin" / tool
        path.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__)} {tool} "$@"\n')
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(_DIR_ENV, str(root))
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return FakeSlurm(root)


def _job(name: str, work_dir: str, state: str, user: str, exit_code: str) -> dict[str, str]:
    end = "Unknown" if state in ACTIVE else "2026-01-01T03:10:00"
    return {"name": name, "work_dir": work_dir, "state": state, "user": user,
            "exit": exit_code, "start": "2026-01-01T00:00:00", "end": end}  # fmt: skip


def _option(argv: list[str], long: str, short: str | None = None) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(f"{long}="):
            return arg.split("=", 1)[1]
        if short and arg == short and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _squeue_line(fmt: str, job_id: str, job: dict[str, str]) -> str:
    codes = {"i": job_id, "A": job_id.split("_")[0].split("+")[0], "T": job["state"],
             "j": job["name"], "Z": job["work_dir"], "u": job["user"]}  # fmt: skip
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "%" and i + 1 < len(fmt) and fmt[i + 1] in codes:
            out.append(codes[fmt[i + 1]])
            i += 2
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


def _sacct_field(field: str, job_id: str, job: dict[str, str]) -> str:
    values = {"jobidraw": job_id, "jobid": job_id, "state": job["state"],
              "exitcode": job["exit"], "start": job["start"], "end": job["end"],
              "jobname": job["name"], "workdir": job["work_dir"], "user": job["user"]}  # fmt: skip
    return values[field.lower()]


def main(tool: str, argv: list[str]) -> int:
    root = Path(os.environ[_DIR_ENV])
    (root / "argv" / tool).write_text("".join(f"{a}\n" for a in argv))
    slurm = FakeSlurm(root)
    jobs = slurm.jobs()
    if tool == "sbatch":
        job_id = str(max((int(i) for i in jobs if i.isdigit()), default=4241) + 1)
        name = _option(argv, "--job-name", "-J") or "sbatch"
        work_dir = _option(argv, "--chdir", "-D") or os.getcwd()
        jobs[job_id] = _job(name, work_dir, "RUNNING", getpass.getuser(), "0:0")
        slurm.table.write_text(json.dumps(jobs))
        print(f"{job_id};cluster0")
        return 0
    ids = (_option(argv, "--jobs", "-j") or "").split(",")
    if tool == "squeue":
        fmt = _option(argv, "--format", "-o") or "%i %T"
        if len(ids) == 1 and ids[0] not in jobs:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            return 1
        for job_id in ids:
            if job_id in jobs and jobs[job_id]["state"] in ACTIVE:
                print(_squeue_line(fmt, job_id, jobs[job_id]))
        return 0
    if tool == "sacct":
        fields = (_option(argv, "--format", "-o") or "JobID,State").split(",")
        for job_id in ids:
            if job_id in jobs:
                print("|".join(_sacct_field(f, job_id, jobs[job_id]) for f in fields))
        return 0
    if tool == "scancel":
        for job_id in argv[argv.index("--") + 1 :] if "--" in argv else argv:
            if job_id in jobs and jobs[job_id]["state"] in ACTIVE:
                jobs[job_id].update(state=f"CANCELLED by {os.getuid()}", exit="0:15")
        slurm.table.write_text(json.dumps(jobs))
        return 0
    raise SystemExit(f"unknown tool {tool}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
