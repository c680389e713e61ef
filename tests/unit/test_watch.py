"""``rlgate watch``: the verdict table, failure triage, progress, and following local runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_fixtures import ONE_NODE, STANDIN, TARGET, local_site, stop_local_run

from rlgate._errors import ExitCode, LaunchError
from rlgate.launch import JobState, Phase, launch, plan_launch
from rlgate.manifest import Backend, RunStatus, load_manifest
from rlgate.testing.corpus import Fault, Profile, write_run
from rlgate.watch import (
    INFRA_SIGNATURES,
    FailureCause,
    Progress,
    classify_failure,
    judge,
    read_progress,
    watch_run,
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
        assert read_progress(tmp_path / "logs") == Progress(6, "train/loss")

    def test_progress_falls_back_to_another_train_tag(self, tmp_path: Path) -> None:
        metrics = tmp_path / "metrics.json"
        metrics.write_text(json.dumps({"train/reward": {"1": 0.2, "2": 0.3}, "ray/x": {"90": 1}}))
        assert read_progress(metrics) == Progress(2, "train/reward")

    def test_progress_of_an_empty_log_dir_says_why(self, tmp_path: Path) -> None:
        progress = read_progress(tmp_path)
        assert progress.last_step is None and "no TensorBoard event files" in progress.note


def launch_local(tmp_path: Path, *entry_args: str, steps: int = 4):
    plan = plan_launch(
        TARGET,
        backend=Backend.LOCAL,
        site=local_site(tmp_path),
        overrides=ONE_NODE,
        steps=steps,
        run_dir=tmp_path / "run",
        entrypoint=(*STANDIN, *entry_args),
    )
    launch(plan)
    return plan.run_dir


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
