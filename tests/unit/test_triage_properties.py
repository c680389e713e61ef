"""Metamorphic properties of triage over generated histories (hypothesis).

A generated main history of one recipe on one hardware type, with the SWE gate's criteria
of one pair of models beside it, is labelled; then history that is not the candidate's
series is added, and no label may change:

* runs of another recipe, runs on another hardware type, runs of another branch;
* SWE comparisons of other models (their criteria carry the same names);
* the candidate's own recordings (its check-run part and its SWE part recorded as runs of
  their own, skipped checks included), in a fresh nightly or in one of the history's.

And adding a failing check to the candidate never turns exit 1 (a regression or an
unknown failure) into 0 or 3. The pure rule is checked on many examples, the store on
fewer: the same history recorded into a real SQLite file and read back gives the same
labels. Values are distinct per run and check, so no generated run holds the candidate's
Results by chance (a run holding exactly them is the candidate's own recording).

Another recipe's SWE comparison of the *same* models is not generated as unrelated: a
candidate naming no recipe cannot tell it from its own series, and triage says unknown.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.cli.triage import exit_code
from rlgate.core.results import INFRA_CAUSE, MODELS, Outcome, Result, Tier
from rlgate.history.model import RecordedRun, RunContext
from rlgate.history.triage import triage

RECIPE, OTHER_RECIPE, SWE_RECIPE = "grpo-prop", "grpo-other", "swe_gate"
HW, OTHER_HW = "h100-2n8g", "a100-8n8g"
PAIR = {"before": "base", "after": "trained"}
CHECKS = ("c0", "c1", "c2")
CRITERIA = ("coverage_after", "significance")
T0 = datetime(2026, 3, 1, tzinfo=UTC)
#: The candidate's context: its hardware, recorded after every generated run.
CANDIDATE = RunContext(
    run_id="candidate", recipe=RECIPE, hardware=HW, recorded_at=T0 + timedelta(days=400)
)

# outcome of one check in one run: pass, fail, error, infra error, skipped
_OUTCOMES = st.sampled_from(["pass", "fail", "error", "infra", "skip"])
_counter = iter(range(10**9))


def result(name: str, tier: Tier, kind: str, value: float, models: dict | None = None) -> Result:
    evidence: dict = {MODELS: models} if models else {}
    outcome = {"pass": Outcome.PASS, "fail": Outcome.FAIL, "skip": Outcome.SKIP}.get(
        kind, Outcome.ERROR
    )
    if kind == "infra":
        evidence[INFRA_CAUSE] = {"reason": "nccl", "detail": "NCCL timeout"}
    return Result(
        name=name, tier=tier, outcome=outcome, value=value, message=f"{name}: {kind} {value}",
        evidence=evidence,
    )  # fmt: skip


def fresh() -> float:
    """A value no other generated Result has."""
    return next(_counter) + 0.5


def run(
    run_id: str, nightly: str | None, when: datetime, results: list[Result], *,
    recipe: str = RECIPE, hardware: str | None = HW, branch: str = "main", code: str | None = "A",
) -> RecordedRun:  # fmt: skip
    commits = {"nemo_rl": (code * 40)[:40]} if code else {}
    context = RunContext(
        run_id=run_id, recipe=recipe, branch=branch, hardware=hardware, nightly_id=nightly,
        recorded_at=when, commits=commits,
    )  # fmt: skip
    return RecordedRun(context=context, results=results)


@st.composite
def outcomes(draw, names: tuple[str, ...]) -> dict[str, str]:
    """Some of ``names``, each with an outcome."""
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    return {name: draw(_OUTCOMES) for name in chosen}


@st.composite
def histories(draw) -> list[RecordedRun]:
    """Main nightlies: one or two check-run runs (a rerun) and maybe a SWE comparison."""
    out = []
    for k in range(draw(st.integers(0, 7))):
        when = T0 + timedelta(days=k)
        code = draw(st.sampled_from(["A", "B", None]))
        for j in range(draw(st.integers(1, 2))):
            checks = draw(outcomes(CHECKS))
            results = [result(n, Tier.CONVERGENCE, o, fresh()) for n, o in checks.items()]
            out.append(
                run(f"n{k}-r{j}", f"n{k:02d}", when + timedelta(hours=j), results, code=code)
            )
        if draw(st.booleans()):
            crit = draw(outcomes(CRITERIA))
            results = [result(n, Tier.SWE_GATE, o, fresh(), PAIR) for n, o in crit.items()]
            out.append(
                run(f"n{k}-swe", f"n{k:02d}", when + timedelta(hours=3), results,
                    recipe=SWE_RECIPE, hardware=None, code=code)
            )  # fmt: skip
    return out


@st.composite
def candidates(draw) -> tuple[list[Result], list[Result]]:
    """The candidate's check-run part and its SWE part; at least one check fails."""
    checks = draw(outcomes(CHECKS))
    crit = draw(outcomes(CRITERIA))
    if not any(o in ("fail", "error", "infra") for o in [*checks.values(), *crit.values()]):
        checks[draw(st.sampled_from(CHECKS))] = "fail"
    runs = [result(n, Tier.CONVERGENCE, o, -fresh()) for n, o in checks.items()]
    swe = [result(n, Tier.SWE_GATE, o, -fresh(), PAIR) for n, o in crit.items()]
    return runs, swe


