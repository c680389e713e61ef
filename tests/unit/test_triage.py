"""The triage rule (rlgate.history.triage) on real Results: the corpus runs gated by the checks.

Healthy nightlies pass every check; a STEP_TIME_UP run fails exactly the two perf checks of
``EXPECTED_CATCHES``. Each label is shown with the history that makes it, and next to the
history that does not (a test that cannot fail proves nothing).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from rlgate.core.results import INFRA_CAUSE, Outcome, Result, Tier
from rlgate.history.model import CommitRef
from rlgate.history.triage import (
    DEFAULT_LAST,
    FLAKY_RATE,
    MIN_FLIPS,
    Label,
    outcome_strip,
    triage,
    window,
)
from rlgate.testing.corpus import EXPECTED_CATCHES, Fault

from .helpers.triage_inputs import (
    RECIPE,
    commit,
    context_of,
    gate_results,
    nightly,
    swe_criteria,
)

SLOW = Fault.STEP_TIME_UP
CAUGHT = EXPECTED_CATCHES[SLOW]  # the two perf checks a +20 % step time fails
STEP = "perf:timing/train/total_step_time"


def healthy() -> tuple[Result, ...]:
    return gate_results(Fault.HEALTHY)


def slow() -> tuple[Result, ...]:
    return gate_results(SLOW)


def without_cause(result: Result) -> dict:
    return {k: v for k, v in result.evidence.items() if k != INFRA_CAUSE}


def labels_by_check(labels) -> dict[str, Label]:
    return {lb.check: lb.label for lb in labels}


class TestInputs:
    def test_the_real_checks_fail_exactly_the_caught_checks(self) -> None:
        assert all(r.passed for r in healthy())
        assert {r.name for r in slow() if not r.passed} == CAUGHT


class TestRegression:
    def test_passes_on_main_fails_now_is_a_regression_and_the_candidate_first_fails(self) -> None:
        history = [nightly(k, healthy()) for k in range(1, 11)]
        labels = triage(slow(), history)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.REGRESSION)
        step = next(lb for lb in labels if lb.check == STEP)
        assert (step.first_failing, step.last_passing) == ("candidate", "n10")
        assert step.candidate.outcome is Outcome.FAIL and step.candidate.value > 1.1
        assert step.main_text() == ".......... 10/10 pass"
        assert "main passes it (last: n10" in step.reason
        doc = step.to_json()
        assert doc["label"] == "regression" and len(doc["nightlies"]) == 10
        assert doc["nightlies"][-1]["outcome"] == "pass" and doc["candidate"]["value"] > 1.1

    def test_main_that_regressed_in_the_window_names_its_first_failing_nightly(self) -> None:
        history = [nightly(k, healthy(), code="A") for k in range(1, 7)]
        history += [nightly(k, slow(), code="B") for k in range(7, 11)]
        step = next(lb for lb in triage(slow(), history) if lb.check == STEP)
        assert step.label is Label.REGRESSION
        assert (step.first_failing, step.last_passing) == ("n07", "n06")
        assert "main fails since n07" in step.reason
        assert outcome_strip(step.history) == "......FFFF"

    def test_a_passing_candidate_gets_no_label(self) -> None:
        history = [nightly(k, slow()) for k in range(1, 6)]
        assert triage(healthy(), history) == []


class TestPreExisting:
    def test_failing_on_main_throughout_the_window_is_pre_existing(self) -> None:
        history = [nightly(k, slow()) for k in range(1, 11)]
        labels = triage(slow(), history)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.PRE_EXISTING)
        assert all(not lb.blocks for lb in labels)

    def test_the_window_decides_between_pre_existing_and_regression(self) -> None:
        history = [nightly(k, healthy(), code="A") for k in range(1, 6)]
        history += [nightly(k, slow(), code="B") for k in range(6, 11)]
        short = labels_by_check(triage(slow(), history, last=5))
        full = labels_by_check(triage(slow(), history, last=10))
        assert short[STEP] is Label.PRE_EXISTING and full[STEP] is Label.REGRESSION


class TestFlaky:
    def alternating(self, same_code: bool) -> list:
        return [
            nightly(k, healthy() if k % 2 else slow(), code="A" if same_code else f"c{k}")
            for k in range(1, 11)
        ]

    def test_flips_between_nightlies_of_the_same_code_are_flaky(self) -> None:
        labels = triage(slow(), self.alternating(same_code=True))
        step = next(lb for lb in labels if lb.check == STEP)
        assert step.label is Label.FLAKY
        assert (step.flips, step.transitions) == (9, 9) and step.flip_rate == 1.0
        assert "flipped 9 times in 9 same-code transitions" in step.reason

    def test_the_same_flips_across_code_changes_are_not_flakiness(self) -> None:
        labels = triage(slow(), self.alternating(same_code=False))
        step = next(lb for lb in labels if lb.check == STEP)
        assert step.label is Label.REGRESSION and step.transitions == 0

    def test_the_rate_threshold_is_applied(self) -> None:
        # 20 nightlies of one code: 2 isolated failures -> 4 flips in 19 transitions (21 %)
        history = [
            nightly(k, slow() if k in (5, 12) else healthy(), code="A") for k in range(1, 21)
        ]
        at_default = next(lb for lb in triage(slow(), history) if lb.check == STEP)
        strict = next(lb for lb in triage(slow(), history, flaky_rate=0.25) if lb.check == STEP)
        assert (at_default.flips, at_default.transitions) == (4, 19)
        assert at_default.label is Label.FLAKY and FLAKY_RATE <= 4 / 19
        assert strict.label is Label.REGRESSION

    def test_a_single_flip_is_not_enough(self) -> None:
        history = [nightly(k, healthy() if k < 10 else slow(), code="A") for k in range(1, 11)]
        step = next(lb for lb in triage(slow(), history, flaky_rate=0.01) if lb.check == STEP)
        assert step.flips == 1 < MIN_FLIPS and step.label is Label.REGRESSION

    def test_passed_on_a_rerun_in_the_candidate(self) -> None:
        history = [nightly(k, slow()) for k in range(1, 6)]
        labels = triage([*slow(), *healthy()], history)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.FLAKY)
        assert {lb.rerun_passed for lb in labels} == {"candidate"}

    def test_passed_on_a_rerun_of_the_same_code(self) -> None:
        history = [nightly(k, slow(), code="A") for k in range(1, 6)]
        history.append(nightly(6, healthy(), code="B"))
        same = triage(slow(), history, context=context_of(6, code="B"))
        other = triage(slow(), history, context=context_of(6, code="C"))
        step = next(lb for lb in same if lb.check == STEP)
        assert step.label is Label.FLAKY and step.rerun_passed == "n06"
        assert labels_by_check(other)[STEP] is Label.REGRESSION

    def test_runs_of_one_nightly_that_disagree_are_a_flip(self) -> None:
        history = []
        for k in range(1, 6):
            history.append(nightly(k, healthy(), part="a"))
            history.append(nightly(k, slow() if k in (2, 4) else healthy(), part="b", hours=1))
        step = next(lb for lb in triage(slow(), history) if lb.check == STEP)
        assert step.label is Label.FLAKY and "M" in outcome_strip(step.history)


class TestInfra:
    def test_swe_errors_with_an_infrastructure_cause_are_infra(self) -> None:
        history = [nightly(k, swe_criteria(infra=False), part="swe") for k in range(1, 6)]
        labels = triage(swe_criteria(infra=True), history)
        assert labels_by_check(labels) == {
            "coverage_after": Label.INFRA,
            "significance": Label.INFRA,
        }
        cov = next(lb for lb in labels if lb.check == "coverage_after")
        assert cov.reason == "ERROR with an infrastructure cause: swe_infra_errors"
        assert cov.to_json()["candidate"]["infra_cause"]["reason"] == "swe_infra_errors"

    def test_without_the_cause_the_same_error_is_a_regression(self) -> None:
        history = [nightly(k, swe_criteria(infra=False), part="swe") for k in range(1, 6)]
        stripped = [
            r.model_copy(update={"evidence": without_cause(r)}) for r in swe_criteria(infra=True)
        ]
        labels = labels_by_check(triage(stripped, history))
        assert labels == {"coverage_after": Label.REGRESSION, "significance": Label.REGRESSION}

    def test_a_malformed_cause_is_no_cause(self) -> None:
        bad = [
            r.model_copy(update={"evidence": {**r.evidence, INFRA_CAUSE: "docker"}})
            for r in swe_criteria(infra=True)
        ]
        assert all(r.infra_cause is None for r in bad)
        history = [nightly(1, swe_criteria(infra=False), part="swe")]
        assert set(labels_by_check(triage(bad, history)).values()) == {Label.REGRESSION}

    def test_infra_errors_in_history_are_not_judgements(self) -> None:
        history = [nightly(k, swe_criteria(infra=True), part="swe") for k in range(1, 4)]
        labels = triage(swe_criteria(infra=True), history)
        assert set(labels_by_check(labels).values()) == {Label.INFRA}
        stripped = [r.model_copy(update={"evidence": {}}) for r in swe_criteria(infra=True)]
        unknown = labels_by_check(triage(stripped, history))
        assert unknown == {"coverage_after": Label.UNKNOWN, "significance": Label.UNKNOWN}


class TestWindow:
    def test_no_main_history_is_unknown_and_blocks(self) -> None:
        history = [nightly(k, healthy(), branch="feature") for k in range(1, 6)]
        labels = triage(slow(), history)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.UNKNOWN)
        assert all(lb.blocks for lb in labels)
        other = triage(slow(), history, main_branch="feature")
        assert set(labels_by_check(other).values()) == {Label.REGRESSION}

    def test_other_recipes_do_not_count(self) -> None:
        history = [nightly(k, healthy(), recipe="another") for k in range(1, 6)]
        assert set(labels_by_check(triage(slow(), history, recipe=RECIPE)).values()) == {
            Label.UNKNOWN
        }
        assert set(labels_by_check(triage(slow(), history)).values()) == {Label.REGRESSION}

    def test_checks_naming_no_recipe_meet_every_recipes_runs(self) -> None:
        """The SWE criteria state no recipe: the candidate's context does not filter them."""
        history = [nightly(k, swe_criteria(False), recipe="swe-runs") for k in range(1, 4)]
        failing = [
            r.model_copy(update={"evidence": without_cause(r)}) for r in swe_criteria(infra=True)
        ]
        labels = triage(failing, history, context=context_of(4, code="Z"))  # recipe grpo-corpus
        assert set(labels_by_check(labels).values()) == {Label.REGRESSION}
        narrowed = triage(failing, history, recipe=RECIPE, context=context_of(4, code="Z"))
        assert set(labels_by_check(narrowed).values()) == {Label.UNKNOWN}

    def test_the_candidate_is_never_compared_with_itself_or_later_runs(self) -> None:
        history = [nightly(k, slow()) for k in range(1, 4)]
        history += [nightly(k, healthy()) for k in range(4, 8)]
        ctx = context_of(3, code="A").model_copy(update={"nightly_id": "n03"})
        labels = triage(slow(), history, context=ctx)
        assert [m.nightly for m in labels[0].history] == ["n01", "n02"]
        assert set(labels_by_check(labels).values()) == {Label.PRE_EXISTING}
        assert window(history, before=ctx)[-1][0] == "n02"

    def test_last_counts_nightlies_not_runs(self) -> None:
        history = []
        for k in range(1, 8):
            history += [nightly(k, healthy(), part="a"), nightly(k, swe_criteria(False), part="b")]
        groups = window(history, last=3)
        assert [n for n, _ in groups] == ["n05", "n06", "n07"]
        assert all(len(runs) == 2 for _, runs in groups)

    def test_informational_and_skipped_results_are_not_triaged(self) -> None:
        info = [r.model_copy(update={"informational": "instance"}) for r in slow()]
        assert triage(info, [nightly(1, healthy())]) == []
        skipped = [r.model_copy(update={"outcome": Outcome.SKIP}) for r in healthy()]
        history = [nightly(k, skipped) for k in range(1, 4)]
        assert set(labels_by_check(triage(slow(), history)).values()) == {Label.UNKNOWN}

    def test_bad_parameters_are_refused(self) -> None:
        with pytest.raises(ValueError, match="last must be at least 1"):
            triage(slow(), [], last=0)
        with pytest.raises(ValueError, match="flaky_rate must be in"):
            triage(slow(), [], flaky_rate=0.0)
        assert DEFAULT_LAST >= 1


