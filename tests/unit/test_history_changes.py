"""``rlgate history changes``: change points in a check's value series over the nightlies.

Histories are the corpus run's real gate Results (``helpers.triage_inputs``) recorded as
nightlies in real SQLite and PostgreSQL stores, with the step-time check's value (the run's
mean step time over the baseline's) set to a seeded noisy series with a planted step.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlgate.core.results import Outcome
from rlgate.history.changes import drift_labels, find_changes
from rlgate.history.model import RecordedRun
from rlgate.history.store import open_store
from rlgate.history.triage import Label
from rlgate.testing.corpus import Fault

from .helpers.cli import run_cli as run
from .helpers.history_inputs import BACKENDS, database
from .helpers.triage_inputs import RECIPE, commit, gate_results, nightly

pytest.importorskip("otava", reason="apache-otava is not installed (ci/install.sh)")

STEP = "perf:timing/train/total_step_time"
N = 30


def _history(values, *, step_at: int | None = None) -> list[RecordedRun]:
    """Nightly k (1-based) holds the corpus gate with STEP's value ``values[k-1]`` (each nightly
    its own evaluation: ``nightly`` moves measured values in the tenth digit).

    The code is "A" before ``step_at`` and "B" from it (the commit that moved the value).
    """
    base = gate_results(Fault.HEALTHY)
    out = []
    for k, v in enumerate(values, start=1):
        results = [r.model_copy(update={"value": float(v)}) if r.name == STEP else r for r in base]
        code = "B" if step_at is not None and k >= step_at else "A"
        out.append(nightly(k, results, code=code))
    return out


def _noise(seed: int, n: int = N, sigma: float = 0.02) -> np.ndarray:
    return 1.0 + np.random.default_rng(seed).normal(0.0, sigma, n)


def _record(db: str, runs: list[RecordedRun]) -> None:
    with open_store(db) as store:
        for r in runs:
            store.record(r.context, r.results)


def _step_series(series):
    (s,) = [x for x in series if x.key.check == STEP]
    return s


@pytest.mark.parametrize("backend", BACKENDS)
def test_planted_step_found_at_its_nightly_with_its_commit_range(backend, tmp_path, capsys):
    values = _noise(1)
    values[19:] *= 1.10  # +10 % from nightly 20 (a new commit)
    db = database(backend, tmp_path)
    _record(db, _history(values, step_at=20))
    with open_store(db) as store:
        series = find_changes(store.runs(recipe=RECIPE), recipe=RECIPE)
    s = _step_series(series)
    assert s.measured and len(s.values) == N
    (change,) = s.changes
    assert (change.nightly, change.previous) == ("n20", "n19")
    assert change.commits_before == commit("A") and change.commits_after == commit("B")
    assert (
        change.commit_range()
        == f"nemo_rl {commit('A')['nemo_rl'][:12]}..{commit('B')['nemo_rl'][:12]}"
    )
    assert change.pvalue < 0.001
    assert change.relative == pytest.approx(0.10, abs=0.03)
    assert change.mean_before == pytest.approx(float(np.mean(values[:19])), rel=1e-4)
    assert change.mean_after == pytest.approx(float(np.mean(values[19:])), rel=1e-4)
    # the CLI says the same, text and JSON
    out = tmp_path / "changes.json"
    code, text, err = run(["history", "changes", RECIPE, "--check", STEP, "--db", db,
                           "--json", str(out)], capsys)  # fmt: skip
    assert code == 0, err
    assert f"{STEP} [on unrecorded hardware]: {N} nightlies, 1 change point(s)" in text
    assert "at n20 (after n19; nemo_rl " in text and "p = " in text
    doc = json.loads(out.read_text())
    (only,) = doc["series"]
    assert only["changes"][0]["nightly"] == "n20"
    assert only["changes"][0]["commits_after"] == commit("B")


@pytest.mark.parametrize("seed", range(5))
def test_flat_noisy_series_has_no_change_point(seed):
    series = find_changes(_history(_noise(100 + seed, sigma=0.03)), recipe=RECIPE)
    assert _step_series(series).changes == ()
    assert all(s.changes == () for s in series)  # every other check's constant values too


def test_too_few_nightlies_say_so(tmp_path, capsys):
    db = str(tmp_path / "h.db")
    _record(db, _history(_noise(3, n=4)))
    code, text, err = run(["history", "changes", RECIPE, "--check", STEP, "--db", db], capsys)
    assert code == 0, err
    assert "4 nightlies, too few values (4 of 6 needed)" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_untrusted_values_are_skipped_with_their_reason(backend, tmp_path, capsys):
    """NaN, inf and 1e300 in the store are left out, named; the step is still found."""
    values = _noise(4)
    values[19:] *= 1.10
    bad = {5: math.nan, 9: math.inf, 13: 1e300, 25: -math.inf}
    for i, v in bad.items():
        values[i - 1] = v
    db = database(backend, tmp_path)
    _record(db, _history(values, step_at=20))
    code, text, err = run(["history", "changes", RECIPE, "--check", STEP, "--db", db], capsys)
    assert code == 0, err
    assert f"{N - 4} nightlies, 1 change point(s)" in text
    assert "at n20 (after n19;" in text
    assert "skipped 1: value nan is not a finite number (n05)" in text
    assert "skipped 1: value inf is not a finite number (n09)" in text
    assert "skipped 1: value 1e+300 is beyond ±1e+150 (not comparable)" in text
    assert "skipped 1: value -inf is not a finite number (n25)" in text


def test_no_nightly_of_the_recipe_is_exit_2(tmp_path, capsys):
    db = str(tmp_path / "h.db")
    _record(db, _history(_noise(5, n=8)))
    code, _, err = run(["history", "changes", "nope", "--db", db], capsys)
    assert code == 2
    assert err.startswith("rlgate: error: no main nightly of recipe 'nope'")
    code, _, err = run(["history", "changes", RECIPE, "--check", "nope", "--db", db], capsys)
    assert code == 2 and "with a check named 'nope'" in err


def _candidate(value: float):
    return [
        r.model_copy(update={"value": value}) if r.name == STEP else r
        for r in gate_results(Fault.HEALTHY)
    ]


@pytest.mark.parametrize("block", [False, True])
def test_a_step_inside_the_bound_is_a_drift_label_blocking_only_if_asked(block):
    values = _noise(6, n=20, sigma=0.01)
    values[11:] *= 1.06  # +6 % from nightly 12: every nightly still passes <= 1.1x
    history = _history(values, step_at=12)
    labels = drift_labels(_candidate(1.06), history, recipe=RECIPE, block=block)
    (label,) = labels
    assert (label.check, label.label) == (STEP, Label.DRIFT)
    assert label.blocks is block
    assert "at n12 (nemo_rl " in label.reason and "still inside its bound <= 1.1x" in label.reason
    assert label.to_json()["label"] == "drift"


def test_no_drift_on_a_flat_series_nor_on_a_failing_one():
    history = _history(_noise(7, n=20, sigma=0.01))
    assert drift_labels(_candidate(1.0), history, recipe=RECIPE) == []
    failing = [r.model_copy(update={"outcome": Outcome.FAIL}) for r in _candidate(1.3)]
    assert drift_labels(failing, history, recipe=RECIPE) == []


def test_the_recipe_says_whether_drift_blocks(tmp_path):
    from rlgate.checks.plan import load_plan
    from rlgate.core.errors import RecipeError
    from rlgate.testing.corpus import corpus_recipe

    text = corpus_recipe()
    assert "\nrlgate:\n" in text
    path = tmp_path / "r.yaml"
    assert load_plan(_write(path, text)).gate.block_on_drift is False
    blocking = text.replace("\nrlgate:\n", "\nrlgate:\n  block_on_drift: true\n")
    assert load_plan(_write(path, blocking)).gate.block_on_drift is True
    with pytest.raises(RecipeError, match="block_on_drift"):
        load_plan(_write(path, text.replace("\nrlgate:\n", "\nrlgate:\n  block_on_drift: 3\n")))


def _write(path, text):
    path.write_text(text)
    return path