@st.composite
def unrelated(draw, history: list[RecordedRun], candidate) -> list[RecordedRun]:
    """Runs that are not the candidate's series, and the candidate's own recordings."""
    nights = sorted({r.context.nightly_id for r in history if r.context.nightly_id})
    out = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["recipe", "hardware", "branch", "models", "own"]))
        nightly = draw(st.sampled_from([*nights, f"x{i}", None]))
        when = T0 + timedelta(days=draw(st.integers(-2, 9)), minutes=draw(st.integers(0, 600)))
        rid = f"u{i}-{kind}"
        if kind == "models":
            pair = draw(
                st.sampled_from(
                    [{"before": "base", "after": "other"}, {"before": "x", "after": "y"}]
                )
            )
            crit = draw(outcomes(CRITERIA))
            results = [result(n, Tier.SWE_GATE, o, fresh(), pair) for n, o in crit.items()]
            recipe = draw(st.sampled_from([SWE_RECIPE, OTHER_RECIPE]))
            out.append(run(rid, nightly, when, results, recipe=recipe, hardware=None))
        elif kind == "own":
            part = draw(st.sampled_from(["checks", "swe"]))
            skipped = result("c_skipped", Tier.CONVERGENCE, "skip", fresh())
            if part == "checks":
                out.append(run(rid, nightly, when, [*candidate[0], skipped]))
            elif candidate[1]:
                out.append(
                    run(rid, nightly, when, list(candidate[1]), recipe=SWE_RECIPE, hardware=None)
                )
        else:
            names = CHECKS if kind != "branch" else (*CHECKS, *CRITERIA)
            checks = draw(outcomes(names))
            results = [
                result(n, Tier.CONVERGENCE if n in CHECKS else Tier.SWE_GATE, o, fresh(),
                       None if n in CHECKS else PAIR)
                for n, o in checks.items()
            ]  # fmt: skip
            recipe = OTHER_RECIPE if kind == "recipe" else RECIPE
            hardware = OTHER_HW if kind == "hardware" else HW
            branch = "pr-7" if kind == "branch" else "main"
            out.append(
                run(rid, nightly, when, results, recipe=recipe, hardware=hardware, branch=branch)
            )
    return out


def labels_of(candidate, history) -> dict[tuple[str, str], str]:
    """Every failing check's label, by tier and name (one series each here)."""
    runs, swe = candidate
    found = triage(runs, history, recipe=RECIPE, context=CANDIDATE, last=5)
    found += triage(swe, history, recipe=None, context=CANDIDATE, last=5)
    return {(lb.tier.value, lb.check): lb.label.value for lb in found}


def exit_of(candidate, history) -> int:
    runs, swe = candidate
    found = triage(runs, history, recipe=RECIPE, context=CANDIDATE, last=5)
    found += triage(swe, history, recipe=None, context=CANDIDATE, last=5)
    return int(exit_code(found))


_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(st.data())
def test_unrelated_history_never_changes_a_label(data) -> None:
    history = data.draw(histories())
    candidate = data.draw(candidates())
    extra = data.draw(unrelated(history, candidate))
    assert labels_of(candidate, [*history, *extra]) == labels_of(candidate, history)


@_SETTINGS
@given(st.data())
def test_adding_a_failing_check_never_turns_exit_1_into_0_or_3(data) -> None:
    history = data.draw(histories())
    candidate = data.draw(candidates())
    history += data.draw(unrelated(history, candidate))
    before = exit_of(candidate, history)
    name = data.draw(st.sampled_from([*CHECKS, "c_new"]))
    failing = result(
        name, Tier.CONVERGENCE, data.draw(st.sampled_from(["fail", "error"])), -fresh()
    )
    where = data.draw(st.integers(0, len(candidate[0])))
    grown = ([*candidate[0][:where], failing, *candidate[0][where:]], candidate[1])
    after = exit_of(grown, history)
    assert before != 1 or after == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_store_gives_the_labels_the_records_give(data) -> None:
    """Recorded into a real SQLite file and read back, unrelated history changes nothing."""
    from rlgate.history.store import open_store

    history = data.draw(histories())
    candidate = data.draw(candidates())
    extra = data.draw(unrelated(history, candidate))
    with tempfile.TemporaryDirectory() as tmp:
        with open_store(Path(tmp) / "h.db") as store:
            for r in [*history, *extra]:
                store.record(r.context, r.results)
            stored = store.runs()
    assert labels_of(candidate, stored) == labels_of(candidate, history)
