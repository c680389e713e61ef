"""The ``drift`` label wired: ``rlgate triage`` and the report, and the recipe's choice to block.

The candidate is what ``rlgate check-run`` writes for the healthy corpus run (JUnit and JSON;
with the recipe's ``rlgate.block_on_drift`` when it sets it); the history is real nightlies
of the corpus gate's Results recorded in a real SQLite (and PostgreSQL) store, the step-time
check's value stepped up inside its bound (<= 1.1x) from nightly 12 to the candidate's level.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.cli.app import main
from rlgate.cli.triage import exit_code, read_candidate
from rlgate.core.errors import ExitCode
from rlgate.core.junit import read_junit
from rlgate.history.store import open_store
from rlgate.history.triage import Label, triage
from rlgate.report.build import Verdict, build_report
from rlgate.report.inputs import load_junit
from rlgate.report.verdict import BlockerKind
from rlgate.testing.corpus import Fault

from .helpers.corpus_build import corpus
from .helpers.history_inputs import BACKENDS, database
from .helpers.triage_inputs import gate_results, nightly, recipe_name, record

pytest.importorskip("otava", reason="apache-otava is not installed (ci/install.sh)")

STEP = "perf:timing/train/total_step_time"
N = 20
STEP_AT = 12


def check_run(out: Path, name: str, *, block: bool = False) -> tuple[Path, Path]:
    """``rlgate check-run`` of the healthy corpus run: its JUnit and JSON."""
    c = corpus()
    recipe = c.recipe
    if block:  # the same recipe (name, relative band files), asking a drift to block
        here = out / "blocking"
        here.mkdir()
        for entry in c.recipe.parent.iterdir():
            if entry != c.recipe:
                (here / entry.name).symlink_to(entry)
        text = c.recipe.read_text()
        assert "\nrlgate:\n" in text
        recipe = here / c.recipe.name
        recipe.write_text(text.replace("\nrlgate:\n", "\nrlgate:\n  block_on_drift: true\n"))
    junit, doc = out / f"{name}.xml", out / f"{name}.json"
    args = ["check-run", str(c.runs[Fault.HEALTHY]), "--recipe", str(recipe)]
    args += ["--baseline", str(c.baseline), "--rollouts", str(c.rollouts["healthy"])]
    assert main([*args, "--junit", str(junit), "--json", str(doc)]) == 0
    return junit, doc


@pytest.fixture(scope="module")
def candidates(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("drift-candidates")
    files = {}
    for name, block in (("plain", False), ("blocking", True)):
        files[f"{name}_junit"], files[f"{name}_json"] = check_run(out, name, block=block)
    return files


def candidate_step() -> float:
    (r,) = [r for r in gate_results(Fault.HEALTHY) if r.name == STEP]
    return float(r.value)


def drifted(seed: int = 1, *, n: int = N, step_at: int = STEP_AT, size: float = 0.06,
            recipe: str | None = None, hardware: str = "2n8g", sigma: float = 0.01,
            part: str = "checks"):  # fmt: skip
    """Main nightlies whose STEP value steps up by ``size`` at ``step_at`` to the candidate's."""
    level = candidate_step()
    noise = 1.0 + np.random.default_rng(seed).normal(0.0, sigma, n)
    base = gate_results(Fault.HEALTHY)
    out = []
    for k in range(1, n + 1):
        v = float(level * noise[k - 1] / ((1 + size) if k < step_at else 1.0))
        results = [r.model_copy(update={"value": v}) if r.name == STEP else r for r in base]
        code = "B" if k >= step_at else "A"
        out.append(nightly(k, results, code=code, recipe=recipe or recipe_name(),
                           hardware=hardware, part=part))  # fmt: skip
    return out


