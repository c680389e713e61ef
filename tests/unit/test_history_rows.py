"""Rows rlgate did not write: every read of the history database names table, row and column.

A history database is untrusted input like a file (docs/security.md). The databases here are
made by rlgate itself (six real MLPerf GBS-512 nightlies with their per-step metrics, five of
them promoted, and a real SWE comparison's per-instance outcomes), then altered with plain
``sqlite3`` (or plain SQL on a real PostgreSQL server) as another tool or a hand edit would.
Each corruption is read through the real commands that read its table (``history show``,
``history export``, ``history flaky``, ``history prune``, ``triage``, ``report --db``,
``check-run --db`` with a band from promoted runs): exit 2 with one ``rlgate: error:`` line
naming the table, the row and the column (and a hint), never exit 70, never a pass.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

import sqlalchemy as sa

from rlgate.cli.app import main
from rlgate.history.ingest import make_context, steps_of, swe_rows
from rlgate.history.store import VERSION_TABLE, open_store

from .helpers.cli import one_error
from .helpers.cli import run_cli as run
from .helpers.history_inputs import MLPERF_GBS, mlperf_gate, postgres_url, swe_case
from .helpers.mlperf_runs import GBS_OVERRIDES, RECIPE, mlperf_path

RECIPE_NAME = RECIPE.stem
OVERRIDES = GBS_OVERRIDES[MLPERF_GBS]
T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
TARGET = "mlperf@n6"  # the newest nightly, promoted: every reader of runs reaches it
SWE_RUN = "swe@n6"


def record_history(db: str) -> None:
    """Six nightlies of the MLPerf recipe (n2..n6 promoted) and a SWE comparison."""
    with open_store(db) as store:
        for seed in range(1, 7):
            report = mlperf_gate(seed)
            context = make_context(
                run_id=f"mlperf@n{seed}",
                recipe=RECIPE_NAME,
                branch="main",
                hardware="64n4g",
                nightly_id=f"n{seed}",
                commits={"nemo_rl": "7ea279a"},
                overrides=OVERRIDES,
                recorded_at=T0 + timedelta(days=seed),
            )
            store.record(context, [*report.results, *report.skipped], steps_of(report.inputs.run))
            if seed >= 2:
                store.promote(context.run_id)
        case = swe_case()
        context = make_context(
            run_id=SWE_RUN,
            recipe="swe_gate",
            branch="main",
            nightly_id="n6",
            recorded_at=T0 + timedelta(days=6, hours=1),
        )
        rows = swe_rows(case.before, "base") + swe_rows(case.after, "rl")
        store.record(context, case.comparison.criteria, swe=rows)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """The SQLite file rlgate wrote (copied for each corruption)."""
    path = tmp_path_factory.mktemp("history") / "history.db"
    record_history(str(path))
    assert not Path(f"{path}-wal").exists()  # closed: one file holds everything
    return path


@pytest.fixture(scope="module")
def candidate(tmp_path_factory) -> Path:
    """check-run's real JUnit of seed 1 (the triage and report candidate)."""
    out = tmp_path_factory.mktemp("candidate") / "seed1.xml"
    overrides = [a for o in OVERRIDES for a in ("--override", o)]
    args = ["check-run", str(mlperf_path(MLPERF_GBS, 1)), "--recipe", str(RECIPE), *overrides,
            "--tier", "convergence", "--junit", str(out)]  # fmt: skip
    assert main(args) in (0, 1)
    return out


def corrupt(pristine: Path, folder: Path, *statements: str) -> Path:
    """A copy of the database altered by plain ``sqlite3``, as another tool would."""
    path = folder / "corrupt.db"
    shutil.copyfile(pristine, path)
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def target_pk(pristine: Path, run_id: str = TARGET) -> int:
    conn = sqlite3.connect(pristine)
    (pk,) = conn.execute("select id from runs where run_id = ?", (run_id,)).fetchone()
    conn.close()
    return pk


