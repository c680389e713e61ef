"""A second attack on ``rlgate swe eval`` (issue 21): each test is a finding, now handled.

What the first attack's fixes added: the server supervisor, the output dir's lease and lock,
the checks of the rows Gym runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from rlgate.core.errors import SweError
from rlgate.launch.manifest import MANIFEST_NAME
from rlgate.launch.swe_eval import LEASE
from rlgate.swe.backends import Backend, ClusterEval, plan_eval

from . import test_swe_launch
from .helpers.launch_fixtures import wait_for
from .test_swe_eval_hardening import _alive, _rlgate
from .test_swe_formats import assert_one_error, run_cli
from .test_swe_launch import gym_argv

on_path = test_swe_launch.on_path  # the stand-ins for ng_run / ng_collect_rollouts on PATH


def _running(program: Path) -> list[int]:
    """The pids of live (not zombie) processes whose command line holds ``program``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and str(program).encode() in words:
            found.append(int(proc.name))
    return found


def test_a_run_here_stopped_with_sigterm_leaves_no_collector_writing_the_output_dir(
    tmp_path, on_path
):
    """``kill PID`` (SIGTERM) of ``rlgate swe eval`` ends rlgate without its ``finally``: the
    supervisor stops the server, but ``ng_collect_rollouts`` (a plain child) keeps running and
    writing the output dir, while the lease names a dead pid, so a second writer is let in."""
    hold = tmp_path / "release"
    env = {**os.environ, "RLGATE_TEST_HOLD": str(hold)}
    collector = tmp_path / "gymbin/ng_collect_rollouts"
    here = _rlgate(gym_argv(tmp_path), env, tmp_path)
    try:
        wait_for(lambda: bool(_running(collector)) or here.poll() is not None)
        assert here.poll() is None, here.communicate()
        here.send_signal(signal.SIGTERM)  # rlgate alone, as `kill PID` or a supervisor does
        here.wait(timeout=30)  # not communicate(): the collector holds rlgate's stdout
        time.sleep(3)
        assert not _running(collector), (
            "ng_collect_rollouts outlived rlgate and still writes the output dir"
        )
    finally:
        for pid in _running(collector):  # what this test started, by id
            os.kill(pid, signal.SIGKILL)
        hold.touch()
        if here.poll() is None:
            here.kill()
        here.communicate(timeout=30)
        child = Path(f"{on_path}.child")
        if child.is_file() and _alive(pid := int(child.read_text())):
            os.kill(pid, signal.SIGKILL)


def test_a_collection_that_exits_0_with_rollouts_missing_is_not_reported_done(
    tmp_path, capsys, on_path
):
    """Gym puts a failed rollout in ``<stem>_failures.jsonl`` (or nowhere, when it was killed)
    and exits 0 (nemo-gym 0.7.0 ``rollout_collection.py``, the failures contract); rlgate then
    says ``results: ...`` with exit 0 ("done") though 3 of the 8 rollouts are not graded."""
    made = tmp_path / "made.jsonl"
    assert len(made.read_text().splitlines()) == 8
    collect = tmp_path / "gymbin/ng_collect_rollouts"
    collect.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        "args = dict(a.lstrip('+').split('=', 1) for a in sys.argv[1:])\n"
        "out = pathlib.Path(args['output_jsonl_fpath'].strip(\"'\"))\n"
        f"rows = pathlib.Path({str(made)!r}).read_text().splitlines()\n"
        "out.write_text(''.join(r + '\\n' for r in rows[:5]))\n"
        "fail = out.with_name(out.stem + '_failures.jsonl')\n"
        "row = json.dumps({'_ng_failure_class': 'agent_run_error'})\n"
        "fail.write_text(''.join(row + '\\n' for _ in rows[5:]))\n"
    )
    code, out, err = run_cli(gym_argv(tmp_path), capsys)
    assert "8 to run" in out, out + err
    assert len((tmp_path / "out/rollouts.jsonl").read_text().splitlines()) == 5
    assert code != 0, f"exit 0 (done) with 3 of 8 rollouts not graded:\n{out}{err}"
    assert "3" in err and "rerun" in err, err


def test_a_large_gym_input_with_a_repeated_row_is_checked_in_linear_time(tmp_path):
    """``_check_gym_input`` calls ``rows.count(i)`` for every row once any id repeats:
    quadratic. 40k rows (1.2 MB, of the 1 GiB allowed) take 25 s here; 300k, half an hour."""
    path = tmp_path / "in.jsonl"
    n = 30_000
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"instance_id": f"o__r-{i}"}) + "\n")
        fh.write(json.dumps({"instance_id": "o__r-0"}) + "\n")
    e = ClusterEval(Backend.GYM, "m", tmp_path / "out", ("o__r-0",),
                    server_url="http://h:1/v1", gym_input=path, gym_agent="x")  # fmt: skip
    start = time.monotonic()
    try:
        plan_eval(e)
    except SweError as exc:
        assert "more than one row" in exc.message
    else:
        raise AssertionError("a repeated row was accepted")
    took = time.monotonic() - start
    assert took < 3, f"{n} rows took {took:.1f} s to check"


