"""rlgate.core.resampling: the one resampling loop of the SWE gate and the convergence tier.

Its blocks bound memory without changing a single draw: the results for a seed are the
same whatever the block size, and the same as the per-call draws each user made before
sharing it (``rng.choice`` in the convergence tier's bootstrap reward test).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from rlgate.checks.kinds.reward import RewardSpec, RewardTest, evaluate_reward_improvement
from rlgate.core import resampling
from rlgate.runs.metrics import MetricSeries, RunMetrics, SourceKind


class TestBlocks:
    @pytest.mark.parametrize(
        ("n_resamples", "n"),
        [
            pytest.param(10_000, 500, id="swe_gate"),
            pytest.param(10_000, 401, id="uneven"),
            pytest.param(7, 5_000_000, id="one_unit_larger_than_a_block"),
            pytest.param(1, 1, id="one"),
        ],
    )
    def test_block_rows_cover_every_resample_within_the_memory_bound(self, n_resamples, n):
        rows = resampling.block_rows(n_resamples, n)
        assert sum(rows) == n_resamples
        assert all(r * n <= resampling.CHUNK_ELEMENTS or r == 1 for r in rows)
        assert len(rows) == -(-n_resamples // max(1, resampling.CHUNK_ELEMENTS // n))

    def test_resample_refuses_no_resamples(self):
        with pytest.raises(ValueError, match="n_resamples must be >= 1, got 0"):
            resampling.bootstrap_means(np.ones(3), 0, np.random.default_rng(0))


class TestBootstrapMeans:
    @pytest.mark.parametrize("n", [2, 400, 401, 1_000, 4_001])
    def test_bootstrap_means_draw_what_rng_choice_draws(self, n):
        """Block boundaries (401: 9,975 + 25 rows) do not shift the generator's stream."""
        x = np.random.default_rng(n).random(n)
        old = np.random.default_rng(0).choice(x, (10_000, n)).mean(axis=1)
        new = resampling.bootstrap_means(x, 10_000, np.random.default_rng(0))
        assert np.array_equal(old, new)

    def test_bootstrap_means_do_not_depend_on_the_block_size(self, monkeypatch):
        x = np.random.default_rng(3).normal(size=257)
        whole = resampling.bootstrap_means(x, 3_001, np.random.default_rng(9))
        monkeypatch.setattr(resampling, "CHUNK_ELEMENTS", 1_000)  # 3 rows of 257 per block
        assert np.array_equal(resampling.bootstrap_means(x, 3_001, np.random.default_rng(9)), whole)


class TestConvergenceBootstrap:
    @staticmethod
    def _run(values: np.ndarray) -> RunMetrics:
        steps = np.arange(1, values.size + 1, dtype=np.int64)
        series = {"train/reward": MetricSeries("train/reward", steps, values)}
        return RunMetrics(Path("run"), SourceKind.METRICS_JSON, MappingProxyType(series))

    @pytest.mark.parametrize("chunk", [resampling.CHUNK_ELEMENTS, 999])
    def test_reward_bootstrap_p_value_is_unchanged_by_the_shared_helper(self, monkeypatch, chunk):
        """1,500 steps: 500-step windows, drawn in blocks; p is the old rng.choice p."""
        monkeypatch.setattr(resampling, "CHUNK_ELEMENTS", chunk)
        values = 0.3 + 0.000003 * np.arange(1_500) + np.random.default_rng(4).normal(0, 0.05, 1_500)
        early, late = values[:500], values[-500:]
        rng = np.random.default_rng(0)
        late_means = rng.choice(late, (10_000, late.size)).mean(axis=1)
        early_means = rng.choice(early, (10_000, early.size)).mean(axis=1)
        old_p = float(np.mean(late_means - early_means <= 0.0))
        assert 0.001 < old_p < 0.5  # a p-value the draws decide, not a sure 0 or 1
        res = evaluate_reward_improvement(RewardSpec(test=RewardTest.BOOTSTRAP), self._run(values))
        assert f"bootstrap one-sided p = {old_p:.3g}" in res.message