@dataclass(frozen=True)
class Case:
    """A corruption: SQL on the copy (``{pk}``: the target run's key), what names it."""

    sql: tuple[str, ...]
    table: str
    column: str
    row: str  # how the message names the row ({pk}: the target run's key)
    commands: tuple[str, ...]


RUNS = ("show", "export-runs", "export-results", "triage", "prune", "changes")
RESULTS = ("show", "export-results", "triage", "changes")
ROW = "row id={pk} (run_id 'mlperf@n6')"
RESULT_ROW = "(run 'mlperf@n6', position 3)"


def _runs(set_: str, column: str, commands=RUNS, row: str = ROW) -> Case:
    return Case((f"update runs set {set_} where id = {{pk}}",), "runs", column, row, commands)


def _results(set_: str, column: str, commands=RESULTS) -> Case:
    sql = f"update results set {set_} where run_pk = {{pk}} and position = 3"
    return Case((sql,), "results", column, RESULT_ROW, commands)


CASES = {
    "commits-json-string": _runs("commits = '\"x\"'", "commits", (*RUNS, "check-run", "report")),
    "versions-not-json": _runs("versions = '{bad'", "versions"),
    "overrides-object": _runs("overrides = '{\"a\": 1}'", "overrides"),
    "recorded-at-garbage": _runs("recorded_at = 'garbage'", "recorded_at", (*RUNS, "report")),
    "recorded-at-out-of-range": _runs(
        "recorded_at = '0001-01-01 00:00:00+14:00'", "recorded_at", ("show", "prune")
    ),
    "run-id-newline": _runs("run_id = 'a' || char(10) || 'b'", "run_id", row="row id={pk}"),
    "nightly-escape": _runs(
        "nightly_id = 'n6' || char(27) || ']0;P' || char(7)", "nightly_id", (*RUNS, "check-run")
    ),
    "promoted-not-a-flag": _runs("promoted = 'yes'", "promoted", ("show", "export-runs")),
    "overrode-not-json": _runs("promotion_overrode = '{bad'", "promotion_overrode", ("show",)),
    "forced-not-a-flag": _runs("promotion_forced = 2", "promotion_forced", ("export-runs",)),
    "sha-not-hex": _runs("recipe_sha256 = 'zz'", "recipe_sha256", ("show", "triage")),
    "evidence-json-string": _results("evidence = '\"s\"'", "evidence", (*RESULTS, "report")),
    "evidence-not-json": _results("evidence = '{bad'", "evidence"),
    "tier-not-a-tier": _results("tier = 'bogus'", "tier", (*RESULTS, "report")),
    "outcome-not-an-outcome": _results("outcome = 'maybe'", "outcome"),
    "value-text": _results("value = 'abc'", "value"),
    "value-and-nan-flag": _results("value = 1.5, value_nan = 1", "value"),
    "schema-version-newer": _results("schema_version = 9", "schema_version"),
    "name-bytes": _results("name = x'00ff'", "name"),
    "negative-position": Case(
        ("update results set position = -1 where run_pk = {pk} and position = 3",),
        "results",
        "position",
        "(run 'mlperf@n6', position -1)",
        RESULTS,
    ),
    "position-twice": Case(
        ("update results set position = 2 where run_pk = {pk} and position = 3",),
        "results",
        "position",
        "(run 'mlperf@n6', position 2)",
        ("show", "export-results"),
    ),
    "step-value-null": Case(
        (
            "update step_metrics set value = NULL, value_nan = 0 where run_pk = {pk} and "
            "tag = 'train/reward' and step = 3",
        ),
        "step_metrics",
        "value",
        "row (run 'mlperf@n6', tag 'train/reward', step 3)",
        ("export-steps", "check-run"),
    ),
    "step-not-an-integer": Case(
        (
            "update step_metrics set step = 'x' where run_pk = {pk} and tag = 'train/reward' and "
            "step = 3",
        ),
        "step_metrics",
        "step",
        "row (run 'mlperf@n6', tag 'train/reward', step 'x')",
        ("export-steps", "check-run"),
    ),
    "swe-outcome-unknown": Case(
        (
            "update swe_instances set outcome = 'sideways' where instance_id = "
            "'astropy__astropy-12907' and model = 'rl'",
        ),
        "swe_instances",
        "outcome",
        "(run 'swe@n6', model 'rl', swe_run ",
        ("flaky", "export-swe"),
    ),
    "swe-instance-newline": Case(
        (
            "update swe_instances set instance_id = 'a' || char(10) || 'b' where instance_id = "
            "'astropy__astropy-12907' and model = 'rl'",
        ),
        "swe_instances",
        "instance_id",
        "(run 'swe@n6', model 'rl', swe_run ",
        ("flaky", "export-swe"),
    ),
    "two-alembic-heads": Case(
        (f"insert into {VERSION_TABLE} values ('0001')",),
        VERSION_TABLE,
        "version_num",
        "2 rows",
        ("show", "flaky"),
    ),
    "no-schema-revision": Case(
        (f"delete from {VERSION_TABLE}",),
        VERSION_TABLE,
        "version_num",
        "no row",
        ("show", "flaky"),
    ),
}