def test_a_lease_of_a_slurm_run_blocks_a_run_here_with_a_way_out(tmp_path, capsys, on_path):
    """A lease naming a Slurm launch (say, from the login node) makes every later ``swe eval``
    on a machine without ``squeue`` exit 3: "cannot tell ... nothing was launched; retry when
    the cluster answers". A run here launches nothing, and retrying never helps: the message
    must name the lease to remove (as the live-writer refusal does)."""
    run_dir = tmp_path / "runs/r"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    wait_for(lambda: (run_dir / "launch/exit_status").is_file())
    doc = json.loads((run_dir / MANIFEST_NAME).read_text())
    doc |= {"backend": "slurm", "status": "running", "job_ids": ["4242"]}
    (run_dir / MANIFEST_NAME).write_text(json.dumps(doc))
    (tmp_path / "out/rollouts.jsonl").unlink()  # something left to run
    code, out, err = run_cli(gym_argv(tmp_path), capsys)
    assert code in (2, 3), out + err
    assert "Traceback" not in err, err
    assert str(tmp_path / "out" / LEASE) in err, f"no way out named: {err}"
    assert "nothing was launched" not in err, err


def test_a_job_killed_but_not_yet_reaped_does_not_keep_its_server_running(tmp_path, on_path):
    """The supervisor's ``kill -0 "$job"`` succeeds on a zombie: while the killed ``rlgate`` (or
    job shell) is not reaped -- a parent that waits later, a container whose PID 1 never
    reaps -- the supervisor takes the job for alive and the server runs on, unstopped."""
    hold = tmp_path / "release"
    env = {**os.environ, "RLGATE_TEST_HOLD": str(hold)}
    here = _rlgate(gym_argv(tmp_path), env, tmp_path)
    child_file = Path(f"{on_path}.child")
    collector = tmp_path / "gymbin/ng_collect_rollouts"
    try:
        wait_for(lambda: bool(_running(collector)) or here.poll() is not None)
        assert here.poll() is None, here.communicate()
        child = int(child_file.read_text())  # a server ng_run spawned
        os.kill(here.pid, signal.SIGKILL)  # and not reaped: no poll() or wait() yet
        time.sleep(4)  # the supervisor polls every second
        assert Path(f"/proc/{here.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert not _alive(child), "the server outlived its job (a zombie not yet reaped)"
    finally:
        for pid in _running(collector):
            os.kill(pid, signal.SIGKILL)
        hold.touch()
        here.wait(timeout=30)
        here.communicate(timeout=30)
        time.sleep(3)  # the supervisor now sees the job gone and stops the server
        if child_file.is_file() and _alive(pid := int(child_file.read_text())):
            os.kill(pid, signal.SIGKILL)


def test_a_file_system_without_flock_is_not_reported_as_another_rlgate_holding_the_dir(
    tmp_path, capsys, on_path, monkeypatch
):
    """``_launch_lock`` takes any OSError of ``flock`` for a held lock. On a file system that
    has no flock (Lustre mounted without ``flock``, some NFS setups: ENOSYS / EOPNOTSUPP /
    ENOLCK) every run and launch is refused for ever with "another rlgate holds --output-dir
    right now ... let it finish", which no waiting ends."""
    import errno

    import rlgate.launch.swe_eval as swe_eval

    def no_flock(fd: int, op: int) -> None:  # the file system's answer, not a lock held
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(swe_eval.fcntl, "flock", no_flock)
    code, _, err = run_cli(gym_argv(tmp_path), capsys)
    assert "Traceback" not in err and "another rlgate holds" not in err, err
    assert code == 0 and "cannot lock (Function not implemented): going on with its lease" in err


def test_a_symlink_loop_in_the_images_folder_is_exit_2_not_a_traceback(tmp_path, capsys, on_path):
    """``images_folder`` resolves the formatter's folder with ``Path.resolve()``, which raises
    RuntimeError on a symlink loop (Python 3.11, non-strict): exit 70, "a bug in rlgate", for
    a bad --container-formatter (a loop in --output-dir or --gym-input is exit 2)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    argv = gym_argv(tmp_path, "--dry-run", formatter=str(tmp_path / "a/{instance_id}.sif"))
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, r"--container-formatter")
