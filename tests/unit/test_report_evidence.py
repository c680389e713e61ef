"""`rlgate report` never takes a GO on trust: SWE numbers, the instance set, gate checks.

Regression stories (issue 10, "wrong GO verdicts"):

* a SWE JSON saying "improved" next to Δ −12 pp and p = 0.9 gave GO, with a sentence that
  contradicted itself: the verdict is now recomputed from the numbers the evidence carries
  with the gate's own rule, and a contradiction is INCOMPLETE with the reason;
* a hand-made 100-instance dataset gave GO "on SWE-bench Verified … n = 100": the instance
  set compared is named, only the full 500-instance set is called SWE-bench Verified, and
  only the full set can give GO;
* a nightly without ``--baseline`` was GO because the perf tier's benchmarks (which assert
  nothing) counted as the tier having run: benchmarks are informational, and a tier runs
  only when one of its gate checks was evaluated.

Inputs come from the real producers (report_inputs.py); the tests only choose outcomes or
edit one field of a real document, the way a hand-edited or stale file would look.
"""

import json

import pytest
from junitparser import JUnitXml, Properties, Property, TestCase, TestSuite

from rlgate.cli.app import main
from rlgate.core.results import Tier
from rlgate.report.build import BlockerKind, Verdict, build_report
from rlgate.swe.records import InstanceSet

from .helpers import report_inputs as ri


def _edited_swe(tmp_path, edit, kind="improved", name="swe.json"):
    doc = json.loads(ri.swe(kind)[0].read_text())
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _report(swe=None, junit=None, kind="improved", **kwargs):
    full = ri.full_set(kind)
    return build_report(
        junit if junit is not None else full["junit"],
        runs=full["runs"],
        swe=swe,
        recipe=full["recipe"],
        draw_plots=False,
        **kwargs,
    )


def _cli(tmp_path, capsys, junit, swe=None):
    full = ri.full_set()
    args = ["report", "--junit", *map(str, junit), "--run", str(full["runs"][0])]
    args += ["--swe", str(swe)] if swe else []
    args += ["--recipe", str(full["recipe"]), "--out", str(tmp_path / "out"), "--no-plots"]
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _set(doc, **fields):
    doc.update(fields)


