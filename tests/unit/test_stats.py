"""Statistical properties of rlgate.swe.stats, checked against scipy/statsmodels and by simulation.

Simulations use named seeds; tolerances are three binomial standard errors of
the number of simulated datasets, so a correct implementation fails with
probability well below 1 %.
"""

import functools
import itertools
import math
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from scipy.optimize import brentq
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from rlgate.core import resampling
from rlgate.swe import stats

SIM_SEED = 20260901


def _binomial_band(p: float, reps: int) -> tuple[float, float]:
    half = 3.0 * math.sqrt(p * (1.0 - p) / reps)
    return p - half, p + half


def _paired_binary(rng, n: int, p_before: float, psi: float, delta: float):
    """Paired outcomes with P(discordant)=psi and E[after - before]=delta."""
    before = rng.random(n) < p_before
    discordant = rng.random(n) < psi
    gain = rng.random(n) < (psi + delta) / (2 * psi)
    after = before.copy()
    after[discordant & gain] = True
    after[discordant & ~gain] = False
    before = before.copy()
    before[discordant & gain] = False
    before[discordant & ~gain] = True
    return before, after


class TestMcnemarExact:
    @settings(max_examples=200, deadline=None)
    @given(b=st.integers(0, 300), c=st.integers(0, 300))
    def test_mcnemar_exact_equals_scipy_binomtest(self, b, c):
        expected = 1.0 if b + c == 0 else sps.binomtest(c, b + c, 0.5).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-15)

    @pytest.mark.parametrize(
        ("b", "c"),
        [
            pytest.param(25, 50, id="worked_example"),
            pytest.param(28, 47, id="threshold"),
            pytest.param(3, 12, id="small_n"),
            pytest.param(40, 40, id="tie"),
        ],
    )
    def test_mcnemar_exact_equals_statsmodels(self, b, c):
        table = [[100, b], [c, 300]]
        assert stats.mcnemar_exact(b, c) == pytest.approx(sm_mcnemar(table, exact=True).pvalue)

    def test_mcnemar_exact_reproduces_reference_worked_example(self):
        # swebench.md 3.3: c=47 vs b=28 gives p = 0.037
        assert stats.mcnemar_exact(28, 47) == pytest.approx(0.037, abs=0.0005)

    def test_mcnemar_exact_without_discordant_pairs_is_one(self):
        assert stats.mcnemar_exact(0, 0) == 1.0

    @pytest.mark.parametrize(
        ("b", "c"),
        [
            pytest.param(0, 1, id="n1_gain"),
            pytest.param(1, 0, id="n1_loss"),
            pytest.param(1, 1, id="n2_tie"),
            pytest.param(0, 2, id="n2_all_gains"),
            pytest.param(17, 18, id="near_tie_17_18"),
            pytest.param(50, 49, id="near_tie_50_49"),
            pytest.param(58, 59, id="near_tie_58_59"),
            pytest.param(0, 1075, id="underflow_to_zero"),
            pytest.param(49_999, 50_001, id="huge_n_tie"),
            pytest.param(48_000, 52_000, id="huge_n_effect"),
        ],
    )
    def test_mcnemar_exact_is_statsmodels_mcnemar_at_the_edges(self, b, c):
        """statsmodels' exact McNemar, bit for bit; binomtest's p to 1e-12 relative."""
        assert stats.mcnemar_exact(b, c) == sm_mcnemar([[0, b], [c, 0]], exact=True).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(sps.binomtest(c, b + c).pvalue, rel=1e-12)

    def test_mcnemar_exact_is_statsmodels_without_discordant_pairs(self):
        assert stats.mcnemar_exact(0, 0) == sm_mcnemar([[7, 0], [0, 9]], exact=True).pvalue == 1.0

    def test_mcnemar_exact_rejects_negative_counts(self):
        with pytest.raises(ValueError, match=">= 0"):
            stats.mcnemar_exact(-1, 3)

    def test_mcnemar_exact_flags_same_model_pairs_at_most_about_alpha(self):
        """A/A: two runs of one model (per-instance solve probabilities) are rarely 'different'."""
        rng = np.random.default_rng(SIM_SEED)
        reps, n, alpha = 1500, 500, 0.05
        p_i = rng.beta(0.6, 0.9, size=n)  # heterogeneous instance difficulty
        a = rng.random((reps, n)) < p_i
        z = rng.random((reps, n)) < p_i
        b = np.count_nonzero(a & ~z, axis=1)
        c = np.count_nonzero(~a & z, axis=1)
        pvals = np.array([stats.mcnemar_exact(int(x), int(y)) for x, y in zip(b, c, strict=True)])
        rate = float(np.mean(pvals <= alpha))
        _, hi = _binomial_band(alpha, reps)
        assert rate <= hi  # exact McNemar is conservative: never above alpha beyond noise
        assert rate >= alpha / 3, f"A/A rejection rate {rate} implausibly low"


