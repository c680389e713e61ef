"""rlgate.swe.compare: the gate criteria and the verdict on real-format inputs.

Harness-shaped arms are graded by swebench itself (see swe_inputs); statistics
scenarios use the per-instance mapping format filled from a seeded simulation.
"""

import json

import numpy as np
import pytest
from scipy import stats as sps

from rlgate.core.errors import SweError
from rlgate.core.results import Outcome as CheckOutcome
from rlgate.swe.compare import Criterion, GateOptions, Verdict, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import Outcome, load_universe

from .helpers import swe_inputs as si

FIRST_ATTEMPT_SEED = 333
FAST = GateOptions(n_resamples=2000)


@pytest.fixture(scope="module")
def universe():
    return load_universe(si.DATASET)


def _map(path, ids, resolved):
    path.write_text(
        json.dumps({i: {"resolved": bool(r)} for i, r in zip(ids, resolved, strict=True)})
    )
    return path


@pytest.fixture(scope="module")
def first_attempt(tmp_path_factory, universe):
    """Base fully evaluated; trained model with 167/500 Docker/harness failures (issue story)."""
    rng = np.random.default_rng(FIRST_ATTEMPT_SEED)
    ids = list(universe.ids)
    solved = rng.random(500) < 0.42
    before = {i: si.RESOLVED if s else si.UNRESOLVED for i, s in zip(ids, solved, strict=True)}
    broken = set(rng.choice(500, size=167, replace=False).tolist())
    docker = set(sorted(broken)[:100])
    after = {}
    for k, iid in enumerate(ids):
        if k in docker:
            after[iid] = si.DOCKER_ERROR
        elif k in broken:
            after[iid] = si.HARNESS_ERROR
        else:
            after[iid] = before[iid]  # the same model where the harness worked
    root = tmp_path_factory.mktemp("first_attempt")
    b = si.write_harness_run(root / "base", "base_s0", before)
    a = si.write_harness_run(root / "rl", "rl_s0", after)
    return b, a