class TestSweVerdictIsRecomputed:
    def test_improved_with_a_negative_delta_and_p_09_is_incomplete_not_go(self, tmp_path, capsys):
        swe = _edited_swe(
            tmp_path, lambda d: _set(d, delta_pp=-12.0, p_value=0.9, ci95_pp=[-15.0, -9.0])
        )
        full = ri.full_set()
        code, out, _ = _cli(tmp_path, capsys, full["junit"], swe)
        assert code == 3 and "verdict: INCOMPLETE" in out
        report = _report(swe)
        assert report.verdict is Verdict.INCOMPLETE
        (blocker,) = report.blockers
        assert blocker.kind is BlockerKind.INCONSISTENT and blocker.anchor == "swe"
        assert "it states 'improved' but its numbers give no_significant_change" in blocker.detail
        assert "p = 0.9" in blocker.detail
        assert "improves" not in report.story
        assert "the SWE-bench comparison contradicts itself (it states 'improved'" in report.story

    @pytest.mark.parametrize(
        ("edit", "says"),
        [
            pytest.param(
                lambda d: _set(d, p_value=0.2),
                "its numbers give no_significant_change",
                id="p_above_alpha",
            ),
            pytest.param(
                lambda d: d["criteria"][0].update(status="error"),
                "although criteria coverage_before errored (that is inconclusive)",
                id="criterion_errored",
            ),
            pytest.param(
                lambda d: d["before"]["runs"][0].update(infra_error_rate=0.2),
                "a run has 20.0% infra errors (more than max_infra_error_rate 5.0%)",
                id="infra_errors_above_the_bound",
            ),
            pytest.param(
                lambda d: d["criteria"][-1].update(status="fail"),
                "it states 'improved' but a criterion failed",
                id="significance_failed",
            ),
            pytest.param(
                lambda d: _set(d, delta_pp=9.0, ci95_pp=[7.0, 11.0]),
                "the arms' resolve rates 0.4040 → 0.4470 differ by +4.30 pp",
                id="delta_not_the_rates_difference",
            ),
            pytest.param(
                lambda d: _set(d, ci95_pp=[-3.0, -1.0]),
                "lies outside its own 95% CI [-3.00, -1.00] pp",
                id="delta_outside_its_ci",
            ),
        ],
    )
    def test_a_verdict_its_numbers_contradict_is_incomplete(self, tmp_path, edit, says):
        report = _report(_edited_swe(tmp_path, edit))
        assert report.verdict is Verdict.INCOMPLETE
        assert [b.kind for b in report.blockers] == [BlockerKind.INCONSISTENT]
        assert says in report.blockers[0].detail
        assert report.swe_verdict is None and "improves" not in report.story

    def test_regressed_stated_as_improved_is_never_go(self, tmp_path):
        doc = json.loads(ri.swe("regressed")[0].read_text())
        doc["verdict"] = "improved"
        doc["criteria"][-1]["status"] = "pass"
        swe = tmp_path / "swe.json"
        swe.write_text(json.dumps(doc))
        report = _report(swe, junit=ri.full_set()["junit"][:2])
        assert report.verdict is not Verdict.GO
        assert "its numbers give regressed" in report.blockers[-1].detail

    def test_a_junit_only_verdict_is_recomputed_from_its_properties(self, tmp_path, capsys):
        """swe_gate JUnit of a no-change comparison with its verdict edited to 'improved'."""
        text = ri.swe("no_significant_change")[1].read_text()
        edited = text.replace('value="no_significant_change"', 'value="improved"')
        assert edited != text
        swe_xml = tmp_path / "swe.xml"
        swe_xml.write_text(edited)
        junit = [*ri.full_set()["junit"][:2], swe_xml]
        code, out, _ = _cli(tmp_path, capsys, junit)
        assert code == 3 and "verdict: INCOMPLETE" in out
        assert "it states 'improved' but its numbers give no_significant_change" in out

    @pytest.mark.parametrize(
        "kind", ["improved", "regressed", "no_significant_change", "inconclusive"]
    )
    def test_real_comparisons_are_consistent_as_json_and_as_junit(self, kind):
        full = ri.full_set(kind)
        for report in (_report(full["swe"], kind=kind), _report(None, kind=kind)):
            evidence = report.swe_evidence
            assert evidence is not None and evidence.contradictions == ()
            assert evidence.stated.value == kind and evidence.instance_set is InstanceSet.VERIFIED
            assert evidence.n == 500

    def test_a_json_without_margin_accepts_either_verdict_the_margin_decides(self, tmp_path):
        swe = _edited_swe(tmp_path, lambda d: d.pop("margin_pp"), kind="regressed")
        report = _report(swe, kind="regressed")
        assert report.swe_evidence.contradictions == ()
        assert report.verdict is Verdict.NO_GO


