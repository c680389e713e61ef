"""Real Results for triage tests: the corpus runs gated by the real checks, SWE criteria.

Nightlies are :class:`~rlgate.history.model.RecordedRun` records built from those Results
(the store gives the same records back), so the triage rule is tested on what the checks
really emit, not on hand-written Results. Each nightly is its own evaluation, as a real one
is: its measured (non-integral) values differ from every other nightly's and from the
candidate's in the tenth significant digit, outcomes and messages unchanged (a run holding
exactly the candidate's Results is the candidate's own recording, never history for it).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from rlgate.core.results import Result
from rlgate.history.model import RecordedRun, RunContext
from rlgate.testing.corpus import Fault

from .corpus_build import corpus

RECIPE = "grpo-corpus"
T0 = datetime(2026, 2, 1, 2, 0, tzinfo=UTC)


@functools.cache
def gate_results(fault: Fault) -> tuple[Result, ...]:
    """The corpus run with ``fault``, gated by its recipe's real checks (with a baseline)."""
    from rlgate.checks.plan import load_inputs, load_plan, run_gate

    c = corpus()
    plan = load_plan(c.recipe)
    inputs = load_inputs(plan, c.runs[fault], baseline=c.baseline, rollouts=c.rollouts["healthy"])
    return run_gate(plan, inputs).results


@functools.cache
def swe_criteria(infra: bool) -> tuple[Result, ...]:
    """The SWE gate's criteria on generated maps; ``infra``: one seed over the infra bound."""
    import tempfile
    from pathlib import Path

    from rlgate.demo.build import BUNDLED_INSTANCES
    from rlgate.demo.history import demo_swe_criteria
    from rlgate.swe.records import load_universe

    root = Path(tempfile.mkdtemp(prefix="rlgate-triage-swe-"))
    return demo_swe_criteria(root, load_universe(BUNDLED_INSTANCES), 1, 0, infra)


def commit(code: str) -> dict[str, str]:
    """The commits of a made-up code version ``code``."""
    return {"nemo_rl": hashlib.sha1(code.encode()).hexdigest(), "rlgate": "0" * 40}


def measured_again(results: Sequence[Result], salt: int) -> list[Result]:
    """``results`` as another evaluation measures them: non-integral values moved by 1e-10."""
    out = []
    for r in results:
        value = r.value
        if value is not None and math.isfinite(value) and value != int(value):
            r = r.model_copy(update={"value": value * (1 + salt * 1e-10)})
        out.append(r)
    return out


def nightly(
    k: int,
    results: Sequence[Result],
    *,
    code: str | None = "A",
    branch: str | None = "main",
    recipe: str = RECIPE,
    part: str = "checks",
    hours: float = 0.0,
    hardware: str | None = None,
) -> RecordedRun:
    """Nightly ``k`` (a day apart from T0) of ``code`` on ``branch`` holding ``results``."""
    context = RunContext(
        run_id=f"n{k:02d}-{part}-{branch}",
        recipe=recipe,
        branch=branch,
        commits=commit(code) if code else {},
        nightly_id=f"n{k:02d}" if branch == "main" else f"{branch}-n{k:02d}",
        recorded_at=T0 + timedelta(days=k, hours=hours),
        hardware=hardware,
    )
    salt = 1 + 1000 * k + sum(map(ord, part)) % 499 + 500 * (branch != "main")
    return RecordedRun(context=context, results=measured_again(results, salt))


def context_of(k: int, *, code: str | None = "A", branch: str = "pr") -> RunContext:
    """A candidate's context: recorded after nightly ``k``, of ``code``."""
    return RunContext(
        run_id=f"candidate-{k}",
        recipe=RECIPE,
        branch=branch,
        commits=commit(code) if code else {},
        recorded_at=T0 + timedelta(days=k, hours=12),
    )


def recipe_name() -> str:
    """The fault corpus recipe's name (what check-run records as ``rlgate.recipe``)."""
    from rlgate.checks.plan import load_plan

    return load_plan(corpus().recipe).recipe


def record(db: str, runs: Sequence[RecordedRun]) -> None:
    """Record ``runs`` into the history database ``db`` (rlgate's own store writer)."""
    from rlgate.history.store import open_store

    with open_store(db) as store:
        for run in runs:
            store.record(run.context, run.results)
