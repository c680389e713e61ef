"""Run the swe_gate tier for real (pytest in a subprocess) and read its JUnit verdicts.

Inputs are harness outputs graded by swebench on a 40-instance slice of
Verified (a .jsonl subset dataset); the three tier runs go in parallel.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Properties, Skipped

from .helpers import swe_inputs as si

REPO_ROOT = Path(__file__).resolve().parents[2]
CRITERIA = {
    "test_swe_arm_infra_error_rate_within_bound[before]": "coverage_before",
    "test_swe_arm_infra_error_rate_within_bound[after]": "coverage_after",
    "test_swe_arms_cover_the_same_instances[set]": "same_instance_set",
    "test_swe_arms_use_the_same_dataset_revision[revision]": "same_dataset_revision",
    "test_swe_trained_model_is_not_significantly_worse[verdict]": "significance",
}


def _status(case) -> str:
    for result in case.result:
        if isinstance(result, Error):
            return "error"
        if isinstance(result, Failure):
            return "failure"
        if isinstance(result, Skipped):
            return "skipped"
    return "passed"


@pytest.fixture(scope="module")
def tier_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tier")
    ids = [r["instance_id"] for r in si.verified_rows()][5::12][:40]
    dataset = si.write_subset_dataset(root / "verified40.jsonl", ids)
    base = {i: si.RESOLVED if k < 30 else si.UNRESOLVED for k, i in enumerate(ids)}
    broken = {i: (si.DOCKER_ERROR if k % 3 == 0 else base[i]) for k, i in enumerate(ids)}
    worse = {i: si.RESOLVED if k < 5 else si.UNRESOLVED for k, i in enumerate(ids)}
    b = si.write_harness_run(root / "base", "base", base, dataset_ids=ids)
    x = si.write_harness_run(root / "x", "x", broken, dataset_ids=ids)
    w = si.write_harness_run(root / "w", "w", worse, dataset_ids=ids)
    inputs = {
        "missing_options": [],
        "first_attempt": ["--swe-before", str(b.final_report), "--swe-after", str(x.log_dir),
                          "--swe-dataset", str(dataset)],
        "regressed": ["--swe-before", str(b.final_report), "--swe-after", str(w.final_report),
                      "--swe-dataset", str(dataset)],
    }  # fmt: skip
    # third-party pytest plugins (hypothesis, hydra, ...) cost seconds and are not used
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    procs = {}
    for name, args in inputs.items():
        xml = root / f"{name}.xml"
        cmd = [sys.executable, "-m", "pytest", "tests/swe_gate", "-p", "no:cacheprovider",
               "-q", *args, "--junitxml", str(xml)]  # fmt: skip
        procs[name] = (xml, subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True))  # fmt: skip
    runs = {}
    for name, (xml, proc) in procs.items():
        out, _ = proc.communicate(timeout=300)
        cases = {c.name: c for suite in JUnitXml.fromfile(str(xml)) for c in suite}
        runs[name] = (proc.returncode, cases, out)
    return runs


class TestSweGateTier:
    def test_tier_without_inputs_skips_naming_the_missing_options(self, tier_runs):
        code, cases, out = tier_runs["missing_options"]
        assert code == 0, out
        assert set(cases) == set(CRITERIA)
        for case in cases.values():
            assert _status(case) == "skipped"
            message = case.result[0].message
            assert "--swe-before" in message and "--swe-after" in message
            assert "--swe-dataset" in message

    def test_tier_first_attempt_is_an_error_not_a_failure(self, tier_runs):
        code, cases, out = tier_runs["first_attempt"]
        statuses = {CRITERIA[n]: _status(c) for n, c in cases.items()}
        assert statuses == {
            "coverage_before": "passed",
            "coverage_after": "error",
            "same_instance_set": "passed",
            "same_dataset_revision": "passed",
            "significance": "error",
        }, out
        assert code == 1
        message = cases["test_swe_arm_infra_error_rate_within_bound[after]"].result[0].message
        assert "infra error rate 35.0%" in message

    def test_tier_regression_is_a_failure_with_the_numbers(self, tier_runs):
        code, cases, out = tier_runs["regressed"]
        statuses = {CRITERIA[n]: _status(c) for n, c in cases.items()}
        assert statuses["significance"] == "failure", out
        assert code == 1
        assert [s for k, s in statuses.items() if k != "significance"] == ["passed"] * 4
        case = cases["test_swe_trained_model_is_not_significantly_worse[verdict]"]
        props = {p.name: p.value for p in case.child(Properties)}
        assert props["rlgate.verdict"] == "fail" and props["rlgate.name"] == "significance"
        evidence = json.loads(props["rlgate.evidence"])
        assert evidence["verdict"] == "regressed"
        assert evidence["delta_pp"] == pytest.approx(-62.5)
        assert float(props["rlgate.value"]) < 0.05
