"""The demo's nightly history: generated main-branch nightlies, judged by the real checks.

``rlgate report --demo`` records :data:`DEMO_NIGHTLIES` nightlies labelled ``DEMO`` (branch
``main``, one per day) so its report shows trends and a triage table. Each nightly is a
generated run of the fault corpus's recipe (:mod:`rlgate.testing.corpus`, TensorBoard
writer) with its Gym rollouts, gated by :mod:`rlgate.checks.plan` against one baseline and
five band runs, and a generated SWE-bench comparison gated by :mod:`rlgate.swe.compare`:
the Results are what the checks say, no label is written by hand. Planted
(:class:`DemoHistoryPlan`), each removable:

* **a regression**: from nightly ``regression_from`` on (a new NeMo RL commit) the runs
  are :attr:`~rlgate.testing.corpus.Fault.STEP_TIME_UP` (step time +20 %);
* **a flaky check**: with chance ``flaky_chance`` per nightly, whatever the code, half of
  the rollouts end truncated (``rollouts:truncated_final_rate``), and always in the last;
* **an infra failure**: in nightly ``infra_at`` one seed of the trained arm loses 8 % of
  its instances to a Docker fault, over the SWE gate's 5 % (coverage criterion ERROR with
  its infrastructure cause);
* **a slow drift**: from nightly ``drift_from`` on, the step time creeps up by
  ``drift_per_week`` (3 % a week, one nightly a day), inside the perf check's 10 % bound
  until the regression: every nightly passes, and ``rlgate history changes`` finds it
  (the report's step-time panel marks it).

The code changes every ``code_every`` nightlies (the NeMo RL commit), so flakiness is
measured on nightlies of the same code. Deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from rlgate.core.results import Result
from rlgate.history.model import RecordedRun, RunContext

__all__ = [
    "DEMO_BRANCH",
    "DEMO_LABEL",
    "DEMO_NIGHTLIES",
    "DemoHistoryPlan",
    "demo_code",
    "demo_history",
    "demo_swe_comparison",
    "demo_swe_criteria",
    "record_demo_history",
    "write_nightly_junit",
]

DEMO_LABEL = "DEMO"
DEMO_BRANCH = "main"
DEMO_NIGHTLIES = 30
#: The first demo nightly's date (fixed: the demo is deterministic).
DEMO_START = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
_VERSIONS = {"vllm": "0.25.1", "nemo_gym": "0.7.0"}  # demo facts, not this machine's


@dataclass(frozen=True, slots=True)
class DemoHistoryPlan:
    """What the demo history holds; ``None`` removes a planted fault."""

    nightlies: int = DEMO_NIGHTLIES
    code_every: int = 3
    regression_from: int | None = 25
    flaky_chance: float | None = 0.35
    infra_at: int | None = DEMO_NIGHTLIES
    drift_from: int | None = 10
    drift_per_week: float = 0.03

    def without(self, *faults: str) -> DemoHistoryPlan:
        """The plan without the named faults (regression, flaky, infra, drift)."""
        fields = {
            "regression": "regression_from",
            "flaky": "flaky_chance",
            "infra": "infra_at",
            "drift": "drift_from",
        }
        return dataclasses.replace(self, **{fields[f]: None for f in faults})


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def demo_code(plan: DemoHistoryPlan, nightly: int) -> dict[str, str]:
    """The commits nightly ``nightly`` (1-based) ran: NeMo RL moves every ``code_every``."""
    return {
        "nemo_rl": _sha(f"demo-nemo-rl-{(nightly - 1) // plan.code_every}"),
        "nemo_gym": _sha("demo-nemo-gym"),
        "rlgate": _sha("demo-rlgate"),
    }


def drift_factor(plan: DemoHistoryPlan, nightly: int) -> float:
    """The step time's factor in nightly ``nightly`` (1-based) from the planted drift."""
    if plan.drift_from is None or nightly < plan.drift_from:
        return 1.0
    return 1.0 + plan.drift_per_week * (nightly - plan.drift_from + 1) / 7.0


def _flaky_schedule(plan: DemoHistoryPlan, seed: int) -> np.ndarray:
    if plan.flaky_chance is None:
        return np.zeros(plan.nightlies, dtype=bool)
    hit = np.random.default_rng(seed + 7919).random(plan.nightlies) < plan.flaky_chance
    hit[-1] = True  # the latest nightly shows it
    return hit


def _break_swe(path: Path, ids: Sequence[str]) -> None:
    """One seed loses 8 % of its instances to a Docker fault (an infra failure)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    for iid in ids[3::12]:
        doc[iid] = {
            "resolved": False,
            "patch_exists": True,
            "infra_failure": True,
            "infra_failure_reason": "docker_daemon_unreachable",
        }
    path.write_text(json.dumps(doc, indent=0) + "\n", encoding="utf-8")


def demo_swe_comparison(root: Path, universe: Any, k: int, seed: int, infra: bool) -> Any:
    """The SWE comparison of demo nightly ``k`` (``infra``: 8 % Docker faults in one seed)."""
    from rlgate.demo.swe import write_demo_swe
    from rlgate.swe.compare import GateOptions, compare_arms
    from rlgate.swe.readers import load_arm

    ids = list(universe.ids)
    before, after = write_demo_swe(root, ids, seed=seed + 500 + k)
    if infra:
        _break_swe(after[0], ids)
    return compare_arms(
        load_arm("before", before, universe),
        load_arm("after", after, universe),
        universe,
        GateOptions(seed=seed + k, n_resamples=2000),
    )


def demo_swe_criteria(
    root: Path, universe: Any, k: int, seed: int, infra: bool
) -> tuple[Result, ...]:
    """The SWE gate's criteria of demo nightly ``k`` (:func:`demo_swe_comparison`)."""
    return demo_swe_comparison(root, universe, k, seed, infra).criteria