def command(name: str, db: Path, folder: Path, candidate: Path) -> list[str]:
    overrides = [a for o in OVERRIDES for a in ("--override", o)]
    return {
        "show": ["history", "show", RECIPE_NAME, "--db", str(db)],
        "changes": ["history", "changes", RECIPE_NAME, "--db", str(db)],
        "export-runs": ["history", "export", str(folder / "o.csv"), "--table", "runs"],
        "export-results": ["history", "export", str(folder / "o.csv"), "--table", "results"],
        "export-steps": ["history", "export", str(folder / "o.parquet"), "--table", "steps"],
        "export-swe": ["history", "export", str(folder / "o.csv"), "--table", "swe"],
        "flaky": ["history", "flaky", "--db", str(db)],
        "prune": ["history", "prune", "--before", "2000-01-01", "--dry-run", "--db", str(db)],
        "triage": ["triage", "--candidate", str(candidate), "--db", str(db)],
        "report": ["report", "--junit", str(candidate), "--db", str(db), "--no-plots",
                   "--out", str(folder / "report"), "--run-id", "the-report"],
        "check-run": ["check-run", str(mlperf_path(MLPERF_GBS, 1)), "--recipe", str(RECIPE),
                      *overrides, "--tier", "convergence", "--db", str(db), "--run-id", "new",
                      "--json", str(folder / "c.json")],
    }[name] + (["--db", str(db)] if name.startswith("export") else [])  # fmt: skip


def assert_named(err: str, table: str, column: str, row: str, db: str) -> None:
    message = one_error(err)
    assert "internal error" not in message and "validation error" not in message, message
    lines = message.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("  hint: "), message
    assert lines[0].startswith(f"rlgate: error: history database {db}: table {table}"), message
    assert f"column {column}" in lines[0] and row in lines[0], message
    assert "\x1b" not in message and "\x07" not in message  # what the row holds is escaped


PAIRS = [(name, cmd) for name, case in CASES.items() for cmd in case.commands]


@pytest.mark.parametrize(("name", "cmd"), PAIRS, ids=[f"{n}-{c}" for n, c in PAIRS])
def test_a_row_rlgate_did_not_write_is_exit_two_naming_table_row_and_column(
    name: str, cmd: str, pristine: Path, candidate: Path, tmp_path: Path, capsys
) -> None:
    case = CASES[name]
    pk = target_pk(pristine, SWE_RUN if case.table == "swe_instances" else TARGET)
    db = corrupt(pristine, tmp_path, *(s.replace("{pk}", str(pk)) for s in case.sql))
    before = db.read_bytes()
    code, out, err = run(command(cmd, db, tmp_path, candidate), capsys)
    assert code == 2, (out, err)
    assert_named(err, case.table, case.column, case.row.replace("{pk}", str(pk)), str(db))
    assert db.read_bytes() == before  # refused, not repaired or recorded into
    assert not (tmp_path / "report" / "report.md").exists()


