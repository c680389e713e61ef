"""Quarantine with a lifecycle (issue 23, item 4), on real stores (SQLite and PostgreSQL).

``rlgate history quarantine add | list | remove`` through the real CLI; entries expire by
date or by nightlies recorded after them; ``rlgate triage`` labels a quarantined failure
``quarantined`` with its reason, owner and expiry and does not block on it; ``rlgate report
--db`` says "GO with N quarantined checks". The candidates are what ``rlgate check-run``
writes for the corpus runs; the nightlies the real checks' Results.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

import sqlalchemy as sa

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.history.quarantine import Quarantine, State, active, state_of, states
from rlgate.history.store import VERSION_TABLE, open_store
from rlgate.testing.corpus import Fault

from .helpers.corpus_build import corpus
from .helpers.history_inputs import BACKENDS, database
from .helpers.triage_inputs import gate_results, nightly, recipe_name, record

STEP = "perf:timing/train/total_step_time"
TOKENS = "perf:performance/tokens_per_sec_per_gpu"


def main_nights(fault: Fault = Fault.HEALTHY, n: int = 5, **kw):
    kw.setdefault("hardware", "2n8g")
    return [nightly(k, gate_results(fault), recipe=recipe_name(), **kw) for k in range(1, n + 1)]


def later_nights(
    first: int, n: int, *, recipe: str | None = None, hardware: str = "2n8g", branch: str = "main"
):
    """Nightlies recorded after now (after a quarantine just added), as the next days' are."""
    now = datetime.now(UTC)
    out = []
    for k in range(first, first + n):
        run = nightly(k, gate_results(Fault.HEALTHY), recipe=recipe or recipe_name(),
                      hardware=hardware, branch=branch)  # fmt: skip
        when = now + timedelta(minutes=k)
        out.append(run.model_copy(update={"context": run.context.model_copy(
            update={"recorded_at": when})}))  # fmt: skip
    return out


#: a date within the year a quarantine may last (cli.quarantine.MAX_DAYS), and the day after
SOON = (datetime.now(UTC) + timedelta(days=200)).date().isoformat()
SOON_END = (datetime.now(UTC) + timedelta(days=201)).date().isoformat()


def quarantine(db: str, check: str, *extra: str, recipe: str | None = None) -> int:
    args = ["history", "quarantine", "add", check, "--recipe", recipe or recipe_name()]
    args += ["--reason", "step time flaky on 2n8g (NVBUG 123)", "--owner", "alice", "--db", db]
    expiry = () if {"--runs", "--until"} & set(extra) else ("--runs", "3")
    return main([*args, *extra, *expiry])


@pytest.fixture(scope="module")
def candidates(tmp_path_factory) -> dict[str, Path]:
    """check-run JUnit/JSON of the slow corpus run (two perf checks fail) and the healthy one."""
    out = tmp_path_factory.mktemp("candidates")
    c = corpus()
    files = {}
    for name, fault in (("slow", Fault.STEP_TIME_UP), ("healthy", Fault.HEALTHY)):
        args = ["check-run", str(c.runs[fault]), "--recipe", str(c.recipe)]
        args += ["--baseline", str(c.baseline), "--rollouts", str(c.rollouts["healthy"])]
        args += ["--junit", str(out / f"{name}.xml"), "--json", str(out / f"{name}.json")]
        main(args)
        files[name] = out / f"{name}.xml"
    return files


def triage(db: str, candidate: Path, out: Path) -> tuple[int, dict, str]:
    code = main(["triage", "--candidate", str(candidate), "--db", db, "--json", str(out)])
    return code, json.loads(out.read_text()), ""


# --- the store: entries and their lifecycle ---------------------------------------------------


