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


# --- what the attack on the verdict found -------------------------------------------------------


def _cases_of(path: Path, tier: Tier | None = None) -> list[JunitCase]:
    return [c for s in read_junit(path) for c in s.cases if tier is None or c.result.tier is tier]


def test_a_recorded_tier_cannot_make_another_tiers_gate_check(tmp_path):
    """Passing functional testcases recording rlgate.tier = convergence/perf/swe_gate made those
    tiers count as run (GO from the functional JUnit alone); the classname decides the tier."""
    full = ri.full_set()
    functional = next(p for p in full["junit"] if "functional" in str(p))
    plain = next(c for c in _cases_of(functional) if c.shown is P)
    claimed = [
        dataclasses.replace(
            plain,
            name=f"{plain.name}_{tier.value}",
            result=plain.result.model_copy(update={"tier": tier, "name": f"x_{tier.value}"}),
            recorded=True,
            properties=(("rlgate.tier", tier.value), ("rlgate.verdict", "pass")),
        )
        for tier in (Tier.CONVERGENCE, Tier.PERF, Tier.SWE_GATE)
    ]
    forged = junit_file(tmp_path / "forged.xml", *claimed)
    report = build_report(
        [functional, forged], runs=full["runs"], swe=full["swe"], draw_plots=False
    )
    assert report.verdict is not Verdict.GO
    ran = {t.tier: t.ran for t in report.tiers}
    assert ran[Tier.CONVERGENCE] is ran[Tier.PERF] is False
    claims = [b for b in report.blockers if "puts it in the functional tier" in b.detail]
    assert len(claims) == 3 and {b.kind for b in claims} == {BlockerKind.INCONSISTENT}
    assert all("but it records rlgate.tier" in b.detail for b in claims)


def test_checks_of_the_run_json_or_the_recipe_missing_from_the_junit_are_never_go(tmp_path):
    """Every convergence testcase but data_integrity removed from check-run's JUnit: GO before,
    with the run JSON listing 34 checks and the recipe planning them."""
    full = ri.full_set()
    run_xml = next(p for p in full["junit"] if p.name == "run.xml")
    kept = [
        c for c in _cases_of(run_xml)
        if c.result.tier is not Tier.CONVERGENCE or c.result.name == "data_integrity"
    ]  # fmt: skip
    path = junit_file(tmp_path / "run.xml", *kept)
    junit = [p for p in full["junit"] if p.name != "run.xml"] + [path]
    with_json = build_report(junit, runs=full["runs"], swe=full["swe"], draw_plots=False)
    assert with_json.verdict is Verdict.INCOMPLETE
    (blocker,) = [b for b in with_json.blockers if b.title.startswith("run JSON:")]
    assert "missing from the JUnit" in blocker.title and "completion" in blocker.detail
    with_recipe = build_report(junit, swe=full["swe"], recipe=full["recipe"], draw_plots=False)
    assert with_recipe.verdict is Verdict.INCOMPLETE
    titles = [b.title for b in with_recipe.blockers]
    assert any(t.startswith("convergence:") and "planned check(s) missing" in t for t in titles)
    # the whole JUnit with the same recipe and run JSON is GO
    assert report_with().verdict is Verdict.GO


def test_a_swe_verdict_whose_numbers_are_missing_is_not_taken_on_trust(tmp_path):
    """The swe_gate JUnit alone: a significance criterion without its CI, or none at all."""
    full = ri.full_set()
    swe_xml = next(p for p in full["junit"] if "swe" in str(p))
    others = [p for p in full["junit"] if p != swe_xml]
    suites = read_junit(swe_xml)

    def rewrite(name: str, edit) -> Path:
        edited = [
            dataclasses.replace(s, cases=tuple(edit(c) for c in s.cases if edit(c))) for s in suites
        ]
        path = tmp_path / name
        path.write_text(write_junit(edited), encoding="utf-8")
        return path

    def no_ci(case):
        if case.result.name != "significance":
            return case
        result = case.result.model_copy(update={"evidence": {"delta_pp": -3.0}})
        return JunitCase.of(result, classname=case.classname)

    for path in (
        rewrite("no_ci.xml", no_ci),
        rewrite("none.xml", lambda c: c.result.name != "significance" and c),
    ):
        report = build_report([*others, path], runs=full["runs"], draw_plots=False)
        assert report.verdict is Verdict.INCOMPLETE, path
        detail = next(b.detail for b in report.blockers if b.kind is BlockerKind.INCONSISTENT)
        assert "cannot be checked" in detail


def test_marking_a_failing_check_informational_never_hides_it(tmp_path, capsys):
    """rlgate.informational = benchmark on a failing completion check gave GO; = instance on a
    testcase outside the per-instance suite is no label at all."""
    bench = edited_case(Tier.CONVERGENCE, F, F, informational="benchmark")
    report = report_with(junit_file(tmp_path / "bench.xml", bench))
    assert report.verdict is not Verdict.GO
    assert any("marked informational (benchmark)" in b.detail for b in report.blockers)
    instance = edited_case(Tier.CONVERGENCE, F, F, informational="instance")
    assert report_with(junit_file(tmp_path / "inst.xml", instance)).verdict is Verdict.NO_GO
    # a real per-instance testcase that lost an instance stays informational
    assert report_with().verdict is Verdict.GO


def test_a_property_recorded_twice_with_two_values_is_refused(tmp_path, capsys):
    case = edited_case(Tier.CONVERGENCE, P, P, name="reward_improvement")
    case = dataclasses.replace(case, properties=(*case.properties, ("rlgate.verdict", "fail")))
    path = junit_file(tmp_path / "dup.xml", case)
    out = tmp_path / "out"
    assert main(["report", "--junit", str(path), "--no-plots", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "rlgate.verdict is recorded twice, as 'pass' and 'fail'" in err
    assert err.count("rlgate: error:") == 1 and "Traceback" not in err


def test_the_plugins_informational_markers_are_kinds_the_report_honours():
    from rlgate.pytest_plugin import INFORMATIONAL_MARKERS
    from rlgate.report.inputs import FREE_KINDS

    assert set(INFORMATIONAL_MARKERS) <= FREE_KINDS


def test_triage_labels_a_failing_check_marked_informational(tmp_path, capsys):
    bench = edited_case(Tier.CONVERGENCE, F, F, informational="benchmark")
    path = junit_file(tmp_path / "bench.xml", bench)
    out, db = tmp_path / "t.json", str(tmp_path / "h.db")
    pytest.importorskip("sqlalchemy")
    from rlgate.history.store import open_store

    open_store(db).close()  # an empty history: triage creates none
    code = main(["triage", "--candidate", str(path), "--db", db, "--json", str(out)])
    capsys.readouterr()
    labels = json.loads(out.read_text())["labels"]
    assert code == 1 and [(lb["check"], lb["label"]) for lb in labels] == [
        ("completion", "unknown")
    ]