class TestInstanceSet:
    def test_a_verified_subset_is_named_and_is_incomplete_not_go(self, tmp_path, capsys):
        swe_json, swe_xml = ri.swe_on_set("subset")
        junit = [*ri.full_set()["junit"][:2], swe_xml]
        code, out, _ = _cli(tmp_path, capsys, junit, swe_json)
        assert code == 3 and "verdict: INCOMPLETE" in out
        report = _report(swe_json, junit=junit)
        assert report.verdict is Verdict.INCOMPLETE
        (blocker,) = report.blockers
        assert blocker.kind is BlockerKind.SWE_SET
        assert blocker.detail == (
            "a release GO needs the full 500-instance SWE-bench Verified set; this comparison "
            "ran on a 100-instance subset of SWE-bench Verified"
        )
        assert "improves from 25.0% to 50.0% on a 100-instance subset of SWE-bench Verified (" in (
            report.story
        )
        assert "on SWE-bench Verified" not in report.story

    def test_a_hand_made_set_is_unrecognised_never_verified(self, tmp_path):
        swe_json, swe_xml = ri.swe_on_set("unknown")
        report = _report(swe_json, junit=[*ri.full_set()["junit"][:2], swe_xml])
        assert report.verdict is Verdict.INCOMPLETE
        assert report.swe_evidence.instance_set is InstanceSet.UNKNOWN
        assert "on an unrecognised 100-instance set (" in report.story
        assert "SWE-bench Verified" not in report.story
        md = _written(tmp_path, report)["markdown"].read_text()
        assert "instance set compared: an unrecognised 100-instance set (not the full set" in md

    def test_the_junit_alone_names_the_set_from_its_instances(self):
        _, swe_xml = ri.swe_on_set("subset")
        report = _report(None, junit=[*ri.full_set()["junit"][:2], swe_xml])
        assert report.swe_evidence.instance_set is InstanceSet.VERIFIED_SUBSET
        assert report.verdict is Verdict.INCOMPLETE
        assert "on a 100-instance subset of SWE-bench Verified" in report.story

    @pytest.mark.parametrize(
        ("verdict", "expected"),
        [
            pytest.param("regressed", Verdict.NO_GO, id="regression_on_a_subset_is_no_go"),
            pytest.param(
                "no_significant_change", Verdict.INCOMPLETE, id="no_change_on_a_subset_incomplete"
            ),
        ],
    )
    def test_a_subset_never_gives_go_and_only_a_regression_is_no_go(self, verdict, expected):
        swe_json, swe_xml = ri.swe_on_set("subset", verdict)
        report = _report(swe_json, junit=[*ri.full_set()["junit"][:2], swe_xml])
        assert report.verdict is expected
        assert BlockerKind.SWE_SET in {b.kind for b in report.blockers}

    def test_an_older_json_without_instance_set_is_classified_by_its_id_hash(self, tmp_path):
        full = _edited_swe(tmp_path, lambda d: d["dataset"].pop("instance_set"), name="full.json")
        assert _report(full).verdict is Verdict.GO
        doc = json.loads(ri.swe_on_set("subset")[0].read_text())
        del doc["dataset"]["instance_set"]
        subset = tmp_path / "subset.json"
        subset.write_text(json.dumps(doc))
        report = _report(subset, junit=ri.full_set()["junit"][:2])
        assert report.swe_evidence.instance_set is InstanceSet.UNKNOWN
        assert report.verdict is Verdict.INCOMPLETE

    def test_a_subset_claiming_to_be_verified_is_a_contradiction(self, tmp_path):
        doc = json.loads(ri.swe_on_set("subset")[0].read_text())
        doc["dataset"]["instance_set"] = "swe-bench-verified"
        swe = tmp_path / "swe.json"
        swe.write_text(json.dumps(doc))
        report = _report(swe, junit=[*ri.full_set()["junit"][:2], ri.swe_on_set("subset")[1]])
        assert report.verdict is Verdict.INCOMPLETE
        (blocker,) = report.blockers
        assert blocker.kind is BlockerKind.INCONSISTENT
        assert "claims the full SWE-bench Verified set, but its 100 instance ids" in blocker.detail
        assert "on SWE-bench Verified" not in report.story


def _written(tmp_path, report):
    from rlgate.report.build import prepare_out_dir, write_report

    return write_report(report, prepare_out_dir(tmp_path / "written"))