class TestLifecycle:
    @pytest.mark.parametrize("backend", BACKENDS)
    def test_add_list_expire_by_runs_and_remove_kept_as_history(
        self, backend, tmp_path, capsys
    ) -> None:
        db = database(backend, tmp_path)
        record(db, main_nights())  # recorded before the entry: never counted
        assert quarantine(db, STEP, "--runs", "2") == ExitCode.OK
        out = capsys.readouterr().out
        assert f"quarantined {STEP} ({recipe_name()}): quarantine #1 by alice" in out
        assert "2 of 2 nightlies left" in out
        with open_store(db) as store:
            [s] = states(store, datetime.now(UTC))
        assert s.state is State.ACTIVE and s.runs_seen == 0
        # nightlies of another recipe, and of other hardware for a hardware-scoped entry,
        # are no nightlies of this one
        record(db, later_nights(10, 3, recipe="other-recipe"))
        # nor are runs of other branches: an experiment, bisect steps (no nightly id: each
        # would count as a nightly of its own), a canary
        record(db, later_nights(30, 3, branch="exp/faster-refit"))
        record(db, later_nights(33, 3, branch=f"bisect/{recipe_name()}/aaaa..bbbb"))
        record(db, later_nights(36, 2, branch="canary/vllm-0.26.0"))
        with open_store(db) as store:
            [s] = states(store, datetime.now(UTC))
        assert s.state is State.ACTIVE and s.runs_seen == 0
        record(db, later_nights(20, 1))
        with open_store(db) as store:
            [s] = states(store, datetime.now(UTC))
        assert (
            s.state is State.ACTIVE and s.runs_seen == 1 and s.expiry() == "1 of 2 nightlies left"
        )
        record(db, later_nights(21, 1))
        with open_store(db) as store:
            [s] = states(store, datetime.now(UTC))
            assert active(store, datetime.now(UTC)) == []
        assert s.state is State.EXPIRED and s.runs_seen == 2
        # expired: a new entry of the same scope may be added; listing shows both
        assert quarantine(db, STEP, "--until", SOON, "--hardware", "2n8g") == ExitCode.OK
        capsys.readouterr()
        assert main(["history", "quarantine", "list", "--db", db]) == ExitCode.OK
        out = capsys.readouterr().out
        assert "1 active, 1 expired, 0 removed" in out
        assert "#1  expired" in out and "#2  active" in out
        assert f"until {SOON_END}T00:00Z" in out  # a date: through that day
        assert main(["history", "quarantine", "remove", STEP, "--recipe", recipe_name(),
                     "--db", db]) == ExitCode.OK  # fmt: skip
        assert "removed quarantine #1" in capsys.readouterr().out
        listing = tmp_path / "q.json"
        main(["history", "quarantine", "list", "--all", "--db", db, "--json", str(listing)])
        assert "0 active, 0 expired, 2 removed" in capsys.readouterr().out
        entries = json.loads(listing.read_text())["entries"]
        assert [(e["id"], e["state"]) for e in entries] == [(1, "removed"), (2, "removed")]
        assert all(e["removed_at"] and e["reason"].startswith("step time") for e in entries)
        assert entries[1]["hardware"] == "2n8g" and entries[1]["until"].startswith(SOON_END)

    def test_an_entry_expires_at_its_time(self) -> None:
        added = datetime(2026, 12, 1, tzinfo=UTC)
        q = Quarantine(1, "r", "c", None, "why", "me", added, None, added + timedelta(days=1), None)
        assert state_of(q, added + timedelta(hours=23)).state is State.ACTIVE
        assert state_of(q, added + timedelta(days=1)).state is State.EXPIRED

    def test_a_second_active_entry_of_one_scope_is_refused(self, tmp_path, capsys) -> None:
        db = str(tmp_path / "h.db")
        assert quarantine(db, STEP) == ExitCode.OK
        capsys.readouterr()
        assert quarantine(db, STEP) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert err.startswith("rlgate: error: ") and "is quarantined already" in err
        assert "remove 1" in err
        # another hardware, another recipe: other scopes
        assert quarantine(db, STEP, "--runs", "1", "--hardware", "8n8g") == ExitCode.OK
        assert quarantine(db, STEP, recipe="other") == ExitCode.OK

    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            (["--reason", "a\x1b[31mred"], "reason holds a control character"),
            (["--reason", "two\nlines"], "reason holds a control character or line break"),
            (["--reason", "x" * 501], "reason is 501 characters long (at most 500)"),
            (["--owner", "o" * 101], "owner is 101 characters long (at most 100)"),
            (["--owner", "  "], "owner must be non-empty text"),
            (["--until", "2001-01-01"], "has passed"),
        ],
    )
    def test_untrusted_text_is_refused_at_input(self, tmp_path, capsys, extra, message) -> None:
        db = str(tmp_path / "h.db")
        args = ["history", "quarantine", "add", STEP, "--recipe", "r", "--reason", "ok",
                "--owner", "me", "--runs", "2", "--db", db]  # fmt: skip
        for option, value in zip(extra[::2], extra[1::2], strict=True):
            if option == "--until":
                args[args.index("--runs") : args.index("--runs") + 2] = ["--until", value]
            else:
                args[args.index(option) + 1] = value
        assert main(args) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert err.count("rlgate: error: ") == 1 and message in err and "Traceback" not in err
        with open_store(db) as store:
            assert states(store, datetime.now(UTC)) == []

    def test_bad_options_exit_2(self, tmp_path, capsys) -> None:
        db = str(tmp_path / "h.db")
        base = ["history", "quarantine", "add", STEP, "--recipe", "r", "--reason", "ok",
                "--owner", "me", "--db", db]  # fmt: skip
        assert main(base) == ExitCode.USAGE  # an entry always expires
        assert "needs an expiry: --until DATE or --runs N" in capsys.readouterr().err
        for extra in (["--runs", "0"], ["--runs", "2", "--until", "2099-01-01"],
                      ["--until", "soon"]):  # fmt: skip
            with pytest.raises(SystemExit) as exc:
                main([*base, *extra])
            assert exc.value.code == 2
        with pytest.raises(SystemExit) as exc:  # the last date: no traceback
            main([*base, "--until", "9999-12-31"])
        assert exc.value.code == 2 and "beyond the last date" in capsys.readouterr().err
        assert main([*base, "--until", "9999-12-30"]) == ExitCode.USAGE  # expires by itself
        assert "more than 366 days ahead" in capsys.readouterr().err
        assert quarantine(db, STEP) == ExitCode.OK
        capsys.readouterr()
        assert main(["history", "quarantine", "remove", "7", "--db", db]) == ExitCode.USAGE
        assert "no quarantine #7" in capsys.readouterr().err
        assert main(["history", "quarantine", "remove", STEP, "--db", db]) == ExitCode.USAGE
        assert "a check needs --recipe" in capsys.readouterr().err

    @pytest.mark.parametrize("backend", BACKENDS)
    def test_a_row_rlgate_did_not_write_is_named(self, backend, tmp_path, capsys) -> None:
        db = database(backend, tmp_path)
        assert quarantine(db, STEP) == ExitCode.OK
        with open_store(db) as store, store.engine.begin() as conn:
            conn.execute(sa.text("update quarantines set reason = :r"), {"r": "evil\x1b]0;x\x07"})
        capsys.readouterr()
        assert main(["history", "quarantine", "list", "--db", db]) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "table quarantines, row id=1, column reason" in err and "\x1b" not in err
        with open_store(db) as store, store.engine.begin() as conn:
            conn.execute(sa.text("update quarantines set reason = 'ok', runs = NULL"))
        with open_store(db) as store, pytest.raises(RlgateError, match="column until"):
            states(store, datetime.now(UTC))

    @pytest.mark.parametrize("backend", BACKENDS)
    def test_a_0003_database_upgrades_keeping_its_runs(self, backend, tmp_path) -> None:
        from alembic import command

        from rlgate.history.store import HEAD_REVISION, _alembic_config, _resolve

        db = database(backend, tmp_path)
        url, _ = _resolve(db)
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), "0003")
            assert "quarantines" not in sa.inspect(conn).get_table_names()
        engine.dispose()
        # an rlgate of revision 0003 records its runs (the same rows: no new column in runs)
        run = main_nights(n=1)[0]
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "insert into runs (run_id, recipe, commits, versions, recorded_at, "
                    "overrides, promoted, promotion_forced) values (:i, :r, '{}', '{}', :t, "
                    "'[]', :f, :f)"
                ),
                {
                    "i": "old",
                    "r": recipe_name(),
                    "t": run.context.recorded_at.replace(tzinfo=None),
                    "f": False,
                },
            )
        engine.dispose()
        with open_store(db) as store:
            assert [r.context.run_id for r in store.runs()] == ["old"]
            assert states(store, datetime.now(UTC)) == []
            with store.engine.connect() as conn:
                version = conn.execute(sa.text(f"select version_num from {VERSION_TABLE}"))
                assert version.scalar() == HEAD_REVISION == "0004"
        assert quarantine(db, STEP) == ExitCode.OK


