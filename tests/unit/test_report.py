"""`rlgate report`: JUnit merging, the verdict rule, the sentence, the written report.

Inputs come from the real producers (report_inputs.py): a real pytest run, the fault corpus
gated by rlgate.checks.plan, and SWE comparisons by rlgate.swe.compare; the tests only choose
which outcome each tier has.
"""

import functools
import json
import os
import re
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from rlgate.cli.app import main
from rlgate.core.errors import RlgateError
from rlgate.core.results import Outcome, Tier
from rlgate.report.build import (
    OUT_MARKER,
    BlockerKind,
    Verdict,
    build_report,
    prepare_out_dir,
    summarise_tiers,
    write_report,
)
from rlgate.report.build import decide as decide_verdict
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri

XSD = Path(os.environ.get("RLGATE_JUNIT_XSD", Path(sys.prefix) / "share/rlgate/junit-10.xsd"))
XSD_HINT = (
    "ci/install.sh extracts pytest's testing/example_scripts/junit-10.xsd from the pytest sdist "
    "into .venv/share/rlgate/ (or set RLGATE_JUNIT_XSD)"
)


@functools.cache
def built(swe_kind="improved", fault=Fault.HEALTHY, *, demo=False, plots=False):
    """One report per input combination (reports are immutable, so tests can share them)."""
    return build_report(**ri.full_set(swe_kind, fault), demo=demo, draw_plots=plots)


def _cases(report, shown=None):
    return [c for c in report.junit.cases if shown is None or c.shown is shown]


