"""The demo's nightly history: the planted faults get their labels from the real checks.

The history is generated (corpus runs, rollouts, SWE maps), gated by the real checks and
triaged; no label is written anywhere. Each planted fault, removed, takes its label with it.
A short history (8 nightlies, a new NeMo RL commit every 3) keeps this fast; the report's
demo builds the full 30 (tests/unit/test_demo.py).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from rlgate.core.results import Outcome
from rlgate.demo.history import (
    DEMO_LABEL,
    DEMO_NIGHTLIES,
    DemoHistoryPlan,
    demo_code,
    demo_history,
)
from rlgate.history.model import RecordedRun
from rlgate.history.triage import Label, code_of, outcome_strip
from rlgate.report.triage_section import latest_nightly_labels

SHORT = DemoHistoryPlan(nightlies=8, regression_from=7, infra_at=8)
PLANTED = {
    "perf:timing/train/total_step_time": Label.REGRESSION,
    "perf:performance/tokens_per_sec_per_gpu": Label.REGRESSION,
    "rollouts:truncated_final_rate": Label.FLAKY,
    "coverage_after": Label.INFRA,
    "significance": Label.INFRA,
}
BY_FAULT = {
    "regression": {"perf:timing/train/total_step_time", "perf:performance/tokens_per_sec_per_gpu"},
    "flaky": {"rollouts:truncated_final_rate"},
    "infra": {"coverage_after", "significance"},
}


@functools.cache
def history(*removed: str) -> tuple[RecordedRun, ...]:
    root = Path(tempfile.mkdtemp(prefix="rlgate-demo-history-"))
    atexit.register(shutil.rmtree, root, True)
    return tuple(demo_history(root / "h", plan=SHORT.without(*removed)))


def latest(*removed: str) -> dict[str, Label]:
    nightly, labels = latest_nightly_labels(history(*removed))
    assert nightly == "DEMO-n08"
    return {lb.check: lb.label for lb in labels}


class TestPlanted:
    def test_the_planted_faults_get_their_labels(self) -> None:
        assert latest() == PLANTED

    def test_the_regression_names_the_nightly_of_the_new_commit(self) -> None:
        _, labels = latest_nightly_labels(history())
        step = next(lb for lb in labels if lb.check == "perf:timing/train/total_step_time")
        assert step.first_failing == "DEMO-n07" and step.last_passing == "DEMO-n06"
        assert outcome_strip(step.history) == "......F"
        assert demo_code(SHORT, 7) != demo_code(SHORT, 6)  # the regression came with new code

    def test_the_flaky_check_flips_on_the_same_code(self) -> None:
        _, labels = latest_nightly_labels(history())
        flaky = next(lb for lb in labels if lb.label is Label.FLAKY)
        assert flaky.flips >= 2 and flaky.flip_rate >= 0.1
        assert {m.outcome for m in flaky.history} == {Outcome.PASS, Outcome.FAIL}

    def test_the_infra_failure_is_the_swe_gate_over_its_infra_bound(self) -> None:
        _, labels = latest_nightly_labels(history())
        cov = next(lb for lb in labels if lb.check == "coverage_after")
        assert cov.candidate.outcome is Outcome.ERROR and cov.candidate.value > 0.05
        assert cov.candidate.infra_cause == "swe_infra_errors"

    def test_every_nightly_is_labelled_demo_on_main_with_its_code(self) -> None:
        runs = history()
        assert len(runs) == 2 * SHORT.nightlies and DEMO_NIGHTLIES == 30
        assert {r.context.label for r in runs} == {DEMO_LABEL}
        assert {r.context.branch for r in runs} == {"main"}
        assert len({code_of(r.context) for r in runs}) == 3  # commits move every 3 nightlies


class TestRemoved:
    def test_without_any_fault_nothing_is_labelled(self) -> None:
        assert latest("regression", "flaky", "infra") == {}

    def test_each_fault_removed_takes_only_its_labels(self) -> None:
        for fault, checks in BY_FAULT.items():
            expected = {k: v for k, v in PLANTED.items() if k not in checks}
            assert latest(fault) == expected, fault


def test_rlgate_triage_on_the_demo_files_as_docs_history_shows(tmp_path, capsys) -> None:
    """The newest nightly's JUnit, triaged against the database it is recorded in."""
    import json

    from rlgate.cli.app import main
    from rlgate.demo.history import record_demo_history, write_nightly_junit

    runs = history()
    record_demo_history(tmp_path / "history.db", runs)
    latest_runs = [r for r in runs if r.context.nightly_id == "DEMO-n08"]
    junit = write_nightly_junit(tmp_path / "latest-nightly.xml", latest_runs)
    args = ["triage", "--candidate", str(junit), "--db", str(tmp_path / "history.db")]
    code = main([*args, "--hardware", "demo-2x8", "--json", str(tmp_path / "t.json")])
    out = capsys.readouterr().out
    assert code == 1 and "against 7 main nightlies" in out  # its own recording left out
    labels = json.loads((tmp_path / "t.json").read_text())["labels"]
    assert {lb["check"]: lb["label"] for lb in labels} == {k: v.value for k, v in PLANTED.items()}
