"""`rlgate report`: a testcase whose recorded ``rlgate.verdict`` disagrees with the outcome its
JUnit element shows is a contradiction (never GO), and a tier runs only on a gate check
evaluated to PASS or FAIL (docs/recommendation-rule.md).

The contradictory files are written by rlgate's own JUnit writer (``JunitCase.of(result)``)
with the shown element changed, which is what a hand-edited or broken file holds; the rest of
each report is the real producers' full GO set (report_inputs.py).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.junit import JunitCase, JunitSuite, read_junit, write_junit
from rlgate.core.results import INFRA_CAUSE, Outcome, Result, Tier
from rlgate.report.build import BlockerKind, Verdict, build_report

from .helpers import report_inputs as ri

CLASSNAME = {
    Tier.FUNCTIONAL: "tests.functional.test_edited",
    Tier.CONVERGENCE: "rlgate.convergence.demo",
    Tier.PERF: "rlgate.perf.demo",
    Tier.SWE_GATE: "rlgate.swe_gate.criteria",
}


def edited_case(
    tier: Tier, recorded: Outcome, shown: Outcome, *, name: str = "completion", **extra: object
) -> JunitCase:
    """rlgate's testcase for a Result ``recorded``, its element changed to show ``shown``."""
    xfail = bool(extra.pop("xfail", False))
    result = Result(name=name, tier=tier, outcome=recorded, message="reached step 7 of 50", **extra)
    case = JunitCase.of(result, classname=CLASSNAME[tier])
    kind = "pytest.xfail" if shown is Outcome.SKIP and xfail else None
    message = "" if shown is Outcome.PASS else "edited"
    return dataclasses.replace(case, shown=shown, message=message, kind=kind)


def junit_file(path: Path, *cases: JunitCase) -> Path:
    path.write_text(write_junit([JunitSuite.of("edited", cases)]), encoding="utf-8")
    return path


def report_with(*extra: Path, drop_check_run: bool = False):
    full = ri.full_set()
    junit = [p for p in full["junit"] if not (drop_check_run and p.name == "run.xml")]
    runs = [] if drop_check_run else full["runs"]
    return build_report([*junit, *extra], runs=runs, swe=full["swe"], draw_plots=False)


def test_the_full_set_alone_is_go():
    report = report_with()
    assert report.verdict is Verdict.GO, report.blockers


P, F, E, S = Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.SKIP

# (tier, recorded, shown) -> the verdict the contradiction forces
CONTRADICTIONS = [
    # shown skipped or passed while a failure is recorded: it hides the failure -> NO-GO
    pytest.param(Tier.CONVERGENCE, F, S, Verdict.NO_GO, id="conv_skipped_records_fail"),
    pytest.param(Tier.CONVERGENCE, E, S, Verdict.NO_GO, id="conv_skipped_records_error"),
    pytest.param(Tier.PERF, F, S, Verdict.NO_GO, id="perf_skipped_records_fail"),
    pytest.param(Tier.FUNCTIONAL, F, P, Verdict.NO_GO, id="functional_passed_records_fail"),
    pytest.param(Tier.FUNCTIONAL, F, S, Verdict.NO_GO, id="functional_skipped_records_fail"),
    pytest.param(Tier.SWE_GATE, F, P, Verdict.NO_GO, id="swe_passed_records_fail"),
    pytest.param(Tier.SWE_GATE, F, E, Verdict.NO_GO, id="swe_errored_records_fail"),
    pytest.param(Tier.CONVERGENCE, F, P, Verdict.NO_GO, id="conv_passed_records_fail"),
    # shown failed while a pass is recorded: still a failure -> NO-GO
    pytest.param(Tier.CONVERGENCE, P, F, Verdict.NO_GO, id="conv_failed_records_pass"),
    pytest.param(Tier.PERF, S, F, Verdict.NO_GO, id="perf_failed_records_skip"),
    # no side is a failure, but the two disagree: never GO -> INCOMPLETE
    pytest.param(Tier.CONVERGENCE, S, P, Verdict.INCOMPLETE, id="conv_passed_records_skip"),
    pytest.param(Tier.PERF, P, S, Verdict.INCOMPLETE, id="perf_skipped_records_pass"),
    pytest.param(Tier.SWE_GATE, P, E, Verdict.INCOMPLETE, id="swe_errored_records_pass"),
    pytest.param(Tier.SWE_GATE, E, P, Verdict.INCOMPLETE, id="swe_passed_records_error"),
]


@pytest.mark.parametrize(("tier", "recorded", "shown", "expected"), CONTRADICTIONS)
def test_a_recorded_verdict_that_disagrees_with_the_shown_outcome_is_never_go(
    tmp_path, tier, recorded, shown, expected
):
    path = junit_file(tmp_path / "edited.xml", edited_case(tier, recorded, shown))
    report = report_with(path)
    assert report.verdict is expected, report.blockers
    (blocker,) = [b for b in report.blockers if b.kind is BlockerKind.INCONSISTENT]
    assert blocker.forces is expected and blocker.tier is tier
    assert f"but records rlgate.verdict = {recorded.value}" in blocker.detail
    assert str(path) in blocker.detail
    # a contradictory testcase is never listed as an allowed skip
    assert all(c.source != str(path) for c in report.allowances)


