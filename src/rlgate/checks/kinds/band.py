"""``band_curve:<metric>`` and ``band_mean:<metric>``: the run against a reference band.

Section: ``rlgate.band`` (planned when it is set; each check needs reference runs:
``--band-run``, else the block's ``runs`` globs, relative to the recipe, else -- with
``check-run --db`` -- the recipe's promoted runs in the history, :mod:`rlgate.history.bands`).
Every Result says how many runs the band held (evidence ``band_runs``, ``band_min_runs``,
``band_source``); fewer than ``min_runs`` is an ERROR naming the count and where they came
from. The statistics
(MLPerf-RCP-like prediction intervals from N earlier good runs) are
:mod:`rlgate.checks.perf`'s; a timing/throughput metric's checks are in the perf tier, the
others in the convergence tier (:func:`~rlgate.checks.perf.tier_for_metric`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import Field, field_validator

from rlgate.checks.perf import (
    Direction,
    build_band,
    evaluate_band_curve,
    evaluate_band_mean,
    tier_for_metric,
)
from rlgate.checks.registry import (
    CheckKind,
    GateInputs,
    InputDefaults,
    Need,
    PlannedCheck,
    register,
)
from rlgate.core.results import Result
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel

__all__ = ["BandMethod", "BandMetricSpec", "BandSpec"]


class BandMethod(Enum):
    """Which reference-band statistics a metric is checked with."""

    CURVE = "curve"
    MEAN = "mean"
    BOTH = "both"


class BandMetricSpec(StrictModel):
    """One band metric: which side is bad and which statistics to check."""

    better: Direction
    method: BandMethod = BandMethod.BOTH


class BandSpec(StrictModel):
    """The ``rlgate.band`` block: a reference band from earlier good runs."""

    min_runs: int = Field(5, ge=3)
    runs: tuple[str, ...] = ()
    alpha: float = Field(0.01, gt=0.0, lt=0.5)
    max_outside: float = Field(0.2, ge=0.0, le=1.0)
    warmup_steps: int = Field(0, ge=0)
    metrics: dict[str, BandMetricSpec] = Field(default_factory=dict)

    @field_validator("metrics", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):  # [tag, ...]: direction must be explicit
            raise ValueError("give each band metric a direction: {tag: higher|lower}")
        if isinstance(value, Mapping):
            return {k: {"better": v} if isinstance(v, str) else v for k, v in value.items()}
        return value


@register
class Band(CheckKind[BandSpec]):
    """Per metric, the curve and/or the run mean against the band of the reference runs."""

    name = "band"
    tier = None  # by metric: timing/throughput in perf, the rest in convergence
    section = "band"
    order = 70

    def plan(self, spec: BandSpec, context: RunContext) -> list[PlannedCheck]:
        """Per metric, ``band_curve`` then ``band_mean`` as its method says."""
        out = []
        for metric, m in spec.metrics.items():
            tier = tier_for_metric(metric)
            for method in (BandMethod.CURVE, BandMethod.MEAN):
                if m.method in (method, BandMethod.BOTH):
                    name = f"band_{method.value}:{metric}"
                    out.append(
                        self.check(name, tier=tier, need=Need.BAND, metric=metric, params=method)
                    )
        return out

    def evaluate(
        self, spec: BandSpec, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """Build the band from the reference runs, then judge the run's curve or mean."""
        metric = check.metric
        assert metric is not None
        refs = []
        for ref in inputs.band_runs:
            series = ref.series.get(metric)
            if series is None:
                return self.error(check, f"reference run {ref.source} does not log {metric}")
            refs.append(series)
        band = build_band(
            refs, alpha=spec.alpha, warmup_steps=spec.warmup_steps, min_runs=spec.min_runs
        )
        origin = inputs.band_origin or f"{len(refs)} run(s) given"
        if isinstance(band, str):  # e.g. fewer runs than the minimum: the checks say it (ERROR)
            band = f"{band} ({origin})"
        candidate, better = inputs.run.series.get(metric), spec.metrics[metric].better
        if check.params is BandMethod.CURVE:
            result = evaluate_band_curve(
                band, candidate, better=better, max_outside=spec.max_outside
            )
        else:
            result = evaluate_band_mean(band, candidate, better=better)
        held = {"band_runs": len(refs), "band_min_runs": spec.min_runs, "band_source": origin}
        return result.model_copy(update={"evidence": {**result.evidence, **held}})

    def inputs(self, spec: BandSpec) -> InputDefaults:
        """The block's reference runs, used when ``--band-run`` is not given."""
        return InputDefaults(band_runs=spec.runs)
