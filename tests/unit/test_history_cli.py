"""``rlgate history record | show | export | promote | demote`` and ``--db`` on the commands.

Inputs are what the real commands write (check-run's JUnit and JSON over the MLPerf runs,
swe compare over SWE-bench Verified); every bad input is exit 2 with one message, never a
traceback, and leaves the database and the inputs as they were.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.cli.app import main
from rlgate.core.junit import read_junit
from rlgate.history.store import open_store

from . import helpers
from .helpers import swe_inputs as si
from .helpers.cli import one_error
from .helpers.cli import run_cli as run
from .helpers.history_inputs import BACKENDS, database, same_results
from .helpers.mlperf_runs import RECIPE, mlperf_path

RECIPE_NAME = RECIPE.stem


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, Path]:
    """check-run's real JUnit and JSON for two MLPerf GBS-256 runs (seed 2 baseline)."""
    root = tmp_path_factory.mktemp("checked")
    out = {}
    for seed in (1, 3):
        junit, doc = root / f"s{seed}.xml", root / f"s{seed}.json"
        assert (
            main(
                [
                    "check-run",
                    str(mlperf_path(256, seed)),
                    "--recipe",
                    str(RECIPE),
                    "--baseline",
                    str(mlperf_path(256, 2)),
                    "--junit",
                    str(junit),
                    "--json",
                    str(doc),
                ]
            )
            == 0
        )
        out[f"junit{seed}"], out[f"json{seed}"] = junit, doc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_record_show_export_round_trip(
    backend: str, checked, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = database(backend, tmp_path)
    for seed, night in ((1, "2026-03-01"), (3, "2026-03-02")):
        code, out, err = run(
            [
                "history",
                "record",
                "--db",
                db,
                "--junit",
                str(checked[f"junit{seed}"]),
                "--run-dir",
                str(mlperf_path(256, seed)),
                "--nightly-id",
                night,
                "--branch",
                "main",
                "--commit",
                "nemo_rl=7ea279a",
                "--commit",
                "nemo_gym=0.7.0",
                "--recipe",
                str(RECIPE),
            ],
            capsys,
        )
        assert code == 0, err
        assert f"recorded run {RECIPE_NAME}@{night} (recipe {RECIPE_NAME}, nightly {night})" in out
    expected = [c.result for s in read_junit(checked["junit3"]) for c in s.cases]
    with open_store(db) as store:
        newest = store.runs(recipe=RECIPE_NAME)[0]
        assert same_results(newest.results, expected)
        assert newest.context.commits == {"nemo_rl": "7ea279a", "nemo_gym": "0.7.0"}
        assert newest.context.hardware == "64n4g" and len(newest.context.recipe_sha256) == 64
        assert newest.context.versions["rlgate"]  # the JUnit's rlgate.version.* properties
        assert "train/reward" in store.steps(newest.context.run_id)

    code, out, err = run(["history", "show", RECIPE_NAME, "--db", db], capsys)
    assert code == 0, err
    assert f"{RECIPE_NAME}@2026-03-01 / 2026-03-01 / main / nemo_gym=0.7.0 nemo_rl=7ea279a" in out
    assert "  completion" in out and "reward_improvement" in out
    perf = next(line for line in out.splitlines() if "perf:timing/train/total_step_time" in line)
    assert perf.split()[1] == ".."  # passed in both nightlies
    code, out, err = run(
        ["history", "show", RECIPE_NAME, "--db", db, "--check", "completion", "--last", "1"],
        capsys,
    )
    assert code == 0 and "1 run(s)" in out and "check completion:" in out
    assert "  1  PASS" in out and "2026-03-02" in out and "2026-03-01" not in out

    csv, parquet = tmp_path / "r.csv", tmp_path / "r.parquet"
    code, out, err = run(["history", "export", str(csv), "--db", db], capsys)
    assert code == 0 and f"exported {2 * len(expected)} results rows" in out
    code, out, err = run(
        ["history", "export", str(parquet), "--db", db, "--table", "steps"], capsys
    )
    assert code == 0, err
    text = pa_csv.ConvertOptions(column_types={"nightly_id": pa.string()})
    rows = pa_csv.read_csv(csv, convert_options=text).to_pylist()
    mine = [r for r in rows if r["nightly_id"] == "2026-03-02"]
    assert [r["name"] for r in mine] == [r.name for r in expected]
    assert [r["outcome"] for r in mine] == [r.outcome.value for r in expected]
    steps = pq.read_table(parquet).to_pylist()
    with open_store(db) as store:
        reward = store.steps(f"{RECIPE_NAME}@2026-03-02")["train/reward"]
    exported = [
        (r["step"], r["value"])
        for r in steps
        if r["nightly_id"] == "2026-03-02" and r["tag"] == "train/reward"
    ]
    assert exported == reward


def test_check_run_and_swe_compare_record_as_they_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    code, out, err = run(
        [
            "check-run",
            str(mlperf_path(256, 1)),
            "--recipe",
            str(RECIPE),
            "--db",
            db,
            "--nightly-id",
            "n1",
            "--json",
            str(tmp_path / "c.json"),
        ],
        capsys,
    )
    # the recipe's band has no static runs: with --db it is built from promoted runs, and
    # none is promoted yet, so its checks are errors (without --db they are skipped)
    assert code == 1, err
    assert "ERROR band_curve:train/reward" in out and "got 0 (0 promoted run(s)" in out
    assert f"history: recorded run {RECIPE_NAME}@n1" in out
    doc = json.loads((tmp_path / "c.json").read_text())
    with open_store(db) as store:
        [run_] = store.runs()
        assert [r.name for r in run_.results] == [c["name"] for c in doc["checks"] + doc["skipped"]]
        assert run_.context.source.startswith(str(mlperf_path(256, 1)))
        assert store.steps(run_.context.run_id)["train/loss"]

    from .helpers.history_inputs import swe_case

    case = swe_case()
    before = [run.label for run in case.before.runs]
    after = [run.label for run in case.after.runs]
    compare = [
        "swe",
        "compare",
        "--before",
        *before,
        "--after",
        *after,
        "--dataset",
        str(si.DATASET),
        "--resamples",
        "1000",
        "--db",
        db,
        "--nightly-id",
        "n1",
    ]
    code, out, err = run(compare, capsys)
    assert code == 2 and "give --before-model and --after-model" in one_error(err)
    code, out, err = run([*compare, "--before-model", "base", "--after-model", "rl"], capsys)
    assert code in (0, 1), err
    assert "history: recorded run swe_gate@n1" in out and "2000 SWE instance outcomes" in out
    with open_store(db) as store:
        swe = store.run("swe_gate@n1")
        assert [r.name for r in swe.results] == [r.name for r in case.comparison.criteria]
        rows = store.swe_instances(model="base")
    assert len(rows) == 1000 and {r.swe_run for r in rows} == set(before)


class TestUntrustedInput:
    def test_a_file_that_is_not_a_database_is_exit_two_and_left_alone(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        bogus = tmp_path / "notes.txt"
        bogus.write_text("my notes\n")
        for args in (
            ["history", "show", "x", "--db", str(bogus)],
            ["history", "promote", "x", "--db", str(bogus)],
            ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--db", str(bogus)],
        ):
            code, out, err = run(args, capsys)
            assert code == 2 and "is not an SQLite database" in one_error(err), args
            assert not out  # stopped before any work
        assert bogus.read_text() == "my notes\n"

    @pytest.mark.parametrize(
        ("db", "message"),
        [
            ("mysql://me:pw@host/db", "unsupported database 'mysql'"),
            ("postgresql://me:pw@host:port/db", "cannot be parsed"),
            ("{tmp}", "is a directory"),
            ("{tmp}/no/such/h.db", "does not exist"),
        ],
    )
    def test_a_bad_database_path_or_url_is_exit_two(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], db: str, message: str
    ) -> None:
        code, _, err = run(["history", "show", "x", "--db", db.format(tmp=tmp_path)], capsys)
        assert code == 2 and message in one_error(err) and ":pw@" not in err

    def test_an_empty_db_option_is_refused_not_ignored(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        args = ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--db", ""]
        code, out, err = run(args, capsys)
        assert code == 2 and "history database '' is empty" in one_error(err) and not out

    def test_a_run_id_that_does_not_exist_is_exit_two(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        db = str(tmp_path / "h.db")
        open_store(db).close()  # a history database, with no runs (read commands create none)
        for action in ("promote", "demote"):
            code, _, err = run(["history", action, "nightly-42", "--db", db], capsys)
            assert code == 2
            assert "no run 'nightly-42' in the history database" in one_error(err)
        code, _, err = run(["history", "show", "no-such-recipe", "--db", db], capsys)
        assert code == 2 and "no runs of recipe 'no-such-recipe'" in one_error(err)

    @pytest.mark.parametrize("backend", BACKENDS)
    def test_read_only_commands_create_no_database(
        self,
        backend: str,
        checked,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """show, export, flaky, prune, promote, demote and triage read a history; none
        makes one: no file, no default folder, no schema in an empty PostgreSQL database."""
        db = database(backend, tmp_path)
        reads = [
            ["history", "show", RECIPE_NAME],
            ["history", "export", str(tmp_path / "r.csv")],
            ["history", "flaky"],
            ["history", "prune", "--before", "2000-01-01"],
            ["history", "promote", "nightly-1"],
            ["history", "demote", "nightly-1"],
            ["triage", "--candidate", str(checked["junit1"])],
        ]
        shown = db if backend == "sqlite" else "postgresql+psycopg://"
        for args in reads:
            code, out, err = run([*args, "--db", db], capsys)
            assert code == 2 and "no history database at " in one_error(err), (args, err)
            assert shown in err and not out, err
        assert sorted(tmp_path.iterdir()) == []  # no h.db (-wal, -shm), no r.csv
        if backend == "postgresql":
            sa = pytest.importorskip("sqlalchemy")
            engine = sa.create_engine(db)
            try:
                with engine.connect() as conn:
                    assert sa.inspect(conn).get_table_names() == []
            finally:
                engine.dispose()
        else:  # the default database: $RLGATE_DB unset, the XDG folder is not created either
            monkeypatch.delenv("RLGATE_DB", raising=False)
            monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
            code, _, err = run(["history", "flaky"], capsys)
            default = tmp_path / "xdg" / "rlgate" / "history.db"
            assert code == 2 and f"no history database at {default}" in one_error(err), err
            assert not (tmp_path / "xdg").exists()
        # a recording command creates it as before; then the reads find it
        record = ["history", "record", "--db", db, "--junit", str(checked["junit1"])]
        code, _, err = run([*record, "--run-id", "nightly-1"], capsys)
        assert code == 0, err
        code, out, err = run(["history", "show", RECIPE_NAME, "--db", db], capsys)
        assert code == 0 and "nightly-1" in out, err

    def test_bad_context_values_are_named(
        self, checked, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        db = str(tmp_path / "h.db")
        base = ["history", "record", "--db", db, "--junit", str(checked["junit1"])]
        code, _, err = run([*base, "--run-id", "a\x1b[31mb"], capsys)
        assert code == 2 and "--run-id" in one_error(err) and "control character" in err
        code, _, err = run([*base, "--commit", "nemo_rl"], capsys)
        assert code == 2 and "--commit 'nemo_rl' is not KEY=VALUE" in one_error(err)
        code, _, err = run(["history", "record", "--db", db], capsys)
        assert code == 2 and "nothing to record" in one_error(err)
        with open_store(db) as store:
            assert store.runs() == []

    @pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
    @pytest.mark.parametrize("action", ["record", "show"])
    def test_a_database_file_with_another_name_is_exit_two_and_left_alone(
        self, checked, tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix, action
    ) -> None:
        """A hard link is refused as SQLite refuses a symbolic link: it would write through it.

        Regression story: a ``-wal`` hard-linked to another file was overwritten with the
        log of the next ``history record`` (the output guard knew it as an input, but SQLite
        itself writes there).
        """
        db = tmp_path / "h.db"
        record = ["history", "record", "--db", str(db), "--junit", str(checked["junit1"]),
                  "--recipe", RECIPE_NAME]  # fmt: skip
        assert run([*record, "--run-id", "first"], capsys)[0] == 0
        other = tmp_path / "other.txt"
        if suffix:
            other.write_bytes(b"precious\n" * 1000)
            os.link(other, f"{db}{suffix}")
        else:
            os.link(db, other)  # a second name of the database itself
        kept = {p: p.read_bytes() for p in (db, other)}
        argv = [*record, "--run-id", "second"] if action == "record" else [
            "history", "show", RECIPE_NAME, "--db", str(db)]  # fmt: skip
        code, out, err = run(argv, capsys)
        assert code == 2, out + err
        line = one_error(err)
        assert f"{db}{suffix}" in line and "2 names (hard links)" in line, err
        assert {p: p.read_bytes() for p in (db, other)} == kept
        assert Path(f"{db}{suffix}").exists() and not out

    def test_a_companion_that_is_a_symbolic_link_is_named(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        db = tmp_path / "h.db"
        with open_store(db):
            pass
        (tmp_path / "other.txt").write_text("kept\n")
        Path(f"{db}-wal").symlink_to(tmp_path / "other.txt")
        code, _, err = run(["history", "flaky", "--db", str(db)], capsys)
        assert code == 2 and f"{db}-wal is a symbolic link (to " in one_error(err)
        assert (tmp_path / "other.txt").read_text() == "kept\n"

    def test_export_never_writes_over_the_database(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        db = tmp_path / "h.db"
        with open_store(db):
            pass
        before = db.read_bytes()
        code, _, err = run(
            ["history", "export", str(db), "--db", str(db), "--format", "csv"], capsys
        )
        assert code == 2 and "one of the inputs" in one_error(err)
        assert db.read_bytes() == before
        code, _, err = run(["history", "export", str(tmp_path / "x.txt"), "--db", str(db)], capsys)
        assert code == 2 and "--format csv|parquet" in one_error(err)


def corpus_check_run(fault, db: str, run_id: str) -> list[str]:
    """``check-run`` of the corpus run with ``fault``, convergence tier, recorded as ``run_id``."""
    from .helpers.corpus_build import corpus

    c = corpus()
    return ["check-run", str(c.runs[fault]), "--recipe", str(c.recipe), "--tier",
            "convergence", "--db", db, "--run-id", run_id]  # fmt: skip


def test_promote_refuses_a_failed_run_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlgate.testing.corpus import Fault

    db = str(tmp_path / "h.db")
    code, out, _ = run(corpus_check_run(Fault.REWARD_FLAT, db, "flat"), capsys)
    assert code == 1 and "recorded run flat" in out
    code, _, err = run(["history", "promote", "flat", "--db", db], capsys)
    assert code == 2 and "cannot serve a reference band" in one_error(err)
    assert "reward_improvement FAIL" in err
    code, out, _ = run(["history", "promote", "flat", "--db", db, "--force"], capsys)
    assert code == 0 and "now holds 1 promoted run(s)" in out
    assert "promoted flat by --force, overriding: " in out and "reward_improvement FAIL" in out


def test_a_nan_value_is_exported_as_nan(tmp_path: Path, capsys) -> None:
    from rlgate.testing.corpus import Fault

    db = str(tmp_path / "h.db")
    args = corpus_check_run(Fault.NAN_LOSS, db, "nan")
    assert run(args, capsys)[0] == 1
    out = tmp_path / "steps.parquet"
    assert run(["history", "export", str(out), "--db", db, "--table", "steps"], capsys)[0] == 0
    loss = [r["value"] for r in pq.read_table(out).to_pylist() if r["tag"] == "train/loss"]
    assert any(math.isnan(v) for v in loss) and not any(v is None for v in loss)


def test_without_the_history_extra_a_history_command_exits_three_naming_it(
    tmp_path: Path,
) -> None:
    code = (
        "import sys; sys.modules['sqlalchemy'] = None; from rlgate.cli.app import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(helpers.REPO_ROOT / "src")}
    db = str(tmp_path / "h.db")
    for args in (
        ["history", "show", "x", "--db", db],
        ["check-run", str(mlperf_path(256, 1)), "--recipe", str(RECIPE), "--db", db],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 3, proc.stderr
        assert "'sqlalchemy', which is not installed" in proc.stderr
        assert "pip install 'rlgate[history]'" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "check-run",
            str(mlperf_path(256, 1)),
            "--recipe",
            str(RECIPE),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr  # without --db nothing needs the extra
    assert not Path(db).exists()


def test_check_run_reads_the_context_from_the_run_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """launch (local, NeMo RL's layout, the stand-in driver) -> watch -> check-run --db."""
    from rlgate.launch.manifest import load_manifest
    from rlgate.launch.site import SiteConfig

    from .helpers.launch_fixtures import ONE_NODE, STANDIN, TARGET, nemo_rl_checkout, swe_env

    repo, nemo_rl, gym = nemo_rl_checkout(tmp_path)
    site = tmp_path / "site.yaml"
    site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
    launch = ["launch", str(TARGET), *ONE_NODE, "--backend", "local", "--site", str(site),
              "--entrypoint", " ".join(STANDIN), "--run-dir", str(tmp_path / "night-7"),
              "--nemo-rl-dir", str(repo), "--no-check", "--steps", "20"]  # fmt: skip
    assert main(launch) == 0
    assert main(["watch", str(tmp_path / "night-7"), "--interval", "0.2"]) == 0
    capsys.readouterr()
    manifest = load_manifest(tmp_path / "night-7")
    db = str(tmp_path / "h.db")
    args = ["check-run", str(tmp_path / "night-7" / "logs"), "--recipe", str(TARGET),
            *(a for o in ONE_NODE for a in ("--override", o)), "--tier", "convergence",
            "--db", db, "--branch", "main"]  # fmt: skip
    code, out, err = run(args, capsys)
    assert code == 1, out + err  # the recipe's band: no promoted run yet (an ERROR)
    assert "16 passed, 2 failed or errored" in out and "got 0 (0 promoted run(s)" in out
    assert f"recorded run {manifest.run_name} (recipe {TARGET.stem})" in out
    with open_store(db) as store:
        context = store.run(manifest.run_name).context
    assert context.commits == {"nemo_rl": nemo_rl, "nemo_gym": gym}
    assert context.recipe_sha256 == manifest.recipe.sha256
    assert context.hardware == f"1n{manifest.gpus_per_node}g" and context.branch == "main"
    assert context.versions == manifest.versions
    assert context.overrides == ONE_NODE


def test_record_takes_check_run_and_swe_json_and_swe_results(
    checked, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .helpers.history_inputs import swe_case

    case = swe_case()
    before = [run.label for run in case.before.runs]
    after = [run.label for run in case.after.runs]
    swe_json = tmp_path / "swe.json"
    compare = ["swe", "compare", "--before", *before, "--after", *after, "--dataset",
               str(si.DATASET), "--resamples", "1000", "--json", str(swe_json)]  # fmt: skip
    assert run(compare, capsys)[0] in (0, 1)
    db = str(tmp_path / "h.db")
    code, out, err = run(
        ["history", "record", "--db", db, "--run-json", str(checked["json3"]), "--swe-json",
         str(swe_json), "--swe-run", f"rl={after[0]}", "--swe-run", f"rl={after[1]}",
         "--dataset", str(si.DATASET), "--nightly-id", "n3"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "1000 SWE instance outcomes" in out  # 2 runs x 500 instances
    doc = json.loads(checked["json3"].read_text())
    criteria = json.loads(swe_json.read_text())["criteria"]
    with open_store(db) as store:
        recorded = store.run(f"{RECIPE_NAME}@n3")  # the recipe the run JSON names
        rows = store.swe_instances(model="rl")
    names = [c["name"] for c in doc["checks"] + doc["skipped"]] + [c["name"] for c in criteria]
    assert [r.name for r in recorded.results] == names
    assert {r.swe_run for r in rows} == set(after)
    expected = {(r.label, iid): o.outcome for r in case.after.runs for iid, o in r.outcomes.items()}
    assert {(r.swe_run, r.instance_id): r.outcome for r in rows} == expected
    code, _, err = run(["history", "record", "--db", db, "--swe-run", "rl", "--dataset",
                        str(si.DATASET), "--run-id", "x"], capsys)  # fmt: skip
    assert code == 2 and "--swe-run 'rl' is not KEY=VALUE" in one_error(err)


def test_a_contradictory_testcase_is_recorded_as_the_failure_it_shows(tmp_path, capsys) -> None:
    """history record --junit and report --db: a ``<failure>`` recording ``pass`` is stored as
    FAIL, so the history never calls a failing nightly passing (core.junit.JunitCase.judged)."""
    import dataclasses

    from rlgate.core.junit import JunitCase, JunitSuite, write_junit
    from rlgate.core.results import Outcome, Result, Tier
    from rlgate.history.store import open_store

    passed = Result(name="completion", tier=Tier.CONVERGENCE, outcome=Outcome.PASS)
    case = JunitCase.of(passed, classname="rlgate.convergence.r", facts={"recipe": "r"})
    edited = dataclasses.replace(case, shown=Outcome.FAIL, message="stopped at step 7")
    junit = tmp_path / "edited.xml"
    junit.write_text(write_junit([JunitSuite.of("edited", [edited])]), encoding="utf-8")
    db = str(tmp_path / "h.db")
    args = ["history", "record", "--db", db, "--junit", str(junit), "--run-id", "n1"]
    code, _, err = run(args, capsys)
    assert code == 0, err
    with open_store(db) as store:
        (stored,) = store.run("n1").results
    assert stored.outcome is Outcome.FAIL
    assert stored.message.startswith("the JUnit shows FAIL but records rlgate.verdict = pass")


def test_a_commit_given_twice_with_two_values_is_refused(tmp_path, capsys) -> None:
    """``--commit nemo_rl=A --commit nemo_rl=B`` kept B silently; triage's same-code test and
    --baseline-commit read these commits."""
    from rlgate.core.junit import JunitCase, JunitSuite, write_junit
    from rlgate.core.results import Outcome, Result, Tier

    passed = Result(name="completion", tier=Tier.CONVERGENCE, outcome=Outcome.PASS)
    junit = tmp_path / "run.xml"
    case = JunitCase.of(passed, classname="rlgate.convergence.r", facts={"recipe": "r"})
    junit.write_text(write_junit([JunitSuite.of("s", [case])]), encoding="utf-8")
    db = tmp_path / "h.db"
    base = ["history", "record", "--db", str(db), "--junit", str(junit), "--run-id", "n1"]
    twice = ["--commit", "nemo_rl=aaaaaaa1", "--commit", "nemo_rl=bbbbbbb2"]
    code, _, err = run([*base, *twice], capsys)
    assert code == 2 and "--commit nemo_rl is given twice: 'aaaaaaa1' and 'bbbbbbb2'" in one_error(
        err
    )
    from rlgate.history.store import open_store

    with open_store(str(db)) as store:
        assert not store.exists("n1")  # nothing recorded
    # the same value twice is one value
    code, _, err = run([*base, *twice[:2], *twice[:2]], capsys)
    assert code == 0, err


def test_a_run_json_of_another_run_is_never_recorded_with_a_run_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The metrics of a run that stopped at step 30 of 50, recorded with a healthy run's
    check-run JSON, were promotable into a band; a run JSON must have judged --run-dir."""
    from rlgate.testing.corpus import Fault

    from .helpers.corpus_build import corpus

    c = corpus()
    healthy = tmp_path / "healthy.json"
    args = ["check-run", str(c.runs[Fault.HEALTHY]), "--recipe", str(c.recipe)]
    assert run([*args, "--tier", "convergence", "--json", str(healthy)], capsys)[0] == 0
    db = str(tmp_path / "h.db")
    record = ["history", "record", "--db", db, "--run-json", str(healthy), "--run-id", "x"]
    code, _, err = run([*record, "--run-dir", str(c.runs[Fault.STOPPED_EARLY])], capsys)
    assert code == 2 and "judged the run" in one_error(err) and "not --run-dir" in err
    code, _, err = run(["history", "promote", "x", "--db", db], capsys)
    assert code == 2  # nothing was recorded under x
    # its own run directory is recorded with it
    code, _, err = run([*record, "--run-dir", str(c.runs[Fault.HEALTHY])], capsys)
    assert code == 0, err