def demo_history(
    root: str | Path,
    *,
    plan: DemoHistoryPlan | None = None,
    seed: int = 0,
    recipe: Path | None = None,
    baseline: Path | None = None,
) -> list[RecordedRun]:
    """Generate, gate and return the demo nightlies (two recorded runs each), oldest first.

    Writes under ``root`` (a fresh directory) per nightly its run, rollouts and SWE maps,
    and, unless ``recipe`` (the corpus recipe, its band next to it) and ``baseline`` are
    given, the recipe, the baseline and the band runs.
    """
    from rlgate.checks.plan import load_inputs, load_plan, run_gate
    from rlgate.demo.swe import DEMO_RECIPE, find_swe_dataset
    from rlgate.runs.metrics import load_run
    from rlgate.runs.rollouts import load_rollouts
    from rlgate.swe.records import load_universe
    from rlgate.testing.corpus import Fault, Profile, corpus_recipe, write_rollouts, write_run

    plan = plan or DemoHistoryPlan()
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    if recipe is None or baseline is None:
        recipe = base / f"{DEMO_RECIPE}.yaml"
        recipe.write_text("# DEMO recipe (rlgate.demo.history)\n" + corpus_recipe())
        baseline = write_run(base / "baseline", Fault.HEALTHY, seed=seed + 1)
        for k in range(5):
            write_run(base / "band" / f"seed_{k}", Fault.HEALTHY, seed=seed + 10 + k)
    gate = load_plan(recipe)
    spec = gate.gate.convergence.rollouts if gate.gate.convergence else None
    first = write_run(base / "n01" / "run", Fault.HEALTHY, seed=seed + 2000)
    rollouts = write_rollouts(base / "n01" / "rollouts.jsonl", "healthy", seed=seed + 3000)
    shared = load_inputs(gate, first, baseline=baseline, rollouts=rollouts)
    universe = load_universe(find_swe_dataset())
    flaky = _flaky_schedule(plan, seed)
    sha = hashlib.sha256(recipe.read_bytes()).hexdigest()
    out = []
    for k in range(1, plan.nightlies + 1):
        night = base / f"n{k:02d}"
        regressed = plan.regression_from is not None and k >= plan.regression_from
        fault = Fault.STEP_TIME_UP if regressed else Fault.HEALTHY
        drift = drift_factor(plan, k)
        profile = Profile(step_time=Profile().step_time * drift)
        if k > 1 or regressed or drift != 1.0:
            run = write_run(night / "run", fault, seed=seed + 2000 + k, profile=profile)
        else:
            run = first
        kind = "truncated_final" if flaky[k - 1] else "healthy"
        rollout = write_rollouts(night / "rollouts.jsonl", kind, seed=seed + 3000 + k)
        inputs = dataclasses.replace(
            shared, run=load_run(run), rollouts=load_rollouts(rollout, spec)
        )
        checks = run_gate(gate, inputs).results
        swe = demo_swe_criteria(night / "swe", universe, k, seed, infra=k == plan.infra_at)
        context = {
            "recipe": DEMO_RECIPE,
            "recipe_sha256": sha,
            "branch": DEMO_BRANCH,
            "commits": demo_code(plan, k),
            "versions": _VERSIONS,
            "hardware": "demo-2x8",
            "nightly_id": f"DEMO-n{k:02d}",
            "label": DEMO_LABEL,
        }
        when = DEMO_START + timedelta(days=k - 1)
        for part, results, minutes in (("checks", checks, 0), ("swe", swe, 30)):
            ctx = RunContext(
                run_id=f"DEMO-n{k:02d}-{part}",
                recorded_at=when + timedelta(minutes=minutes),
                **context,
            )
            out.append(RecordedRun(context=ctx, results=list(results)))
    return out


def record_demo_history(db: Path, runs: Sequence[RecordedRun]) -> tuple[list[RecordedRun], str]:
    """Record ``runs`` into the SQLite file ``db`` and read them back (newest first).

    Returns the runs and a note; without the ``[history]`` extra the runs are used as
    generated and the note says that no database was written.
    """
    try:
        from rlgate.history.store import open_store
    except ModuleNotFoundError as exc:
        note = (
            f"demo history not written to a database ({exc.name} is not installed: pip "
            "install 'rlgate[history]'); the triage section uses the generated nightlies"
        )
        return list(runs), note
    with open_store(db) as store:
        for run in runs:
            store.record(run.context, run.results)
        stored = store.runs(label=DEMO_LABEL)
    note = f"demo history: {len(runs)} DEMO runs of {len(runs) // 2} nightlies recorded in {db}"
    return stored, note


def write_nightly_junit(path: Path, runs: Sequence[RecordedRun]) -> Path:
    """One nightly's Results as JUnit (``rlgate.<tier>.<recipe>``, ``rlgate.recipe`` set)."""
    from rlgate.core.io import write_text_atomic
    from rlgate.core.junit import JunitCase, JunitSuite, write_junit

    suites = []
    for run in runs:
        recipe = run.context.recipe
        cases = [
            JunitCase.of(r, classname=f"rlgate.{r.tier.value}.{recipe}", facts={"recipe": recipe})
            for r in run.results
        ]
        suites.append(JunitSuite.of(run.context.run_id, cases))
    return write_text_atomic(path, write_junit(suites))