class TestBaselineCommit:
    """``commit=``: the candidate is compared with the nightlies of a baseline commit."""

    def history(self) -> list:
        """Main broke at code B (n06..n10); a release branch of code A still passes."""
        runs = [nightly(k, healthy(), code="A") for k in range(1, 6)]
        runs += [nightly(k, slow(), code="B") for k in range(6, 11)]
        runs += [nightly(k, healthy(), code="A", branch="release") for k in range(11, 13)]
        return runs

    def test_a_check_that_passed_on_the_baseline_is_a_regression_whatever_main_says(self) -> None:
        base = CommitRef.parse(commit("A")["nemo_rl"])
        assert set(labels_by_check(triage(slow(), self.history(), last=5)).values()) == {
            Label.PRE_EXISTING
        }
        labels = triage(slow(), self.history(), last=5, commit=base)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.REGRESSION)
        step = next(lb for lb in labels if lb.check == STEP)
        assert [m.nightly for m in step.history] == [
            "n03", "n04", "n05", "release-n11", "release-n12"
        ]  # fmt: skip
        assert step.last_passing == "release-n12" and step.first_failing == "candidate"
        assert f"baseline {base} passes it" in step.reason

    def test_failing_on_the_baseline_too_is_pre_existing(self) -> None:
        base = CommitRef.parse("nemo_rl=" + commit("B")["nemo_rl"][:7])
        labels = triage(slow(), self.history(), commit=base)
        step = next(lb for lb in labels if lb.check == STEP)
        assert step.label is Label.PRE_EXISTING
        assert [m.nightly for m in step.history] == [f"n{k:02d}" for k in range(6, 11)]
        assert f"fails on baseline nemo_rl@{commit('B')['nemo_rl'][:7]} too" in step.reason

    def test_abbreviations_and_checkouts_select_the_runs(self) -> None:
        sha = commit("A")["nemo_rl"]
        for text in (sha, sha[:7], sha.upper()[:12], f"nemo_rl={sha[:10]}"):
            groups = window(self.history(), last=30, commit=CommitRef.parse(text))
            assert len(groups) == 7, text  # n01..n05 and the two release nightlies
        none = window(self.history(), last=30, commit=CommitRef.parse(f"nemo_gym={sha[:8]}"))
        assert none == []
        # every run records rlgate at 0*40: that checkout's commit matches them all
        everyone = window(self.history(), last=30, commit=CommitRef.parse("rlgate=0000000"))
        assert len(everyone) == 12
        labels = triage(slow(), self.history(), commit=CommitRef.parse("f" * 40))
        assert set(labels_by_check(labels).values()) == {Label.UNKNOWN}
        assert "no baseline ffffffffffff nightly" in labels[0].reason

    def test_later_baseline_runs_count_but_never_the_candidate_itself(self) -> None:
        base = CommitRef.parse(commit("A")["nemo_rl"])
        ctx = context_of(3, code="A").model_copy(update={"nightly_id": "n03"})
        groups = window(self.history(), last=30, commit=base, before=ctx)
        assert [n for n, _ in groups] == ["n01", "n02", "n04", "n05", "release-n11", "release-n12"]

    def test_other_code_at_the_baseline_commit_is_not_the_baseline(self) -> None:
        """An experiment branch at the baseline's NeMo RL commit but another NeMo Gym commit,
        flipping between its runs, neither excuses the candidate as flaky nor joins the
        window; with no main run of the commit, every branch's runs count."""
        base = CommitRef.parse(commit("A")["nemo_rl"])
        history = self.history()
        labels = triage(slow(), history, last=5, commit=base)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.REGRESSION)
        experiment = []
        for k in range(13, 19):  # same nemo_rl commit, another nemo_gym: fail, pass, fail, ...
            run = nightly(k, slow() if k % 2 else healthy(), code="A", branch="gym-exp")
            ctx = run.context
            commits = {**ctx.commits, "nemo_gym": "2" * 40}
            experiment.append(
                run.model_copy(update={"context": ctx.model_copy(update={"commits": commits})})
            )
        labels = triage(slow(), [*history, *experiment], last=5, commit=base)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.REGRESSION)
        step = next(lb for lb in labels if lb.check == STEP)
        assert not any(m.nightly.startswith("gym-exp") for m in step.history)
        # the experiment alone at that commit (main never ran it): it is what there is
        labels = triage(slow(), experiment, last=5, commit=base)
        assert {m.nightly for lb in labels for m in lb.history} <= {
            f"gym-exp-n{k:02d}" for k in range(13, 19)
        }

    def test_a_bad_commit_is_refused_with_the_reason(self) -> None:
        for text, message in (
            ("abc", "7 to 64 hexadecimal"),
            ("main", "7 to 64 hexadecimal"),
            ("=abcdef0", "name the checkout"),
            ("nemo\x00rl=abcdef0", "name the checkout"),
            ("abcdef0;rm -rf /", "7 to 64 hexadecimal"),
        ):
            with pytest.raises(ValueError, match=message):
                CommitRef.parse(text)