def _one_check(tmp_path, name, classname, verdict):
    """A JUnit of one passed testcase recording ``rlgate.verdict`` (junitparser writes it)."""
    case = TestCase(name, classname=classname)
    props = Properties()
    props.add_property(Property("rlgate.verdict", verdict))
    case.append(props)
    suite = TestSuite("one check")
    suite.add_testcase(case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    path = tmp_path / f"{verdict}.xml"
    xml.write(str(path))
    return path


class TestTierRunsOnlyOnGateChecks:
    def _nightly(self, *extra):
        """Every tier's JUnit of a nightly without --baseline: no perf check evaluated."""
        run_json, run_xml = ri.check_run_no_baseline()
        swe_json, swe_xml = ri.swe("improved")
        junit = [ri.functional_passing(), run_xml, swe_xml, *extra]
        return build_report(junit, runs=[run_json], swe=swe_json, draw_plots=False)

    def test_a_nightly_whose_perf_tier_only_ran_benchmarks_is_incomplete(self, capsys, tmp_path):
        report = self._nightly(ri.perf_benchmarks_only())
        assert report.verdict is Verdict.INCOMPLETE
        (blocker,) = report.blockers
        assert (blocker.kind, blocker.tier) == (BlockerKind.NOT_RUN, Tier.PERF)
        assert "no gate check was evaluated" in blocker.detail
        assert "3 testcase(s) skipped: perf:" in blocker.detail  # the check-run perf checks
        assert "needs --baseline" in blocker.detail
        assert "2 informational testcase(s) (benchmark) never count" in blocker.detail
        assert "1 testcase(s) ran but record no rlgate.verdict" in blocker.detail
        perf = next(t for t in report.tiers if t.tier is Tier.PERF)
        assert not perf.ran
        md = _written(tmp_path, report)["markdown"].read_text()
        assert (
            "Informational (benchmark; never a gate check): `test_prompt_preparation` (passed)"
            in md
        )

    @pytest.mark.parametrize("verdict", ["pass", "improved"])
    def test_the_rollout_path_gate_is_a_perf_gate_check(self, tmp_path, verdict):
        """What tests/perf/test_rollout_path.py's gate records (rlgate.bench.gate.Verdict)."""
        path = _one_check(
            tmp_path,
            "test_rollout_metric_within_baseline[recipe-prompt.full_us_per_token]",
            "tests.perf.test_rollout_path",
            verdict,
        )
        report = self._nightly(ri.perf_benchmarks_only(), path)
        assert report.verdict is Verdict.GO, report.blockers
        assert next(t for t in report.tiers if t.tier is Tier.PERF).ran

    def test_the_plugin_marks_benchmarks_informational_in_junit(self):
        suite = next(iter(JUnitXml.fromfile(str(ri.perf_benchmarks_only()))))
        props = {}
        for case in suite:
            props[case.name] = {p.name: p.value for g in case.iterchildren(Properties) for p in g}
        assert props["test_prompt_preparation"]["rlgate.informational"] == "benchmark"
        assert props["test_parsing"]["rlgate.informational"] == "benchmark"  # the fixture
        assert "rlgate.informational" not in props["test_trajectory_fills_the_recipe_context"]

    def test_benchmarks_next_to_evaluated_gate_checks_keep_a_go(self):
        full = ri.full_set()
        report = build_report(
            [*full["junit"], ri.perf_benchmarks_only()],
            runs=full["runs"],
            swe=full["swe"],
            draw_plots=False,
        )
        assert report.verdict is Verdict.GO
        perf = next(t for t in report.tiers if t.tier is Tier.PERF)
        assert perf.ran and sum(bool(c.informational) for c in perf.cases) == 2

    def test_a_check_that_passed_with_a_failing_verdict_is_no_go(self, tmp_path):
        path = _one_check(tmp_path, "perf:timing/train/total_step_time", "rlgate.perf.demo", "fail")
        full = ri.full_set()
        report = build_report(
            [*full["junit"], path], runs=full["runs"], swe=full["swe"], draw_plots=False
        )
        assert report.verdict is Verdict.NO_GO
        (blocker,) = report.blockers
        assert blocker.kind is BlockerKind.INCONSISTENT
        assert "passed but records rlgate.verdict = fail" in blocker.detail

    def test_a_run_json_that_did_not_pass_without_a_failed_check_is_no_go(self, tmp_path):
        doc = json.loads(ri.check_run_no_baseline()[0].read_text())
        doc["passed"] = False
        run = tmp_path / "run.json"
        run.write_text(json.dumps(doc))
        full = ri.full_set()
        report = build_report(full["junit"], runs=[run], swe=full["swe"], draw_plots=False)
        assert report.verdict is Verdict.NO_GO
        assert "says passed = false but lists no failed check" in report.blockers[0].detail
