"""The fault-injection corpus: each fault is caught by the checks named for it, and only by them.

The corpus (rlgate.testing.corpus) is written with torch's SummaryWriter using NeMo RL's tag
names; the gate reads it back through the same path users take (load_plan + load_inputs +
run_gate on the recipe the corpus ships).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from rlgate.checks.plan import GateInputs, GatePlan, GateReport, load_inputs, load_plan, run_gate
from rlgate.core.results import Outcome
from rlgate.runs.metrics import load_run, load_tensorboard_dir, to_metrics_json
from rlgate.testing.corpus import (
    EXPECTED_CATCHES,
    EXPECTED_ROLLOUT_CATCHES,
    ROLLOUT_FAULTS,
    Fault,
    build_corpus,
    main,
)

from .helpers.corpus_build import corpus

# NeMo RL tag names the corpus may use (shared/reference/nemo-rl.md §2.2-2.3).
NEMO_RL_TAGS = {
    "train/loss",
    "train/reward",
    "train/grad_norm",
    "train/token_mult_prob_error",
    "train/gen_kl_error",
    "train/global_valid_seqs",
    "train/global_valid_toks",
    "train/total_num_tokens",
    "train/avg_trajectory_age",
    "train/turns_per_sample/mean",
    "train/turns_per_sample/min",
    "train/turns_per_sample/median",
    "train/turns_per_sample/p95",
    "train/turns_per_sample/p99",
    "train/turns_per_sample/max",
    "train/truncation_rate",
    "train/natural_termination_rate",
    "train/total_tokens_per_sample/mean",
    "train/total_tokens_per_sample/max",
    "train/invalid_tool_call_rate",
    "train/malformed_thinking_rate",
    "timing/train/total_step_time",
    "timing/train/policy_training",
    "timing/train/exposed_generation",
    "timing/train/weight_sync",
    "timing/train/valid_tokens_per_sec_per_gpu",
    "timing/setup/total",
    "performance/tokens_per_sec_per_gpu",
    "performance/generation_tokens_per_sec_per_gpu",
    "validation/accuracy",
    "ray/node.0.gpu.0.util",
    "ray/node.0.gpu.0.mem_gb",
}


@functools.cache
def plan_and_inputs(rollouts: str) -> tuple[GatePlan, GateInputs]:
    c = corpus()
    plan = load_plan(c.recipe)
    healthy = c.runs[Fault.HEALTHY]
    return plan, load_inputs(plan, healthy, baseline=c.baseline, rollouts=c.rollouts[rollouts])


def gate(run: Path, rollouts: str = "healthy") -> GateReport:
    plan, inputs = plan_and_inputs(rollouts)
    return run_gate(plan, dataclasses.replace(inputs, run=load_run(run)))


def caught(report: GateReport) -> set[str]:
    return {r.name for r in report.results if r.outcome is not Outcome.PASS}


class TestFaultMatrix:
    @pytest.mark.parametrize("fault", list(Fault), ids=[f.value for f in Fault])
    def test_fault_is_caught_by_exactly_its_checks(self, fault: Fault) -> None:
        report = gate(corpus().runs[fault])
        assert report.skipped == ()  # baseline, rollouts and band runs are all given
        details = {
            r.name: r.message
            for r in report.results
            if r.name in caught(report) ^ EXPECTED_CATCHES[fault]
        }
        assert caught(report) == EXPECTED_CATCHES[fault], details

    @pytest.mark.parametrize("kind", ROLLOUT_FAULTS, ids=list(ROLLOUT_FAULTS))
    def test_rollout_fault_is_caught_by_exactly_its_checks(self, kind: str) -> None:
        assert caught(gate(corpus().runs[Fault.HEALTHY], kind)) == EXPECTED_ROLLOUT_CATCHES[kind]

    def test_every_check_of_the_recipe_runs_on_the_corpus(self) -> None:
        report = gate(corpus().runs[Fault.HEALTHY])
        names = {r.name for r in report.results}
        expected = set().union(*EXPECTED_CATCHES.values(), *EXPECTED_ROLLOUT_CATCHES.values())
        assert expected <= names and len(names) >= 30

    def test_stopped_early_is_an_error_not_a_failure(self) -> None:
        completion = next(
            r for r in gate(corpus().runs[Fault.STOPPED_EARLY]).results if r.name == "completion"
        )
        assert (
            completion.outcome is Outcome.ERROR
            and "target step 50 not reached" in completion.message
        )

    @pytest.mark.parametrize(
        ("fault", "named"),
        [
            (Fault.STALE_ATTEMPT, "steps 31..50 were logged by an earlier attempt"),
            (Fault.STRAY_STEP, "missing steps 31..999"),
            (Fault.RESUMED, "exp_002 restarted at step 23 after step 27 had been logged"),
        ],
        ids=["stale", "stray", "resumed"],
    )
    def test_completion_names_restarts_gaps_and_stale_steps(self, fault: Fault, named: str) -> None:
        completion = next(r for r in gate(corpus().runs[fault]).results if r.name == "completion")
        assert named in completion.message and completion.evidence["target"] == 50
        assert completion.outcome is (Outcome.PASS if fault is Fault.RESUMED else Outcome.ERROR)
        assert completion.value == (50 if fault is Fault.RESUMED else 30)


class TestCorpusFiles:
    def test_corpus_uses_nemo_rl_tag_names_and_layout(self) -> None:
        root = corpus().runs[Fault.HEALTHY]
        assert (
            sorted(p.parent.relative_to(root).as_posix() for p in root.rglob("*tfevents*"))[0]
            == "exp_001/tensorboard"
        )
        assert set(load_tensorboard_dir(root).tags) <= NEMO_RL_TAGS

    def test_resumed_run_is_split_over_two_exp_dirs_and_merges_later_wins(self) -> None:
        root = corpus().runs[Fault.RESUMED]
        assert {p.name for p in root.iterdir()} == {"exp_001", "exp_002"}
        run = load_tensorboard_dir(root)
        assert run.conflicts and run.get("train/loss").steps.tolist() == list(range(1, 51))
        assert (
            to_metrics_json(run)["train/loss"]["30"]
            == to_metrics_json(load_tensorboard_dir(root / "exp_002"))["train/loss"]["30"]
        )

    def test_build_corpus_refuses_a_non_empty_directory(self, tmp_path: Path) -> None:
        (tmp_path / "keep.txt").write_text("user data")
        with pytest.raises(FileExistsError, match="not empty"):
            build_corpus(tmp_path)
        assert (tmp_path / "keep.txt").read_text() == "user data"

    def test_corpus_module_main_rebuilds_a_small_corpus(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main([str(tmp_path / "c"), "--steps", "12", "--seed", "3"]) == 0
        assert (
            tmp_path / "c" / "recipe.yaml"
        ).is_file() and "corpus written" in capsys.readouterr().out
        run = load_tensorboard_dir(tmp_path / "c" / "runs" / "healthy")
        assert run.get("train/reward").last_step == 12
