"""Flaky SWE-bench instances across the stored history of a model (pure).

The rule is the SWE gate's (:data:`rlgate.swe.flaky.RULE`), applied to every SWE run the
history holds for a model instead of the runs of one comparison: a SWE run is one
``(recorded run, swe_run)`` pair of :class:`~rlgate.history.model.SweInstanceRow` records
(a seed, a Gym repeat, a nightly's evaluation), and an instance is flaky for a model when
one of those runs resolved it and another graded it not resolved. Infra outcomes never
make a flip.

A model is its name as recorded (``swe compare --before-model/--after-model``,
``history record --swe-run MODEL=PATH``): record an evaluated checkpoint under a name of its
own (e.g. with its step), or outcomes of different weights will look like flips.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rlgate.history.model import SweInstanceRow, SweOutcome
from rlgate.swe.flaky import Flakiness, flaky_runs

__all__ = ["flaky_in_history", "runs_by_model"]


def runs_by_model(
    rows: Iterable[SweInstanceRow],
) -> dict[str, list[dict[str, SweOutcome]]]:
    """``{model: [one outcome map per SWE run]}``, models and runs in the order first seen."""
    runs: dict[str, dict[tuple[str | None, str], dict[str, SweOutcome]]] = {}
    for row in rows:
        per = runs.setdefault(row.model, {})
        per.setdefault((row.run_id, row.swe_run), {})[row.instance_id] = row.outcome
    return {model: list(per.values()) for model, per in runs.items()}


def flaky_in_history(
    by_model: Mapping[str, Sequence[Mapping[str, SweOutcome]]], models: Sequence[str] | None = None
) -> Flakiness:
    """The flaky instances of each model of :func:`runs_by_model` (``models``: only these).

    A model given that the history holds no run of is *unmeasured*, like one with one run.
    """
    if models is not None:
        by_model = {m: by_model.get(m, []) for m in dict.fromkeys(models)}
    return flaky_runs(by_model)
