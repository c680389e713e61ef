"""Benchmark the SWE gate statistics: 500 instances x 2 arms x 5 seeds, 10,000 resamples.

    python benchmarks/bench_swe_stats.py

Times rlgate's cluster bootstrap CI + paired sign-flip test (what ``rlgate swe
compare`` runs for several seeds) and the whole ``compare_arms`` on in-memory
runs, against baselines measured in the same process on the same data:
a naive per-resample Python loop and ``scipy.stats.bootstrap`` (paired,
vectorised, percentile) for the CI, ``scipy.stats.permutation_test`` (paired
sign flips, vectorised) for the test. Both share one resampling helper,
``rlgate.core.resampling``. Prints wall times and ratios; asserts nothing.
Target: the rlgate path under 2 s.

Also times the one-seed exact power (``rlgate swe power --seeds 1``): rlgate's O(n)
critical-gain table from the binomial quantile against the per-D loop it replaced
(O(n^2)), on n = 2,294 (SWE-bench) and n = 10,000, after checking both give the
same table.
"""

from __future__ import annotations

import random
import time

import numpy as np
from scipy import stats as sps

from rlgate.swe import stats
from rlgate.swe.compare import GateOptions, compare_arms
from rlgate.swe.records import (
    DatasetUniverse,
    InputFormat,
    InstanceOutcome,
    Outcome,
    SweArm,
    SweRun,
)

SEED = 20260901
N, SEEDS, RESAMPLES = 500, 5, 10_000


def simulate() -> tuple[np.ndarray, np.ndarray]:
    """Per-seed resolved matrices (SEEDS x N) for a base and a slightly better model."""
    rng = np.random.default_rng(SEED)
    p_base = rng.beta(0.6, 0.9, size=N)
    p_rl = np.clip(p_base + 0.03, 0, 1)
    return rng.random((SEEDS, N)) < p_base, rng.random((SEEDS, N)) < p_rl


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def rlgate_stats(diffs: np.ndarray) -> tuple[tuple[float, float], float]:
    ci = stats.paired_bootstrap_ci(diffs, n_resamples=RESAMPLES, seed=0)
    p = stats.paired_sign_flip_test(diffs, n_resamples=RESAMPLES, seed=0)
    return ci, p


def naive_loop(diffs: np.ndarray) -> tuple[float, float]:
    rng = random.Random(0)
    values = diffs.tolist()
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(RESAMPLES))
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def scipy_bootstrap(after_mean: np.ndarray, before_mean: np.ndarray) -> tuple[float, float]:
    res = sps.bootstrap(
        (after_mean, before_mean),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(0),
    )
    return res.confidence_interval.low, res.confidence_interval.high


