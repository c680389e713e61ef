"""A recipe's reference band from its promoted runs (``rlgate history promote``).

When a recipe's ``rlgate.band`` lists no ``runs`` and no ``--band-run`` is given, a command
with ``--db`` builds the band from the runs promoted for the same recipe, hardware and NeMo
RL overrides, from their stored per-step metrics: each becomes the same
:class:`~rlgate.runs.metrics.RunMetrics` record a run directory would, so the band
statistics (:func:`rlgate.checks.perf.build_band`) and their minimum (``rlgate.band.min_runs``,
5 by default) are exactly those of a static band. Fewer promoted runs than the minimum give
the band checks an ERROR naming the count, never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlgate.history.store import Store
from rlgate.runs.metrics import MetricSeries, RunMetrics, SourceKind

__all__ = ["PromotedBand", "promoted_band"]


@dataclass(frozen=True, slots=True)
class PromotedBand:
    """The promoted runs a band is built from, and how to say where they came from."""

    runs: tuple[RunMetrics, ...]
    run_ids: tuple[str, ...]
    origin: str  # "5 promoted runs of R on H in DB"
    min_runs: int

    @property
    def enough(self) -> bool:
        """Whether the band holds at least its minimum of runs."""
        return len(self.runs) >= self.min_runs

    def describe(self) -> str:
        """One line: how many runs the band holds, its minimum, and which runs."""
        ids = ", ".join(self.run_ids[:8]) + (", ..." if len(self.run_ids) > 8 else "")
        verdict = "" if self.enough else " -- below the minimum: the band is refused"
        return (
            f"reference band: {self.origin} (minimum {self.min_runs})"
            + (f": {ids}" if ids else "")
            + verdict
        )


def _as_run(run_id: str, steps: dict[str, list[tuple[int, float]]], store: Store) -> RunMetrics:
    series = {
        tag: MetricSeries(
            tag,
            np.array([s for s, _ in points], dtype=np.int64),
            np.array([v for _, v in points], dtype=float),
        )
        for tag, points in steps.items()
    }
    return RunMetrics(
        source=Path(f"{store.shown}#{run_id}"), kind=SourceKind.METRICS_JSON, series=series
    )


def promoted_band(
    store: Store,
    *,
    recipe: str,
    hardware: str | None,
    overrides: Sequence[str],
    metrics: Sequence[str],
    min_runs: int,
) -> PromotedBand:
    """The promoted runs of ``recipe`` on ``hardware`` (same overrides), their ``metrics``."""
    promoted = store.promoted(recipe, hardware, overrides=list(overrides))
    runs, ids = [], []
    for run in promoted:
        run_id = run.context.run_id
        runs.append(_as_run(run_id, store.steps(run_id, tags=metrics), store))
        ids.append(run_id)
    where = f" on {hardware}" if hardware else ""
    with_overrides = f" with the same {len(overrides)} override(s)" if overrides else ""
    origin = f"{len(runs)} promoted run(s) of {recipe}{where}{with_overrides} in {store.shown}"
    return PromotedBand(tuple(runs), tuple(ids), origin, min_runs)
