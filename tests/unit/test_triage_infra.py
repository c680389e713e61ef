"""Infrastructure causes in Results: where they come from and what they change.

``rlgate watch --junit`` writes each verdict as the ``run_status`` check; an exit-3 verdict
(an infra signature, a stalled run) is an ERROR whose evidence names the cause
(``core.results.INFRA_CAUSE``), as is the SWE gate's coverage criterion over its infra
bound. Triage labels those ``infra``; the report makes such an ERROR INCOMPLETE (rerun),
never GO, where an ERROR without a cause stays NO-GO.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode
from rlgate.core.junit import JunitCase, JunitSuite, read_junit, write_junit
from rlgate.core.results import INFRA_CAUSE, Outcome, Tier
from rlgate.history.triage import Label, triage
from rlgate.launch.manifest import load_manifest
from rlgate.launch.watch import RUN_STATUS_CHECK, read_progress, run_result, watch_run
from rlgate.report.build import BlockerKind, Verdict, build_report

from .helpers.launch_fixtures import launch_local, stop_local_run, wait_for
from .helpers.triage_inputs import nightly, swe_criteria


class TestWatchResults:
    def test_a_completed_run_passes_its_run_status(self, tmp_path: Path) -> None:
        result = run_result(watch_run(launch_local(tmp_path), interval=0.2))
        assert (result.name, result.tier, result.outcome) == (
            RUN_STATUS_CHECK,
            Tier.CONVERGENCE,
            Outcome.PASS,
        )
        assert (result.value, result.threshold, result.bound) == (4.0, 4.0, ">= 4 step")

    def test_a_run_that_stopped_short_fails_without_a_cause(self, tmp_path: Path) -> None:
        result = run_result(watch_run(launch_local(tmp_path, "--stop-at-step", "2"), interval=0.2))
        assert result.outcome is Outcome.FAIL and result.infra_cause is None
        assert result.value == 2.0 and "stopped short" in result.message

    def test_a_run_killed_by_the_oom_killer_errors_with_its_cause(self, tmp_path: Path) -> None:
        run = launch_local(
            tmp_path, "--stop-at-step", "0", "--exit-code", "137",
            "--fail-with", "Killed process 4242 (python) total-vm:1GB",
        )  # fmt: skip
        result = run_result(watch_run(run, interval=0.2))
        assert result.outcome is Outcome.ERROR and result.infra_cause == "host_out_of_memory"
        assert "Killed process 4242" in result.evidence[INFRA_CAUSE]["detail"]

    def test_watch_junit_records_a_stalled_run_as_an_infra_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run = launch_local(tmp_path, "--stop-at-step", "1", "--hang", steps=4)
        out = tmp_path / "watch.xml"
        try:
            wait_for(lambda: read_progress(load_manifest(run).log_dir).last_step == 1)
            code = main(
                ["watch", str(run), "--interval", "0.2", "--stall-minutes", "0.02",
                 "--junit", str(out)]
            )  # fmt: skip
        finally:
            stop_local_run(run)
        assert code == ExitCode.INFRA and "STALLED" in capsys.readouterr().out
        (suite,) = read_junit(out)
        (case,) = suite.cases
        assert case.result.name == RUN_STATUS_CHECK and case.shown is Outcome.ERROR
        assert case.result.infra_cause == "stalled" and case.result.value == 1.0
        assert case.prop("rlgate.recipe") == load_manifest(run).recipe.name
        assert case.classname == f"rlgate.convergence.{load_manifest(run).recipe.name}"

    def test_watch_junit_is_never_written_over_the_manifest(self, tmp_path: Path, capsys) -> None:
        run = launch_local(tmp_path)
        manifest = run / "rlgate_manifest.json"
        kept = manifest.read_bytes()
        try:  # refused before watching: the run is left as launched
            code = main(["watch", str(run), "--interval", "0.2", "--junit", str(manifest)])
        finally:
            stop_local_run(run)
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE and f"inside the input directory {run} (RUN_DIR)" in err
        assert manifest.read_bytes() == kept and load_manifest(run).status.value == "submitted"


def junit_of(tmp_path: Path, result, name: str = "watch.xml") -> Path:
    case = JunitCase.of(result, classname="rlgate.convergence.r", facts={"recipe": "r"})
    path = tmp_path / name
    path.write_text(write_junit([JunitSuite.of("rlgate.watch", [case])]))
    return path


class TestVerdict:
    """An infra-caused ERROR is INCOMPLETE; the same ERROR without its cause stays NO-GO."""

    def stalled(self):
        from rlgate.core.results import Result

        return Result(
            name=RUN_STATUS_CHECK,
            tier=Tier.CONVERGENCE,
            outcome=Outcome.ERROR,
            message="stalled: last step 12, no new step for 41.3 min",
            evidence={INFRA_CAUSE: {"reason": "stalled", "detail": "no new step"}},
        )

    def blocker(self, tmp_path: Path, result):
        report = build_report([junit_of(tmp_path, result)], draw_plots=False)
        return next(b for b in report.blockers if RUN_STATUS_CHECK in b.title), report

    def test_an_infra_error_is_incomplete(self, tmp_path: Path) -> None:
        blocker, report = self.blocker(tmp_path, self.stalled())
        assert (blocker.kind, blocker.forces) == (BlockerKind.ERROR, Verdict.INCOMPLETE)
        assert report.verdict is not Verdict.GO

    def test_without_its_cause_the_same_error_is_no_go(self, tmp_path: Path) -> None:
        plain = self.stalled().model_copy(update={"evidence": {}})
        blocker, report = self.blocker(tmp_path, plain)
        assert blocker.forces is Verdict.NO_GO and report.verdict is Verdict.NO_GO

    def test_a_fail_never_becomes_incomplete(self, tmp_path: Path) -> None:
        failed = self.stalled().model_copy(update={"outcome": Outcome.FAIL})
        assert failed.infra_cause is None  # only an ERROR has a cause
        blocker, _ = self.blocker(tmp_path, failed)
        assert blocker.forces is Verdict.NO_GO


def test_the_swe_coverage_criterion_names_its_cause_and_triage_reads_it() -> None:
    criteria = {r.name: r for r in swe_criteria(infra=True)}
    assert criteria["coverage_after"].infra_cause == "swe_infra_errors"
    assert criteria["significance"].infra_cause == "swe_infra_errors"  # not judged because of it
    assert criteria["coverage_before"].infra_cause is None  # passed
    labels = triage(list(criteria.values()), [nightly(1, swe_criteria(infra=False))])
    assert {lb.check: lb.label for lb in labels} == {
        "coverage_after": Label.INFRA,
        "significance": Label.INFRA,
    }
