"""Real Results for triage tests: the corpus runs gated by the real checks, SWE criteria.

Nightlies are :class:`~rlgate.history.model.RecordedRun` records built from those Results
(the store gives the same records back), so the triage rule is tested on what the checks
really emit, not on hand-written Results.
"""

from __future__ import annotations

import functools
import hashlib
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


def nightly(
    k: int,
    results: Sequence[Result],
    *,
    code: str | None = "A",
    branch: str | None = "main",
    recipe: str = RECIPE,
    part: str = "checks",
    hours: float = 0.0,
) -> RecordedRun:
    """Nightly ``k`` (a day apart from T0) of ``code`` on ``branch`` holding ``results``."""
    context = RunContext(
        run_id=f"n{k:02d}-{part}-{branch}",
        recipe=recipe,
        branch=branch,
        commits=commit(code) if code else {},
        nightly_id=f"n{k:02d}" if branch == "main" else f"{branch}-n{k:02d}",
        recorded_at=T0 + timedelta(days=k, hours=hours),
    )
    return RecordedRun(context=context, results=list(results))


def context_of(k: int, *, code: str | None = "A", branch: str = "pr") -> RunContext:
    """A candidate's context: recorded after nightly ``k``, of ``code``."""
    return RunContext(
        run_id=f"candidate-{k}",
        recipe=RECIPE,
        branch=branch,
        commits=commit(code) if code else {},
        recorded_at=T0 + timedelta(days=k, hours=12),
    )