def test_the_untouched_database_reads_through_every_command(
    pristine: Path, candidate: Path, tmp_path: Path, capsys
) -> None:
    """The same commands on the database as rlgate wrote it (the corruptions are the cause).

    ``report`` is INCOMPLETE (exit 3: the candidate is one tier's JUnit), the others pass or
    fail as their inputs say."""
    db = corrupt(pristine, tmp_path)
    for cmd in sorted({c for case in CASES.values() for c in case.commands}):
        code, out, err = run(command(cmd, db, tmp_path, candidate), capsys)
        assert code in (0, 1, 3) and "rlgate: error" not in err, (cmd, out, err)
    out = (tmp_path / "c.json").read_text()
    assert '"band_runs": 5' in out and '"band_source": "5 promoted run(s)' in out


# --- the same gate on a real PostgreSQL server --------------------------------------------------


@pytest.fixture(scope="module")
def pg_template() -> str:
    """The same history recorded on a real PostgreSQL server (a template for each case)."""
    url = postgres_url().replace("postgresql+psycopg://", "postgresql://")
    record_history(url)
    return url


@pytest.fixture
def pg(pg_template: str) -> str:
    """A fresh copy of the template database (PostgreSQL's CREATE DATABASE ... TEMPLATE)."""
    server, template = pg_template.rsplit("/", 1)
    name = f"{template}_{uuid.uuid4().hex[:6]}"
    engine = sa.create_engine(f"{server}/postgres".replace("postgresql://", "postgresql+psycopg://"),
                              isolation_level="AUTOCOMMIT")  # fmt: skip
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE {template}"))
    engine.dispose()
    return f"{server}/{name}"


def pg_alter(url: str, statement: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(sa.text(statement))
    engine.dispose()


PG_CASES = {
    "commits-json-string": (
        "update runs set commits = '\"x\"' where run_id = 'mlperf@n6'", "runs", "commits",
        "run_id 'mlperf@n6'", ("show", "check-run"),
    ),
    "nightly-escape": (
        "update runs set nightly_id = 'n6' || chr(27) || '[2K' where run_id = 'mlperf@n6'",
        "runs", "nightly_id", "run_id 'mlperf@n6'", ("show", "triage"),
    ),
    "negative-position": (
        "update results set position = -1 where position = 3 and run_pk = (select id from "
        "runs where run_id = 'mlperf@n6')", "results", "position",
        "(run 'mlperf@n6', position -1)", ("show",),
    ),
    "step-value-null": (
        "update step_metrics set value = NULL where step = 3 and tag = 'train/reward' and "
        "run_pk = (select id from runs where run_id = 'mlperf@n6')", "step_metrics", "value",
        "(run 'mlperf@n6', tag 'train/reward', step 3)", ("check-run", "export-steps"),
    ),
    "swe-outcome-unknown": (
        "update swe_instances set outcome = 'sideways' where model = 'rl' and instance_id = "
        "'astropy__astropy-12907'", "swe_instances", "outcome", "(run 'swe@n6', model 'rl'",
        ("flaky",),
    ),
    "two-alembic-heads": (
        f"insert into {VERSION_TABLE} values ('0001')", VERSION_TABLE, "version_num", "2 rows",
        ("show",),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PG_CASES))
def test_postgresql_rows_rlgate_did_not_write_are_named_too(
    name: str, pg: str, candidate: Path, tmp_path: Path, capsys
) -> None:
    statement, table, column, row, commands = PG_CASES[name]
    pg_alter(pg, statement)
    shown = "postgresql+psycopg" + pg.removeprefix("postgresql")
    for cmd in commands:
        args = [a if a != "DB" else pg for a in command(cmd, Path("DB"), tmp_path, candidate)]
        code, out, err = run(args, capsys)
        assert code == 2, (cmd, out, err)
        assert_named(err, table, column, row, shown)