class TestDiscordantCounts:
    def test_discordant_counts_counts_lost_and_gained(self):
        assert stats.discordant_counts([1, 1, 0, 0, 1], [0, 1, 1, 1, 1]) == (1, 2)

    def test_discordant_counts_rejects_unequal_lengths(self):
        with pytest.raises(ValueError, match="equal length"):
            stats.discordant_counts([1, 0], [1])


class TestMeanSE:
    def test_mean_se_matches_scipy_sem(self):
        values = [0.41, 0.44, 0.39, 0.45, 0.42]
        got = stats.mean_se(values)
        assert got.mean == pytest.approx(np.mean(values))
        assert got.se == pytest.approx(sps.sem(values))
        assert got.n == 5

    def test_mean_se_of_one_run_has_no_se(self):
        assert stats.mean_se([0.4]).se is None

    @pytest.mark.parametrize(
        "values", [pytest.param([], id="empty"), pytest.param([0.1, math.nan], id="nan")]
    )
    def test_mean_se_rejects_bad_input(self, values):
        with pytest.raises(ValueError):
            stats.mean_se(values)


class TestPairedBootstrap:
    def test_paired_bootstrap_ci_is_reproducible_with_a_seed(self):
        d = np.random.default_rng(1).integers(-1, 2, size=300)
        assert stats.paired_bootstrap_ci(d, seed=7) == stats.paired_bootstrap_ci(d, seed=7)
        same = stats.paired_bootstrap_means(d, seed=7)
        assert np.array_equal(same, stats.paired_bootstrap_means(d, seed=7))
        assert not np.array_equal(same, stats.paired_bootstrap_means(d, seed=8))

    def test_paired_bootstrap_means_chunked_equals_expected_distribution(self, monkeypatch):
        d = np.random.default_rng(2).integers(-1, 2, size=400).astype(float)
        whole = stats.paired_bootstrap_means(d, n_resamples=3000, seed=3)
        monkeypatch.setattr(resampling, "CHUNK_ELEMENTS", 4000)  # force 300 chunks of 10 rows
        chunked = stats.paired_bootstrap_means(d, n_resamples=3000, seed=3)
        assert chunked.shape == (3000,)
        assert np.mean(chunked) == pytest.approx(np.mean(whole), abs=3 * np.std(d) / 20 / 50)
        assert np.std(chunked) == pytest.approx(np.std(d) / math.sqrt(d.size), rel=0.08)

    def test_paired_bootstrap_ci_covers_the_true_difference_at_the_stated_rate(self):
        rng = np.random.default_rng(SIM_SEED)
        reps, n, delta = 300, 200, 0.05
        covered = 0
        for r in range(reps):
            before, after = _paired_binary(rng, n, 0.4, 0.2, delta)
            lo, hi = stats.paired_bootstrap_ci(
                after.astype(float) - before, n_resamples=1000, seed=r
            )
            covered += lo <= delta <= hi
        lo_band, hi_band = _binomial_band(0.95, reps)
        assert lo_band <= covered / reps <= hi_band

    def test_paired_bootstrap_ci_rejects_empty_input(self):
        with pytest.raises(ValueError, match="empty"):
            stats.paired_bootstrap_ci([])


