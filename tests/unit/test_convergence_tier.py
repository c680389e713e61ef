"""The convergence and perf tiers, run for real in a pytest subprocess, read back from JUnit.

(a) a real MLPerf NeMo RL run with the reference recipe; (b) corpus runs (a fault, and a run
that stopped early) with the corpus recipe. Asserts testcases, outcomes and ``rlgate.*``
properties with junitparser.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Properties, Skipped, TestCase

from rlgate.checks.plan import RunDocument, load_inputs, load_plan, run_gate
from rlgate.core.results import Outcome
from rlgate.testing.corpus import EXPECTED_CATCHES, Fault

from .helpers.corpus_build import corpus
from .helpers.mlperf_runs import RECIPE, REPO_ROOT, mlperf_path


def run_tiers(tmp_path: Path, *args: str) -> dict[str, TestCase]:
    out = tmp_path / "junit.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "tests/convergence",
        "tests/perf",
        # The rollout-path benchmarks need no run; they are tested on their own.
        "--ignore=tests/perf/test_rollout_path.py",
        "-p",
        "no:cacheprovider",
        "-q",
        "--junitxml",
        str(out),
        *args,
    ]
    # The tiers need only rlgate.pytest_plugin (via conftest); other plugins just cost startup.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert out.is_file(), proc.stdout + proc.stderr
    cases = {case.name: case for suite in JUnitXml.fromfile(str(out)) for case in suite}
    assert cases, proc.stdout
    return cases


def props(case: TestCase) -> dict[str, str]:
    return {p.name: p.value for group in case.iterchildren(Properties) for p in group}


def outcome(case: TestCase) -> str:
    kinds = {Failure: "failed", Error: "error", Skipped: "skipped"}
    return next(
        (name for kind, name in kinds.items() if any(isinstance(r, kind) for r in case.result)),
        "passed",
    )


def check_name(case_name: str) -> str:
    return case_name.split("[", 1)[1][:-1]


class TestTiersOnRealMlperfRun:
    def test_tiers_pass_a_real_mlperf_run_and_record_properties(self, tmp_path: Path) -> None:
        run, baseline = mlperf_path(256, 1), mlperf_path(256, 2)
        cases = run_tiers(
            tmp_path, "--run-dir", str(run), "--recipe", str(RECIPE), "--baseline", str(baseline)
        )
        results = {check_name(n): outcome(c) for n, c in cases.items()}
        assert results["completion"] == "passed" and results["reward_improvement"] == "passed"
        assert results["perf:timing/train/total_step_time"] == "passed"
        assert results["band_curve:train/reward"] == "skipped"  # no --band-run
        assert {v for k, v in results.items() if not k.startswith("band_")} == {"passed"}
        facts = props(cases["test_convergence_check[completion]"])
        # stopped at step 18 of 30 on reaching its target accuracy: value and threshold as
        # recorded, the bound and message say what passed
        assert facts["rlgate.value"] == "18" and facts["rlgate.threshold"] == "30"
        assert facts["rlgate.bound"] == "early stop on success"
        assert facts["rlgate.message"].startswith(
            "target accuracy reached at step 18 (early stop, max 30): "
        )
        assert facts["rlgate.metric"] == "train/loss" and facts["rlgate.run_dir"] == str(run)
        assert facts["rlgate.recipe"] == RECIPE.stem and facts["rlgate.verdict"] == "pass"
        perf = props(cases["test_perf_check[perf:timing/train/total_step_time]"])
        assert (
            perf["rlgate.bound"] == "<= 1.3x baseline" and 0.5 < float(perf["rlgate.value"]) < 1.5
        )


class TestTiersOnCorpus:
    def test_tiers_fail_exactly_the_checks_of_an_injected_fault(self, tmp_path: Path) -> None:
        """... and the same evaluation writes check-run's JSON (--rlgate-json): one pass."""
        c = corpus()
        doc_path = tmp_path / "run.check.json"
        cases = run_tiers(
            tmp_path,
            "--rlgate-json",
            str(doc_path),
            "--run-dir",
            str(c.runs[Fault.LOGPROB_DRIFT]),
            "--recipe",
            str(c.recipe),
            "--baseline",
            str(c.baseline),
            "--rollouts",
            str(c.rollouts["healthy"]),
        )
        results = {check_name(n): outcome(case) for n, case in cases.items()}
        assert {k for k, v in results.items() if v == "failed"} == EXPECTED_CATCHES[
            Fault.LOGPROB_DRIFT
        ]
        assert {
            v for k, v in results.items() if k not in EXPECTED_CATCHES[Fault.LOGPROB_DRIFT]
        } == {"passed"}
        facts = props(cases["test_convergence_check[logprob_error_median]"])
        assert facts["rlgate.verdict"] == "fail" and facts["rlgate.bound"] == "< 1.05"
        assert float(facts["rlgate.value"]) > 1.05
        doc = RunDocument.model_validate(json.loads(doc_path.read_text()))
        shown = {"passed": Outcome.PASS, "failed": Outcome.FAIL, "skipped": Outcome.SKIP}
        assert {r.name: r.outcome for r in (*doc.checks, *doc.skipped)} == {
            n: shown[v] for n, v in results.items()
        }
        plan = load_plan(c.recipe)
        inputs = load_inputs(
            plan, c.runs[Fault.LOGPROB_DRIFT], baseline=c.baseline, rollouts=c.rollouts["healthy"]
        )
        check_run = run_gate(plan, inputs)
        assert [r.to_json() for r in doc.checks] == [r.to_json() for r in check_run.results]
        assert doc.passed is False and doc.recipe == plan.recipe

    def test_tiers_report_an_unreached_target_as_error(self, tmp_path: Path) -> None:
        c = corpus()
        cases = run_tiers(
            tmp_path, "--run-dir", str(c.runs[Fault.STOPPED_EARLY]), "--recipe", str(c.recipe)
        )
        completion = cases["test_convergence_check[completion]"]
        assert (
            outcome(completion) == "error"
            and "target step 50 not reached" in completion.result[0].message
        )
        assert props(completion)["rlgate.verdict"] == "error"
        skipped = [case for n, case in cases.items() if n.startswith("test_perf_check[perf:")]
        assert skipped and all("needs --baseline" in case.result[0].message for case in skipped)

    def test_tiers_skip_with_the_missing_option_named(self, tmp_path: Path) -> None:
        cases = run_tiers(tmp_path)
        assert {outcome(c) for c in cases.values()} == {"skipped"}
        assert all("--run-dir and --recipe" in c.result[0].message for c in cases.values())

    def test_tiers_report_an_invalid_recipe_as_error(self, tmp_path: Path) -> None:
        recipe = tmp_path / "typo.yaml"
        recipe.write_text("grpo: {max_num_steps: 3}\nrlgate:\n  convergence:\n    chekcs: []\n")
        cases = run_tiers(tmp_path, "--run-dir", str(mlperf_path(256, 1)), "--recipe", str(recipe))
        assert {outcome(c) for c in cases.values()} == {"error"}
        assert all("did you mean 'checks'" in c.result[0].message for c in cases.values())

    def test_tiers_report_a_recipe_without_gates_as_error_never_green(self, tmp_path: Path) -> None:
        recipe = tmp_path / "nogates.yaml"
        recipe.write_text("grpo: {max_num_steps: 3}\nrlgate: {tiers: [functional]}\n")
        cases = run_tiers(tmp_path, "--run-dir", str(mlperf_path(256, 1)), "--recipe", str(recipe))
        assert {outcome(c) for c in cases.values()} == {"error"}
        assert all("declares no gates" in c.result[0].message for c in cases.values())
