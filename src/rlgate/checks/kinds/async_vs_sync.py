"""``async_vs_sync:<metric>``: an async run is at least ``min_speedup`` x its sync twin.

Field: ``rlgate.perf.async_vs_sync`` (planned when it is set; each check needs
``--sync-run``). It reads the perf section's ``warmup_steps`` and ``alpha`` too, so its
fields model extends the perf kind's. The statistics are
:func:`rlgate.checks.perf.compare_async_vs_sync`.
"""

from __future__ import annotations

from pydantic import Field

from rlgate.checks.kinds.perf import PerfSpec
from rlgate.checks.perf import Direction, compare_async_vs_sync
from rlgate.checks.registry import CheckKind, GateInputs, Need, PlannedCheck, register
from rlgate.core.results import Op, Result, Tier
from rlgate.recipe.facts import RunContext
from rlgate.recipe.spec import StrictModel

__all__ = ["AsyncVsSyncFields", "AsyncVsSyncSpec"]


class AsyncVsSyncSpec(StrictModel):
    """An async run must be at least ``min_speedup`` times faster than its sync twin."""

    min_speedup: float = Field(1.0, gt=0.0)
    metrics: dict[str, Direction] = Field(
        default_factory=lambda: {"timing/train/total_step_time": Direction.LOWER}
    )


class AsyncVsSyncFields(PerfSpec):
    """The perf section's fields this kind reads: its own block, warm-up and alpha."""

    async_vs_sync: AsyncVsSyncSpec | None = None


@register
class AsyncVsSync(CheckKind[AsyncVsSyncFields]):
    """One speedup check per metric."""

    name = "async_vs_sync"
    tier = Tier.PERF
    section = "perf"
    order = 90

    def plan(self, spec: AsyncVsSyncFields, context: RunContext) -> list[PlannedCheck]:
        """``async_vs_sync:<metric>`` per metric of the block."""
        if spec.async_vs_sync is None:
            return []
        return [
            self.check(f"async_vs_sync:{m}", need=Need.SYNC, metric=m)
            for m in spec.async_vs_sync.metrics
        ]

    def evaluate(
        self, spec: AsyncVsSyncFields, check: PlannedCheck, inputs: GateInputs, context: RunContext
    ) -> Result:
        """The run against the sync run given."""
        block, sync, metric = spec.async_vs_sync, inputs.sync_run, check.metric
        assert block is not None and sync is not None and metric is not None
        pair = (inputs.run.series.get(metric), sync.series.get(metric))
        if pair[0] is None or pair[1] is None:
            who = "the run" if pair[0] is None else "the sync run"
            return self.error(check, f"{who} does not log {metric}", op=Op.GE, unit="x sync")
        return compare_async_vs_sync(
            pair[0],
            pair[1],
            better=block.metrics[metric],
            warmup_steps=spec.warmup_steps,
            alpha=spec.alpha,
            min_speedup=block.min_speedup,
        )
