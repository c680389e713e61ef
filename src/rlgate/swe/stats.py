"""Pure statistics for paired before/after comparisons: arrays in, numbers out.

Used by the SWE-bench gate (:mod:`rlgate.swe.records`) and meant to be reused by
other tiers (reward-improvement tests, perf noise). Nothing here knows about
SWE-bench, files or pytest.

Invariants:

* Every random procedure takes an explicit ``seed`` and is reproducible; the
  resampling goes through :mod:`rlgate.core.resampling` (vectorised with numpy, in
  blocks of bounded memory whatever the size).
* Differences are always ``after - before``; a positive value is an improvement.
* Two-sided tests reject at ``p <= alpha`` (the convention of the power
  calculation below and of swebench.md section 3.3).
* Empty or mismatched inputs raise :class:`ValueError`; a caller that lets
  users reach these functions turns that into a user-facing error first.

Power model for several seeds (:func:`mde_normal`): let ``d_i`` be the
difference of the per-instance means over ``k`` seeds. Its variance splits into
a between-instance part and a sampling part, ``Var(d_i) = s_b + w / k``, where
``w = E[p_A(1-p_A)] + E[p_B(1-p_B)]`` is the variance of one seed pair and
``s_b = Var_i(p_Bi - p_Ai)``. With one seed and binary outcomes
``Var(d_i) = psi - delta^2 ≈ psi`` (the discordance), so ``psi = s_b + w``.
The *noise fraction* ``f = w / psi`` states how much of the single-seed
discordance is sampling noise; the default ``0.11 / 0.15`` is the reference
split (``E[p(1-p)] ≈ 0.055`` per model at ``psi = 0.15``). Then
``MDE = (z_{1-alpha/2} + z_power) * sqrt(psi * (1 - f + f / k) / n)``.
Assumptions: the same ``k`` in both arms, independent instances, variance taken
at ``delta ≈ 0`` (conservative for small effects), and a normal approximation of
the mean difference, which needs ``n * psi`` of a few dozen or more. For one seed
use the exact conditional McNemar power (:func:`mde_exact_mcnemar`).

Libraries do the textbook parts: the McNemar p-value is statsmodels' ``mcnemar``, the
standard error ``scipy.stats.sem``, the quantiles ``scipy.stats.norm``/``binom``, the
roots ``scipy.optimize.brentq`` (SciPy imported by the functions that compute, not with
the module: readers of the SWE records need no SciPy). Hand-written and why: the resampling (see
:mod:`rlgate.core.resampling`), and the one-seed power enumeration, whose table of
critical gains is the McNemar rejection rule evaluated for every ``D = 0..n`` at once from
the binomial quantile (a p-value per ``(D, c)`` is O(n^2): minutes at ``n = 100,000``);
the unit tests check the table against :func:`mcnemar_exact` for every ``(D, c)``, D <= 400.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rlgate.core.resampling import bootstrap_means, resample

__all__ = [
    "DEFAULT_NOISE_FRACTION",
    "MAX_EXACT_N",
    "MdeResult",
    "MeanSE",
    "discordant_counts",
    "mcnemar_exact",
    "mcnemar_power",
    "mde_connor",
    "mde_exact_mcnemar",
    "mde_normal",
    "mean_se",
    "minimum_detectable_difference",
    "paired_bootstrap_ci",
    "paired_bootstrap_means",
    "paired_sign_flip_test",
]

#: Share of single-seed discordance that is sampling noise (swebench.md section 3.3).
DEFAULT_NOISE_FRACTION = 0.11 / 0.15

#: Largest n of the exact one-seed power enumeration (SWE-bench has 2,294 instances).
MAX_EXACT_N = 100_000

# Absolute tolerance of the MDE roots (a fraction: 1e-10 = 1e-8 pp).
_XTOL = 1e-10


@dataclass(frozen=True, slots=True)
class MeanSE:
    """Mean of some values with its standard error (``se`` is None for one value)."""

    mean: float
    se: float | None
    n: int


def _as_1d(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def mean_se(values: ArrayLike) -> MeanSE:
    """Return the mean and its standard error ``sd(ddof=1) / sqrt(n)`` (``scipy.stats.sem``)."""
    from scipy import stats as _sps  # ~1 s: imported when computed

    arr = _as_1d(values, "values")
    if arr.size == 1:
        return MeanSE(float(arr[0]), None, 1)
    return MeanSE(float(arr.mean()), float(_sps.sem(arr)), int(arr.size))


def discordant_counts(before: ArrayLike, after: ArrayLike) -> tuple[int, int]:
    """Return ``(b, c)``: pairs solved only before (lost) and only after (gained)."""
    a = np.asarray(before, dtype=bool)
    z = np.asarray(after, dtype=bool)
    if a.shape != z.shape or a.ndim != 1:
        raise ValueError(f"before/after must be 1-d of equal length, got {a.shape} and {z.shape}")
    return int(np.count_nonzero(a & ~z)), int(np.count_nonzero(~a & z))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact (conditional binomial) McNemar p-value for discordant counts.

    Under H0 ``c ~ Bin(b + c, 1/2)`` and ``p = min(1, 2 * P(X <= min(b, c)))``: statsmodels'
    ``mcnemar(table, exact=True)``, which equals ``scipy.stats.binomtest(c, b + c).pvalue``
    (to 1e-15; statsmodels applies the same ``binom.cdf`` rule as the power enumeration,
    and is 8x faster). 1 without discordant pairs.
    """
    from statsmodels.stats.contingency_tables import mcnemar  # ~0.4 s: only when tested

    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    return float(mcnemar([[0, b], [c, 0]], exact=True).pvalue)