def test_a_skipped_completion_that_recorded_fail_is_no_go_not_an_allowed_skip(tmp_path):
    """The issue's case: `<skipped>` with rlgate.verdict = fail (step 7 of 50) gave GO."""
    path = junit_file(tmp_path / "conv.xml", edited_case(Tier.CONVERGENCE, F, S))
    report = report_with(path)
    assert report.verdict is Verdict.NO_GO
    blocker = report.blockers[0]
    assert blocker.title == "convergence: completion"
    assert blocker.detail.startswith("the testcase was skipped but records rlgate.verdict = fail")
    assert report.allowances == ()


def test_an_expected_failure_that_recorded_fail_is_no_go(tmp_path):
    case = edited_case(Tier.PERF, F, S, xfail=True)
    assert case.xfail
    report = report_with(junit_file(tmp_path / "xfail.xml", case))
    assert report.verdict is Verdict.NO_GO
    assert "was an expected failure but records rlgate.verdict = fail" in report.blockers[0].detail


def test_a_hidden_infra_error_is_incomplete_not_no_go(tmp_path):
    """An ERROR that names its infrastructure cause is INCOMPLETE; hidden as a pass, too."""
    cause = {INFRA_CAUSE: {"reason": "stalled", "detail": "no new step for 2 h"}}
    case = edited_case(Tier.CONVERGENCE, E, P, name="run_status", evidence=cause)
    report = report_with(junit_file(tmp_path / "watch.xml", case))
    assert report.verdict is Verdict.INCOMPLETE
    assert [b.kind for b in report.blockers] == [BlockerKind.INCONSISTENT]


def test_the_same_contradiction_through_the_cli_exits_non_zero(tmp_path, capsys):
    path = junit_file(tmp_path / "conv.xml", edited_case(Tier.CONVERGENCE, F, S))
    full = ri.full_set()
    args = ["report", "--junit", *map(str, full["junit"]), str(path), "--run", str(full["runs"][0])]
    args += ["--swe", str(full["swe"]), "--no-plots", "--out", str(tmp_path / "out")]
    assert main(args) == 1
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["verdict"] == "NO-GO"
    assert "verdict: NO-GO" in capsys.readouterr().out


# --- a tier runs only on a check evaluated to PASS or FAIL ---------------------------------------


def _recorded_skips(tmp_path: Path) -> Path:
    """Every convergence and perf check records skip, but shows as passed."""
    cases = [
        edited_case(tier, S, P, name=name)
        for tier, name in (
            (Tier.CONVERGENCE, "completion"),
            (Tier.CONVERGENCE, "reward_trend"),
            (Tier.PERF, "perf:timing/train/total_step_time"),
        )
    ]
    return junit_file(tmp_path / "skips.xml", *cases)


def test_checks_that_record_skip_but_show_passed_do_not_make_their_tiers_run(tmp_path):
    report = report_with(_recorded_skips(tmp_path), drop_check_run=True)
    assert report.verdict is Verdict.INCOMPLETE
    ran = {t.tier: t.ran for t in report.tiers}
    assert ran[Tier.CONVERGENCE] is False and ran[Tier.PERF] is False
    not_run = {b.tier for b in report.blockers if b.kind is BlockerKind.NOT_RUN}
    assert not_run == {Tier.CONVERGENCE, Tier.PERF}


def test_a_tier_whose_gate_checks_only_errored_did_not_run(tmp_path):
    """An ERROR could not judge: the tier is blocked by it, and it did not run either."""
    cause = {INFRA_CAUSE: {"reason": "oom_killed", "detail": "Killed"}}
    case = JunitCase.of(
        Result(name="run_status", tier=Tier.PERF, outcome=E, message="killed", evidence=cause),
        classname=CLASSNAME[Tier.PERF],
    )
    full = ri.full_set()
    run_xml = next(p for p in full["junit"] if p.name == "run.xml")
    conv_only = [
        c for s in read_junit(run_xml) for c in s.cases if c.result.tier is Tier.CONVERGENCE
    ]
    path = junit_file(tmp_path / "run.xml", *conv_only, case)
    report = report_with(path, drop_check_run=True)
    assert report.verdict is Verdict.INCOMPLETE
    assert {t.tier: t.ran for t in report.tiers}[Tier.PERF] is False
    assert {(b.kind, b.tier) for b in report.blockers} == {
        (BlockerKind.ERROR, Tier.PERF),
        (BlockerKind.NOT_RUN, Tier.PERF),
    }