def triage_cli(capsys, tmp_path, candidate: Path, db: str, *extra: str):
    out_json, out_junit = tmp_path / "t.json", tmp_path / "t.xml"
    args = ["triage", "--candidate", str(candidate), "--db", db, "--json", str(out_json)]
    code = main([*args, "--junit", str(out_junit), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, json.loads(out_json.read_text()), out_junit


@pytest.mark.parametrize("backend", BACKENDS)
def test_triage_shows_a_drift_and_exits_0(backend, tmp_path, candidates, capsys) -> None:
    db = database(backend, tmp_path)
    record(db, drifted())
    for kind in ("plain_junit", "plain_json"):
        code, out, err, doc, junit = triage_cli(capsys, tmp_path, candidates[kind], db)
        assert code == ExitCode.OK, out + err
        assert "rlgate triage: 0 failing and 1 drifting gate check(s) of the candidate" in out
        row = next(line for line in out.splitlines() if STEP in line)
        assert "  drift  " in row and "(blocks)" not in row
        assert f"at n{STEP_AT} (nemo_rl " in row and "still inside its bound <= 1.1x" in row
        assert doc["exit_code"] == 0 and doc["drifting"] == 1 and doc["drift_blocks"] is False
        (label,) = doc["labels"]
        assert (label["check"], label["label"], label["hardware"]) == (STEP, "drift", "2n8g")
        assert label["blocks"] is False
        (case,) = [c for s in read_junit(junit) for c in s.cases if c.result.name == STEP]
        assert case.prop("rlgate.triage.label") == "drift"
        assert case.prop("rlgate.triage.blocks") == "false"


def test_check_run_carries_the_recipes_block_on_drift(candidates) -> None:
    plain = load_junit([candidates["plain_junit"]]).cases
    blocking = load_junit([candidates["blocking_junit"]]).cases
    assert {c.fact("rlgate.block_on_drift") for c in plain} == {None}  # unset: not written
    assert {c.fact("rlgate.block_on_drift") for c in blocking} == {"true"}
    assert {c.fact("rlgate.recipe") for c in blocking} == {recipe_name()}
    assert "block_on_drift" not in json.loads(candidates["plain_json"].read_text())
    assert json.loads(candidates["blocking_json"].read_text())["block_on_drift"] is True
    assert read_candidate([candidates["blocking_json"]]).blocks_drift(recipe_name())
    assert not read_candidate([candidates["plain_junit"]]).blocks_drift(recipe_name())


def test_a_recipe_blocking_on_drift_exits_1_and_the_report_is_no_go(
    tmp_path, candidates, capsys
) -> None:
    db = str(tmp_path / "h.db")
    record(db, drifted())
    for kind in ("blocking_junit", "blocking_json"):
        code, out, err, doc, _ = triage_cli(capsys, tmp_path, candidates[kind], db)
        assert code == ExitCode.FAIL, out + err
        assert doc["exit_code"] == 1 and doc["drift_blocks"] is True
        assert [lb["blocks"] for lb in doc["labels"] if lb["label"] == "drift"] == [True]
        row = next(line for line in out.splitlines() if STEP in line)
        assert "drift (blocks)" in row
    with open_store(db) as store:
        history = store.runs()
    # without a history (no functional/SWE evidence): INCOMPLETE, never NO-GO
    alone = build_report([candidates["plain_junit"]], draw_plots=False).verdict
    assert alone is Verdict.INCOMPLETE
    for junit, verdict in (("blocking_junit", Verdict.NO_GO), ("plain_junit", alone)):
        report = build_report([candidates[junit]], history=history, draw_plots=False)
        assert report.verdict is verdict, report.blockers
        (label,) = [lb for lb in report.triage.labels if lb.label is Label.DRIFT]
        assert label.check == STEP and label.blocks is (verdict is Verdict.NO_GO)
        mine = report.triage.tables[0]
        assert mine.title.startswith("This report's failing and drifting gate checks")
        assert any(STEP in r[0] and r[3].startswith("drift") for r in mine.rows)
        drift = [b for b in report.blockers if b.kind is BlockerKind.DRIFT]
        if verdict is Verdict.NO_GO:
            (b,) = drift
            assert b.title == f"perf: {STEP} drifted" and b.forces is Verdict.NO_GO
            assert f"at n{STEP_AT} (nemo_rl " in b.detail and "block_on_drift" in b.detail
        else:
            assert drift == []


def test_unrelated_history_never_adds_a_drift(tmp_path, candidates, capsys) -> None:
    db = str(tmp_path / "h.db")
    record(db, drifted(recipe="another-recipe", part="other-recipe"))
    record(db, drifted(hardware="8n8g", part="other-hardware"))
    for kind in ("plain_junit", "blocking_json"):
        code, out, err, doc, _ = triage_cli(capsys, tmp_path, candidates[kind], db)
        assert code == ExitCode.OK, out + err
        assert doc["labels"] == [] and doc["drifting"] == 0
        assert "0 failing gate check(s)" in out and "drift" not in out
    with open_store(db) as store:
        history = store.runs()
    report = build_report([candidates["blocking_junit"]], history=history, draw_plots=False)
    assert not [lb for lb in report.triage.labels if lb.label is Label.DRIFT]
    assert report.verdict is build_report([candidates["blocking_junit"]], draw_plots=False).verdict
    assert not [b for b in report.blockers if b.kind is BlockerKind.DRIFT]


def test_a_quarantine_never_hides_a_drift(tmp_path, candidates, capsys) -> None:
    db = str(tmp_path / "h.db")
    record(db, drifted())
    args = ["history", "quarantine", "add", STEP, "--recipe", recipe_name(), "--reason", "noisy"]
    args += ["--owner", "ops"]
    assert main([*args, "--runs", "3", "--db", db]) == 0, capsys.readouterr()
    capsys.readouterr()
    code, out, err, doc, _ = triage_cli(capsys, tmp_path, candidates["blocking_junit"], db)
    assert code == ExitCode.FAIL, out + err
    assert [lb["label"] for lb in doc["labels"]] == ["drift"]


def test_a_block_on_drift_that_is_not_a_boolean_is_exit_2(tmp_path, candidates, capsys) -> None:
    db = str(tmp_path / "h.db")
    record(db, drifted())
    text = candidates["blocking_junit"].read_text()
    assert 'name="rlgate.block_on_drift" value="true"' in text
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace('name="rlgate.block_on_drift" value="true"',
                                'name="rlgate.block_on_drift" value="yes"'))  # fmt: skip
    code = main(["triage", "--candidate", str(bad), "--db", db])
    captured = capsys.readouterr()
    assert code == ExitCode.USAGE
    lines = captured.err.strip().splitlines()
    assert lines[0].startswith("rlgate: error: ") and "rlgate.block_on_drift is 'yes'" in lines[0]
    assert "Traceback" not in captured.err
    code = main(["report", "--junit", str(bad), "--db", db, "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert code == ExitCode.USAGE and "rlgate.block_on_drift is 'yes'" in captured.err


def test_without_otava_triage_and_the_report_still_work_with_one_note(
    tmp_path, candidates, capsys, monkeypatch
) -> None:
    db = str(tmp_path / "h.db")
    record(db, drifted())
    monkeypatch.setitem(sys.modules, "otava", None)  # import otava raises ImportError
    monkeypatch.setitem(sys.modules, "otava.analysis", None)
    code, out, err, doc, _ = triage_cli(capsys, tmp_path, candidates["blocking_junit"], db)
    assert code == ExitCode.OK, out + err
    assert doc["exit_code"] == 0 and doc["labels"] == []
    notes = [line for line in out.splitlines() if line.startswith("note: drift not looked for")]
    assert len(notes) == 1 and "not installed (ci/install.sh)" in notes[0]
    with open_store(db) as store:
        history = store.runs()
    report = build_report([candidates["blocking_junit"]], history=history, draw_plots=False)
    assert not [b for b in report.blockers if b.kind is BlockerKind.DRIFT]
    assert sum("drift not looked for" in n for n in report.triage.notes) == 1


@pytest.fixture(scope="module")
def plain_cases(candidates):
    return candidates["plain_junit"]


def test_a_non_blocking_drift_never_changes_the_verdict_nor_the_exit_code(plain_cases) -> None:
    """Property: over histories with and without a drift (any step, place, noise), a drift
    its recipe does not block on never changes the report's verdict nor triage's exit code."""
    seen: list[bool] = []
    cases = load_junit([plain_cases]).cases
    results = [c.judged for c in cases if c.gating]
    base_verdict = build_report([plain_cases], draw_plots=False).verdict

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        seed=st.integers(0, 2**16),
        size=st.sampled_from([0.0, 0.02, 0.05, 0.08]),
        step_at=st.integers(4, N - 3),
        sigma=st.sampled_from([0.002, 0.01, 0.03]),
    )
    def prop(seed: int, size: float, step_at: int, sigma: float) -> None:
        history = drifted(seed, size=size, step_at=step_at, sigma=sigma)
        report = build_report([plain_cases], history=history, draw_plots=False)
        drifts = [lb for lb in report.triage.labels if lb.label is Label.DRIFT]
        assert not any(lb.blocks for lb in drifts)
        assert report.verdict is base_verdict
        labels = triage(results, history, recipe=recipe_name(), hardware="2n8g")
        assert exit_code([*labels, *drifts]) == exit_code(labels)
        seen.append(bool(drifts))

    prop()
    assert any(seen), "no example drifted: the property was never put to the test"