def test_tiers_and_names_key_a_check() -> None:
    """A check of the same name in another tier is another check."""
    renamed = [r.model_copy(update={"tier": Tier.FUNCTIONAL}) for r in healthy()]
    history = [nightly(k, renamed) for k in range(1, 4)]
    assert set(labels_by_check(triage(slow(), history)).values()) == {Label.UNKNOWN}


def with_models(results, before: str, after: str) -> list[Result]:
    """The SWE criteria as `swe compare --before-model B --after-model A` writes them."""
    from rlgate.core.results import MODELS

    return [
        r.model_copy(
            update={"evidence": {**r.evidence, MODELS: {"before": before, "after": after}}}
        )
        for r in results
    ]


def on(hardware: str | None, runs) -> list:
    """The nightlies ``runs`` as recorded on ``hardware``."""
    return [
        run.model_copy(update={"context": run.context.model_copy(update={"hardware": hardware})})
        for run in runs
    ]


class TestOwnRecordings:
    """The candidate recorded into the history it is triaged against is never its history."""

    def own(self, k: int, results, **update):
        """The candidate's own recording: its very Results (and a skipped check), as a run."""
        skipped = next(r for r in healthy() if r.name == STEP).model_copy(
            update={"name": "skipped:x", "outcome": Outcome.SKIP}
        )
        run = nightly(k, [], part="own")
        return run.model_copy(
            update={
                "results": [*results, skipped],
                "context": run.context.model_copy(update=update),
            }
        )

    def test_its_own_recording_alone_is_no_history(self) -> None:
        """Recorded with --branch main and nothing before it: unknown, not pre-existing."""
        labels = triage(slow(), [self.own(1, slow())])
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.UNKNOWN)
        assert all(lb.history == () for lb in labels)

    def test_its_own_recording_does_not_change_a_label(self) -> None:
        history = [nightly(k, healthy()) for k in range(1, 6)]
        for own in (self.own(6, slow()), self.own(6, slow(), nightly_id="n05")):
            labels = triage(slow(), [*history, own])
            step = next(lb for lb in labels if lb.check == STEP)
            assert step.label is Label.REGRESSION and step.first_failing == "candidate"
            assert [m.nightly for m in step.history] == [f"n{k:02d}" for k in range(1, 6)]

    def test_a_recording_of_part_of_the_candidate_is_its_own_too(self) -> None:
        """check-run --db recorded the run; the candidate is that JSON and an SWE JSON."""
        swe = swe_criteria(infra=True)
        labels = triage([*slow(), *swe], [self.own(1, slow())])
        assert {lb.label for lb in labels if lb.check in CAUGHT} == {Label.UNKNOWN}

    def test_another_evaluation_of_the_same_checks_is_history(self) -> None:
        """Values measured again (another run, same outcomes) are main's, not the candidate's."""
        history = [nightly(1, slow())]
        assert labels_by_check(triage(slow(), history)) == dict.fromkeys(CAUGHT, Label.PRE_EXISTING)

    def test_a_recording_older_than_the_candidate_is_history(self) -> None:
        """Deterministic checks give the same Results every nightly: the time tells them apart."""
        from rlgate.history.triage import CandidateIdentity

        own = self.own(1, slow())
        written = own.context.recorded_at
        before = CandidateIdentity.of([(slow(), written + timedelta(hours=1))])
        after = CandidateIdentity.of([(slow(), written - timedelta(minutes=5))])
        assert labels_by_check(triage(slow(), [own], own=before)) == dict.fromkeys(
            CAUGHT, Label.PRE_EXISTING
        )
        assert labels_by_check(triage(slow(), [own], own=after)) == dict.fromkeys(
            CAUGHT, Label.UNKNOWN
        )

    def test_run_and_nightly_ids_name_its_recordings(self) -> None:
        from rlgate.history.triage import CandidateIdentity

        history = [nightly(k, slow()) for k in range(1, 4)]
        for own in (
            CandidateIdentity(run_ids=frozenset({"n03-checks-main"})),
            CandidateIdentity(nightly_ids=frozenset({"n03"})),
        ):
            step = next(lb for lb in triage(slow(), history, own=own) if lb.check == STEP)
            assert [m.nightly for m in step.history] == ["n01", "n02"]