def paired_bootstrap_means(
    diffs: ArrayLike, *, n_resamples: int = 10_000, seed: int = 0
) -> NDArray[np.float64]:
    """Return ``n_resamples`` bootstrap means of per-unit paired differences.

    Units (instances) are resampled with replacement; whatever a unit's value
    summarises (one run or the mean over several seeds) stays together, so this
    is the cluster bootstrap when ``diffs`` are per-instance seed means.
    """
    d = _as_1d(diffs, "diffs")
    return bootstrap_means(d, n_resamples, np.random.default_rng(seed))


def paired_bootstrap_ci(
    diffs: ArrayLike,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Return the percentile bootstrap CI of the mean paired difference."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    means = paired_bootstrap_means(diffs, n_resamples=n_resamples, seed=seed)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def paired_sign_flip_test(diffs: ArrayLike, *, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired permutation (random sign-flip) p-value for mean(diffs) == 0.

    Under H0 each unit's difference is symmetric about zero, so its sign is
    exchangeable. ``p = (1 + #{|sum*| >= |sum|}) / (1 + n_resamples)``, which is
    never 0 and is exact in distribution for the random-permutation test.
    """
    d = _as_1d(diffs, "diffs")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not np.any(d):
        return 1.0
    total = float(d.sum())
    observed = abs(total)
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))

    def flipped_sums(rng: np.random.Generator, rows: int) -> NDArray[np.float64]:
        flips = rng.random((rows, d.size)) < 0.5
        # flipping a subset S changes the sum to total - 2 * sum(d[S])
        return total - 2.0 * (flips.astype(np.float64) @ d)

    permuted = resample(flipped_sums, n_resamples, d.size, np.random.default_rng(seed))
    extreme = int(np.count_nonzero(np.abs(permuted) >= observed - tol))
    return (1.0 + extreme) / (1.0 + n_resamples)


# --- power / minimum detectable difference ------------------------------------


def _check_design(n: int, discordance: float, alpha: float, power: float) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance must be in (0, 1], got {discordance}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")


def _critical_gains(n: int, alpha: float) -> NDArray[np.int64]:
    """For D = 0..n discordant pairs, the smallest gain count c that rejects (c > b).

    With ``k = D - c`` lost pairs the test rejects iff ``2 * cdf(k; D, 1/2) <= alpha``
    (and ``c > k``); the cdf grows with ``k``, so the answer is ``D - k*`` for the largest
    such ``k*``, found for every D at once from the binomial quantile (checked at its
    neighbours, so rounding in ``ppf`` cannot move it). O(n), not O(n^2).
    """
    from scipy import stats as _sps  # ~1 s: imported when computed

    if n > MAX_EXACT_N:
        raise ValueError(f"n must be <= {MAX_EXACT_N:,} for the exact enumeration, got {n:,}")
    totals = np.arange(n + 1)
    k0 = np.nan_to_num(_sps.binom.ppf(alpha / 2.0, totals, 0.5), nan=-1.0).astype(np.int64)
    ks = k0[:, None] + np.array([-1, 0, 1])
    rejects = (ks >= 0) & (2.0 * _sps.binom.cdf(ks, totals[:, None], 0.5) <= alpha)
    k_star = np.max(np.where(rejects, ks, -1), axis=1)
    crit = np.where(k_star >= 0, np.maximum(totals - k_star, totals // 2 + 1), totals + 1)
    return crit.astype(np.int64)


def _power_from_crit(n: int, discordance: float, delta: float, crit: NDArray[np.int64]) -> float:
    from scipy import stats as _sps  # ~1 s: imported when computed

    totals = np.arange(n + 1)
    q = (discordance + delta) / (2.0 * discordance)
    weights = _sps.binom.pmf(totals, n, discordance)
    return float(np.sum(weights * _sps.binom.sf(crit - 1, totals, q)))


def mcnemar_power(n: int, discordance: float, delta: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided exact McNemar test to detect an improvement ``delta``.

    Enumerates the number of discordant pairs ``D ~ Bin(n, psi)`` and, given D,
    the gains ``c ~ Bin(D, (psi + delta) / (2 psi))``; the test rejects when its
    p-value is ``<= alpha`` and ``c > b`` (swebench.md section 3.3).
    """
    _check_design(n, discordance, alpha, 0.5)
    if not 0.0 <= delta <= discordance:
        raise ValueError(f"delta must be in [0, discordance={discordance}], got {delta}")
    return _power_from_crit(n, discordance, delta, _critical_gains(n, alpha))


def mde_exact_mcnemar(
    n: int, discordance: float, *, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """Smallest true difference the exact McNemar test detects with ``power``.

    Returns a fraction (0.05 = 5 pp): the root of ``power(delta) - power`` by
    ``scipy.optimize.brentq`` (the exact power is continuous and increasing in delta);
    0 when ``delta = 0`` already has that power (possible only for ``power <= alpha / 2``); None
    when even ``delta = discordance`` (every discordant pair a gain) is not detected
    with that power.
    """
    from scipy import optimize as _opt  # ~1 s: imported when computed

    _check_design(n, discordance, alpha, power)
    crit = _critical_gains(n, alpha)

    def shortfall(delta: float) -> float:
        return _power_from_crit(n, discordance, delta, crit) - power

    if shortfall(discordance) < 0:
        return None
    if shortfall(0.0) >= 0:
        return 0.0
    return float(_opt.brentq(shortfall, 0.0, discordance, xtol=_XTOL))


def mde_connor(n: int, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """One-seed normal approximation (Connor 1987).

    Solves ``n d^2 = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2`` for ``d`` in
    ``[0, psi]`` by ``scipy.optimize.brentq``; ``psi`` when no ``d`` up to ``psi``
    satisfies it (``n`` too small).
    """
    from scipy import optimize as _opt  # ~1 s: imported when computed
    from scipy import stats as _sps

    _check_design(n, discordance, alpha, power)
    za = float(_sps.norm.ppf(1.0 - alpha / 2.0))
    zb = float(_sps.norm.ppf(power))

    def excess(d: float) -> float:
        rhs = (za * math.sqrt(discordance) + zb * math.sqrt(discordance - d * d)) ** 2
        return n * d * d - rhs

    if excess(discordance) < 0:
        return discordance
    return float(_opt.brentq(excess, 0.0, discordance, xtol=_XTOL))


def mde_normal(
    n: int,
    discordance: float,
    *,
    seeds: int = 1,
    alpha: float = 0.05,
    power: float = 0.8,
    noise_fraction: float = DEFAULT_NOISE_FRACTION,
) -> float:
    """Normal-approximation MDE with ``seeds`` runs per arm (model in the module docstring)."""
    from scipy import stats as _sps  # ~1 s: imported when computed

    _check_design(n, discordance, alpha, power)
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    if not 0.0 <= noise_fraction <= 1.0:
        raise ValueError(f"noise_fraction must be in [0, 1], got {noise_fraction}")
    za = float(_sps.norm.ppf(1.0 - alpha / 2.0))
    zb = float(_sps.norm.ppf(power))
    variance = discordance * (1.0 - noise_fraction + noise_fraction / seeds)
    return (za + zb) * math.sqrt(variance / n)


@dataclass(frozen=True, slots=True)
class MdeResult:
    """A minimum detectable difference (fraction) and how it was computed."""

    n: int
    discordance: float
    seeds: int
    alpha: float
    power: float
    mde: float | None
    method: str


def minimum_detectable_difference(
    n: int,
    discordance: float,
    *,
    seeds: int = 1,
    alpha: float = 0.05,
    power: float = 0.8,
    noise_fraction: float = DEFAULT_NOISE_FRACTION,
) -> MdeResult:
    """MDE for a paired two-sided test: exact McNemar for one seed, else :func:`mde_normal`."""
    if seeds == 1:
        mde = mde_exact_mcnemar(n, discordance, alpha=alpha, power=power)
        method = "exact_mcnemar_enumeration"
    else:
        mde = mde_normal(
            n, discordance, seeds=seeds, alpha=alpha, power=power, noise_fraction=noise_fraction
        )
        method = f"normal_seeds_model(noise_fraction={noise_fraction:.3f})"
    return MdeResult(n, discordance, seeds, alpha, power, mde, method)
