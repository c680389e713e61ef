"""rlgate.history.store: real Results recorded and read back on SQLite files and PostgreSQL."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from rlgate.checks.perf import Direction, build_band, evaluate_band_curve, evaluate_band_mean
from rlgate.core.errors import ExitCode, InfraError, RlgateError
from rlgate.core.results import Outcome
from rlgate.history.ingest import make_context, steps_of, swe_rows
from rlgate.history.model import RunContext
from rlgate.history.schema import Base
from rlgate.history.store import VERSION_TABLE, default_db_path, open_store
from rlgate.runs.metrics import load_run
from rlgate.swe.records import Outcome as SweOutcome
from rlgate.testing.corpus import Fault

from .helpers.corpus_build import corpus
from .helpers.history_inputs import (
    BACKENDS,
    corpus_gate,
    database,
    mlperf_gate,
    same_results,
    swe_case,
)

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def db(request, tmp_path: Path) -> str:
    return database(request.param, tmp_path)


def ctx(run_id: str, **kw) -> RunContext:
    return make_context(run_id=run_id, recipe=kw.pop("recipe", "mlperf"), **kw)


class TestRecordAndReadBack:
    def test_real_check_results_come_back_field_for_field(self, db: str) -> None:
        report = mlperf_gate(3)
        results = [*report.results, *report.skipped]
        assert {r.outcome for r in results} == {Outcome.PASS}  # the real gate passed
        context = ctx(
            "mlperf-512-s3",
            branch="main",
            commits={"nemo_rl": "7ea279a", "nemo_gym": "0.7.0"},
            versions={"vllm": "0.25.1"},
            hardware="64n4g",
            nightly_id="2026-03-01",
            recorded_at=T0,
            overrides=("grpo.num_prompts_per_step=32",),
            source="seed_3.out",
        )
        with open_store(db) as store:
            store.record(context, results)
        with open_store(db) as store:  # another connection: what was committed
            [run] = store.runs()
        assert run.context == context and not run.promoted
        assert same_results(run.results, results)
        assert [r.evidence for r in run.results] == [r.evidence for r in results]

    def test_a_nan_loss_stays_nan_and_none_stays_none(self, db: str) -> None:
        report = corpus_gate(Fault.NAN_LOSS)
        c = corpus()
        refs = [load_run(p).get("train/loss") for p in c.band_runs]
        loss = report.inputs.run.get("train/loss")
        lower = Direction.LOWER
        results = [
            *report.results,
            evaluate_band_curve(build_band(refs, alpha=0.01, warmup_steps=0, min_runs=5), loss,
                                better=lower, max_outside=0.2),
            evaluate_band_mean(build_band(refs[:2], alpha=0.01, warmup_steps=0, min_runs=5),
                               loss, better=lower),
        ]  # fmt: skip
        assert math.isnan(results[-2].value) and results[-2].outcome is Outcome.FAIL
        assert results[-1].value is None and results[-1].outcome is Outcome.ERROR
        steps = steps_of(report.inputs.run)
        assert any(math.isnan(v) for _, v in steps["train/loss"])
        with open_store(db) as store:
            store.record(ctx("nan", recipe="corpus"), results, steps)
            [run] = store.runs()
            back = store.steps("nan")
        assert same_results(run.results, results)
        for tag, points in steps.items():
            assert [(s, repr(v)) for s, v in back[tag]] == [(s, repr(v)) for s, v in points]
        assert back.keys() == steps.keys() and not any(t.startswith("ray/") for t in back)

    def test_swe_instance_outcomes_per_run_come_back(self, db: str) -> None:
        case = swe_case()
        rows = swe_rows(case.before, "base-model") + swe_rows(case.after, "rl-model")
        assert len(rows) == 2 * 2 * 500
        with open_store(db) as store:
            store.record(ctx("swe", recipe="swe_gate"), case.comparison.criteria, swe=rows)
            back = store.swe_instances(model="rl-model")
            everything = store.swe_instances()
        assert len(everything) == 2000 and {r.run_id for r in everything} == {"swe"}
        expected = {
            (run.label, o.instance_id): o.outcome
            for run in case.after.runs
            for o in run.outcomes.values()
        }
        assert {(r.swe_run, r.instance_id): r.outcome for r in back} == expected
        assert {r.outcome for r in back} <= {SweOutcome.RESOLVED, SweOutcome.UNRESOLVED}

    def test_runs_are_newest_first_and_last_counts_nightlies(self, db: str) -> None:
        results = list(mlperf_gate(3).results)
        with open_store(db) as store:
            for night in range(4):
                for recipe in ("mlperf", "corpus"):
                    store.record(
                        ctx(
                            f"{recipe}-{night}",
                            recipe=recipe,
                            nightly_id=f"n{night}",
                            branch="main" if night != 2 else "pr-7",
                            recorded_at=T0 + timedelta(days=night),
                        ),
                        results[:3],
                    )
            store.record(ctx("adhoc", recorded_at=T0 + timedelta(days=9), label="DEMO"), [])
            ids = lambda runs: [r.context.run_id for r in runs]  # noqa: E731
            assert ids(store.runs(recipe="mlperf")) == [
                "adhoc", "mlperf-3", "mlperf-2", "mlperf-1", "mlperf-0"
            ]  # fmt: skip
            assert ids(store.runs(last=2)) == ["adhoc", "corpus-3", "mlperf-3"]  # same time: id
            assert ids(store.runs(recipe="mlperf", branch="main", last=2)) == [
                "mlperf-3",
                "mlperf-1",
            ]
            assert ids(store.runs(label="DEMO")) == ["adhoc"]
            with pytest.raises(RlgateError, match="last must be >= 1"):
                store.runs(last=0)

    def test_read_back_results_equal_the_recorded_ones(self, tmp_path: Path) -> None:
        results = [*mlperf_gate(3).results, *swe_case().comparison.criteria]
        with open_store(tmp_path / "h.db") as store:
            store.record(ctx("eq"), results)
            assert store.run("eq").results == results  # no NaN here: plain equality holds

    def test_a_result_row_rlgate_did_not_write_is_named_not_returned(self, db: str) -> None:
        with open_store(db) as store:
            store.record(ctx("r1"), mlperf_gate(3).results)
            with store.engine.begin() as conn:
                conn.execute(sa.text("update results set tier = 'bogus' where position = 2"))
            pattern = r"table results, row id=\d+ \(run 'r1', position 2\), column tier: holds"
            with pytest.raises(RlgateError, match=pattern):
                store.runs()


class TestOneTransaction:
    def test_a_run_id_is_recorded_once_and_never_replaced(self, db: str) -> None:
        results = list(mlperf_gate(3).results)
        with open_store(db) as store:
            store.record(ctx("r1"), results)
            with pytest.raises(RlgateError, match="'r1' is already recorded") as caught:
                store.record(ctx("r1", branch="other"), results[:1])
            assert caught.value.exit_code == ExitCode.USAGE
            [run] = store.runs()
        assert run.context.branch is None and len(run.results) == len(results)

    def test_a_record_that_fails_half_way_stores_nothing(self, db: str) -> None:
        results = list(mlperf_gate(3).results)
        steps = {"train/loss": [(1, 0.5), (2, 0.4)], "train/reward": [(1, 0.1), (1, 0.2)]}
        with open_store(db) as store:
            with pytest.raises(RlgateError, match="step 1 given twice"):
                store.record(ctx("half"), results, steps)
            assert store.runs() == []
            with store.engine.connect() as conn:
                counts = [
                    conn.execute(sa.text(f"select count(*) from {t}")).scalar()
                    for t in ("runs", "results", "step_metrics")
                ]
        assert counts == [0, 0, 0]

    def test_the_documented_retention_statement_deletes_old_runs_whole(self, db: str) -> None:
        """docs/history.md "Retention": old unpromoted runs go, with all their rows."""
        report = mlperf_gate(3)
        steps = steps_of(report.inputs.run)
        with open_store(db) as store:
            for i, day in enumerate((T0 - timedelta(days=90), T0 - timedelta(days=80), T0)):
                store.record(ctx(f"r{i}", recorded_at=day), report.results, steps)
            store.promote("r1")
            with store.engine.begin() as conn:
                conn.execute(
                    sa.text("DELETE FROM runs WHERE recorded_at < '2026-01-01' AND NOT promoted")
                )
                left = [
                    conn.execute(sa.text(f"select count(*) from {t}")).scalar()
                    for t in ("runs", "results", "step_metrics")
                ]
            assert [r.context.run_id for r in store.runs()] == ["r2", "r1"]
        n_results, n_steps = len(report.results), sum(len(v) for v in steps.values())
        assert left == [2, 2 * n_results, 2 * n_steps]


class TestPromotion:
    def test_promote_demote_and_the_promoted_runs_of_a_recipe(self, db: str) -> None:
        report = mlperf_gate(3)
        steps = steps_of(report.inputs.run)
        with open_store(db) as store:
            for i, hw in enumerate(("64n4g", "64n4g", "32n4g")):
                store.record(ctx(f"r{i}", hardware=hw, recorded_at=T0 + timedelta(hours=i)),
                             report.results, steps)  # fmt: skip
            store.record(ctx("other-overrides", hardware="64n4g", overrides=("x=1",)),
                         report.results, steps)  # fmt: skip
            assert store.promoted("mlperf", "64n4g") == []
            for run_id in ("r0", "r1", "r2", "other-overrides"):
                store.promote(run_id)
            got = store.promoted("mlperf", "64n4g", overrides=[])
            assert [r.context.run_id for r in got] == ["r1", "r0"] and all(r.promoted for r in got)
            assert len(store.promoted("mlperf", "64n4g")) == 3
            assert store.promoted_at("r1") is not None and store.promoted_at("other-overrides")
            store.demote("r1")
            assert [r.context.run_id for r in store.promoted("mlperf", "64n4g", overrides=[])] == [
                "r0"
            ]
            assert not store.run("r1").promoted

    def test_promoting_what_cannot_serve_a_band_is_refused(self, db: str) -> None:
        failed = corpus_gate(Fault.REWARD_FLAT)
        assert any(r.outcome is Outcome.FAIL for r in failed.results)
        with open_store(db) as store:
            store.record(ctx("no-steps"), mlperf_gate(3).results)
            store.record(
                ctx("failed", recipe="corpus"), failed.results, steps_of(failed.inputs.run)
            )
            with pytest.raises(RlgateError, match="no per-step metrics"):
                store.promote("no-steps")
            with pytest.raises(
                RlgateError, match=r"cannot serve a reference band: reward_\w+ FAIL"
            ):
                store.promote("failed")
            assert store.promoted("corpus", None) == []
            store.promote("failed", force=True, by="alice")
            assert [r.context.run_id for r in store.promoted("corpus", None)] == ["failed"]
            promotion = store.promotion("failed")
            assert promotion.forced and promotion.by == "alice"
            assert {o.split()[0] for o in promotion.overrode} == {
                r.name for r in failed.results if r.outcome is Outcome.FAIL
            }

    def test_only_runs_whose_gate_checks_all_passed_are_promotable(self) -> None:
        """Completion included: a run that stopped short, or errored, is no reference."""
        from rlgate.core.results import INFRA_CAUSE
        from rlgate.history.bands import COMPLETION, promotion_blockers

        healthy = corpus_gate(Fault.HEALTHY).results
        assert promotion_blockers(healthy) == []
        assert promotion_blockers(corpus_gate(Fault.STOPPED_EARLY).results) == ["completion ERROR"]
        infra = [
            r.model_copy(update={"outcome": Outcome.ERROR, "evidence": {INFRA_CAUSE: {
                "reason": "nccl", "detail": "NCCL timeout"}}}) if r.name == COMPLETION else r
            for r in healthy
        ]  # fmt: skip
        assert promotion_blockers(infra) == ["completion ERROR, infrastructure: nccl"]
        skipped = [r.model_copy(update={"outcome": Outcome.SKIP}) for r in healthy]
        assert promotion_blockers(skipped) == [
            "no gate check passed (nothing judged the run)",
            "completion SKIP (nothing shows the run reached its target step)",
        ]
        without = [r for r in healthy if r.name != COMPLETION]
        assert promotion_blockers(without) == [
            "no completion check (nothing shows the run reached its target step)"
        ]
        info = [r.model_copy(update={"informational": "benchmark"}) for r in healthy]
        assert "no gate check passed (nothing judged the run)" in promotion_blockers(info)

    def test_the_completion_name_is_the_check_kinds(self) -> None:
        from rlgate.checks.kinds.completion import Completion
        from rlgate.history.bands import COMPLETION

        assert Completion.name == COMPLETION

    def test_a_run_id_that_does_not_exist_is_named(self, db: str) -> None:
        with open_store(db) as store:
            calls = (store.promote, store.demote, store.run, store.steps, store.promoted_at)
            for call in (*calls, store.promotion):
                with pytest.raises(RlgateError, match="no run 'nope' in the history database"):
                    call("nope")


class TestOpening:
    def test_the_default_is_rlgate_db_then_the_user_data_dir(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("RLGATE_DB", raising=False)
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        assert default_db_path() == tmp_path / "data" / "rlgate" / "history.db"
        with open_store(None) as store:
            assert store.path == (tmp_path / "data" / "rlgate" / "history.db").resolve()
        monkeypatch.setenv("RLGATE_DB", str(tmp_path / "env.db"))
        with open_store(None) as store:
            assert store.path == (tmp_path / "env.db").resolve()
        assert (tmp_path / "env.db").read_bytes().startswith(b"SQLite format 3\x00")

    def test_sqlite_is_in_wal_mode(self, tmp_path: Path) -> None:
        with open_store(tmp_path / "h.db"):
            pass
        conn = sqlite3.connect(tmp_path / "h.db")
        assert conn.execute("pragma journal_mode").fetchone() == ("wal",)
        assert conn.execute(f"select version_num from {VERSION_TABLE}").fetchone() == ("0004",)

    @pytest.mark.parametrize(
        ("target", "message"),
        [
            ("folder", "is a directory"),
            ("missing/h.db", "does not exist"),
            ("text.db", "is not an SQLite database (it starts with b'not a database"),
            ("sqlite://", "an in-memory database would lose what is recorded"),
            ("sqlite:///:memory:", "an in-memory database would lose what is recorded"),
            ("mysql://u:secret@db/x", "unsupported database 'mysql'"),
            ("postgresql+psycopg2://u:secret@db/x", "unsupported database"),
            ("postgresql://u:secret@/x", "no host"),
            ("postgresql://u:secret@db:notaport/x", "cannot be parsed"),
        ],
    )
    def test_a_bad_path_or_url_is_exit_two_naming_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
    ) -> None:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "folder").mkdir()
        (tmp_path / "text.db").write_text("not a database, just text\n")
        with pytest.raises(RlgateError) as caught:
            open_store(target)
        assert message in str(caught.value) and caught.value.exit_code == ExitCode.USAGE
        assert "secret" not in str(caught.value)
        assert (tmp_path / "text.db").read_text() == "not a database, just text\n"

    def test_a_corrupt_sqlite_file_is_named_not_a_traceback(self, tmp_path: Path) -> None:
        path = tmp_path / "h.db"
        with open_store(path):
            pass
        data = bytearray(path.read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree, after the header
        path.write_bytes(bytes(data))
        with pytest.raises(RlgateError, match=rf"history database {path}: .*malformed"):
            with open_store(path) as store:
                store.runs()

    def test_another_applications_database_is_refused_and_left_alone(self, tmp_path: Path) -> None:
        path = tmp_path / "app.db"
        conn = sqlite3.connect(path)
        conn.execute("create table users (name text)")
        conn.commit()
        conn.close()
        with pytest.raises(RlgateError, match=r"not an rlgate history database.*\(users\)"):
            open_store(path)
        tables = sqlite3.connect(path).execute("select name from sqlite_master").fetchall()
        assert tables == [("users",)]

    def test_a_database_from_a_newer_rlgate_is_refused(self, db: str) -> None:
        with open_store(db) as store:
            with store.engine.begin() as conn:
                conn.execute(sa.text(f"update {VERSION_TABLE} set version_num = '0099'"))
        with pytest.raises(RlgateError, match="revision '0099', which this rlgate does not know"):
            open_store(db)

    def test_an_unreachable_server_is_an_infra_error_without_the_password(
        self, tmp_path: Path
    ) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # bound, not listening: connections are refused
            with pytest.raises(InfraError) as caught:
                open_store(f"postgresql://rlgate:hunter2@127.0.0.1:{port}/history")
        text = str(caught.value)
        assert caught.value.exit_code == ExitCode.INFRA and "hunter2" not in text
        assert f"postgresql+psycopg://rlgate:***@127.0.0.1:{port}/history" in text
        assert "\n  hint:" in text and text.count("\n") == 1


class TestSchema:
    def test_the_head_revision_constant_is_alembics(self) -> None:
        from alembic.script import ScriptDirectory

        from rlgate.history.store import HEAD_REVISION, MIGRATIONS

        assert ScriptDirectory(str(MIGRATIONS)).get_current_head() == HEAD_REVISION

    def test_a_database_at_head_opens_without_importing_alembic(self, tmp_path: Path) -> None:
        import subprocess
        import sys

        path = tmp_path / "h.db"
        code = (
            "import sys; from rlgate.history.store import open_store\n"
            f"with open_store({str(path)!r}) as s: s.runs()\n"
            "print('alembic' in sys.modules)"
        )
        first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert (first.stdout, again.stdout) == ("True\n", "False\n"), (first.stderr, again.stderr)

    def test_the_tables_are_what_the_migrations_build(self, db: str) -> None:
        with open_store(db) as store, store.engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            assert compare_metadata(context, Base.metadata) == []

    def test_an_older_database_is_upgraded_keeping_its_rows(self, db: str) -> None:
        """A database left at revision 0001 by an older rlgate, with a run in it."""
        from alembic import command

        from rlgate.history.store import HEAD_REVISION, _alembic_config, _resolve

        url, _ = _resolve(db)
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), "0001")
            columns = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
            assert "promoted_at" not in columns  # really the old schema
            conn.execute(
                sa.text(
                    "insert into runs (run_id, recipe, commits, versions, recorded_at, "
                    "overrides, promoted) values ('old', 'mlperf', '{}', '{}', :t, '[]', :p)"
                ),
                {"t": T0.replace(tzinfo=None), "p": True},
            )
            conn.execute(
                sa.text(
                    "insert into results (run_pk, position, name, tier, outcome, value, "
                    "value_nan, unit, bound, message, evidence, informational, "
                    "schema_version, threshold_nan) values (1, 0, 'completion', 'convergence', "
                    "'pass', 20.0, :f, 'step', '>= 20 step', 'ok', '{}', '', 1, :f)"
                ),
                {"f": False},
            )
            conn.execute(
                sa.text(
                    "insert into step_metrics (run_pk, tag, step, value, value_nan) "
                    "values (1, 'train/loss', 1, 0.5, :f)"
                ),
                {"f": False},
            )
        engine.dispose()
        with open_store(db) as store:
            [run] = store.runs()
            assert run.context.run_id == "old" and run.promoted
            assert run.context.recorded_at == T0
            assert [(r.name, r.value, r.bound) for r in run.results] == [
                ("completion", 20.0, ">= 20 step")
            ]
            assert store.promoted_at("old") is None
            store.demote("old")
            assert store.promoted_at("old") is not None
        with open_store(db) as store:
            promotion = store.promotion("old")
            assert store.steps("old") == {"train/loss": [(1, 0.5)]}  # kept by every revision
            with store.engine.connect() as conn:
                version = conn.execute(sa.text(f"select version_num from {VERSION_TABLE}"))
                version = version.scalar()
        assert version == HEAD_REVISION == "0004"
        assert not promotion.forced and promotion.overrode == () and promotion.by is None
