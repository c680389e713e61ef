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
from typing import TYPE_CHECKING

from rlgate.core.results import Outcome, Result

if TYPE_CHECKING:
    from rlgate.history.store import Store
    from rlgate.runs.metrics import RunMetrics

__all__ = ["COMPLETION", "PromotedBand", "promoted_band", "promotion_blockers"]

#: The check that says a run reached its target step (``checks.kinds.completion``'s name).
COMPLETION = "completion"


def _band_too_short(result: Result) -> bool:
    """A band check that errored because its band held fewer runs than its minimum.

    That is no judgement of the run (the first runs of a band are promoted so), the evidence
    says it (``band_runs`` < ``band_min_runs``, both whole numbers).
    """
    held, least = result.evidence.get("band_runs"), result.evidence.get("band_min_runs")
    if result.outcome is not Outcome.ERROR:
        return False
    if not isinstance(held, int) or not isinstance(least, int) or bool in (type(held), type(least)):
        return False
    return held < least


def promotion_blockers(results: Sequence[Result]) -> list[str]:
    """Why a run cannot serve a reference band (empty: it can).

    A run is promotable when every gate (non-informational) check it recorded passed or
    was skipped, at least one passed, and :data:`COMPLETION` is among the passes (the run
    reached its target step). An ERROR is no pass, an infrastructure one included; the one
    exception is a band check that errored only because its band was below its minimum.
    """
    gate = [r for r in results if not r.informational]
    out = []
    for r in gate:
        if r.outcome in (Outcome.PASS, Outcome.SKIP) or _band_too_short(r):
            continue
        cause = f", infrastructure: {r.infra_cause}" if r.infra_cause else ""
        out.append(f"{r.name} {r.outcome.value.upper()}{cause}")
    if not any(r.outcome is Outcome.PASS for r in gate):
        out.append("no gate check passed (nothing judged the run)")
    if not any(r.name == COMPLETION and r.outcome is Outcome.PASS for r in gate):
        if not any(r.name == COMPLETION for r in gate):
            out.append(f"no {COMPLETION} check (nothing shows the run reached its target step)")
        elif all(r.outcome is Outcome.SKIP for r in gate if r.name == COMPLETION):
            out.append(f"{COMPLETION} SKIP (nothing shows the run reached its target step)")
    return out


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
    import numpy as np

    from rlgate.runs.metrics import MetricSeries, RunMetrics, SourceKind

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
