"""``Store.prune`` / ``rlgate history prune``: old runs go with their rows; promoted runs and
the newest nightlies stay; one transaction, on SQLite and PostgreSQL.

Nightlies hold real Results (the corpus gated by its checks), per-step values and SWE
instance outcomes; what is checked is which runs and rows remain.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.history.model import SweInstanceRow
from rlgate.history.store import open_store
from rlgate.history.triage import triage
from rlgate.testing.corpus import Fault

from .helpers.history_inputs import BACKENDS, database
from .helpers.triage_inputs import T0, gate_results, nightly

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

STEPS = {"train/reward": [(1, 0.1), (2, 0.25)]}
SWE_IDS = ("astropy__astropy-12907", "django__django-11099", "sympy__sympy-24539")


def swe() -> list[SweInstanceRow]:
    outcomes = ("resolved", "unresolved", "error")
    return [
        SweInstanceRow(model="base", swe_run="seed0", instance_id=i, outcome=o)
        for i, o in zip(SWE_IDS, outcomes, strict=True)
    ]


def fill(db: str) -> list:
    """10 main nightlies of two runs each, 3 of a PR branch; n02's first run promoted."""
    runs = [
        nightly(k, gate_results(Fault.HEALTHY), part=part, hours=h)
        for k in range(1, 11)
        for part, h in (("a", 0.0), ("b", 1.0))
    ]
    runs += [nightly(k, gate_results(Fault.HEALTHY), branch="pr") for k in range(1, 4)]
    with open_store(db) as store:
        for run in runs:
            store.record(run.context, run.results, STEPS, swe())
        store.promote("n02-a-main")
    return runs


def counts(store) -> dict[str, int]:
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        return {
            t: conn.execute(sa.text(f"select count(*) from {t}")).scalar_one()
            for t in ("runs", "results", "step_metrics", "swe_instances")
        }


@pytest.mark.parametrize("backend", BACKENDS)
def test_old_runs_go_with_their_rows_promoted_and_newest_stay(backend, tmp_path) -> None:
    db = database(backend, tmp_path)
    fill(db)
    doomed = {f"n{k:02d}-{p}-main" for k in range(1, 8) for p in "ab"} - {"n02-a-main"}
    per_run = len(gate_results(Fault.HEALTHY))
    with open_store(db) as store:
        before = counts(store)
        dry = store.prune(before=T0 + timedelta(days=8), keep_last=3, dry_run=True)
        assert set(dry.run_ids) == doomed and dry.dry_run and dry.promoted_kept == 1
        assert counts(store) == before  # a dry run deletes nothing
        done = store.prune(before=T0 + timedelta(days=8), keep_last=3)
        assert set(done.run_ids) == doomed
        assert (done.results, done.steps, done.swe) == (13 * per_run, 13 * 2, 13 * 3)
        after = counts(store)
        left = {r.context.run_id for r in store.runs()}
    assert after == {
        "runs": before["runs"] - 13,
        "results": before["results"] - 13 * per_run,
        "step_metrics": before["step_metrics"] - 13 * 2,
        "swe_instances": before["swe_instances"] - 13 * 3,
    }  # no orphan row: the cascades ran on both databases
    assert "n02-a-main" in left and {"n01-checks-pr", "n08-a-main", "n10-b-main"} <= left
    assert not left & doomed


def test_what_triage_looks_back_over_is_kept(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    fill(db)
    slow = gate_results(Fault.STEP_TIME_UP)
    with open_store(db) as store:
        was = triage(slow, store.runs(), last=3)
        store.prune(before=T0 + timedelta(days=30), keep_last=3)
        now = triage(slow, store.runs(), last=3)
    assert [(lb.check, lb.label, lb.window) for lb in was] == [
        (lb.check, lb.label, lb.window) for lb in now
    ]
    with open_store(db) as store, pytest.raises(RlgateError, match="keep_last must be >= 0"):
        store.prune(before=T0, keep_last=-1)


def test_cli_dry_run_then_prune_and_bad_dates(tmp_path, capsys) -> None:
    db = str(tmp_path / "h.db")
    fill(db)
    args = ["history", "prune", "--db", db, "--keep-last", "3", "--before", "2026-02-09"]
    assert main([*args, "--dry-run"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "would delete 13 run(s) recorded before 2026-02-09T00:00:00+00:00" in out
    assert "kept every promoted run (1 of them old enough)" in out and "  n01-a-main" in out
    assert main(args) == ExitCode.OK
    out = capsys.readouterr().out
    assert "deleted 13 run(s)" in out and "VACUUM" in out
    assert main(args) == ExitCode.OK and "deleted 0 run(s)" in capsys.readouterr().out
    for bad in ("yesterday", "2026-13-01", "2026-02-09; DROP TABLE runs"):
        with pytest.raises(SystemExit) as exc:
            main(["history", "prune", "--db", db, "--before", bad])
        assert exc.value.code == ExitCode.USAGE
        assert "is not an ISO date or time" in capsys.readouterr().err
    with open_store(db) as store:
        assert len(store.runs()) == 20 + 3 - 13
