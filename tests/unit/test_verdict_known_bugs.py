"""Attack on the newest layer (session 30): report, history, triage, watch, quarantine.

Each test is a finding: it fails on the code as it is and passes once the bug is fixed. The
comment above each test says what the bug is and what is expected. They are known, open
verdict bugs, marked ``xfail(strict=True)``: a fix makes its test XPASS, which fails the
suite until the mark is removed. Inputs are built with
rlgate's own writers (``JunitCase.of`` + ``write_junit``, ``RunDocument``, the real SWE
comparison of ``report_inputs``, the history store's own ``record``, a real local launch on
the stand-in driver for ``watch``).
"""

from __future__ import annotations

import contextlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.io import write_json_atomic, write_text_atomic
from rlgate.core.junit import JunitCase, JunitSuite, read_junit, write_junit
from rlgate.core.results import INFRA_CAUSE, Outcome, Result, Tier
from rlgate.report.build import build_report
from rlgate.report.inputs import load_run_doc
from rlgate.report.verdict import Verdict
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri

pytestmark = pytest.mark.xfail(
    strict=True, reason="known verdict bug found by the 2026-12-02 attack (comment above the test)"
)

VERIFIED = "with key training health metrics verified"


def _recipe() -> str:
    from .helpers.triage_inputs import recipe_name

    return recipe_name()


def _junit_file(path: Path, *results: Result, facts: dict[str, str] | None = None) -> Path:
    """A JUnit file as check-run writes it: one testcase per Result, classname by tier."""
    recipe = (facts or {}).get("recipe", _recipe())
    cases = [
        JunitCase.of(
            r, classname=f"rlgate.{r.tier.value}.{recipe}", facts=facts or {"recipe": recipe}
        )
        for r in results
    ]
    path.write_text(write_junit([JunitSuite.of(f"rlgate.check-run.{recipe}", cases)]), "utf-8")
    return path


# --- 1. the story sentence claims verified health the evidence does not show -----------------
#
# docs/recommendation-rule.md, "The sentence": "with key training health metrics verified"
# only when the convergence tier ran and none of its checks failed or errored. The story
# (rlgate.report.build._story) takes "health failures" from the NO-GO blockers of the
# convergence tier only, so a convergence check that ERRORED with an infrastructure cause
# (INCOMPLETE, e.g. `rlgate watch --junit`'s stalled run_status, or a logprob check whose
# run was OOM-killed) leaves the sentence saying the health metrics were verified. Expected:
# the sentence never says "verified" while a convergence check errored (it names it, e.g.
# "with training health checks that could not be judged (…)").


def test_story_does_not_claim_verified_health_when_a_convergence_check_errored(tmp_path):
    errored = Result(
        name="logprob_error_median",
        tier=Tier.CONVERGENCE,
        outcome=Outcome.ERROR,
        message="run killed by the OOM killer before step 10",
        evidence={INFRA_CAUSE: {"reason": "host_out_of_memory", "detail": "oom-kill"}},
    )
    kwargs = ri.full_set()
    kwargs["junit"] = [*kwargs["junit"], _junit_file(tmp_path / "errored.xml", errored)]
    report = build_report(**kwargs, draw_plots=False)
    assert report.verdict is Verdict.INCOMPLETE  # the verdict is right ...
    assert VERIFIED not in report.story, report.story  # ... the sentence is not


# --- 2. ... and when a health check failed but is quarantined ---------------------------------
#
# A failing convergence check held by an active quarantine is waived (verdict "GO with 1
# quarantined check"), but the check still failed: the evidence does not show the training
# health verified. The story drops it from the health failures (its blocker forces GO) and
# says "with key training health metrics verified". Expected: the sentence says the health
# check failed and is quarantined (or at least never "verified").


