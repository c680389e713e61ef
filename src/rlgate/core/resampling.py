"""The one resampling loop behind every bootstrap and permutation test in rlgate.

Used by the SWE gate's paired/cluster bootstrap and sign-flip test
(:mod:`rlgate.swe.stats`) and by the convergence tier's bootstrap reward test
(:mod:`rlgate.checks.kinds.reward`); each keeps its own statistic and draws through here.

* :func:`resample` evaluates a vectorised statistic on blocks of resamples: a block
  holds at most :data:`CHUNK_ELEMENTS` draws (~32 MB of float64), so memory stays bounded
  whatever ``n_resamples x n``, while each block is one numpy operation (no per-resample
  Python loop: ``benchmarks/bench_swe_stats.py`` measures it against such a loop and
  ``scipy.stats.bootstrap``).
* Every draw comes from the ``numpy.random.Generator`` the caller passes, in block order,
  so a seed reproduces the result exactly; numpy's generators continue their stream
  across calls, so the block size does not change a single draw (the unit tests check
  it for the bootstrap and the sign flips).

Kept hand-written on purpose: ``scipy.stats.bootstrap`` and
``scipy.stats.permutation_test`` do the same job 8-20x slower on the SWE gate's
sizes (measured in ``benchmarks/bench_swe_stats.py``), hold every resample at once, and
draw a different stream, which would change every CI and p-value reported for a seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["CHUNK_ELEMENTS", "Statistic", "block_rows", "bootstrap_means", "resample"]

#: Largest number of draws (resamples x units) held at once (~32 MB of float64).
CHUNK_ELEMENTS = 4_000_000

#: ``statistic(rng, rows)``: draw ``rows`` resamples from ``rng``, return their ``rows`` values.
Statistic = Callable[[np.random.Generator, int], NDArray[np.float64]]


def block_rows(n_resamples: int, n: int) -> list[int]:
    """Resamples per block: at most ``CHUNK_ELEMENTS // n`` (at least 1), summing to the total."""
    rows = max(1, CHUNK_ELEMENTS // max(n, 1))
    full, rest = divmod(n_resamples, rows)
    return [rows] * full + ([rest] if rest else [])


def resample(
    statistic: Statistic, n_resamples: int, n: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Return ``n_resamples`` values of ``statistic``, computed block by block.

    Args:
        statistic: draws a block of resamples of ``n`` units and returns one value each.
        n_resamples: how many resamples in all (>= 1).
        n: units per resample (sets the block size).
        rng: the only source of randomness; consumed in block order.

    Raises:
        ValueError: ``n_resamples`` < 1.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    out = np.empty(n_resamples, dtype=np.float64)
    pos = 0
    for rows in block_rows(n_resamples, n):
        out[pos : pos + rows] = statistic(rng, rows)
        pos += rows
    return out


def bootstrap_means(
    values: NDArray[np.float64], n_resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Means of ``n_resamples`` resamples of ``values`` drawn with replacement.

    The indices are drawn as ``rng.integers(0, n, (rows, n), dtype=int32)``, the stream
    ``rng.choice(values, (rows, n))`` draws too (checked in the unit tests).
    """
    n = values.size

    def means(gen: np.random.Generator, rows: int) -> NDArray[np.float64]:
        return values[gen.integers(0, n, size=(rows, n), dtype=np.int32)].mean(axis=1)

    return resample(means, n_resamples, n, rng)