class TestSharedResampling:
    def test_paired_bootstrap_means_are_the_shared_bootstrap(self):
        d = np.random.default_rng(6).integers(-1, 2, size=700).astype(float)
        ours = stats.paired_bootstrap_means(d, n_resamples=2500, seed=11)
        shared = resampling.bootstrap_means(d, 2500, np.random.default_rng(11))
        assert np.array_equal(ours, shared)

    def test_paired_sign_flip_keeps_its_p_value_when_drawn_in_many_blocks(self, monkeypatch):
        d = np.random.default_rng(8).normal(0.01, 0.3, size=333)
        whole = stats.paired_sign_flip_test(d, n_resamples=5000, seed=2)
        monkeypatch.setattr(resampling, "CHUNK_ELEMENTS", 1000)  # blocks of 3 rows
        assert stats.paired_sign_flip_test(d, n_resamples=5000, seed=2) == whole


class TestPairedSignFlip:
    def test_paired_sign_flip_matches_full_enumeration_on_small_samples(self):
        d = np.array([0.5, 1.0, -0.25, 0.75, 1.0, 0.0, 0.5, -0.5, 1.0, 0.25])
        sums = [abs(np.dot(s, d)) for s in itertools.product((-1, 1), repeat=d.size)]
        exact = np.mean(np.asarray(sums) >= abs(d.sum()) - 1e-12)
        got = stats.paired_sign_flip_test(d, n_resamples=20_000, seed=4)
        assert got == pytest.approx(exact, abs=3 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4)

    def test_paired_sign_flip_flags_same_model_seed_means_at_about_alpha(self):
        """A/A with 4 seeds per arm: rejection rate is alpha within binomial noise."""
        rng = np.random.default_rng(SIM_SEED + 1)
        reps, n, k, alpha = 300, 200, 4, 0.05
        p_i = rng.beta(0.6, 0.9, size=n)
        rejected = 0
        for r in range(reps):
            a = (rng.random((k, n)) < p_i).mean(axis=0)
            z = (rng.random((k, n)) < p_i).mean(axis=0)
            rejected += stats.paired_sign_flip_test(z - a, n_resamples=1000, seed=r) <= alpha
        lo, hi = _binomial_band(alpha, reps)
        assert lo <= rejected / reps <= hi

    def test_paired_sign_flip_detects_a_large_improvement(self):
        rng = np.random.default_rng(5)
        before, after = _paired_binary(rng, 500, 0.4, 0.15, 0.1)
        assert stats.paired_sign_flip_test(after.astype(float) - before, seed=0) < 0.001

    def test_paired_sign_flip_without_differences_is_one(self):
        assert stats.paired_sign_flip_test(np.zeros(50)) == 1.0

    def test_paired_sign_flip_p_value_is_never_zero(self):
        assert stats.paired_sign_flip_test(np.ones(500), n_resamples=200) > 0