def test_story_does_not_claim_verified_health_when_a_health_failure_is_quarantined():
    from rlgate.history.model import Quarantine
    from rlgate.history.quarantine import state_of

    now = datetime.now(UTC)
    entry = Quarantine(
        id=1, recipe=_recipe(), check="tool_call_failure_rate", hardware=None,
        reason="parser bug NVBUG 1", owner="alice", added_at=now - timedelta(days=1),
        added_by="alice", until=now + timedelta(days=10), runs=None,
    )  # fmt: skip
    kwargs = ri.full_set(fault=Fault.TOOL_CALLS_IN_REASONING)  # that one convergence check fails
    report = build_report(**kwargs, draw_plots=False, quarantines=[state_of(entry, now)])
    assert report.verdict_text == "GO with 1 quarantined check"
    assert VERIFIED not in report.story, report.story


# --- 3. a run JSON whose recipe's JUnit is missing still gives GO -----------------------------
#
# docs/recommendation-rule.md: INCOMPLETE when "a check the run JSON (--run) lists, passed or
# skipped, that no JUnit testcase shows". verdict._run_blockers matches a run JSON's checks to
# the JUnit by (tier, name) only, not by recipe, although check-run's JUnit records
# rlgate.recipe on every testcase. A nightly gating two recipes whose second recipe's JUnit
# was left out (`--run a.json --run b.json --junit a.xml`) is GO: b's checks are "shown" by
# a's testcases of the same names. Expected: INCOMPLETE, b's checks named as missing.


def test_run_json_of_a_recipe_whose_junit_is_missing_is_not_go(tmp_path):
    kwargs = ri.full_set()
    doc = load_run_doc(kwargs["runs"][0])
    second = doc.model_copy(update={"recipe": "grpo-second-recipe", "run": str(tmp_path / "b")})
    kwargs["runs"] = [*kwargs["runs"], write_json_atomic(tmp_path / "b.json", second.to_json())]
    report = build_report(**kwargs, draw_plots=False)
    assert report.verdict is not Verdict.GO, [b.title for b in report.blockers]
    assert any("grpo-second-recipe" in b.title + b.detail for b in report.blockers)


# --- 4. an improvement made of infra errors is GO ("improves from 16.9% to 44.7%") ------------
#
# The report re-checks the SWE verdict with the numbers the document carries, including the
# document's own max_infra_error_rate. `rlgate swe compare --max-infra-error-rate 1.0` (any
# value in [0, 1] is accepted) writes a comparison whose before arm lost 60% of its instances
# to Docker/infra faults (counted as unresolved) and calls it "improved": the release report
# says GO and "improves from 16.9% to 44.7% on SWE-bench Verified", an improvement that is the
# infra errors (the before arm really resolves ~40%). Expected: the release report applies the
# gate's own coverage bound (GateOptions().max_infra_error_rate, 5%) or otherwise refuses to
# claim an improvement that infra errors dominate: not GO, and no "improves" in the sentence.


def test_an_improvement_made_of_infra_errors_is_not_go(tmp_path):
    from rlgate.demo.build import BUNDLED_INSTANCES
    from rlgate.swe.compare import GateOptions, compare_arms
    from rlgate.swe.readers import load_arm
    from rlgate.swe.records import load_universe
    from rlgate.swe.report import build_swe_junit, comparison_to_dict

    before, after = ri._maps()
    universe = load_universe(BUNDLED_INSTANCES)
    comparison = compare_arms(
        load_arm("before", ri._infra_copy(before, 0.6), universe),
        load_arm("after", after, universe),
        universe,
        GateOptions(n_resamples=2000, seed=1, max_infra_error_rate=1.0),
    )
    swe_json = write_json_atomic(tmp_path / "swe.json", comparison_to_dict(comparison))
    swe_xml = write_text_atomic(
        tmp_path / "swe.xml", build_swe_junit(comparison).tostring().decode()
    )
    kwargs = ri.full_set()
    kwargs.update(swe=swe_json, junit=[*kwargs["junit"][:2], swe_xml])
    report = build_report(**kwargs, draw_plots=False)
    assert report.verdict is not Verdict.GO, report.story
    assert "improves" not in report.story, report.story


