"""Reference bands from promoted runs: ``check-run --db`` and ``report --db`` on real runs.

The MLPerf reference recipe declares a band (reward curve, step-time mean) with no static
runs. Five real GBS-512 seeds recorded and promoted must give seed 3 exactly the band its
five ``--band-run`` files give; fewer than the recipe's minimum (5) must be an ERROR that
says how many runs the band holds, never a pass; static runs keep working with ``--db``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.core.junit import read_junit
from rlgate.history.store import open_store

from .helpers.cli import run_cli as run
from .helpers.corpus_build import corpus
from .helpers.history_inputs import BACKENDS, MLPERF_GBS, database
from .helpers.mlperf_runs import GBS_OVERRIDES, RECIPE, mlperf_path

RECIPE_NAME = RECIPE.stem
OVERRIDES = [a for o in GBS_OVERRIDES[MLPERF_GBS] for a in ("--override", o)]
BAND = ("band_curve:train/reward", "band_mean:timing/train/total_step_time")


def check_run(seed: int, *extra: str) -> list[str]:
    path = mlperf_path(MLPERF_GBS, seed)
    return ["check-run", str(path), "--recipe", str(RECIPE), *OVERRIDES, *extra]


def promote_seeds(db: str, seeds, capsys) -> None:
    """Record each seed with its checks (check-run --db) and promote it.

    The first seeds' band checks are ERRORs (a band below its minimum): no judgement of the
    run, so they do not keep it out of the band it starts.
    """
    for seed in seeds:
        args = ["--db", db, "--run-id", f"seed{seed}", "--nightly-id", f"n{seed}"]
        code, out, err = run(check_run(seed, *args), capsys)
        assert f"history: recorded run seed{seed}" in out, out + err
        code, out, err = run(["history", "promote", f"seed{seed}", "--db", db], capsys)
        assert code == 0, err
        assert "overriding" not in out
    assert f"now holds {len(seeds)} promoted run(s)" in out


def band_results(path: Path) -> dict[str, dict]:
    doc = json.loads(path.read_text())
    return {c["name"]: c for c in doc["checks"] if c["name"] in BAND}


@pytest.mark.parametrize("backend", BACKENDS)
def test_five_promoted_runs_give_the_band_their_files_give(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = database(backend, tmp_path)
    others = (1, 2, 4, 5, 6)
    promote_seeds(db, others, capsys)
    static = [a for s in others for a in ("--band-run", str(mlperf_path(MLPERF_GBS, s)))]
    code, out, err = run([*check_run(3, *static), "--json", str(tmp_path / "static.json")], capsys)
    assert code == 0, out + err
    assert "reference band: 5 run(s) from --band-run (minimum 5)" in out
    code, out, err = run(
        [*check_run(3, "--db", db, "--run-id", "candidate"), "--json", str(tmp_path / "db.json")],
        capsys,
    )
    assert code == 0, out + err
    assert (
        f"reference band: 5 promoted run(s) of {RECIPE_NAME} on 64n4g with the same 5 "
        "override(s)" in out
    )
    assert "(minimum 5): seed6, seed5, seed4, seed2, seed1" in out
    from_db, from_files = band_results(tmp_path / "db.json"), band_results(tmp_path / "static.json")
    assert set(from_db) == set(BAND)
    for name in BAND:
        assert from_db[name]["status"] == "pass" == from_files[name]["status"]
        for key in ("value", "threshold", "bound", "message"):
            assert from_db[name][key] == from_files[name][key], (name, key)
        assert from_db[name]["evidence"]["band_runs"] == 5
        assert from_db[name]["evidence"]["band_source"].startswith("5 promoted run(s)")
        assert from_files[name]["evidence"]["band_source"] == "5 run(s) given"
    with open_store(db) as store:
        recorded = store.run("candidate")
    assert {r.name: r.outcome.value for r in recorded.results if r.name in BAND} == {
        name: "pass" for name in BAND
    }


def test_a_band_below_its_minimum_is_an_error_naming_the_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    promote_seeds(db, (1, 2, 4, 5, 6), capsys)
    code, out, err = run(["history", "demote", "seed6", "--db", db], capsys)
    assert code == 0 and "now holds 4 promoted run(s)" in out
    code, out, err = run([*check_run(3, "--db", db), "--junit", str(tmp_path / "j.xml")], capsys)
    assert code == 1, out + err  # never a pass
    for name in BAND:
        line = next(line for line in out.splitlines() if name in line)
        assert line.lstrip().startswith("ERROR")
        assert "the band needs >= 5 reference runs, got 4 (4 promoted run(s)" in line
    assert "-- below the minimum: the band is refused" in out
    cases = {c.name: c.result for s in read_junit(tmp_path / "j.xml") for c in s.cases}
    assert cases[BAND[0]].outcome.value == "error" and cases[BAND[0]].evidence["band_runs"] == 4


def test_without_promoted_runs_the_band_checks_error_rather_than_skip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(check_run(3), capsys)  # no --db: skipped, naming the options
    assert code == 0 and "SKIP  band_curve:train/reward" in out and "--db and promoted" in out
    code, out, _ = run(check_run(3, "--db", str(tmp_path / "h.db")), capsys)
    assert code == 1 and "ERROR band_curve:train/reward" in out
    assert "got 0 (0 promoted run(s)" in out


def test_runs_of_other_hardware_or_overrides_never_join_the_band(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    promote_seeds(db, (1, 2, 4, 5, 6), capsys)
    code, out, _ = run(check_run(3, "--db", db, "--hardware", "gb200-64n4g"), capsys)
    assert code == 1 and "got 0 (0 promoted run(s) of" in out and "on gb200-64n4g" in out
    wrong = ["check-run", str(mlperf_path(MLPERF_GBS, 3)), "--recipe", str(RECIPE), "--db", db]
    code, out, err = run(wrong, capsys)  # the same run: its default id is recorded
    assert code == 2 and "is already recorded" in err and "nothing was run" in err and not out
    code, out, _ = run([*wrong, "--run-id", "gbs256-row"], capsys)
    assert code == 1 and "got 0 (0 promoted run(s)" in out  # the recipe's own GBS 256 row


def test_static_band_runs_keep_working_with_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = corpus()
    from rlgate.testing.corpus import Fault

    args = ["check-run", str(c.runs[Fault.HEALTHY]), "--recipe", str(c.recipe), "--tier",
            "convergence"]  # fmt: skip
    code, _, _ = run([*args, "--json", str(tmp_path / "a.json")], capsys)
    code_db, with_db, err = run(
        [*args, "--db", str(tmp_path / "h.db"), "--json", str(tmp_path / "b.json")], capsys
    )
    assert code == code_db == 0, err
    assert "reference band: 5 run(s) from rlgate.band.runs (minimum 5)" in with_db
    a, b = (json.loads((tmp_path / n).read_text())["checks"] for n in ("a.json", "b.json"))
    assert a == b


def test_report_draws_the_promoted_band_and_says_how_many_runs_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    junit, doc = tmp_path / "check.xml", tmp_path / "check.json"
    code, _, err = run(
        ["check-run", str(mlperf_path(256, 3)), "--recipe", str(RECIPE), "--junit", str(junit),
         "--json", str(doc)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    report = ["report", "--junit", str(junit), "--run", str(doc), "--recipe", str(RECIPE),
              "--db", db, "--nightly-id", "n7"]  # fmt: skip
    code, out, err = run([*report, "--out", str(tmp_path / "r1")], capsys)
    assert "reference band: 0 promoted run(s)" in out and "no band is drawn" in out
    assert f"history: recorded run {RECIPE_NAME}@n7" in out
    md = (tmp_path / "r1" / "report.md").read_text()
    assert "0 promoted run" in md and "below the minimum" in md
    assert "prediction band of" not in md  # the reward plot has no band
    for seed in (1, 2, 4, 5, 6):
        path = str(mlperf_path(256, seed))
        args = ["check-run", path, "--recipe", str(RECIPE), "--db", db, "--run-id", f"s{seed}"]
        assert f"recorded run s{seed}" in run(args, capsys)[1]
        assert run(["history", "promote", f"s{seed}", "--db", db], capsys)[0] == 0
    code, out, err = run([*report[:-1], "n8", "--out", str(tmp_path / "r2")], capsys)
    assert f"reference band: 5 promoted run(s) of {RECIPE_NAME} on 64n4g" in out
    md = (tmp_path / "r2" / "report.md").read_text()
    assert "5 promoted run" in md and "below the minimum" not in md
    assert "prediction band of 5 reference runs" in md  # drawn from the promoted runs


def test_runs_that_stopped_short_never_make_a_band_unless_forced_and_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five runs that stopped at step 30 of 50 (completion ERROR) would make a band that only
    covers steps 1..30: a run whose reward collapses after step 30 passes it."""
    from rlgate.runs.metrics import load_run, to_metrics_json
    from rlgate.testing.corpus import Fault, corpus_recipe, write_run

    recipe = tmp_path / "band-from-db.yaml"
    recipe.write_text(corpus_recipe().replace("runs: [band/seed_*]", "runs: []"))
    db = str(tmp_path / "h.db")
    gate = ["--recipe", str(recipe), "--tier", "convergence", "--db", db]
    for k in range(5):
        short = write_run(tmp_path / f"short{k}", Fault.STOPPED_EARLY, seed=100 + k)
        code, out, _ = run(["check-run", str(short), *gate, "--run-id", f"short{k}"], capsys)
        assert code == 1 and "ERROR completion" in out and f"recorded run short{k}" in out
        code, out, err = run(["history", "promote", f"short{k}", "--db", db], capsys)
        assert code == 2 and not out
        assert f"run 'short{k}' cannot serve a reference band: completion ERROR" in err
        assert "--force overrides these reasons" in err
    healthy = to_metrics_json(load_run(write_run(tmp_path / "healthy", Fault.HEALTHY, seed=200)))
    for step in healthy["train/reward"]:
        if int(step) > 30:
            healthy["train/reward"][step] = 0.05  # the reward collapses after step 30
    collapsed = tmp_path / "collapsed" / "metrics.json"
    collapsed.parent.mkdir()
    collapsed.write_text(json.dumps(healthy))
    code, out, _ = run(["check-run", str(collapsed), *gate, "--run-id", "refused"], capsys)
    assert "ERROR band_mean:train/reward" in out and "got 0 (0 promoted run(s)" in out

    for k in range(5):
        code, out, _ = run(["history", "promote", f"short{k}", "--db", db, "--force"], capsys)
        assert code == 0
        assert f"promoted short{k} by --force, overriding: completion ERROR (recorded" in out
    with open_store(db) as store:
        promotion = store.promotion("short0")
        assert promotion.promoted and promotion.forced
        assert promotion.overrode == ("completion ERROR",) and promotion.at is not None
        assert promotion.by  # the user who forced it
        assert not store.promotion("refused").promoted and not store.promotion("refused").forced
    code, out, _ = run(["check-run", str(collapsed), *gate, "--run-id", "forced"], capsys)
    band = next(line for line in out.splitlines() if "band_mean:train/reward" in line)
    assert band.lstrip().startswith("PASS") and "mean over steps 1..30" in band  # the cost
    assert run(["history", "demote", "short0", "--db", db], capsys)[0] == 0
    with open_store(db) as store:
        after = store.promotion("short0")
    assert not after.promoted and not after.forced and after.overrode == ()


def test_a_run_recorded_without_its_checks_is_not_promotable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    args = ["history", "record", "--db", db, "--run-dir", str(mlperf_path(MLPERF_GBS, 1)),
            "--recipe", str(RECIPE), *OVERRIDES, "--run-id", "metrics-only"]  # fmt: skip
    assert run(args, capsys)[0] == 0
    code, _, err = run(["history", "promote", "metrics-only", "--db", db], capsys)
    assert code == 2 and "no gate check passed (nothing judged the run)" in err
    assert "no completion check (nothing shows the run reached its target step)" in err