class TestSeries:
    """A series is one recipe, check, hardware and (where Results name them) models."""

    def test_a_hardware_specific_failure_is_not_flaky(self) -> None:
        """Each nightly ran the check on two hardware types: not a rerun, two series."""
        history = []
        for k in range(1, 7):
            history += on("h100", [nightly(k, slow(), part="h100")])
            history += on("a100", [nightly(k, healthy(), part="a100", hours=1)])
        h100 = triage(
            slow(), history, context=context_of(7).model_copy(update={"hardware": "h100"})
        )
        a100 = triage(slow(), history, hardware="a100")
        assert labels_by_check(h100) == dict.fromkeys(CAUGHT, Label.PRE_EXISTING)
        assert labels_by_check(a100) == dict.fromkeys(CAUGHT, Label.REGRESSION)
        step = next(lb for lb in h100 if lb.check == STEP)
        assert step.hardware == "h100" and "M" not in outcome_strip(step.history)
        assert step.to_json()["hardware"] == "h100"

    def test_a_candidate_stating_no_hardware_meets_only_runs_recorded_without_one(self) -> None:
        history = on("h100", [nightly(k, healthy()) for k in range(1, 5)])
        labels = triage(slow(), history)
        assert labels_by_check(labels) == dict.fromkeys(CAUGHT, Label.UNKNOWN)
        assert "no main nightly ran it on unrecorded hardware (only on h100)" in labels[0].reason

    def test_another_models_comparison_never_makes_a_regression_flaky(self) -> None:
        """Every nightly holds model A's failing comparison and model B's passing one."""
        failing = [r.model_copy(update={"evidence": without_cause(r)}) for r in swe_criteria(True)]
        history = []
        for k in range(1, 7):
            history.append(nightly(k, with_models(swe_criteria(False), "base", "ckpt-a"), part="a"))
            history.append(nightly(k, with_models(failing, "base", "ckpt-b"), part="b", hours=1))
        a = labels_by_check(triage(with_models(failing, "base", "ckpt-a"), history))
        b = triage(with_models(failing, "base", "ckpt-b"), history)
        assert a == {"coverage_after": Label.REGRESSION, "significance": Label.REGRESSION}
        assert {lb.label for lb in b} == {Label.PRE_EXISTING}
        assert b[0].models == ("base", "ckpt-b") and "M" not in b[0].main_text()
        unnamed = triage(failing, history)  # the candidate names no models: nor must its history
        assert {lb.label for lb in unnamed} == {Label.UNKNOWN}

    def test_a_check_naming_no_recipe_is_never_pooled_over_recipes(self) -> None:
        failing = [r.model_copy(update={"evidence": without_cause(r)}) for r in swe_criteria(True)]
        history = [nightly(k, swe_criteria(False), recipe="swe-a") for k in range(1, 4)]
        history += [nightly(k, failing, recipe="swe-b", part="b") for k in range(1, 4)]
        labels = triage(failing, history)
        assert {lb.label for lb in labels} == {Label.UNKNOWN}
        assert "names no recipe and main nightlies of 2 recipes ran it" in labels[0].reason
        assert {lb.label for lb in triage(failing, history, recipe="swe-b")} == {Label.PRE_EXISTING}

    def test_each_series_has_its_own_window(self) -> None:
        """Nightlies of other hardware do not push the series' nightlies out of its window."""
        history = []
        for k in range(1, 11):
            hw = "h100" if k % 2 else "a100"
            history += on(hw, [nightly(k, healthy() if hw == "h100" else slow())])
        step = next(
            lb for lb in triage(slow(), history, hardware="h100", last=3) if lb.check == STEP
        )
        assert [m.nightly for m in step.history] == ["n05", "n07", "n09"]
        assert step.window == ("n05", "n07", "n09")