# --- triage -----------------------------------------------------------------------------------


class TestTriage:
    @pytest.mark.parametrize("backend", BACKENDS)
    def test_quarantined_failures_are_shown_labelled_and_do_not_block(
        self, backend, tmp_path, candidates, capsys
    ) -> None:
        db = database(backend, tmp_path)
        record(db, main_nights())
        out = tmp_path / "t.json"
        code, doc, _ = triage(db, candidates["slow"], out)
        assert code == ExitCode.FAIL == doc["exit_code"]  # two regressions
        quarantine(db, STEP)
        capsys.readouterr()
        code, doc, _ = triage(db, candidates["slow"], out)
        text = capsys.readouterr().out
        assert code == ExitCode.FAIL == doc["exit_code"]  # the other check still regressed
        labels = {lb["check"]: lb for lb in doc["labels"]}
        assert labels[TOKENS]["label"] == "regression"
        step = labels[STEP]
        assert step["label"] == "quarantined" and doc["quarantined"] == 1
        assert step["quarantine"]["owner"] == "alice" and step["quarantine"]["id"] == 1
        assert step["quarantine"]["expiry"] == "3 of 3 nightlies left"
        assert "would be regression" in step["reason"]
        row = next(line for line in text.splitlines() if STEP in line)
        assert "quarantined" in row and "by alice" in row and "NVBUG 123" in row
        quarantine(db, TOKENS, "--until", SOON)
        code, doc, _ = triage(db, candidates["slow"], out)
        assert code == ExitCode.OK == doc["exit_code"] and doc["quarantined"] == 2
        assert {lb["label"] for lb in doc["labels"]} == {"quarantined"}

    def test_unrelated_entries_change_nothing_and_expiry_blocks_again(
        self, tmp_path, candidates, capsys
    ) -> None:
        db = str(tmp_path / "h.db")
        record(db, main_nights())
        out = tmp_path / "t.json"
        _, before, _ = triage(db, candidates["slow"], out)
        # another recipe's check, a check not in the run, another hardware
        quarantine(db, STEP, recipe="another-recipe")
        quarantine(db, "no_such_check")
        quarantine(db, TOKENS, "--hardware", "8n8g")
        code, after, _ = triage(db, candidates["slow"], out)
        assert code == ExitCode.FAIL and after["labels"] == before["labels"]
        assert after["quarantined"] == 0 and after["quarantined_passing"] == []
        quarantine(db, STEP, "--runs", "1")
        quarantine(db, TOKENS, "--runs", "2", "--hardware", "2n8g")
        assert triage(db, candidates["slow"], out)[0] == ExitCode.OK
        record(db, later_nights(30, 1))  # STEP's entry expires; TOKENS' has one left
        code, doc, _ = triage(db, candidates["slow"], out)
        assert code == ExitCode.FAIL == doc["exit_code"]
        assert {lb["check"]: lb["label"] for lb in doc["labels"]} == {
            STEP: "regression",
            TOKENS: "quarantined",
        }

    def test_a_quarantined_check_that_passes_is_a_candidate_for_removal(
        self, tmp_path, candidates, capsys
    ) -> None:
        db = str(tmp_path / "h.db")
        record(db, main_nights())
        quarantine(db, STEP)
        capsys.readouterr()
        code, doc, _ = triage(db, candidates["healthy"], tmp_path / "t.json")
        text = capsys.readouterr().out
        assert code == ExitCode.OK == doc["exit_code"] and doc["labels"] == []
        assert [e["check"] for e in doc["quarantined_passing"]] == [STEP]
        assert f"note: quarantined check {STEP} ({recipe_name()}) passed: a candidate for " in text
        assert "rlgate history quarantine remove 1" in text