class TestFirstAttemptScenario:
    def test_first_attempt_with_167_harness_failures_is_inconclusive(self, first_attempt, universe):
        """The first attempt read "worse than base" into 333/500 instances; it must not."""
        b, a = first_attempt
        cmp = compare_arms(
            load_arm("before", [b.final_report], universe),
            load_arm("after", [a.final_report], universe),
            universe,
            FAST,
        )
        assert cmp.verdict is Verdict.INCONCLUSIVE
        cov = cmp.criterion(Criterion.COVERAGE_AFTER)
        assert cov.outcome is CheckOutcome.ERROR
        assert cov.value == pytest.approx(167 / 500)
        assert "infra error rate 33.4%" in cov.message
        assert "67 harness errors, 100 infra faults" in cov.message
        assert cmp.criterion(Criterion.COVERAGE_BEFORE).outcome is CheckOutcome.PASS
        assert cmp.criterion(Criterion.SIGNIFICANCE).outcome is CheckOutcome.ERROR
        assert any("33.4%" in r for r in cmp.reasons)
        # without the infra criterion the numbers would have read as a regression
        assert cmp.delta_pp < 0 and cmp.p_value <= 0.05

    def test_first_attempt_counts_failures_as_not_resolved_in_the_denominator(
        self, first_attempt, universe
    ):
        b, a = first_attempt
        cmp = compare_arms(
            load_arm("before", [b.final_report], universe),
            load_arm("after", [a.final_report], universe),
            universe,
            FAST,
        )
        report = json.loads(a.final_report.read_text())
        assert cmp.after.resolved == (len(report["resolved_ids"]),)
        assert cmp.after.rate == pytest.approx(len(report["resolved_ids"]) / 500)
        assert cmp.after.counts(Outcome.INFRA) == (len(report["infra_failure_ids"]),) == (100,)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 40-instance universe (a .jsonl subset of Verified) and its ids."""
    root = tmp_path_factory.mktemp("small")
    ids = [r["instance_id"] for r in si.verified_rows()][::12][:40]
    return load_universe(si.write_subset_dataset(root / "subset.jsonl", ids)), ids, root


class TestInputCriteria:
    def test_runs_on_different_instance_sets_are_inconclusive(self, small):
        universe, ids, root = small
        kinds = {i: si.RESOLVED if k % 3 else si.UNRESOLVED for k, i in enumerate(ids)}
        b = si.write_harness_run(root / "b", "b", kinds, dataset_ids=ids)
        a = si.write_harness_run(
            root / "a", "a", {i: kinds[i] for i in ids[1:]}, dataset_ids=ids[1:]
        )  # the trained model was run with --instance_ids on 39 of the 40
        cmp = compare_arms(
            load_arm("before", [b.final_report], universe),
            load_arm("after", [a.final_report], universe),
            universe,
            FAST,
        )
        scope = cmp.criterion(Criterion.SAME_INSTANCE_SET)
        assert scope.outcome is CheckOutcome.ERROR
        assert ids[0] in scope.message and "40 ids" in scope.message and "39" in scope.message
        assert cmp.criterion(Criterion.COVERAGE_AFTER).outcome is CheckOutcome.PASS  # 2.5%
        assert cmp.verdict is Verdict.INCONCLUSIVE

    def test_runs_graded_on_another_dataset_revision_are_inconclusive(self, small):
        universe, ids, root = small
        kinds = {i: si.RESOLVED if k % 2 else si.UNRESOLVED for k, i in enumerate(ids)}
        b = si.write_harness_run(root / "rb", "rb", kinds, dataset_ids=ids)
        a = si.write_harness_run(root / "ra", "ra", kinds, dataset_ids=ids)
        stale = ids[1]
        f2p = json.loads(si.rows_by_id()[stale]["FAIL_TO_PASS"])
        si.regrade_with_labels(a, stale, [*f2p, "test_that_was_dropped_later (x.Tests)"])
        cmp = compare_arms(
            load_arm("before", [b.final_report], universe),
            load_arm("after", [a.final_report], universe),
            universe,
            FAST,
        )
        rev = cmp.criterion(Criterion.SAME_DATASET_REVISION)
        assert rev.outcome is CheckOutcome.ERROR
        assert stale in rev.message and "different dataset revision" in rev.message
        assert cmp.verdict is Verdict.INCONCLUSIVE

    def test_identical_arms_pass_every_input_criterion(self, small):
        universe, ids, root = small
        kinds = {i: si.RESOLVED if k % 2 else si.UNRESOLVED for k, i in enumerate(ids)}
        b = si.write_harness_run(root / "sb", "sb", kinds, dataset_ids=ids)
        cmp = compare_arms(
            load_arm("before", [b.final_report], universe),
            load_arm("after", [b.log_dir], universe),
            universe,
            FAST,
        )
        assert [c.outcome for c in cmp.criteria] == [CheckOutcome.PASS] * 5
        assert cmp.verdict is Verdict.NO_SIGNIFICANT_CHANGE
        assert cmp.p_value == 1.0 and cmp.flips == ()


def _arms(tmp_path, universe, before, after, name="x"):
    ids = list(universe.ids)
    b = [_map(tmp_path / f"{name}_b{k}.json", ids, r) for k, r in enumerate(np.atleast_2d(before))]
    a = [_map(tmp_path / f"{name}_a{k}.json", ids, r) for k, r in enumerate(np.atleast_2d(after))]
    return load_arm("before", b, universe), load_arm("after", a, universe)


def _paired(seed, p=0.4, psi=0.15, delta=0.0, n=500):
    rng = np.random.default_rng(seed)
    base = rng.random(n) < p
    disc = rng.random(n) < psi
    gain = rng.random(n) < (psi + delta) / (2 * psi)
    before, after = base.copy(), base.copy()
    before[disc], after[disc] = ~gain[disc], gain[disc]
    return before, after


class TestVerdict:
    def test_clear_gain_is_improved_with_an_exact_mcnemar_p(self, tmp_path, universe):
        before, after = _paired(1, delta=0.08)
        cmp = compare_arms(*_arms(tmp_path, universe, before, after), universe, FAST)
        assert cmp.verdict is Verdict.IMPROVED and cmp.test == "exact_mcnemar"
        assert cmp.p_value == pytest.approx(sps.binomtest(cmp.gained, cmp.lost + cmp.gained).pvalue)
        assert cmp.delta_pp == pytest.approx(100 * (after.mean() - before.mean()))
        assert 0 < cmp.ci95_pp[0] < cmp.delta_pp < cmp.ci95_pp[1]

    def test_clear_drop_is_regressed(self, tmp_path, universe):
        before, after = _paired(2, delta=-0.08)
        cmp = compare_arms(*_arms(tmp_path, universe, before, after), universe, FAST)
        assert cmp.verdict is Verdict.REGRESSED
        assert cmp.criterion(Criterion.SIGNIFICANCE).outcome is CheckOutcome.FAIL
        assert cmp.ci95_pp[1] < 0

    def test_significant_drop_within_the_margin_is_tolerated(self, tmp_path, universe):
        before, after = _paired(2, delta=-0.08)
        arms = _arms(tmp_path, universe, before, after)
        strict = compare_arms(*arms, universe, FAST)
        loose = compare_arms(
            *arms, universe, GateOptions(n_resamples=2000, margin_pp=-strict.ci95_pp[0] + 0.5)
        )
        assert loose.verdict is Verdict.NO_SIGNIFICANT_CHANGE
        assert "tolerated margin" in loose.reasons[0]

    def test_small_difference_is_no_significant_change(self, tmp_path, universe):
        before, after = _paired(3, delta=0.01)
        cmp = compare_arms(*_arms(tmp_path, universe, before, after), universe, FAST)
        assert cmp.verdict is Verdict.NO_SIGNIFICANT_CHANGE and cmp.p_value > 0.05

    def test_per_repo_breakdown_sums_to_the_totals(self, tmp_path, universe):
        before, after = _paired(4, delta=0.03)
        cmp = compare_arms(*_arms(tmp_path, universe, before, after), universe, FAST)
        assert sum(r.n for r in cmp.per_repo) == 500
        assert sum(r.before_resolved for r in cmp.per_repo) == cmp.before.resolved[0]
        assert sum(r.after_resolved for r in cmp.per_repo) == cmp.after.resolved[0]
        assert sum(r.gained for r in cmp.per_repo) == cmp.gained
        assert sum(r.lost for r in cmp.per_repo) == cmp.lost
        django = next(r for r in cmp.per_repo if r.repo == "django/django")
        assert django.n == 231

    def test_discordant_list_is_exactly_the_flipped_instances(self, tmp_path, universe):
        before, after = _paired(5, delta=0.02)
        cmp = compare_arms(*_arms(tmp_path, universe, before, after), universe, FAST)
        ids = np.asarray(universe.ids)
        assert {f.instance_id for f in cmp.flips if f.gained} == set(ids[~before & after])
        assert {f.instance_id for f in cmp.flips if not f.gained} == set(ids[before & ~after])
        assert (cmp.lost, cmp.gained) == (
            int((before & ~after).sum()),
            int((~before & after).sum()),
        )

    def test_several_seeds_use_the_permutation_test_and_report_mean_se(self, tmp_path, universe):
        pairs = [_paired(10 + k, delta=0.04) for k in range(3)]
        before = np.vstack([p[0] for p in pairs])
        after = np.vstack([p[1] for p in pairs])
        cmp = compare_arms(*_arms(tmp_path, universe, before, after, "seeds"), universe, FAST)
        assert cmp.test == "paired_sign_flip_permutation"
        assert cmp.ci_method == "cluster_bootstrap_percentile"
        assert cmp.after.resolved == tuple(int(r.sum()) for r in after)
        assert cmp.after.rate_se == pytest.approx(sps.sem(after.sum(axis=1) / 500))
        assert cmp.delta_pp == pytest.approx(100 * (after.mean() - before.mean()))

    def test_mixed_input_formats_compare_on_one_universe(self, tmp_path):
        rows = [json.loads(x) for x in si.GYM_EXAMPLE_ROLLOUTS.read_text().splitlines()]
        ids = [r["responses_create_params"]["metadata"]["instance_id"] for r in rows]
        universe = load_universe(si.write_subset_dataset(tmp_path / "u.jsonl", ids))
        after = _map(tmp_path / "after.json", ids, [True] * len(ids))
        cmp = compare_arms(
            load_arm("before", [si.GYM_EXAMPLE_ROLLOUTS], universe),
            load_arm("after", [after], universe),
            universe,
            FAST,
        )
        assert (cmp.lost, cmp.gained) == (0, 3)
        assert cmp.verdict is Verdict.NO_SIGNIFICANT_CHANGE  # 3 of 10 cannot be significant


class TestGateOptions:
    @pytest.mark.parametrize(
        "kwargs",
        [
            pytest.param({"alpha": 0.0}, id="alpha_zero"),
            pytest.param({"margin_pp": -1.0}, id="negative_margin"),
            pytest.param({"max_infra_error_rate": 1.5}, id="rate_above_one"),
            pytest.param({"n_resamples": 10}, id="too_few_resamples"),
        ],
    )
    def test_gate_options_reject_invalid_values(self, kwargs):
        with pytest.raises(SweError):
            GateOptions(**kwargs)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            pytest.param(
                {"seed": -1}, r"seed must be in 0\.\.4,294,967,295, got -1", id="neg_seed"
            ),
            pytest.param({"seed": 2**64}, r"seed must be in 0\.\.", id="huge_seed"),
            pytest.param(
                {"n_resamples": 10**8}, r"n_resamples must be in 100\.\.100,000", id="huge_draws"
            ),
            pytest.param({"alpha": float("nan")}, r"alpha must be in \(0, 1\)", id="nan_alpha"),
            pytest.param({"margin_pp": float("inf")}, r"margin_pp must be a finite", id="inf_m"),
        ],
    )
    def test_gate_options_bound_what_the_resampling_would_crash_or_hang_on(self, kwargs, match):
        with pytest.raises(SweError, match=match):
            GateOptions(**kwargs)
