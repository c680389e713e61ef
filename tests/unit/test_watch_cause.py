"""What ended a run: ``rlgate watch`` classifies the terminating error, not text rollouts echo.

The logs are NeMo RL driver logs in the shape ``run_grpo_nemo_gym.py`` writes them
(``helpers/driver_logs.py``); the end-to-end cases run the real local backend on the stand-in
driver, which prints the ending given with ``--fail-with`` after its step banners.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgate.core.errors import ExitCode
from rlgate.launch.manifest import RunStatus
from rlgate.launch.watch import classify_failure, watch_run

from .helpers.driver_logs import (
    ACTOR_DIED,
    ECHOED_DISK_FULL,
    ECHOED_PYTHON_ERROR,
    ECHOED_TIMEOUTS,
    GYM,
    LOSS_IS_NAN,
    NCCL_WATCHDOG,
    RAY_TASK_OOM,
    SHUTDOWN,
    driver_log,
    echo,
    step,
    traceback,
)
from .helpers.launch_fixtures import launch_local


def cause_of(lines: list[str], *others: tuple[str, list[str]], state: str = ""):
    return classify_failure([("ray-driver.log", lines), *others], state=state)


class TestEchoedTextIsNotTheCause:
    """A run that died of its own error is exit 1 whatever its rollouts printed before."""

    @pytest.mark.parametrize(
        "lines",
        [
            pytest.param(
                driver_log(ECHOED_DISK_FULL, LOSS_IS_NAN, steps=6), id="echo_in_the_last_step"
            ),
            pytest.param(
                driver_log(ECHOED_DISK_FULL, steps=3)  # an echo during step 4, then steps 5-7
                + step(4, 20)[3:]
                + step(5, 20)
                + step(6, 20)
                + driver_log(LOSS_IS_NAN, steps=0, setup=False),
                id="echo_before_a_later_step",
            ),
            pytest.param(
                driver_log(ECHOED_TIMEOUTS, ECHOED_DISK_FULL, LOSS_IS_NAN, SHUTDOWN, steps=6),
                id="every_signature_echoed_then_shutdown_lines",
            ),
            pytest.param(
                driver_log(LOSS_IS_NAN, ECHOED_DISK_FULL, steps=6),
                id="echo_flushed_after_the_traceback",
            ),
        ],
    )
    def test_loss_is_nan_after_an_echoed_disk_full_is_the_models_failure(
        self, lines: list[str]
    ) -> None:
        cause = cause_of(lines)
        assert cause is not None
        assert (cause.reason, cause.infra, cause.line) == (
            "exception",
            False,
            "ValueError: loss is NaN",
        )

    def test_validation_samples_printed_by_the_driver_are_not_evidence(self) -> None:
        """``print_message_log_samples`` draws sample conversations in rich panels."""
        panel = [
            "╭──────────────────────── Sample 1 | Reward: 0.0000 ────────────────────────╮",
            "│ tool: OSError: [Errno 28] No space left on device                          │",
            "╰────────────────────────────────────────────────────────────────────────────╯",
        ]
        cause = cause_of(driver_log(panel, LOSS_IS_NAN, steps=4))
        assert cause is not None and (cause.reason, cause.infra) == ("exception", False)


class TestTheRealCauseStaysInfra:
    """The converse: an infrastructure fault that ended the run stays exit 3."""

    def test_nccl_timeout_last_after_an_echoed_python_error(self) -> None:
        cause = cause_of(driver_log(ECHOED_PYTHON_ERROR, NCCL_WATCHDOG, steps=9))
        assert cause is not None and (cause.reason, cause.infra) == ("nccl", True)
        assert "Watchdog caught collective operation timeout" in cause.line

    def test_actor_died_defers_to_the_dead_workers_own_nccl_abort(self) -> None:
        lines = driver_log(ECHOED_PYTHON_ERROR, NCCL_WATCHDOG, ECHOED_DISK_FULL, ACTOR_DIED)
        cause = cause_of(lines)
        assert cause is not None and (cause.reason, cause.infra) == ("nccl", True)
        assert cause.line.startswith("(MegatronPolicyWorker pid=2345")

    def test_actor_died_without_a_cause_of_its_own_is_not_infra(self) -> None:
        cause = cause_of(driver_log(ECHOED_DISK_FULL, ACTOR_DIED, steps=2))
        assert cause is not None and (cause.reason, cause.infra) == ("exception", False)
        assert cause.line.startswith("ray.exceptions.ActorDiedError")

    def test_ray_task_error_carrying_a_workers_cuda_oom(self) -> None:
        cause = cause_of(driver_log(ECHOED_PYTHON_ERROR, RAY_TASK_OOM, SHUTDOWN, steps=3))
        assert cause is not None and (cause.reason, cause.infra) == ("gpu_out_of_memory", True)

    def test_chained_exception_whose_cause_is_an_oom(self) -> None:
        chained = [
            *traceback(
                '  File "/opt/nemo-rl/nemo_rl/models/generation/vllm/vllm_worker.py", line 88',
                "    outputs = self.llm.generate(prompts)",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
            ),
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            *traceback(
                '  File "/opt/nemo-rl/nemo_rl/algorithms/grpo.py", line 4650, in train',
                "    raise RuntimeError('generation failed') from exc",
                "RuntimeError: generation failed",
            ),
        ]
        cause = cause_of(driver_log(ECHOED_DISK_FULL, chained, steps=5))
        assert cause is not None and (cause.reason, cause.infra) == ("gpu_out_of_memory", True)

    @pytest.mark.parametrize("state", ["TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL"])
    def test_slurms_final_state_ends_the_job(self, state: str) -> None:
        cause = cause_of(driver_log(steps=7), state=f"job 4242 ended {state} (exit 0)")
        assert cause is not None and (cause.reason, cause.infra) == (
            "slurm_node_or_time_limit",
            True,
        )

    def test_slurm_oom_kill_explains_an_actor_death(self) -> None:
        slurm_out = [
            "Detected ENDED file, terminating...",
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.3. Some of your "
            "processes may have been killed by the cgroup out-of-memory handler.",
            "srun: error: pool0-01: task 0: Out Of Memory",
        ]
        cause = cause_of(
            driver_log(ECHOED_DISK_FULL, ACTOR_DIED, steps=2), ("slurm-4242.out", slurm_out)
        )
        assert cause is not None and (cause.reason, cause.infra) == ("host_out_of_memory", True)
        assert cause.source == "slurm-4242.out"

    def test_the_drivers_own_error_is_not_overridden_by_srun_exit_lines(self) -> None:
        slurm_out = ["srun: error: pool0-01: task 0: Exited with exit code 1"]
        cause = cause_of(driver_log(LOSS_IS_NAN, steps=2), ("slurm-4242.out", slurm_out))
        assert cause is not None and cause.line == "ValueError: loss is NaN"


# every signature's text, as a rollout could echo it (tool output, an agent's observation)
ECHOES = st.lists(
    st.sampled_from(
        [
            *(line.split("observation: ", 1)[1] for line in ECHOED_TIMEOUTS + ECHOED_DISK_FULL),
            "ray.exceptions.NodeDiedError: the node died",
            "huggingface_hub.errors.LocalEntryNotFoundError: no cached file",
            "[ERROR] Background srun 'ray-workers' died (pid=42).",
            "Killed process 4242 (python) total-vm:1GB",
            "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
            "ValueError: 'm/s/s' did not parse as unit",
        ]
    ),
    min_size=1,
    max_size=6,
)
ENDINGS = {
    "loss_nan": ([*LOSS_IS_NAN], ("exception", "ValueError: loss is NaN")),
    "ray_oom": ([*RAY_TASK_OOM], ("gpu_out_of_memory", RAY_TASK_OOM[-1])),
    "nccl_actor_died": ([*NCCL_WATCHDOG, *ACTOR_DIED], ("nccl", NCCL_WATCHDOG[1])),
}


class TestEchoesNeverChangeTheCause:
    @settings(max_examples=150, deadline=None)
    @given(
        ending=st.sampled_from(sorted(ENDINGS)),
        steps=st.integers(0, 4),
        echoes=ECHOES,
        where=st.floats(0, 1),
        actor=st.sampled_from([GYM, "(NemoGym pid=4321, ip=10.65.3.9)"]),
    )
    def test_echoes_inserted_before_the_ending_leave_the_cause_unchanged(
        self, ending: str, steps: int, echoes: list[str], where: float, actor: str
    ) -> None:
        """Metamorphic: adding rollout output anywhere before the ending changes nothing."""
        lines, expected = ENDINGS[ending]
        clean = driver_log(lines, steps=steps)
        start = len(clean) - len(lines)
        at = int(where * start)
        noisy = [*clean[:at], *echo(*echoes, actor=actor), *clean[at:]]
        before, after = cause_of(clean), cause_of(noisy)
        assert before is not None and (before.reason, before.line) == expected
        assert after == before


class TestWatchExitCodes:
    """End to end: the stand-in driver prints the ending, ``watch`` gives the exit code."""

    @pytest.mark.parametrize(
        ("ending", "status", "code"),
        [
            pytest.param(
                [*ECHOED_DISK_FULL, *LOSS_IS_NAN], RunStatus.FAILED, ExitCode.FAIL, id="loss_nan"
            ),
            pytest.param(
                [*ECHOED_PYTHON_ERROR, *NCCL_WATCHDOG, *ACTOR_DIED],
                RunStatus.FAILED,
                ExitCode.INFRA,
                id="nccl",
            ),
        ],
    )
    def test_watch_exit_code_follows_the_terminating_error(
        self, tmp_path: Path, ending: list[str], status: RunStatus, code: ExitCode
    ) -> None:
        run = launch_local(
            tmp_path, "--stop-at-step", "2", "--exit-code", "1", "--fail-with", "\n".join(ending)
        )
        result = watch_run(run, interval=0.2)
        assert (result.status, result.exit_code) == (status, code), result.message


def test_the_tail_starts_at_a_whole_line(tmp_path: Path) -> None:
    """The last MiB is read; a line the bound cuts is dropped, not read as a fragment."""
    from rlgate.launch.watch import _TAIL_BYTES, _tail_lines

    log = tmp_path / "ray-driver.log"
    ending = "\n".join(driver_log(steps=2, setup=False)) + "\n"
    log.write_text("x" * 100 + "RuntimeError: cut\n" + "y" * 100 + "\n" + ending)
    with log.open("r+b") as fh:  # grow the first line so the bound falls inside it
        body = fh.read()
        fh.seek(0)
        fh.write(b"A" * _TAIL_BYTES + body)
    lines = _tail_lines(log)
    assert lines[0] == "y" * 100 and lines[-1] == ending.splitlines()[-1]
    assert classify_failure([("ray-driver.log", lines)]) is None


def coloured(lines: list[str]) -> list[str]:
    """The lines as Ray 2.60 prints them by default: each actor prefix in a colour (CSI SGR,
    ``ray/_private/worker.py`` ``print_worker_logs`` unless ``RAY_COLOR_PREFIX=0``)."""
    import re

    return [re.sub(r"^(\([^)]*pid=\d+[^)]*\))", "\x1b[36m\\1\x1b[0m", line) for line in lines]


class TestTerminalText:
    """Colours and carriage returns are how logs look, not new lines or new text."""

    @pytest.mark.parametrize("ending", sorted(ENDINGS))
    def test_coloured_actor_prefixes_leave_every_cause_unchanged(self, ending: str) -> None:
        lines, expected = ENDINGS[ending]
        plain = driver_log(ECHOED_DISK_FULL, ECHOED_PYTHON_ERROR, lines, steps=2)
        cause = cause_of(coloured(plain))
        assert cause is not None and cause.reason == cause_of(plain).reason
        assert (cause.reason, esc_free(cause.line)) == expected

    def test_a_coloured_echo_after_the_drivers_error_is_still_an_echo(self) -> None:
        lines = coloured(driver_log(LOSS_IS_NAN, ECHOED_DISK_FULL, steps=6))
        cause = cause_of(lines)
        assert cause is not None and (cause.reason, cause.infra) == ("exception", False)

    def test_a_carriage_return_inside_an_echo_is_not_a_line_of_the_driver(
        self, tmp_path: Path
    ) -> None:
        """A progress bar's lone CR (pip, tqdm) stays inside the actor's line."""
        from rlgate.launch.watch import _tail_lines

        progress = (
            f"{GYM} [swe_agents] observation: Collecting pkg\r"
            "OSError: [Errno 28] No space left on device"
        )
        log = tmp_path / "ray-driver.log"
        text = "\r\n".join([*driver_log(LOSS_IS_NAN, steps=3), progress]) + "\r\n"
        log.write_bytes(text.encode())
        lines = _tail_lines(log)
        assert lines[-1] == progress and not any(line.endswith("\r") for line in lines)
        cause = cause_of(lines)
        assert cause is not None and (cause.reason, cause.line) == (
            "exception",
            "ValueError: loss is NaN",
        )


def esc_free(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)