class TestMinimumDetectableDifference:
    # swebench.md section 3.3: (n, psi) -> (normal approx pp, exact McNemar pp)
    REFERENCE: ClassVar[dict[tuple[int, float], tuple[float, float]]] = {
        (500, 0.10): (4.0, 4.2),
        (500, 0.15): (4.8, 5.0),
        (500, 0.20): (5.6, 5.8),
        (500, 0.25): (6.2, 6.6),
        (100, 0.10): (8.8, 9.0),
        (100, 0.15): (10.7, 11.0),
        (100, 0.20): (12.4, 12.8),
        (100, 0.25): (13.8, 14.6),
    }

    @pytest.mark.parametrize(
        ("n", "psi", "expected"),
        [pytest.param(500, 0.15, 5.0, id="n500"), pytest.param(100, 0.15, 11.0, id="n100")],
    )
    def test_mde_exact_mcnemar_matches_the_reference_examples(self, n, psi, expected):
        assert 100 * stats.mde_exact_mcnemar(n, psi) == pytest.approx(expected, abs=0.1)

    def test_mde_exact_mcnemar_reproduces_the_reference_table_on_its_grid(self):
        """The reference scanned delta on a 0.2 pp grid; ceil(ours) lands on every entry."""
        for (n, psi), (_, exact_pp) in self.REFERENCE.items():
            ours = 100 * stats.mde_exact_mcnemar(n, psi)
            assert math.ceil(ours / 0.2 - 1e-9) * 0.2 == pytest.approx(exact_pp), (n, psi, ours)

    def test_mde_connor_matches_the_reference_normal_column(self):
        for (n, psi), (normal_pp, _) in self.REFERENCE.items():
            assert 100 * stats.mde_connor(n, psi) == pytest.approx(normal_pp, abs=0.051), (n, psi)

    @pytest.mark.parametrize(
        ("n", "seeds", "expected"),
        [
            pytest.param(500, 1, 4.9, id="n500_k1"),
            pytest.param(500, 2, 3.9, id="n500_k2"),
            pytest.param(500, 4, 3.3, id="n500_k4"),
            pytest.param(500, 8, 2.9, id="n500_k8"),
            pytest.param(100, 2, 8.6, id="n100_k2"),
            pytest.param(100, 4, 7.3, id="n100_k4"),
            pytest.param(100, 8, 6.5, id="n100_k8"),
        ],
    )
    def test_mde_normal_reproduces_the_reference_seed_model(self, n, seeds, expected):
        assert 100 * stats.mde_normal(n, 0.15, seeds=seeds) == pytest.approx(expected, abs=0.051)

    def test_mcnemar_power_at_the_mde_is_the_requested_power(self):
        mde = stats.mde_exact_mcnemar(500, 0.15)
        assert stats.mcnemar_power(500, 0.15, mde) == pytest.approx(0.8, abs=1e-3)
        assert stats.mcnemar_power(500, 0.15, mde / 2) < 0.8 < stats.mcnemar_power(500, 0.15, 0.08)

    def test_mcnemar_power_agrees_with_simulation(self):
        rng = np.random.default_rng(SIM_SEED + 2)
        n, psi, delta, reps = 500, 0.15, 0.05, 3000
        total = rng.binomial(n, psi, size=reps)
        gains = rng.binomial(total, (psi + delta) / (2 * psi))
        p = np.minimum(1, 2 * sps.binom.cdf(np.minimum(gains, total - gains), total, 0.5))
        simulated = float(np.mean((p <= 0.05) & (gains > total - gains)))
        lo, hi = _binomial_band(simulated, reps)
        assert lo <= stats.mcnemar_power(n, psi, delta) <= hi

    def test_mde_exact_mcnemar_is_none_when_nothing_is_detectable(self):
        assert stats.mde_exact_mcnemar(10, 0.1) is None

    @pytest.mark.parametrize(
        ("n", "psi"),
        [
            pytest.param(100, 0.10, id="n100"),
            pytest.param(500, 0.15, id="n500"),
            pytest.param(2_294, 0.15, id="swe_bench_full"),
            pytest.param(250, 1.0, id="every_pair_discordant"),
            pytest.param(stats.MAX_EXACT_N, 0.07, id="largest_n"),
        ],
    )
    def test_mde_exact_mcnemar_is_the_root_of_the_exact_power(self, n, psi):
        """brentq to 1e-10: the exact power at the MDE is the target to 1e-9 (bisection: 1e-5)."""
        mde = stats.mde_exact_mcnemar(n, psi)
        assert stats.mcnemar_power(n, psi, mde) == pytest.approx(0.8, abs=1e-9)

    def test_mde_exact_mcnemar_is_zero_when_no_difference_already_has_the_power(self):
        # power <= alpha / 2: delta = 0 already rejects often enough (the bisection gave ~1e-6)
        assert stats.mde_exact_mcnemar(100, 0.25, alpha=0.99, power=0.01) == 0.0

    def test_mde_exact_mcnemar_of_one_instance_detects_nothing(self):
        assert stats.mde_exact_mcnemar(1, 0.15) is None
        assert stats.minimum_detectable_difference(1, 0.15).mde is None

    @pytest.mark.parametrize(
        ("n", "psi", "alpha", "power"),
        [
            pytest.param(500, 0.15, 0.05, 0.8, id="reference"),
            pytest.param(100, 0.25, 0.01, 0.9, id="strict"),
            pytest.param(stats.MAX_EXACT_N, 0.07, 0.05, 0.8, id="largest_n"),
            pytest.param(40, 1.0, 0.05, 0.8, id="psi_one"),
        ],
    )
    def test_mde_connor_solves_its_equation_in_closed_form(self, n, psi, alpha, power):
        """Squaring Connor's equation gives a quadratic in d; brentq finds its root."""
        za, zb = sps.norm.ppf(1 - alpha / 2), sps.norm.ppf(power)
        closed = (za * math.sqrt(n * psi) + zb * math.sqrt(psi * (n - za**2 + zb**2))) / (n + zb**2)
        assert stats.mde_connor(n, psi, alpha=alpha, power=power) == pytest.approx(closed, rel=1e-9)

    def test_mde_connor_without_a_root_below_the_discordance_is_the_discordance(self):
        # n = 1: n d^2 < rhs for every d <= psi (brentq has no bracket; the bisection gave psi)
        assert stats.mde_connor(1, 0.15) == 0.15

    def test_mde_connor_agrees_with_a_direct_brentq_at_the_edges(self):
        for n, psi in ((2, 1.0), (30, 0.5), (100_000, 0.01)):
            za, zb = sps.norm.ppf(0.975), sps.norm.ppf(0.8)

            def excess(d, n=n, psi=psi, za=za, zb=zb):
                return n * d * d - (za * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2

            root = brentq(excess, 0.0, psi, xtol=1e-12) if excess(psi) >= 0 else psi
            assert stats.mde_connor(n, psi) == pytest.approx(root, abs=1e-9), (n, psi)

    def test_minimum_detectable_difference_picks_exact_for_one_seed(self):
        one = stats.minimum_detectable_difference(500, 0.15, seeds=1)
        four = stats.minimum_detectable_difference(500, 0.15, seeds=4)
        assert one.method == "exact_mcnemar_enumeration"
        assert four.method.startswith("normal_seeds_model")
        assert four.mde < one.mde

    @pytest.mark.parametrize(
        "kwargs",
        [
            pytest.param({"n": 0, "discordance": 0.1}, id="n_zero"),
            pytest.param({"n": 100, "discordance": 0.0}, id="psi_zero"),
            pytest.param({"n": 100, "discordance": 0.1, "alpha": 1.0}, id="alpha_one"),
        ],
    )
    def test_mde_rejects_invalid_designs(self, kwargs):
        with pytest.raises(ValueError):
            stats.mde_exact_mcnemar(**kwargs)


@functools.cache
def _exact_p_values(total: int) -> tuple[tuple[int, float], ...]:
    """(c, exact McNemar p(total - c, c)) for every c > total - c (the same for every alpha)."""
    return tuple((c, stats.mcnemar_exact(total - c, c)) for c in range(total // 2 + 1, total + 1))


class TestExactEnumerationCost:
    @pytest.mark.parametrize("alpha", [0.05, 0.01, 0.0625, 0.125, 0.5, 0.99, 1e-9])
    def test_critical_gains_equal_their_definition(self, alpha):
        """crit[D] = min{c > D - c : exact McNemar p(D - c, c) <= alpha}, or D + 1 if none."""
        crit = stats._critical_gains(400, alpha)
        for total in range(401):
            rejecting = [c for c, p in _exact_p_values(total) if p <= alpha]
            assert crit[total] == (rejecting[0] if rejecting else total + 1), (alpha, total)

    def test_exact_power_refuses_an_n_above_the_enumeration_bound(self):
        with pytest.raises(ValueError, match=r"n must be <= 100,000 for the exact enumeration"):
            stats.mde_exact_mcnemar(stats.MAX_EXACT_N + 1, 0.15)

    def test_exact_power_at_the_bound_keeps_shrinking_with_n(self):
        """At n = MAX_EXACT_N the enumeration still runs (O(n)) and agrees with Connor's formula."""
        mde = stats.mde_exact_mcnemar(stats.MAX_EXACT_N, 0.15)
        assert mde == pytest.approx(stats.mde_connor(stats.MAX_EXACT_N, 0.15), rel=0.02)
