"""Completion judged on the latest attempt and on contiguous steps, never on the largest step.

Runs are written with torch's SummaryWriter into NeMo RL's layout (one ``exp_NNN/tensorboard``
per job, ``get_next_experiment_dir``); MLPerf cases are the real reference logs, edited.
NeMo RL semantics modelled (``nemo_rl/algorithms/grpo.py`` at 7ea279a): train metrics are
logged at ``total_steps + 1`` (1-indexed); a checkpoint after step K saves
``total_steps = K``, so a job resumed from it logs K+1, K+2, ... again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from rlgate.checks.kinds.completion import CompletionSpec, evaluate_completion
from rlgate.core.results import Outcome
from rlgate.recipe.facts import RunContext
from rlgate.runs.metrics import load_mlperf_log, load_run

from .helpers.mlperf_runs import BATCH_SIZES, SEEDS, mlperf_path, mlperf_plan

CTX = RunContext("r", target_step=50)


def write_attempts(root: Path, attempts: list[list[int]]) -> Path:
    """One exp_NNN per attempt (oldest first, mtimes in that order), train/loss at the steps."""
    for k, steps in enumerate(attempts, start=1):
        writer = SummaryWriter(log_dir=str(root / f"exp_{k:03d}" / "tensorboard"))
        for step in steps:
            writer.add_scalar("train/loss", 1.0 / step + 0.01 * k, step)
        writer.close()
        for f in (root / f"exp_{k:03d}").rglob("*tfevents*"):
            os.utime(f, (1e9 + k * 100, 1e9 + k * 100))
    return root


def completion(root: Path):
    return evaluate_completion(load_run(root), CTX, CompletionSpec())


class TestLatestAttemptAndContiguity:
    def test_a_stray_far_step_does_not_complete_a_run_that_stopped_at_20(
        self, tmp_path: Path
    ) -> None:
        res = completion(write_attempts(tmp_path, [[*range(1, 21), 1000]]))
        assert res.outcome is Outcome.ERROR and res.value == 20
        assert "run stopped at step 20, target step 50 not reached" in res.message
        assert "missing steps 21..999 (last logged step 1000)" in res.message
        assert res.evidence["gaps"] == [[21, 999]] and res.evidence["last_logged"] == 1000

    def test_a_stale_complete_attempt_does_not_complete_a_newer_one_that_stopped_at_30(
        self, tmp_path: Path
    ) -> None:
        res = completion(write_attempts(tmp_path, [list(range(1, 51)), list(range(1, 31))]))
        assert res.outcome is Outcome.ERROR and res.value == 30
        assert "exp_002 restarted at step 1 after step 50 had been logged" in res.message
        assert "steps 31..50 were logged by an earlier attempt" in res.message
        assert "stale, not counted" in res.message
        assert [a["file"] for a in res.evidence["attempts"]] == ["exp_001", "exp_002"]

    def test_a_multi_job_run_that_continues_where_the_last_job_stopped_passes(
        self, tmp_path: Path
    ) -> None:
        res = completion(write_attempts(tmp_path, [list(range(1, 21)), list(range(21, 51))]))
        assert res.outcome is Outcome.PASS and res.value == 50
        assert "2 attempts: exp_001 steps 1..20, exp_002 steps 21..50" in res.message
        assert res.evidence["gaps"] == []

    def test_a_job_resumed_from_an_earlier_checkpoint_relogs_steps_and_passes(
        self, tmp_path: Path
    ) -> None:
        """exp_001 logged 1..20, its last checkpoint was step 15: exp_002 logs 16..50."""
        root = write_attempts(tmp_path, [list(range(1, 21)), list(range(16, 51))])
        res = completion(root)
        assert res.outcome is Outcome.PASS and res.value == 50
        assert "exp_002 restarted at step 16 after step 20 had been logged" in res.message
        assert "steps 16..20 logged again" in res.message
        assert load_run(root).get("train/loss").value_at(18) == pytest.approx(1 / 18 + 0.02)

    def test_a_gap_between_jobs_is_named_and_stops_progress(self, tmp_path: Path) -> None:
        res = completion(write_attempts(tmp_path, [list(range(1, 21)), list(range(31, 51))]))
        assert res.outcome is Outcome.ERROR and res.value == 20
        assert "missing steps 21..30" in res.message
        assert "exp_002 started at step 31 after step 20" in res.message

    def test_a_step_the_latest_job_skipped_is_not_filled_from_a_stale_job(
        self, tmp_path: Path
    ) -> None:
        latest = [s for s in range(21, 51) if s != 35]
        res = completion(write_attempts(tmp_path, [list(range(1, 51)), latest]))
        assert res.outcome is Outcome.ERROR and res.value == 34
        assert "missing steps 35 " in res.message

    def test_missing_first_steps_are_a_gap(self, tmp_path: Path) -> None:
        res = completion(write_attempts(tmp_path, [list(range(16, 51))]))
        assert res.outcome is Outcome.ERROR and res.value == 0
        assert "missing steps 1..15" in res.message

    def test_a_gap_after_the_target_is_named_but_the_target_was_reached(
        self, tmp_path: Path
    ) -> None:
        res = completion(write_attempts(tmp_path, [[*range(1, 51), 60]]))
        assert res.outcome is Outcome.PASS and res.value == 50
        assert "missing steps 51..59" in res.message


def edited_mlperf(tmp_path: Path, edit) -> Path:
    """A copy of the real GBS 256 seed 1 log with ``edit(events)`` applied to its events."""
    lines = mlperf_path(256, 1).read_text().splitlines()
    prefix = ":::MLLOG "
    events = [
        json.loads(line[len(prefix) :]) if line.startswith(prefix) else line for line in lines
    ]
    events = edit(events)
    out = tmp_path / "seed_1.out"
    out.write_text(
        "\n".join(prefix + json.dumps(e) if isinstance(e, dict) else e for e in events) + "\n"
    )
    return out


def set_value(key: str, value):
    def edit(events):
        for e in events:
            if isinstance(e, dict) and e["key"] == key:
                e["value"] = value
        return events

    return edit


def drop(key: str):
    return lambda events: [e for e in events if not (isinstance(e, dict) and e["key"] == key)]


class TestMlperfRunStop:
    @pytest.mark.parametrize("gbs", BATCH_SIZES, ids=[f"gbs{g}" for g in BATCH_SIZES])
    def test_every_real_run_passes_with_its_accuracy_checked_against_its_target(
        self, gbs: int
    ) -> None:
        plan = mlperf_plan(gbs)
        for seed in SEEDS:
            res = evaluate_completion(
                load_mlperf_log(mlperf_path(gbs, seed)), plan.context, CompletionSpec()
            )
            assert res.outcome is Outcome.PASS, res.message
            assert ">= target_accuracy 0.69" in res.message
            assert res.evidence["gaps"] == [] and res.evidence["mlperf"]["run_status"] == "success"

    @pytest.mark.parametrize(
        ("edit", "why"),
        [
            pytest.param(
                set_value("eval_accuracy", 0.01),
                "eval_accuracy 0.01 at step 18 < target",
                id="below",
            ),
            pytest.param(set_value("eval_accuracy", float("nan")), "eval_accuracy nan", id="nan"),
            pytest.param(set_value("eval_accuracy", None), "eval_accuracy nan", id="null"),
            pytest.param(drop("eval_accuracy"), "no eval_accuracy logged", id="missing"),
            pytest.param(drop("target_accuracy"), "no usable target_accuracy", id="no_target"),
            pytest.param(
                set_value("target_accuracy", "high"), "no usable target_accuracy", id="bad_target"
            ),
        ],
    )
    def test_a_success_status_its_own_numbers_contradict_is_an_error(
        self, tmp_path: Path, edit, why: str
    ) -> None:
        run = load_mlperf_log(edited_mlperf(tmp_path, edit))
        res = evaluate_completion(run, mlperf_plan(256).context, CompletionSpec())
        assert res.outcome is Outcome.ERROR
        assert "run_stop status=success contradicts the log's own numbers" in res.message
        assert why in res.message

    def test_aborted_is_final_whatever_step_a_stray_event_names(self, tmp_path: Path) -> None:
        def abort_then_stray(events):
            for e in events:
                if isinstance(e, dict) and e["key"] == "run_stop":
                    e["metadata"]["status"] = "aborted"
            stray = {"key": "block_stop", "value": None, "metadata": {"step": 1000}}
            late = {"key": "run_stop", "value": None, "metadata": {"status": "success"}}
            return [*events, stray, late]

        run = load_mlperf_log(edited_mlperf(tmp_path, abort_then_stray))
        ctx = RunContext("r", target_step=18)  # even a run at its target step
        res = evaluate_completion(run, ctx, CompletionSpec())
        assert res.outcome is Outcome.ERROR and res.value == 18
        assert "MLPerf run_stop status=aborted at step 18" in res.message
        assert run.metadata["run_status"] == "aborted"

    def test_a_stray_evaluation_step_is_a_gap(self, tmp_path: Path) -> None:
        def stray(events):
            extra = {"key": "eval_stop", "value": None, "metadata": {"step": 1000}}
            return [*events[:-1], extra, events[-1]]

        run = load_mlperf_log(edited_mlperf(tmp_path, stray))
        res = evaluate_completion(run, RunContext("r", target_step=30), CompletionSpec())
        assert res.outcome is Outcome.ERROR and res.value == 18
        assert "missing steps 19..999" in res.message
