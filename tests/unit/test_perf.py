"""rlgate.perf: baseline comparison, async-vs-sync, and the reference band.

The statistics are exercised on the 18 real MLPerf Qwen3.5-397B NeMo RL runs (6 seeds x 3
batch sizes): same-batch-size seeds must pass perf against each other despite their large
step-to-step noise, and a leave-one-out band must accept every run and reject it with the
reward flattened or the step time raised by half.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rlgate.checks.perf import (
    Band,
    Direction,
    build_band,
    compare_async_vs_sync,
    compare_to_baseline,
    evaluate_band_curve,
    evaluate_band_mean,
    hodges_lehmann,
    perf_result,
    steady_state,
    tier_for_metric,
)
from rlgate.checks.plan import GateInputs, evaluate_check
from rlgate.core.results import Outcome, Tier
from rlgate.runs.metrics import MetricSeries
from rlgate.testing.perturb import flatten_series, scale_series

from .helpers.mlperf_runs import BATCH_SIZES, SEEDS, mlperf_plan, mlperf_run

STEP_TIME = "timing/train/total_step_time"


def series(values, tag: str = STEP_TIME, start: int = 1) -> MetricSeries:
    vals = np.asarray(values, dtype=float)
    return MetricSeries(tag, np.arange(start, start + vals.size), vals)


def lognormal(seed: int, n: int = 40, center: float = 400.0, sigma: float = 0.1) -> np.ndarray:
    return center * np.random.default_rng(seed).lognormal(0, sigma, n)


def compare(cand, base, better=Direction.LOWER, **kw):
    opts = {"warmup_steps": 3, "alpha": 0.01, "min_effect": 0.05} | kw
    return compare_to_baseline(series(cand), series(base), better=better, **opts)


class TestCompareToBaseline:
    def test_compare_to_baseline_passes_same_distribution(self) -> None:
        res = perf_result("perf:x", compare(lognormal(1), lognormal(2)), STEP_TIME)
        assert res.outcome is Outcome.PASS and res.tier is Tier.PERF and 0.9 < res.value < 1.1

    @pytest.mark.parametrize(
        ("factor", "status"),
        [(1.2, Outcome.FAIL), (1.03, Outcome.PASS), (0.7, Outcome.PASS)],
        ids=["slower_20pct", "slower_3pct_within_floor", "faster"],
    )
    def test_compare_to_baseline_flags_only_regressions_beyond_tolerance(
        self, factor: float, status: Outcome
    ) -> None:
        res = perf_result("perf:x", compare(lognormal(1) * factor, lognormal(2)), STEP_TIME)
        assert res.outcome is status, res.message

    def test_compare_to_baseline_reads_direction_for_throughput(self) -> None:
        base = lognormal(2, center=1000)
        worse = perf_result(
            "perf:t", compare(lognormal(1, center=1000) * 0.85, base, Direction.HIGHER), "t"
        )
        better = perf_result(
            "perf:t", compare(lognormal(1, center=1000) * 1.3, base, Direction.HIGHER), "t"
        )
        assert worse.outcome is Outcome.FAIL and better.outcome is Outcome.PASS

    def test_compare_to_baseline_tolerance_comes_from_baseline_noise(self) -> None:
        quiet = compare(lognormal(1, sigma=0.02), lognormal(2, sigma=0.02), min_effect=0.0)
        noisy = compare(lognormal(1, sigma=0.3), lognormal(2, sigma=0.3), min_effect=0.0)
        assert quiet.tolerance < noisy.tolerance / 5
        floor = compare(lognormal(1, sigma=0.0), lognormal(2, sigma=0.0), min_effect=0.05)
        assert floor.tolerance == pytest.approx(math.log(1.05))

    def test_compare_to_baseline_excludes_warmup_steps(self) -> None:
        base, cand = lognormal(2), lognormal(1)
        cand[:3] *= 5  # compile + first refit, excluded by warmup_steps=3
        assert perf_result("p", compare(cand, base), STEP_TIME).outcome is Outcome.PASS

    @pytest.mark.parametrize(
        ("cand", "what"),
        [
            pytest.param([400.0] * 5, "steady-state step(s)", id="too_short"),
            pytest.param(
                [400.0] * 6 + [float("nan")] + [400.0] * 5,
                "non-finite value nan at step 7",
                id="nan",
            ),
            pytest.param(
                [400.0] * 6 + [0.0] + [400.0] * 5, "non-positive value at step 7", id="zero"
            ),
        ],
    )
    def test_compare_to_baseline_errors_on_unusable_input(self, cand, what: str) -> None:
        res = perf_result("p", compare(cand, lognormal(2)), STEP_TIME)
        assert res.outcome is Outcome.ERROR and what in res.message

    def test_hodges_lehmann_is_the_median_pairwise_difference(self) -> None:
        assert hodges_lehmann(np.array([1.0, 2.0, 10.0]), np.array([0.0])) == 2.0

    def test_steady_state_drops_first_steps(self) -> None:
        assert steady_state(series([1, 2, 3, 4]), 2).steps.tolist() == [3, 4]


class TestCompareAsyncVsSync:
    def test_async_vs_sync_passes_when_async_is_faster_enough(self) -> None:
        res = compare_async_vs_sync(
            series(lognormal(1) / 1.3),
            series(lognormal(2)),
            better=Direction.LOWER,
            warmup_steps=3,
            alpha=0.01,
            min_speedup=1.1,
        )
        assert res.outcome is Outcome.PASS and res.value == pytest.approx(1.3, rel=0.1)

    def test_async_vs_sync_fails_when_async_is_slower(self) -> None:
        res = compare_async_vs_sync(
            series(lognormal(1) * 1.3),
            series(lognormal(2)),
            better=Direction.LOWER,
            warmup_steps=3,
            alpha=0.01,
            min_speedup=1.0,
        )
        assert res.outcome is Outcome.FAIL and "not faster enough" in res.message


class TestBand:
    REFS = tuple(
        series(
            0.3 + 0.01 * np.arange(20) + np.random.default_rng(k).normal(0, 0.02, 20),
            "train/reward",
        )
        for k in range(5)
    )

    def test_build_band_needs_min_runs(self) -> None:
        assert "needs >= 5 reference runs, got 4" in build_band(
            self.REFS[:4], alpha=0.01, warmup_steps=0, min_runs=5
        )

    def test_build_band_rejects_non_finite_reference(self) -> None:
        bad = series(np.r_[np.full(10, 0.3), np.nan, np.full(9, 0.3)], "train/reward")
        assert "non-finite" in build_band(
            [*self.REFS[:4], bad], alpha=0.01, warmup_steps=0, min_runs=5
        )

    def test_band_factor_is_the_t_prediction_interval(self) -> None:
        band = build_band(self.REFS, alpha=0.01, warmup_steps=0, min_runs=5)
        assert isinstance(band, Band) and band.factor == pytest.approx(
            3.747 * math.sqrt(1.2), rel=1e-3
        )

    def test_band_accepts_a_new_run_and_rejects_a_flat_one(self) -> None:
        band = build_band(self.REFS, alpha=0.01, warmup_steps=0, min_runs=5)
        good = series(
            0.3 + 0.01 * np.arange(20) + np.random.default_rng(9).normal(0, 0.02, 20),
            "train/reward",
        )
        flat = series(np.full(20, 0.3), "train/reward")
        assert (
            evaluate_band_curve(band, good, better=Direction.HIGHER, max_outside=0.2).outcome
            is Outcome.PASS
        )
        assert evaluate_band_mean(band, good, better=Direction.HIGHER).outcome is Outcome.PASS
        assert (
            evaluate_band_curve(band, flat, better=Direction.HIGHER, max_outside=0.2).outcome
            is Outcome.FAIL
        )
        assert evaluate_band_mean(band, flat, better=Direction.HIGHER).outcome is Outcome.FAIL

    def test_band_errors_without_overlap_and_fails_on_nan(self) -> None:
        band = build_band(self.REFS, alpha=0.01, warmup_steps=0, min_runs=5)
        far = series([0.5, 0.5], "train/reward", start=100)
        nan = series(np.r_[np.full(5, 0.4), np.nan, np.full(14, 0.4)], "train/reward")
        assert evaluate_band_mean(band, far, better=Direction.HIGHER).outcome is Outcome.ERROR
        res = evaluate_band_curve(band, nan, better=Direction.HIGHER, max_outside=0.2)
        assert res.outcome is Outcome.FAIL and "nan at step 6" in res.message

    def test_tier_for_metric_puts_timing_in_perf(self) -> None:
        assert (
            tier_for_metric(STEP_TIME) is Tier.PERF
            and tier_for_metric("train/reward") is Tier.CONVERGENCE
        )


def _check(plan, name: str):
    return next(c for c in plan.checks if c.name == name)


class TestMlperfRuns:
    """The recipe's perf and band settings on the 18 real runs."""

    @pytest.mark.parametrize("gbs", BATCH_SIZES, ids=[f"gbs{g}" for g in BATCH_SIZES])
    def test_same_batch_size_seeds_pass_perf_against_each_other(self, gbs: int) -> None:
        plan = mlperf_plan(gbs)
        failures = []
        for cand, base in itertools.permutations(SEEDS, 2):
            inputs = GateInputs(run=mlperf_run(gbs, cand), baseline=mlperf_run(gbs, base))
            for check in plan.for_tier(Tier.PERF):
                if check.name.startswith("perf:"):
                    res = evaluate_check(plan, check, inputs)
                    if res.outcome is not Outcome.PASS:
                        failures.append((cand, base, res.message))
        assert failures == []  # 0 of 60 comparisons per batch size

    @pytest.mark.parametrize("gbs", BATCH_SIZES, ids=[f"gbs{g}" for g in BATCH_SIZES])
    def test_perf_catches_one_and_a_half_times_step_time(self, gbs: int) -> None:
        plan = mlperf_plan(gbs)
        check = _check(plan, f"perf:{STEP_TIME}")
        caught = sum(
            evaluate_check(
                plan,
                check,
                GateInputs(
                    run=scale_series(mlperf_run(gbs, c), STEP_TIME, 1.5),
                    baseline=mlperf_run(gbs, b),
                ),
            ).outcome
            is Outcome.FAIL
            for c, b in itertools.permutations(SEEDS, 2)
        )
        assert caught >= 28  # of 30 pairs (measured: 30, 29, 29)

    @pytest.mark.parametrize("gbs", BATCH_SIZES, ids=[f"gbs{g}" for g in BATCH_SIZES])
    @pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
    def test_band_from_five_seeds_accepts_the_sixth_and_rejects_it_perturbed(
        self, gbs: int, seed: int
    ) -> None:
        plan = mlperf_plan(gbs)
        refs = tuple(mlperf_run(gbs, s) for s in SEEDS if s != seed)
        band_checks = [c for c in plan.checks if c.name.startswith("band_")]
        run = mlperf_run(gbs, seed)

        def statuses(candidate) -> dict[str, Outcome]:
            inputs = GateInputs(run=candidate, band_runs=refs)
            return {c.name: evaluate_check(plan, c, inputs).outcome for c in band_checks}

        assert set(statuses(run).values()) == {Outcome.PASS}
        flat = statuses(flatten_series(run, "train/reward"))
        assert flat["band_curve:train/reward"] is Outcome.FAIL
        slow = statuses(scale_series(run, STEP_TIME, 1.5))
        assert slow[f"band_mean:{STEP_TIME}"] is Outcome.FAIL
