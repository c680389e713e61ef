"""``rlgate watch``: the verdict table, failure triage, progress, and following local runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode, LaunchError
from rlgate.launch.job import JobState, Phase
from rlgate.launch.local import LocalBackend
from rlgate.launch.manifest import (
    MANIFEST_NAME,
    Backend,
    RunManifest,
    RunStatus,
    load_manifest,
)
from rlgate.launch.plan import initial_manifest, plan_launch
from rlgate.launch.watch import (
    INFRA_SIGNATURES,
    FailureCause,
    Progress,
    classify_failure,
    judge,
    judge_stall,
    read_progress,
    watch_run,
)
from rlgate.runs.metrics import load_run
from rlgate.testing.corpus import Fault, Profile, write_run

from .helpers.launch_fixtures import (
    ONE_NODE,
    STANDIN,
    TARGET,
    launch_local,
    local_site,
    stop_local_run,
    wait_for,
)

OOM = FailureCause("gpu_out_of_memory", True, "torch.OutOfMemoryError: CUDA out of memory", "log")
BUG = FailureCause("exception", False, "KeyError: 'train/loss'", "log")


S, F, U = Phase.SUCCEEDED, Phase.FAILED, Phase.UNKNOWN
# id: (job phase, last train step or None, failure cause, verdict, exit code); target 20
JUDGE_CASES = {
    "completed": (S, 20, None, RunStatus.COMPLETED, ExitCode.OK),
    "exit0_short": (S, 12, None, RunStatus.STOPPED_SHORT, ExitCode.FAIL),
    "exit0_no_metrics": (S, None, None, RunStatus.STOPPED_SHORT, ExitCode.FAIL),
    "died_exception": (F, 5, BUG, RunStatus.FAILED, ExitCode.FAIL),
    "died_infra": (F, 5, OOM, RunStatus.FAILED, ExitCode.INFRA),
    "died_after_target": (F, 20, None, RunStatus.FAILED, ExitCode.FAIL),
    "no_accounting_reached": (U, 20, None, RunStatus.COMPLETED, ExitCode.OK),
    "no_accounting_short": (U, 3, None, RunStatus.LOST, ExitCode.FAIL),
}


class TestJudge:
    @pytest.mark.parametrize("case", JUDGE_CASES.values(), ids=JUDGE_CASES.keys())
    def test_judge_maps_job_end_and_progress_to_a_verdict(self, case: tuple) -> None:
        phase, step, cause, status, code = case
        progress = Progress(step, "train/loss") if step else Progress(None, None, "no events")
        assert judge(JobState(phase, 0 if phase is S else 1), progress, 20, cause)[:2] == (
            status,
            code,
        )

    def test_judge_message_names_the_step_reached(self) -> None:
        message = judge(JobState(Phase.SUCCEEDED, 0), Progress(12, "train/loss"), 20, None)[2]
        assert message == "exited 0 but stopped short: last step 12 of 20 (train/loss)"


class TestClassifyFailure:
    @pytest.mark.parametrize(
        ("line", "reason"),
        [
            pytest.param(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
                "gpu_out_of_memory",
                id="cuda_oom",
            ),
            pytest.param(
                "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1.0",
                "host_out_of_memory",
                id="host_oom",
            ),
            pytest.param(
                "[rank3]: torch.distributed.DistBackendError: NCCL error in: ...", "nccl", id="nccl"
            ),
            pytest.param(
                "ray.exceptions.NodeDiedError: the node died", "ray_node_lost", id="ray_node"
            ),
            pytest.param(
                "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026 DUE TO TIME LIMIT",
                "slurm_node_or_time_limit",
                id="time_limit",
            ),
            pytest.param(
                "[ERROR] Background srun 'ray-workers' died (pid=42).",
                "container_or_cluster_bringup",
                id="ray_sub_bringup",
            ),
            pytest.param(
                "huggingface_hub.errors.LocalEntryNotFoundError: no cached file",
                "hf_hub_download",
                id="hf_hub",
            ),
            pytest.param("OSError: [Errno 28] No space left on device", "disk_full", id="disk"),
        ],
    )
    def test_infra_signatures_are_recognised(self, line: str, reason: str) -> None:
        cause = classify_failure([("driver.log", ["Step 3/20", line])])
        assert cause is not None and (cause.reason, cause.infra) == (reason, True)

    def test_table_order_wins_over_line_order(self) -> None:
        lines = ["NCCL error: unhandled", "torch.OutOfMemoryError: CUDA out of memory"]
        assert classify_failure([("log", lines)]).reason == "gpu_out_of_memory"

    def test_last_exception_is_reported_when_no_infra_signature_matches(self) -> None:
        lines = [
            "Traceback (most recent call last):",
            "  File 'x'",
            "ValueError: early",
            "RuntimeError: Generation logprobs contain NaN",
        ]
        cause = classify_failure([("log", lines)])
        assert (cause.reason, cause.infra, cause.line) == (
            "exception",
            False,
            "RuntimeError: Generation logprobs contain NaN",
        )

    def test_no_cause_when_the_log_says_nothing(self) -> None:
        assert classify_failure([("log", ["Step 1/20", "Step 2/20"])]) is None

    def test_signature_reasons_are_unique(self) -> None:
        reasons = [reason for reason, _ in INFRA_SIGNATURES]
        assert len(reasons) == len(set(reasons))


class TestReadProgress:
    def test_progress_reads_train_loss_of_a_tensorboard_run(self, tmp_path: Path) -> None:
        write_run(tmp_path / "logs", Fault.STOPPED_EARLY, seed=1, profile=Profile(steps=10))
        progress = read_progress(tmp_path / "logs")
        assert (progress.last_step, progress.metric, progress.note) == (6, "train/loss", "")
        step_times = load_run(tmp_path / "logs").series["timing/train/total_step_time"].values
        assert progress.median_step_seconds == pytest.approx(float(np.median(step_times)))
        newest = max(p.stat().st_mtime for p in (tmp_path / "logs").rglob("events.out.*"))
        assert progress.updated_at == newest

    def test_progress_falls_back_to_another_train_tag(self, tmp_path: Path) -> None:
        metrics = tmp_path / "metrics.json"
        metrics.write_text(json.dumps({"train/reward": {"1": 0.2, "2": 0.3}, "ray/x": {"90": 1}}))
        progress = read_progress(metrics)
        assert (progress.last_step, progress.metric, progress.median_step_seconds) == (
            2,
            "train/reward",
            None,  # no timing/train/total_step_time logged: only --stall-minutes applies
        )
        assert progress.updated_at == metrics.stat().st_mtime

    @pytest.mark.parametrize(
        ("fault", "expected"),
        [(Fault.STRAY_STEP, "missing steps"), (Fault.STALE_ATTEMPT, "stale, not counted")],
    )
    def test_progress_is_judged_like_check_run_completion(
        self, tmp_path: Path, fault: Fault, expected: str
    ) -> None:
        """A stray far step or a stale complete attempt must not make a short run complete."""
        profile = Profile(steps=10)
        write_run(tmp_path / "logs", fault, seed=1, profile=profile)
        progress = read_progress(tmp_path / "logs")
        assert progress.last_step is not None and progress.last_step < profile.steps
        assert expected in progress.note
        status, code, message = judge(
            JobState(Phase.SUCCEEDED, "exit 0"), progress, profile.steps, None
        )
        assert (status, code) == (RunStatus.STOPPED_SHORT, ExitCode.FAIL)
        assert expected in message

    def test_progress_of_an_empty_log_dir_says_why(self, tmp_path: Path) -> None:
        progress = read_progress(tmp_path)
        assert progress.last_step is None and "no TensorBoard event files" in progress.note


class TestWatchLocalRuns:
    def test_watch_reports_completion_and_updates_the_manifest(self, tmp_path: Path) -> None:
        run = launch_local(tmp_path)
        events, lines = [], []
        result = watch_run(run, interval=0.2, on_event=events.append, on_log=lines.append)
        assert (result.status, result.exit_code) == (RunStatus.COMPLETED, ExitCode.OK)
        assert events[-1] == "succeeded" and "step 4/4" in events
        assert any("Step 4/4" in line for line in lines)
        saved = load_manifest(run)
        assert (saved.status, saved.exit_status, saved.last_step) == (RunStatus.COMPLETED, 0, 4)
        assert saved.ended_at and saved.message == "completed: last step 4 of 4 (train/loss)"

    def test_watch_fails_a_run_that_exits_0_short_of_its_target(self, tmp_path: Path) -> None:
        run = launch_local(tmp_path, "--stop-at-step", "2")
        result = watch_run(run, interval=0.2)
        assert (result.status, result.exit_code) == (RunStatus.STOPPED_SHORT, ExitCode.FAIL)
        assert load_manifest(run).last_step == 2

    def test_watch_fails_a_run_that_died(self, tmp_path: Path) -> None:
        run = launch_local(
            tmp_path,
            "--stop-at-step",
            "0",
            "--exit-code",
            "137",
            "--fail-with",
            "Killed process 4242 (python) total-vm:1GB",
        )
        result = watch_run(run, interval=0.2)
        assert (result.status, result.exit_code) == (RunStatus.FAILED, ExitCode.INFRA)
        assert result.cause.reason == "host_out_of_memory"
        assert load_manifest(run).exit_status == 137

    def test_watch_gives_up_after_its_timeout_and_leaves_the_run(self, tmp_path: Path) -> None:
        run = launch_local(tmp_path, "--seconds", "60")
        try:
            result = watch_run(run, interval=0.2, timeout=1.0)
            assert result.exit_code is ExitCode.INFRA and "still running" in result.message
            assert load_manifest(run).status is RunStatus.RUNNING
        finally:
            stop_local_run(run)

    def test_watch_without_a_manifest_is_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(LaunchError, match="no run manifest"):
            watch_run(tmp_path)


def manifest_doc(tmp_path: Path, run: Path, **changes: object) -> dict:
    """A valid manifest document for ``run_dir`` (local backend, a job that is gone)."""
    plan = plan_launch(
        TARGET,
        backend=Backend.LOCAL,
        site=local_site(tmp_path),
        overrides=ONE_NODE,
        run_dir=tmp_path / "planned",
        entrypoint=STANDIN,
    )
    root = str(run.resolve())
    doc = initial_manifest(plan).model_dump(mode="json")
    doc.update(
        run_name=run.name,
        run_dir=root,
        log_dir=f"{root}/logs",
        checkpoint_dir=f"{root}/ckpts",
        job_ids=["1"],
        pid=None,
    )
    return {"schema_version": 1, **doc, **changes}


def write_doc(folder: Path, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MANIFEST_NAME
    path.write_text(json.dumps(doc))
    return path


class TestHostileManifests:
    """A manifest is input: garbage is exit 2, and watch writes only where it was pointed."""

    def test_manifest_naming_another_run_dir_is_refused_and_that_dir_untouched(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        victim = tmp_path / "victim"
        victim.mkdir()
        (victim / MANIFEST_NAME).write_text("precious")
        write_doc(tmp_path / "given", manifest_doc(tmp_path, victim))
        assert main(["watch", str(tmp_path / "given"), "--interval", "0.1"]) == 2
        assert "the manifest is for run directory" in capsys.readouterr().err
        assert (victim / MANIFEST_NAME).read_text() == "precious"
        assert sorted(p.name for p in victim.iterdir()) == [MANIFEST_NAME]

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            pytest.param({"log_dir": "/etc"}, "log_dir '/etc' is outside", id="log_dir_outside"),
            pytest.param(
                {"driver_log": "../elsewhere.log"},
                "driver_log '../elsewhere.log' is outside",
                id="driver_log_escapes",
            ),
            pytest.param({"run_dir": "relative"}, "is not an absolute path", id="relative_run"),
            pytest.param({"target_step": 0}, "target_step", id="target_zero"),
            pytest.param({"pid": -1}, "pid", id="pid_negative"),
            pytest.param({"gpu_hours": float("nan")}, "gpu_hours", id="gpu_hours_nan"),
            pytest.param({"job_ids": ["1; rm -rf ~"]}, "job_ids[0]", id="job_id_shell"),
            pytest.param({"nodes": True}, "nodes", id="nodes_bool"),
        ],
    )
    def test_invalid_manifest_fields_are_exit_2(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        changes: dict,
        message: str,
    ) -> None:
        run = tmp_path / "run"
        write_doc(run, manifest_doc(tmp_path, run, **changes))
        assert main(["watch", str(run), "--interval", "0.1"]) == 2
        err = capsys.readouterr().err
        assert "invalid run manifest" in err and message in err, err
        assert "Traceback" not in err

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            pytest.param(b"[" * 100_000, "nested too deeply", id="deep_nesting"),
            pytest.param(b'{"schema_version": 1, "x": "\xff"}', "not UTF-8", id="binary"),
            pytest.param(b"", "not valid JSON", id="empty"),
            pytest.param(b"garbage{", "not valid JSON", id="garbage"),
            pytest.param(b"null", "JSON object, got NoneType", id="null"),
        ],
    )
    def test_unreadable_manifest_is_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
    ) -> None:
        (tmp_path / MANIFEST_NAME).write_bytes(content)
        assert main(["watch", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and "internal error" not in err

    def test_run_dir_that_is_a_file_is_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "run").write_text("not a run")
        assert main(["watch", str(tmp_path / "run")]) == 2
        assert "not valid JSON" in capsys.readouterr().err
        assert (tmp_path / "run").read_text() == "not a run"

    def test_symlinked_manifest_is_replaced_not_written_through(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run = tmp_path / "run"
        outside = tmp_path / "outside.json"
        outside.write_text(json.dumps(manifest_doc(tmp_path, run)))
        run.mkdir()
        (run / MANIFEST_NAME).symlink_to(outside)
        before = outside.read_text()
        assert main(["watch", str(run), "--interval", "0.1"]) == 1  # the job is gone: failed
        assert outside.read_text() == before
        assert not (run / MANIFEST_NAME).is_symlink()
        assert load_manifest(run).status is RunStatus.FAILED

    @pytest.mark.parametrize(
        ("option", "value"),
        [
            pytest.param("--interval", "-1", id="interval_negative"),
            pytest.param("--interval", "nan", id="interval_nan"),
            pytest.param("--interval", "inf", id="interval_inf"),
            pytest.param("--interval", "0", id="interval_zero"),
            pytest.param("--interval", "1e308", id="interval_huge"),
            pytest.param("--timeout-minutes", "-1", id="timeout_negative"),
            pytest.param("--timeout-minutes", "nan", id="timeout_nan"),
        ],
    )
    def test_watch_refuses_bad_intervals(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
    ) -> None:
        with pytest.raises(SystemExit) as info:
            main(["watch", str(tmp_path), f"{option}={value}"])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {option}: must be" in err, err


class TestStalled:
    """A wedged run (alive, no new step) is told apart from a crashed one: ``stalled``, exit 3."""

    def _progress(self, median: float | None, updated_at: float | None) -> Progress:
        return Progress(7, "train/loss", "", median, updated_at)

    def test_no_new_step_for_k_median_step_times_is_stalled(self) -> None:
        why = judge_stall(
            self._progress(400.0, 10_000.0),
            now=10_000.0 + 5 * 400 + 1,
            watching_since=0.0,
            stall_factor=5.0,
            stall_minutes=None,
        )
        assert why is not None and why.startswith("stalled: last step 7, no new step for 33.4 min")
        assert "5 x its median step time 400 s" in why

    def test_a_slow_step_within_the_factor_is_not_stalled(self) -> None:
        progress = self._progress(400.0, 10_000.0)
        kwargs = {"watching_since": 0.0, "stall_factor": 5.0, "stall_minutes": None}
        assert judge_stall(progress, now=10_000.0 + 5 * 400 - 1, **kwargs) is None

    def test_stall_minutes_applies_before_the_first_step(self) -> None:
        progress = Progress(None, None, "no TensorBoard event files")
        kwargs = {"stall_factor": 5.0, "stall_minutes": 30.0}
        assert judge_stall(progress, now=1000.0 + 29 * 60, watching_since=1000.0, **kwargs) is None
        why = judge_stall(progress, now=1000.0 + 31 * 60, watching_since=1000.0, **kwargs)
        assert why is not None and why.startswith("stalled: no step, no new step for 31.0 min")

    def test_the_tighter_limit_is_named(self) -> None:
        why = judge_stall(
            self._progress(400.0, 0.0),
            now=3 * 3600.0,
            watching_since=0.0,
            stall_factor=5.0,
            stall_minutes=60.0,
        )
        assert why is not None and "limit 33.3 min: 5 x its median step time" in why

    def test_cli_default_factor_is_the_library_default(self) -> None:
        from rlgate.cli.runs import STALL_FACTOR
        from rlgate.launch.watch import DEFAULT_STALL_FACTOR

        assert STALL_FACTOR == DEFAULT_STALL_FACTOR

    def test_a_wedged_local_run_is_stalled_and_cancel_stalled_kills_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run = launch_local(tmp_path, "--stop-at-step", "2", "--hang", steps=4)
        manifest = load_manifest(run)
        try:
            wait_for(lambda: read_progress(manifest.log_dir).last_step == 2)
            code = main(
                ["watch", str(run), "--interval", "0.2", "--stall-minutes", "0.02",
                 "--cancel-stalled"]
            )  # fmt: skip
            out = capsys.readouterr().out
            assert code == ExitCode.INFRA
            assert "run: STALLED: stalled: last step 2, no new step for" in out
            assert "--stall-minutes 0.02" in out and "cancelled: process group" in out
            saved = load_manifest(run)
            assert saved.status is RunStatus.STALLED and saved.last_step == 2
            wait_for(lambda: not LocalBackend._alive(saved), timeout=30)
        finally:
            stop_local_run(run)

    def test_without_cancel_the_stalled_run_keeps_running(self, tmp_path: Path) -> None:
        run = launch_local(tmp_path, "--stop-at-step", "1", "--hang", steps=4)
        try:
            wait_for(lambda: read_progress(load_manifest(run).log_dir).last_step == 1)
            result = watch_run(run, interval=0.2, stall_minutes=0.02)
            assert (result.status, result.exit_code) == (RunStatus.STALLED, ExitCode.INFRA)
            assert "still running (rerun with --cancel-stalled" in result.message
            assert LocalBackend._alive(load_manifest(run))
        finally:
            stop_local_run(run)


def _start_time(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


class TestSignalsOnlyWhatRlgateStarted:
    """``--cancel-stalled`` signals a process only when the manifest proves rlgate started it.

    The proof is the pid, its start time, the launch token rlgate put in the process's
    environment and the manifest, and that the process leads its own session (the wrapper
    ``rlgate launch`` started). Each case points a manifest at a real process the test
    started itself and checks the refusal (exit 2, one message) and that it survived.
    """

    @pytest.fixture
    def victim(self):
        procs: list[subprocess.Popen] = []

        def start(env: dict[str, str] | None = None) -> subprocess.Popen:
            proc = subprocess.Popen(
                ["sleep", "120"], start_new_session=True, env={**os.environ, **(env or {})}
            )
            procs.append(proc)
            wait_for(lambda: Path(f"/proc/{proc.pid}/stat").is_file())
            return proc

        yield start
        for proc in procs:
            proc.kill()
            proc.wait()

    def _watch(self, tmp_path: Path, capsys, **changes: object) -> tuple[int, str]:
        run = tmp_path / "run"
        write_doc(run, manifest_doc(tmp_path, run, backend="local", **changes))
        argv = ["watch", str(run), "--interval", "0.1", "--stall-minutes", "0.005"]
        code = main([*argv, "--cancel-stalled"])
        return code, capsys.readouterr().err

    @pytest.mark.parametrize(
        ("proof", "message"),
        [
            pytest.param({"pid_start": None}, "records no start time", id="no_start_time"),
            pytest.param({}, "records no launch token", id="start_time_but_no_token"),
            pytest.param(
                {"launch_token": "0" * 32}, "launch token is not in", id="token_not_in_its_env"
            ),
        ],
    )
    def test_a_manifest_naming_a_process_rlgate_did_not_start_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], victim, proof, message
    ) -> None:
        proc = victim()
        fields = {"pid": proc.pid, "job_ids": [str(proc.pid)], "pid_start": _start_time(proc.pid)}
        code, err = self._watch(tmp_path, capsys, **{**fields, **proof})
        assert code == ExitCode.USAGE, err
        lines = [line for line in err.splitlines() if not line.startswith("  hint:")]
        assert len(lines) == 1 and lines[0].startswith("rlgate: error: run: "), err
        assert f"process {proc.pid}" in err and message in err
        assert proc.poll() is None  # not signalled
        assert load_manifest(tmp_path / "run").status is RunStatus.SUBMITTED  # nothing recorded

    def test_a_process_holding_the_token_but_not_leading_its_session_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The driver inside a real run inherits the token; only the wrapper may be named."""
        run = launch_local(tmp_path / "real", "--stop-at-step", "1", "--hang", steps=4)
        real = load_manifest(run)
        try:
            children = Path(f"/proc/{real.pid}/task/{real.pid}/children")
            wait_for(lambda: children.read_text().split())
            child = int(children.read_text().split()[0])
            fields = {
                "pid": child,
                "job_ids": [str(child)],
                "pid_start": _start_time(child),
                "launch_token": real.launch_token,
            }
            code, err = self._watch(tmp_path, capsys, **fields)
            assert code == ExitCode.USAGE and "does not lead its own session" in err, err
            assert LocalBackend._alive(real)  # the run was not touched
        finally:
            stop_local_run(run)

    def test_a_process_with_the_token_but_no_run_directory_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], victim
    ) -> None:
        token = "a" * 32
        proc = victim({"RLGATE_LAUNCH_TOKEN": token})
        fields = {"pid": proc.pid, "job_ids": [str(proc.pid)], "pid_start": _start_time(proc.pid)}
        code, err = self._watch(tmp_path, capsys, **fields, launch_token=token)
        assert code == ExitCode.USAGE and "names no run directory (RLGATE_RUN_DIR)" in err, err
        assert proc.poll() is None

    def test_another_run_dirs_proof_copied_into_a_manifest_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Run A's pid, start time and token in a manifest for run B: A is not B's process.

        The proof is bound to the run directory: rlgate put A's directory into A's
        environment at launch, so a manifest in B naming A's process proves nothing.
        """
        run_a = launch_local(tmp_path / "a", "--stop-at-step", "1", "--hang", steps=4)
        real = load_manifest(run_a)
        try:
            wait_for(lambda: read_progress(real.log_dir).last_step == 1)
            run_b = tmp_path / "b" / "run"
            doc = json.loads((run_a / MANIFEST_NAME).read_text())
            moved = {
                key: value.replace(str(run_a), str(run_b)) if isinstance(value, str) else value
                for key, value in doc.items()
            }
            assert moved["pid"] == real.pid and moved["launch_token"] == real.launch_token
            write_doc(run_b, moved)
            argv = ["watch", str(run_b), "--interval", "0.1", "--stall-minutes", "0.005"]
            code = main([*argv, "--cancel-stalled"])
            err = capsys.readouterr().err
            assert code == ExitCode.USAGE, err
            lines = [line for line in err.splitlines() if not line.startswith("  hint:")]
            assert len(lines) == 1 and f"process {real.pid} was not started by rlgate" in err
            assert f"it was launched for run directory {run_a}" in err, err
            assert LocalBackend._alive(real)  # run A untouched
            assert load_manifest(run_b).status is RunStatus.SUBMITTED  # nothing recorded
        finally:
            stop_local_run(run_a)

    def test_cancel_refuses_without_signalling(self, tmp_path: Path, victim) -> None:
        proc = victim({"RLGATE_LAUNCH_TOKEN": "f" * 32})
        doc = manifest_doc(tmp_path, tmp_path / "run", backend="local", pid=proc.pid)
        doc.update(job_ids=[str(proc.pid)], pid_start=_start_time(proc.pid))
        manifest = RunManifest.model_validate(
            {k: v for k, v in doc.items() if k != "schema_version"}
        )
        with pytest.raises(LaunchError, match="records no launch token"):
            LocalBackend().cancel(manifest)
        assert proc.poll() is None

    def test_the_run_rlgate_launched_is_proven_and_cancelled(self, tmp_path: Path) -> None:
        run = launch_local(tmp_path, "--stop-at-step", "1", "--hang", steps=4)
        manifest = load_manifest(run)
        try:
            assert manifest.launch_token and len(manifest.launch_token) == 32
            environ = Path(f"/proc/{manifest.pid}/environ").read_bytes().split(b"\0")
            assert f"RLGATE_LAUNCH_TOKEN={manifest.launch_token}".encode() in environ
            assert f"RLGATE_RUN_DIR={run}".encode() in environ
            assert os.getpgid(manifest.pid) == os.getsid(manifest.pid) == manifest.pid
            assert LocalBackend().cancel(manifest, grace=5).startswith("process group")
            wait_for(lambda: not LocalBackend._alive(manifest), timeout=30)
        finally:
            stop_local_run(run)