def scipy_sign_flip(diffs: np.ndarray) -> float:
    res = sps.permutation_test(
        (diffs,),
        lambda d, axis: np.mean(d, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=RESAMPLES,
        random_state=np.random.default_rng(0),
    )
    return float(res.pvalue)


def critical_gains_loop(n: int, alpha: float) -> np.ndarray:
    """The previous table: for each D, scan the gains with one binomial cdf call."""
    crit = np.empty(n + 1, dtype=np.int64)
    for total in range(n + 1):
        gains = np.arange(total // 2 + 1, total + 1)
        p = np.minimum(1.0, 2.0 * sps.binom.cdf(total - gains, total, 0.5))
        hits = np.flatnonzero(p <= alpha)
        crit[total] = gains[hits[0]] if hits.size else total + 1
    return crit


def power_rows() -> None:
    for n in (2_294, 10_000):
        t_loop, loop = timed(lambda n=n: critical_gains_loop(n, 0.05), repeat=1)
        t_ours, ours = timed(lambda n=n: stats._critical_gains(n, 0.05))
        same = "same table" if np.array_equal(loop, ours) else "TABLES DIFFER"
        t_mde, _ = timed(lambda n=n: stats.mde_exact_mcnemar(n, 0.15), repeat=1)
        ratio = t_loop / t_ours
        print(f"exact power n={n:>6,}: critical gains {t_ours:7.3f} s vs per-D loop "
              f"{t_loop:7.3f} s -> {ratio:5.1f}x ({same}); whole MDE {t_mde:.3f} s")  # fmt: skip


def in_memory_arms(before: np.ndarray, after: np.ndarray):
    ids = tuple(f"repo{i % 12}__proj-{i}" for i in range(N))
    universe = DatasetUniverse(
        "simulated", ids, {i: i.split("__")[0] for i in ids}, {}, None, "sim", None
    )

    def run(label: str, row: np.ndarray) -> SweRun:
        outcomes = {
            iid: InstanceOutcome(iid, Outcome.RESOLVED if r else Outcome.UNRESOLVED)
            for iid, r in zip(ids, row, strict=True)
        }
        return SweRun(label, label, InputFormat.INSTANCE_MAP, outcomes, frozenset(ids), None, ())

    arm_b = SweArm("before", tuple(run(f"b{k}", r) for k, r in enumerate(before)))
    arm_a = SweArm("after", tuple(run(f"a{k}", r) for k, r in enumerate(after)))
    return arm_b, arm_a, universe


def main() -> None:
    before, after = simulate()
    b_mean, a_mean = before.mean(axis=0), after.mean(axis=0)
    diffs = a_mean - b_mean
    t_ours, (ci, p) = timed(lambda: rlgate_stats(diffs))
    t_boot, _ = timed(lambda: stats.paired_bootstrap_ci(diffs, n_resamples=RESAMPLES, seed=0))
    t_naive, naive_ci = timed(lambda: naive_loop(diffs), repeat=1)
    t_scipy, scipy_ci = timed(lambda: scipy_bootstrap(a_mean, b_mean), repeat=1)
    t_flip, _ = timed(lambda: stats.paired_sign_flip_test(diffs, n_resamples=RESAMPLES, seed=0))
    t_perm, perm_p = timed(lambda: scipy_sign_flip(diffs), repeat=1)
    arm_b, arm_a, universe = in_memory_arms(before, after)
    options = GateOptions(n_resamples=RESAMPLES)
    t_compare, cmp = timed(lambda: compare_arms(arm_b, arm_a, universe, options))
    print(f"data: {N} instances x 2 arms x {SEEDS} seeds, {RESAMPLES:,} resamples (seed {SEED})")
    print(f"delta = {100 * diffs.mean():+.2f} pp, rlgate CI [{100 * ci[0]:+.2f}, "
          f"{100 * ci[1]:+.2f}] pp, sign-flip p = {p:.4f}; {cmp.verdict.value}")  # fmt: skip
    print(f"naive CI [{100 * naive_ci[0]:+.2f}, {100 * naive_ci[1]:+.2f}] pp, scipy CI "
          f"[{100 * scipy_ci[0]:+.2f}, {100 * scipy_ci[1]:+.2f}] pp, "
          f"scipy permutation_test p = {perm_p:.4f}")  # fmt: skip
    print(f"rlgate bootstrap CI alone           {t_boot:8.3f} s")
    print(f"rlgate bootstrap CI + sign-flip test {t_ours:8.3f} s")
    print(f"rlgate compare_arms (end to end)     {t_compare:8.3f} s  (target < 2 s)")
    print(f"baseline=naive per-resample Python loop (CI only) {t_naive:8.3f} s "
          f"-> rlgate bootstrap is {t_naive / t_boot:.1f}x faster")  # fmt: skip
    print(f"baseline=scipy.stats.bootstrap paired percentile  {t_scipy:8.3f} s "
          f"-> rlgate bootstrap is {t_scipy / t_boot:.1f}x faster")  # fmt: skip
    print(f"baseline=scipy.stats.permutation_test sign flips {t_perm:8.3f} s -> rlgate "
          f"sign-flip test ({t_flip:.3f} s) is {t_perm / t_flip:.1f}x faster")  # fmt: skip
    power_rows()


if __name__ == "__main__":
    main()
