"""rlgate.swe.flaky: instances whose outcome flips between runs of one model.

Harness runs are graded by swebench itself (helpers/swe_inputs.py) on real Verified
instances; only which instance resolves in which run is chosen here.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlgate.swe.compare import GateOptions, compare_arms
from rlgate.swe.flaky import MIN_RUNS, find_flaky, flips
from rlgate.swe.readers import load_arm
from rlgate.swe.records import INFRA_OUTCOMES, Outcome, load_universe

from .helpers import swe_inputs as si

FAST = GateOptions(n_resamples=200)

# One instance per case; the outcome it gets in runs 0, 1, 2 of the base model.
CASES = {
    "resolved_then_unresolved": (si.RESOLVED, si.RESOLVED, si.UNRESOLVED),  # flaky
    "resolved_then_empty_patch": (si.RESOLVED, si.EMPTY_PATCH, si.RESOLVED),  # flaky
    "resolved_error_unresolved": (si.RESOLVED, si.DOCKER_ERROR, si.UNRESOLVED),  # flaky
    "resolved_or_harness_error": (si.RESOLVED, si.HARNESS_ERROR, si.RESOLVED),  # infra: no flip
    "resolved_or_docker_error": (si.DOCKER_ERROR, si.RESOLVED, si.RESOLVED),  # infra: no flip
    "resolved_or_missing": (si.RESOLVED, si.MISSING, si.RESOLVED),  # missing: no flip
    "never_resolved": (si.UNRESOLVED, si.PATCH_FAILED, si.EMPTY_PATCH),  # all not resolved
    "always_resolved": (si.RESOLVED, si.RESOLVED, si.RESOLVED),
}
FLAKY = {"resolved_then_unresolved", "resolved_then_empty_patch", "resolved_error_unresolved"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three harness runs of one model and one of another, on 8 Verified instances."""
    ids = sorted(r["instance_id"] for r in si.verified_rows())[:: 500 // len(CASES)][: len(CASES)]
    by_case = dict(zip(CASES, ids, strict=True))
    root = tmp_path_factory.mktemp("flaky")
    universe = load_universe(si.write_subset_dataset(root / "subset.jsonl", ids))
    runs = [
        si.write_harness_run(
            root / f"base_s{k}",
            f"base_s{k}",
            {by_case[c]: kinds[k] for c, kinds in CASES.items()},
            dataset_ids=ids,
        ).final_report
        for k in range(3)
    ]
    other = si.write_harness_run(
        root / "rl_s0", "rl_s0", dict.fromkeys(ids, si.RESOLVED), dataset_ids=ids
    ).final_report
    before = load_arm("before", runs, universe)
    after = load_arm("after", [other], universe)
    return universe, before, after, by_case


class TestFlakyRule:
    def test_only_graded_flips_between_runs_of_one_arm_are_flaky(self, graded):
        universe, before, after, by_case = graded
        flaky = find_flaky((before, after), universe.ids)
        assert set(flaky.ids) == {by_case[c] for c in FLAKY}
        assert flaky.in_arm("before") == flaky.ids and flaky.in_arm("after") == ()
        counts = {f.instance_id: (f.resolved, f.graded) for f in flaky.instances}
        assert counts[by_case["resolved_then_unresolved"]] == (2, 3)
        assert counts[by_case["resolved_error_unresolved"]] == (1, 2)  # the error is not graded

    def test_the_set_is_what_flips_says_of_each_instance(self, graded):
        universe, before, after, _ = graded
        flaky = find_flaky((before, after), universe.ids)
        expected = {
            i for i in universe.ids if flips(run.outcomes[i].outcome for run in before.runs)
        }
        assert set(flaky.ids) == expected
        assert flaky.arms_by_id() == dict.fromkeys(expected, ("before",))

    def test_an_arm_with_one_run_is_not_measured_rather_than_clean(self, graded):
        universe, before, after, _ = graded
        flaky = find_flaky((before, after), universe.ids)
        assert flaky.measured == ("before",) and flaky.unmeasured == ("after",)
        alone = find_flaky((after,), universe.ids)
        assert alone.measured == () and alone.ids == ()
        assert len(after.runs) < MIN_RUNS

    def test_the_comparison_carries_its_flaky_instances(self, graded):
        universe, before, after, by_case = graded
        cmp = compare_arms(before, after, universe, FAST)
        assert set(cmp.flaky.ids) == {by_case[c] for c in FLAKY}
        assert cmp.flaky.measured == ("before",)


_OUTCOMES = st.sampled_from(list(Outcome))


class TestFlipsProperties:
    @given(
        st.lists(_OUTCOMES, max_size=12), st.lists(st.sampled_from(sorted(INFRA_OUTCOMES, key=str)))
    )
    def test_infra_outcomes_never_change_whether_an_instance_flips(self, outcomes, infra):
        assert flips(outcomes + infra) == flips(outcomes)
        assert flips(infra + outcomes) == flips(outcomes)

    @given(st.lists(_OUTCOMES, max_size=12), st.randoms())
    def test_the_order_of_runs_does_not_matter(self, outcomes, rnd):
        shuffled = list(outcomes)
        rnd.shuffle(shuffled)
        assert flips(shuffled) == flips(outcomes)

    @given(st.lists(_OUTCOMES, min_size=1, max_size=12))
    def test_one_verdict_repeated_is_never_a_flip(self, outcomes):
        assert not flips([Outcome.RESOLVED] * len(outcomes))
        assert not flips([o for o in outcomes if o is not Outcome.RESOLVED])


class TestStoredHistory:
    def test_runs_stored_one_per_nightly_give_the_comparisons_flaky_set(self, graded, tmp_path):
        """The three harness runs recorded as three nightlies, read back, judged by one rule."""
        pytest.importorskip("sqlalchemy")
        from rlgate.history.ingest import swe_rows
        from rlgate.history.model import RunContext
        from rlgate.history.store import open_store
        from rlgate.history.swe_flaky import flaky_in_history, runs_by_model
        from rlgate.swe.records import SweArm

        universe, before, after, by_case = graded
        with open_store(tmp_path / "h.db") as store:
            for k, run in enumerate(before.runs):
                rows = swe_rows(SweArm("base", (run,)), "base")
                rows += swe_rows(SweArm("rl", after.runs), "rl") if k == 0 else []
                store.record(RunContext(run_id=f"n{k}", recipe="swe_gate"), [], swe=rows)
            stored = store.swe_instances()
        flaky = flaky_in_history(runs_by_model(stored))
        direct = find_flaky((before,), universe.ids)
        assert flaky.ids == direct.ids == tuple(sorted(by_case[c] for c in FLAKY))
        counts = {f.instance_id: (f.resolved, f.graded) for f in flaky.instances}
        assert counts == {f.instance_id: (f.resolved, f.graded) for f in direct.instances}
        assert (flaky.measured, flaky.unmeasured) == (("base",), ("rl",))
        only = flaky_in_history(runs_by_model(stored), ["rl", "absent"])
        assert only.measured == () and only.unmeasured == ("rl", "absent")