class TestLoadJunit:
    def test_load_junit_reads_every_pytest_outcome(self):
        report = build_report([ri.functional_mixed()])
        by_name = {c.name: c for c in report.junit.cases}
        assert {n: (c.shown, c.junit.xfail) for n, c in by_name.items()} == {
            "test_passes": (Outcome.PASS, False),
            "test_fails": (Outcome.FAIL, False),
            "test_errors": (Outcome.ERROR, False),
            "test_skipped": (Outcome.SKIP, False),
            "test_known_limitation": (Outcome.SKIP, True),
        }
        assert not any(c.junit.recorded for c in by_name.values())  # plain pytest tests
        assert {c.result.outcome for c in by_name.values()} == set(Outcome)
        assert "tool call left unparsed" in by_name["test_fails"].message
        assert "tokenizer folder missing" in by_name["test_errors"].message
        assert by_name["test_known_limitation"].message.startswith("hermes keeps the newline")

    @pytest.mark.parametrize(
        ("source", "tiers"),
        [
            pytest.param("functional", {Tier.FUNCTIONAL}, id="pytest_tests_functional"),
            pytest.param("check_run", {Tier.CONVERGENCE, Tier.PERF}, id="check_run_junit"),
            pytest.param("swe", {Tier.SWE_GATE}, id="swe_compare_junit"),
        ],
    )
    def test_load_junit_classifies_tiers_by_classname(self, source, tiers):
        path = {
            "functional": ri.functional_passing(),
            "check_run": ri.check_run(Fault.HEALTHY)[1],
            "swe": ri.swe("improved")[1],
        }[source]
        report = build_report([path])
        assert {c.tier for c in report.junit.cases} == tiers

    def test_per_instance_swe_suite_is_informational(self):
        report = build_report([ri.swe("improved")[1]])
        info = [c for c in report.junit.cases if c.informational]
        assert len(info) == 500
        assert any(c.shown is Outcome.FAIL for c in info), "lost instances are failures"
        assert report.verdict is not Verdict.NO_GO or any(
            b.kind is not BlockerKind.FAILED for b in report.blockers
        )
        assert not any(b.anchor in {c.anchor for c in info} for b in report.blockers)

    def test_load_junit_rejects_a_truncated_file_naming_it(self, tmp_path):
        text = ri.functional_mixed().read_text()
        cut = tmp_path / "functional.xml"
        cut.write_text(text[: len(text) // 2])
        with pytest.raises(RlgateError, match=r"functional\.xml: not valid XML"):
            build_report([cut])

    @pytest.mark.parametrize(
        ("content", "match"),
        [
            pytest.param("<html><body/></html>", "not a JUnit report", id="html_root"),
            pytest.param("", "not valid XML", id="empty_file"),
        ],
    )
    def test_load_junit_rejects_what_is_not_junit(self, tmp_path, content, match):
        bad = tmp_path / "x.xml"
        bad.write_text(content)
        with pytest.raises(RlgateError, match=match):
            build_report([bad])

    def test_load_junit_rejects_a_missing_file(self, tmp_path):
        with pytest.raises(RlgateError, match="JUnit file not found"):
            build_report([tmp_path / "nope.xml"])


class TestMergedJunit:
    def test_merged_junit_parses_with_junitparser_and_keeps_every_testcase(self):
        inputs = [ri.functional_mixed(), *ri.full_set()["junit"]]
        report = build_report(inputs)
        merged = JUnitXml.fromstring(report.junit.merged_xml.encode())
        total = sum(sum(s.tests for s in _suites(JUnitXml.fromfile(str(p)))) for p in inputs)
        assert merged.tests == total == len(report.junit.cases)
        assert merged.failures == len(_cases(report, Outcome.FAIL))  # instances included
        assert merged.errors == len(_cases(report, Outcome.ERROR))

    def test_merged_junit_validates_against_pytest_junit_xsd(self):
        try:
            import xmlschema
        except ImportError:
            pytest.fail("xmlschema is not installed (rlgate[dev] needs it)", pytrace=False)
        if not XSD.is_file():
            pytest.fail(f"pytest's junit-10.xsd not found at {XSD}: {XSD_HINT}", pytrace=False)
        schema = xmlschema.XMLSchema(str(XSD))
        raw = ri.functional_mixed()
        assert not schema.is_valid(str(raw)), "xunit1 input is expected to violate the XSD"
        report = build_report([raw, *ri.full_set()["junit"]])
        errors = list(schema.iter_errors(report.junit.merged_xml))
        assert not errors, errors[:3]

    def test_merged_junit_keeps_properties_and_sources_as_text(self):
        report = build_report([ri.functional_passing()])
        xml = report.junit.merged_xml
        assert "[rlgate] rlgate.template_sha256 = 0123456789abcdef" in xml
        assert "[rlgate] location = tests/functional/test_parsers.py:" in xml
        assert f'name="rlgate.source" value="{ri.functional_passing()}"' in xml


def _suites(xml):
    return list(xml) if isinstance(xml, JUnitXml) else [xml]


class TestVerdictRule:
    def test_every_tier_passing_and_swe_improved_is_go(self):
        report = built()
        assert report.verdict is Verdict.GO
        assert report.blockers == ()

    def test_a_missing_tier_is_incomplete_never_go(self):
        kwargs = ri.full_set()
        kwargs["junit"] = kwargs["junit"][1:]  # no functional JUnit
        report = build_report(**kwargs, draw_plots=False)
        assert report.verdict is Verdict.INCOMPLETE
        (blocker,) = report.blockers
        assert (blocker.kind, blocker.tier, blocker.anchor) == (
            BlockerKind.NOT_RUN,
            Tier.FUNCTIONAL,
            "tier-functional",
        )

    def test_a_tier_whose_testcases_were_all_skipped_did_not_run(self):
        report = build_report([ri.functional_passing(), ri.convergence_skipped()])
        assert next(t for t in report.tiers if t.tier is Tier.CONVERGENCE).cases
        blocker = next(b for b in report.blockers if b.tier is Tier.CONVERGENCE)
        assert blocker.kind is BlockerKind.NOT_RUN
        assert "needs --run-dir and --recipe" in blocker.detail

    def test_a_failing_gate_is_no_go_and_links_its_testcase(self):
        report = built(fault=Fault.STEP_TIME_UP)
        assert report.verdict is Verdict.NO_GO
        failing = {c.anchor: c.name for c in _cases(report, Outcome.FAIL) if not c.informational}
        linked = {b.anchor: b.title for b in report.blockers}
        assert set(failing) == set(linked)
        assert "perf:timing/train/total_step_time" in failing.values()

    @pytest.mark.parametrize(
        ("swe_kind", "verdict"),
        [
            pytest.param("regressed", Verdict.NO_GO, id="regressed_is_no_go"),
            pytest.param("no_significant_change", Verdict.NO_GO, id="no_change_is_no_go"),
            pytest.param("inconclusive", Verdict.INCOMPLETE, id="inconclusive_is_incomplete"),
        ],
    )
    def test_swe_verdict_decides_when_every_tier_passes(self, swe_kind, verdict):
        report = built(swe_kind)
        assert report.verdict is verdict
        assert any(b.kind is BlockerKind.SWE and b.anchor == "swe" for b in report.blockers)

    def test_swe_infra_errors_are_incomplete_not_no_go(self):
        report = built("inconclusive")
        errors = [b for b in report.blockers if b.kind is BlockerKind.ERROR]
        assert errors and all(b.forces is Verdict.INCOMPLETE for b in errors)

    def test_no_go_outranks_incomplete_and_both_are_listed(self):
        report = built("inconclusive", Fault.NAN_LOSS)
        assert report.verdict is Verdict.NO_GO
        assert report.blockers[0].forces is Verdict.NO_GO
        assert {b.forces for b in report.blockers} == {Verdict.NO_GO, Verdict.INCOMPLETE}

    def test_a_run_json_failure_missing_from_the_junit_is_no_go(self):
        kwargs = ri.full_set()
        kwargs["runs"] = [ri.check_run(Fault.REWARD_FLAT)[0]]  # JUnit is the healthy run's
        report = build_report(**kwargs, draw_plots=False)
        assert report.verdict is Verdict.NO_GO
        assert {b.kind for b in report.blockers} == {BlockerKind.INCONSISTENT}
        assert any("reward_improvement" in b.title for b in report.blockers)

    def test_no_swe_evidence_is_incomplete(self):
        tiers = summarise_tiers(built().junit.cases)
        verdict, blockers = decide_verdict(tiers, None)
        assert verdict is Verdict.INCOMPLETE
        assert [b.kind for b in blockers] == [BlockerKind.SWE]

    def test_swe_json_contradicting_the_junit_is_an_error(self):
        kwargs = ri.full_set()
        kwargs["swe"] = ri.swe("regressed")[0]  # JUnit says improved
        with pytest.raises(RlgateError, match="says 'regressed' but the swe_gate JUnit says"):
            build_report(**kwargs, draw_plots=False)


class TestStory:
    def test_story_fills_every_slot_of_the_sentence(self):
        story = built().story
        assert story.startswith("Qwen/Qwen3.5-35B-A3B trained for ")
        assert re.search(r"trained for \d+\.\d h \(50 steps\) on 2 nodes × 8 GPUs", story)
        assert "(1 training + 1 generation node)" in story
        assert re.search(r"improves from \d+\.\d% to \d+\.\d% on SWE-bench Verified \(Δ \+", story)
        for part in ("95% CI [", "paired sign-flip permutation p", "4 seeds per arm", "n = 500"):
            assert part in story
        assert story.endswith("with key training health metrics verified.")

    def test_story_says_why_the_swe_comparison_is_inconclusive(self):
        story = built("inconclusive").story
        assert story.endswith(
            "with key training health metrics verified, but the SWE-bench comparison is "
            "inconclusive: 33% infra errors in the before arm (at most 5% allowed)."
        )

    def test_story_names_failing_health_checks(self):
        story = built(fault=Fault.TRUNCATION_RUNAWAY).story
        assert (
            "with failing training health checks (truncation_rate, natural_termination_rate)"
            in (story)
        )

    def test_story_names_a_perf_regression(self):
        story = built(fault=Fault.STEP_TIME_UP).story
        assert "with key training health metrics verified and a perf regression against the " in (
            story
        )
        assert "(perf:timing/train/total_step_time, perf:performance/tokens_per_sec_per_gpu)" in (
            story
        )

    def test_story_without_recipe_or_swe_says_what_is_missing(self):
        kwargs = ri.full_set()
        report = build_report(kwargs["junit"][:2], runs=kwargs["runs"])
        assert "on an unstated cluster (pass --recipe)" in report.story
        assert report.story.endswith("but there is no SWE-bench Verified comparison.")

    def test_demo_story_and_title_say_demo(self):
        report = built(demo=True, plots=True)
        assert report.story.startswith("DEMO (generated inputs, not a release result): ")
        assert report.title.startswith("DEMO")
        assert report.figures and all(f.title.startswith("DEMO") for f in report.figures)


class TestJsonInputs:
    def test_truncated_run_json_is_an_error_naming_it(self, tmp_path):
        text = ri.check_run(Fault.HEALTHY)[0].read_text()
        bad = tmp_path / "run.json"
        bad.write_text(text[:200])
        with pytest.raises(RlgateError, match=r"run\.json: run JSON is not valid JSON"):
            build_report(ri.full_set()["junit"], runs=[bad])

    def test_check_run_json_given_as_swe_json_is_refused(self):
        run_json = ri.check_run(Fault.HEALTHY)[0]
        with pytest.raises(RlgateError, match=r"SWE JSON .* unexpected shape: verdict"):
            build_report(ri.full_set()["junit"], swe=run_json)

    def test_unknown_schema_version_is_refused(self, tmp_path):
        doc = json.loads(ri.swe("improved")[0].read_text())
        doc["schema_version"] = 99
        bad = tmp_path / "swe.json"
        bad.write_text(json.dumps(doc))
        with pytest.raises(RlgateError, match="schema_version 99"):
            build_report(ri.full_set()["junit"], swe=bad)


class TestWriteReport:
    def test_write_report_writes_every_file_and_links_every_blocker(self, tmp_path):
        report = built("inconclusive", Fault.NAN_LOSS, plots=True)
        files = write_report(report, prepare_out_dir(tmp_path / "out"))
        html = files["html"].read_text()
        md = files["markdown"].read_text()
        for b in report.blockers:
            assert f'id="{b.anchor}"' in html and f'href="#{b.anchor}"' in html
            assert f'<a id="{b.anchor}"></a>' in md and f"(#{b.anchor})" in md
        assert html.index("NO-GO") < html.index(report.story[:40])
        assert md.index("## Verdict: **NO-GO**") < md.index("### Why")
        assert {p.name for p in (tmp_path / "out/plots").iterdir()} == {
            f"{f.key}.png" for f in report.figures
        }
        assert json.loads(files["json"].read_text())["verdict"] == "NO-GO"

    def test_html_is_self_contained(self, tmp_path):
        files = write_report(built(plots=True), prepare_out_dir(tmp_path / "o"))
        html = files["html"].read_text()
        assert "<script" not in html
        assert not re.search(r"""(src|href)=["'](https?:|//|file:)""", html)
        assert html.count('src="data:image/png;base64,') == 5

    def test_user_text_is_escaped(self, tmp_path):
        report = build_report([ri.functional_mixed()])
        html = write_report(report, prepare_out_dir(tmp_path / "o"))["html"].read_text()
        assert "<tool_call>" not in html

    def test_prepare_out_dir_refuses_a_foreign_non_empty_directory(self, tmp_path):
        (tmp_path / "mine.txt").write_text("keep")
        with pytest.raises(RlgateError, match="not empty and was not created by rlgate"):
            prepare_out_dir(tmp_path)
        assert prepare_out_dir(tmp_path, force=True) == tmp_path
        assert (tmp_path / "mine.txt").read_text() == "keep"
        assert not (tmp_path / OUT_MARKER).exists(), "a forced directory stays the user's"

    def test_prepare_out_dir_reuses_a_directory_rlgate_created(self, tmp_path):
        out = prepare_out_dir(tmp_path / "r")
        (out / "report.md").write_text("old")
        assert prepare_out_dir(out) == out
        assert (out / OUT_MARKER).is_file()

    def test_write_report_never_overwrites_an_input(self, tmp_path):
        out = prepare_out_dir(tmp_path / "o")
        user_junit = out / "junit.xml"
        user_junit.write_bytes(ri.functional_passing().read_bytes())
        before = user_junit.read_bytes()
        with pytest.raises(RlgateError, match="it is one of the inputs"):
            write_report(build_report([user_junit]), out)
        assert user_junit.read_bytes() == before


class TestReportCli:
    def _args(self, kwargs, out):
        args = ["report", "--junit", *map(str, kwargs["junit"]), "--out", str(out)]
        args += ["--run", *map(str, kwargs["runs"]), "--swe", str(kwargs["swe"])]
        args += ["--recipe", str(kwargs["recipe"]), "--baseline", str(kwargs["baseline"])]
        return [*args, "--band-run", *map(str, kwargs["band_runs"]), "--no-plots"]

    @pytest.mark.parametrize(
        ("swe_kind", "fault", "code", "verdict"),
        [
            pytest.param("improved", Fault.HEALTHY, 0, "GO", id="go_exit_0"),
            pytest.param("improved", Fault.STEP_TIME_UP, 1, "NO-GO", id="no_go_exit_1"),
            pytest.param("inconclusive", Fault.HEALTHY, 3, "INCOMPLETE", id="incomplete_exit_3"),
        ],
    )
    def test_report_exit_code_follows_the_verdict(
        self, tmp_path, capsys, swe_kind, fault, code, verdict
    ):
        out = tmp_path / "report"
        assert main(self._args(ri.full_set(swe_kind, fault), out)) == code
        assert f"verdict: {verdict}" in capsys.readouterr().out
        assert (out / "report.html").is_file() and (out / "junit.xml").is_file()

    def test_report_without_junit_is_a_usage_error(self, tmp_path, capsys):
        assert main(["report", "--out", str(tmp_path / "o")]) == 2
        assert "needs --junit" in capsys.readouterr().err

    def test_report_demo_refuses_user_inputs(self, tmp_path, capsys):
        junit = str(ri.functional_passing())
        assert main(["report", "--demo", "--junit", junit, "--out", str(tmp_path / "o")]) == 2
        assert "--demo builds its own inputs" in capsys.readouterr().err