# --- the report -------------------------------------------------------------------------------


class TestReport:
    def test_report_db_says_go_with_n_quarantined_checks(self, tmp_path, capsys) -> None:
        """The base GO evidence of every release tier and a failing perf check of a recipe."""
        from rlgate.core.junit import JunitCase, JunitSuite, write_junit
        from rlgate.core.results import Outcome, Result, Tier

        from .test_verdict_properties import BASE, swe_inputs

        swe_json, criteria = swe_inputs()
        failing = Result(name="perf:extra_check", tier=Tier.PERF, outcome=Outcome.FAIL,
                         message="4.2 s > 3.9 s")  # fmt: skip
        cases = [s.case() for s in BASE]
        cases.append(
            JunitCase.of(failing, classname="rlgate.perf.grpo-q", facts={"recipe": "grpo-q"})
        )
        junit = tmp_path / "c.xml"
        junit.write_text(write_junit([JunitSuite.of("gen", cases)]))
        crit = tmp_path / "swe.xml"
        crit.write_text(write_junit([criteria]))
        db = str(tmp_path / "h.db")

        def report(name: str) -> tuple[int, dict, str]:
            out = tmp_path / name
            args = ["report", "--junit", str(junit), str(crit), "--swe", str(swe_json), "--db",
                    db, "--no-plots", "--out", str(out), "--run-id", name]  # fmt: skip
            code = main(args)
            text = capsys.readouterr().out
            return code, json.loads((out / "report.json").read_text()), text

        code, doc, _ = report("r1")
        assert code == ExitCode.FAIL and doc["verdict"] == "NO-GO"
        quarantine(db, "perf:extra_check", "--runs", "1", recipe="grpo-q")
        capsys.readouterr()
        code, doc, text = report("r2")
        assert code == ExitCode.OK == doc["exit_code"] and doc["verdict"] == "GO"
        assert doc["verdict_text"] == "GO with 1 quarantined check" and doc["quarantined"] == 1
        assert "verdict: GO with 1 quarantined check\n" in text
        [b] = doc["blockers"]
        assert b["kind"] == "quarantined" and b["forces"] == "GO"
        assert "by alice" in b["detail"] and "NVBUG 123" in b["detail"]
        md = (tmp_path / "r2" / "report.md").read_text()
        assert "## Verdict: **GO with 1 quarantined check**" in md
        html = (tmp_path / "r2" / "report.html").read_text()
        assert ">GO with 1 quarantined check</div>" in html
        # one nightly of grpo-q recorded after the entry: --runs 1 has expired
        record(db, later_nights(40, 1, recipe="grpo-q"))
        code, doc, text = report("r3")
        assert code == ExitCode.FAIL and doc["verdict_text"] == "NO-GO"