# --- 5. triage --junit gives one hardware's label to another's testcase -----------------------
#
# `rlgate triage --candidate c.xml --junit out.xml` with the same check of one recipe failing
# on two hardware types (check-run records rlgate.hardware; triage labels each series apart:
# a regression on 2n8g, pre-existing on 4n8g, exit 1). cli.triage._junit keys the labels by
# (recipe, tier, check, models), not hardware, so the last label wins and is put on the first
# testcase only: the JUnit says "pre-existing, blocks false" for the 2n8g regression and has
# no label for the 4n8g case, while the JSON and the exit code say a label blocks. Expected:
# each testcase carries its own series' label; the JUnit's rlgate.triage.blocks agree with
# the JSON (some testcase blocks when the exit code is 1).


def test_triage_junit_labels_each_hardware_as_the_json_does(tmp_path):
    from rlgate.history.model import RunContext
    from rlgate.history.store import open_store

    recipe, t0 = "grpo-x", datetime(2026, 2, 1, tzinfo=UTC)

    def completion(outcome: Outcome, value: float) -> Result:
        return Result(name="completion", tier=Tier.CONVERGENCE, outcome=outcome, value=value,
                      message=f"last step {value}")  # fmt: skip

    db = str(tmp_path / "history.db")
    with open_store(db) as store:
        for k in range(5):
            for hw, outcome in (("2n8g", Outcome.PASS), ("4n8g", Outcome.FAIL)):
                context = RunContext(
                    run_id=f"n{k}-{hw}", recipe=recipe, branch="main", nightly_id=f"n{k}",
                    commits={"nemo_rl": "a" * 40}, recorded_at=t0 + timedelta(days=k),
                    hardware=hw,
                )  # fmt: skip
                store.record(context, [completion(outcome, 10.25 + k)])
    candidate = tmp_path / "candidate.xml"
    cases = [
        JunitCase.of(
            completion(Outcome.FAIL, 3.5),
            classname=f"rlgate.convergence.{recipe}",
            facts={"recipe": recipe, "hardware": hw},
        )
        for hw in ("2n8g", "4n8g")
    ]
    candidate.write_text(write_junit([JunitSuite.of("candidate", cases)]), "utf-8")
    out_json, out_xml = tmp_path / "triage.json", tmp_path / "triage.xml"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["triage", "--candidate", str(candidate), "--db", db,
                     "--json", str(out_json), "--junit", str(out_xml)])  # fmt: skip
    doc = json.loads(out_json.read_text())
    assert code == 1 and doc["exit_code"] == 1
    json_labels = sorted((lb["label"], lb["blocks"]) for lb in doc["labels"])
    assert json_labels == [("pre-existing", False), ("regression", True)]
    [suite] = read_junit(out_xml)
    junit_labels = sorted(
        ((c.prop("rlgate.triage.label"), c.prop("rlgate.triage.blocks") == "true")
         for c in suite.cases),
        key=str,
    )  # fmt: skip
    assert junit_labels == json_labels


# --- 6. watch --junit drops a run whose watch errored -----------------------------------------
#
# `rlgate watch good bad --junit w.xml` where `bad` has no (or a corrupt) manifest, or its
# backend cannot be asked: the exit code is 2 (or 3), but cli.runs._watch_dirs writes a
# testcase only for the runs it judged, so w.xml holds one PASS (good's run_status) and
# nothing for `bad`. The JUnit is the evidence channel (`rlgate report`, `rlgate triage`
# read it): a run the watch could not judge vanishes from it and the file reads all green.
# Expected: the JUnit names every run directory given (an ERROR testcase for one that could
# not be watched), or is not written at all.


def test_watch_junit_keeps_a_run_it_could_not_watch(tmp_path, capsys):
    from .helpers.launch_fixtures import launch_local

    good = launch_local(tmp_path / "good", steps=2)
    bad = tmp_path / "bad"
    bad.mkdir()
    out = tmp_path / "watch.xml"
    code = main(["watch", str(good), str(bad), "--interval", "0.2", "--junit", str(out)])
    assert code == 2 and "no run manifest" in capsys.readouterr().err
    if out.exists():
        cases = [c for s in read_junit(out) for c in s.cases]
        assert any(c.shown is not Outcome.PASS for c in cases), [(c.name, c.shown) for c in cases]
