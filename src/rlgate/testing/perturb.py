"""Derive modified copies of a loaded run: the perturbations the gate must detect.

Pure and non-destructive: every function returns a new :class:`~rlgate.runs.metrics.RunMetrics`
and never touches files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MappingProxyType

import numpy as np

from rlgate.runs.metrics import MetricSeries, RunMetrics

__all__ = ["flatten_series", "map_series", "scale_series"]


def map_series(
    run: RunMetrics, tag: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> RunMetrics:
    """A copy of ``run`` whose ``tag`` values are ``fn(steps, values)``."""
    series = run.get(tag)
    new = MetricSeries(
        tag, series.steps.copy(), np.asarray(fn(series.steps, series.values.copy()), float)
    )
    return dataclasses.replace(run, series=MappingProxyType({**run.series, tag: new}))


def flatten_series(run: RunMetrics, tag: str, *, fraction: float = 1 / 3) -> RunMetrics:
    """``tag`` frozen at the mean of its first ``fraction`` of steps (no learning)."""

    def flat(_: np.ndarray, values: np.ndarray) -> np.ndarray:
        k = max(2, int(len(values) * fraction))
        return np.full_like(values, values[:k].mean())

    return map_series(run, tag, flat)


def scale_series(run: RunMetrics, tag: str, factor: float) -> RunMetrics:
    """``tag`` multiplied by ``factor`` at every step."""
    return map_series(run, tag, lambda _, values: values * factor)
