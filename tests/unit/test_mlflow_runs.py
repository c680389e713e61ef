"""MLflow runs as check-run inputs (rlgate.runs.formats.mlflow): file store, SQLite, server.

The stores are written by real MLflow 3.15.1 through NeMo RL's own ``MLflowLogger`` (its
source, executed against MLflow: tools/mlflow_store.py) from corpus runs; the same runs
written as TensorBoard event files must get the same verdicts. The stores are kept as test
data (helpers/mlflow_stores.py); a real ``mlflow server`` is started when an environment with
MLflow is named by ``RLGATE_MLFLOW_PYTHON`` (skipped, saying so, otherwise).
"""

from __future__ import annotations

import json
import math
import socket
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlgate.checks.plan import load_inputs, load_plan, run_gate
from rlgate.cli.app import main
from rlgate.core.results import Outcome
from rlgate.runs.metrics import SourceKind, load_run, run_progress
from rlgate.testing.corpus import Fault

from .helpers.cli import one_error, run_cli
from .helpers.mlflow_stores import (
    EXPERIMENT,
    FAULTS,
    JOBS,
    RESUMED,
    mlflow_python,
    recipe,
    tensorboard_run,
    unpack,
)

# NeMo RL's MLflowLogger names (nemo_rl/utils/logger.py @ 7ea279a): flatten_dict(sep="/")
# for nested dicts, _summarize_list's mean/p50/p90/max for lists; TensorBoard skips both.
MLFLOW_ONLY = {
    "train/moe/aux_loss",
    *(
        f"train/generation_logger_metrics/inflight_batch_sizes/{s}"
        for s in ("mean", "p50", "p90", "max")
    ),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The kept stores unpacked, the corpus recipe, and the TensorBoard form of each run."""
    root = tmp_path_factory.mktemp("mlflow")
    mlruns, db = unpack(root / "stores")
    out = {"mlruns": mlruns, "db": db, "recipe": recipe(root / "gate")}
    for fault in (*FAULTS, Fault.RESUMED):
        out[fault.value] = tensorboard_run(root / "tb", fault)
    return out


def _store(world: dict[str, Path], backend: str) -> str:
    return {"file": str(world["mlruns"]), "sqlite": f"sqlite:///{world['db']}"}[backend]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def _outcomes(world: dict[str, Path], run: str) -> dict[str, Outcome]:
    plan = load_plan(world["recipe"])
    inputs = load_inputs(plan, run, baseline=world["recipe"].parent / "baseline")
    report = run_gate(plan, inputs, tuple({c.tier for c in plan.checks}))
    return {r.name: r.outcome for r in (*report.results, *report.skipped)}


@pytest.mark.parametrize("backend", ["file", "sqlite"])
class TestStores:
    def test_every_tensorboard_tag_reads_back_with_its_steps_and_values(
        self, world: dict[str, Path], backend: str
    ) -> None:
        for fault in FAULTS:
            mine = load_run(f"{_store(world, backend)}#{EXPERIMENT}/{fault.value}")
            tb = load_run(world[fault.value])
            assert mine.kind is SourceKind.MLFLOW
            assert set(mine.series) == set(tb.series) | MLFLOW_ONLY, fault
            for tag, series in tb.series.items():
                assert np.array_equal(mine.series[tag].steps, series.steps), (fault, tag)
                assert _same(mine.series[tag].values, series.values), (fault, tag)

    @pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.value)
    def test_the_gate_gives_the_same_verdicts_as_on_the_tensorboard_run(
        self, world: dict[str, Path], backend: str, fault: Fault
    ) -> None:
        tb = _outcomes(world, str(world[fault.value]))
        mine = _outcomes(world, f"{_store(world, backend)}#{fault.value}")
        assert mine == tb
        if fault is Fault.HEALTHY:
            assert Outcome.FAIL not in tb.values()
        else:
            assert Outcome.FAIL in tb.values() or Outcome.ERROR in tb.values()

    @pytest.mark.parametrize("name", [RESUMED, JOBS])
    def test_a_resumed_run_is_judged_on_its_latest_attempt_as_tensorboard_is(
        self, world: dict[str, Path], backend: str, name: str
    ) -> None:
        run = load_run(f"{_store(world, backend)}#{name}")
        tb = load_run(world[Fault.RESUMED.value])
        mine, theirs = run_progress(run, "train/loss"), run_progress(tb, "train/loss")
        assert mine is not None and theirs is not None
        assert (mine.reached, mine.last_logged, mine.gaps) == (
            theirs.reached,
            theirs.last_logged,
            theirs.gaps,
        )
        assert [a[1:] for a in mine.attempts] == [a[1:] for a in theirs.attempts]
        assert len(mine.attempts) == 2 and "restarted at step" in mine.describe()
        assert _outcomes(world, f"{_store(world, backend)}#{name}") == _outcomes(
            world, str(world[Fault.RESUMED.value])
        )


class TestCheckRun:
    def test_exit_codes_and_json_match_the_tensorboard_run(
        self, world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for fault, code in ((Fault.HEALTHY, 0), (Fault.NAN_LOSS, 1)):
            out = tmp_path / f"{fault.value}.json"
            args = ["--recipe", str(world["recipe"]), "--tier", "convergence", "--json", str(out)]
            got, printed, _ = run_cli(
                ["check-run", f"sqlite:///{world['db']}#{fault.value}", *args], capsys
            )
            assert got == code, printed
            assert f"run {world['db']}" in printed
            checks = {c["name"]: c["status"] for c in json.loads(out.read_text())["checks"]}
            assert main(["check-run", str(world[fault.value]), *args]) == code
            capsys.readouterr()
            assert {c["name"]: c["status"] for c in json.loads(out.read_text())["checks"]} == checks
        messages = [c["message"] for c in json.loads(out.read_text())["checks"]]
        assert any("first nan at step 8" in m for m in messages)

    def test_a_store_with_several_runs_and_no_selector_names_them(
        self, world: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, _, err = run_cli(
            ["check-run", str(world["db"]), "--recipe", str(world["recipe"])], capsys
        )
        message = one_error(err)
        assert code == 2 and "MLflow runs" in message and f"{EXPERIMENT}/healthy" in message
        assert "#<run_id>" in message

    @pytest.mark.parametrize(
        ("selector", "words"),
        [
            ("0123456789abcdef0123456789abcdef", "no MLflow run 0123456789abcdef"),
            ("healthyy", "did you mean rlgate/healthy"),
            ("other/healthy", "no active MLflow run in experiment 'other'"),
        ],
    )
    def test_a_missing_run_is_exit_2_naming_it(
        self,
        world: dict[str, Path],
        capsys: pytest.CaptureFixture[str],
        selector: str,
        words: str,
    ) -> None:
        for store in (str(world["mlruns"]), f"sqlite:///{world['db']}"):
            code, _, err = run_cli(
                ["check-run", f"{store}#{selector}", "--recipe", str(world["recipe"])], capsys
            )
            assert code == 2 and words in one_error(err)

    def test_a_run_id_selects_one_run(self, world: dict[str, Path]) -> None:
        with sqlite3.connect(world["db"]) as db:
            (run_id,) = db.execute("SELECT run_uuid FROM runs WHERE name = 'healthy'").fetchone()
        run = load_run(f"{world['mlruns'].parent / 'mlflow.db'}#{run_id}")
        assert run.metadata["mlflow_runs"] == (run_id,)


class TestUntrustedStores:
    def test_a_corrupt_sqlite_file_is_exit_2(
        self, world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = bytearray(world["db"].read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # the schema page overwritten
        bad = tmp_path / "mlflow.db"
        bad.write_bytes(bytes(data))
        code, _, err = run_cli(
            ["check-run", f"{bad}#healthy", "--recipe", str(world["recipe"])], capsys
        )
        assert code == 2 and str(bad) in one_error(err)

    def test_another_applications_sqlite_file_is_exit_2_saying_so(
        self, world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        other = tmp_path / "other.db"
        with sqlite3.connect(other) as db:
            db.execute("CREATE TABLE notes (text TEXT)")
        code, _, err = run_cli(["check-run", str(other), "--recipe", str(world["recipe"])], capsys)
        assert code == 2 and "not an MLflow tracking store" in one_error(err)

    def test_a_malformed_metric_line_of_a_file_store_names_file_and_line(
        self, world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        store = tmp_path / "mlruns"
        import shutil

        shutil.copytree(world["mlruns"], store)
        loss = next(store.glob("*/*/metrics/train/loss"))
        run_dir = loss.parents[2]
        name = (run_dir / "tags" / "mlflow.runName").read_text()
        loss.write_text(loss.read_text() + "1796166252082 not-a-number 13\n")
        code, _, err = run_cli(
            ["check-run", f"{store}#{name}", "--recipe", str(world["recipe"])], capsys
        )
        message = one_error(err)
        assert code == 2 and f"{loss}:" in message and "'not-a-number' is not a number" in message

    def test_infinity_as_mlflows_sql_store_keeps_it_reads_as_infinity(
        self, world: dict[str, Path], tmp_path: Path
    ) -> None:
        # MLflow's SqlAlchemyStore.log_metric stores inf as sys.float_info.max (seen in 3.15.1)
        db = tmp_path / "mlflow.db"
        db.write_bytes(world["db"].read_bytes())
        with sqlite3.connect(db) as conn:
            conn.execute(
                "UPDATE metrics SET value = ? WHERE key = 'train/loss' AND step = 3 AND run_uuid ="
                " (SELECT run_uuid FROM runs WHERE name = 'healthy')",
                (1.7976931348623157e308,),
            )
        run = load_run(f"{db}#healthy")
        assert run.get("train/loss").value_at(3) == math.inf
        assert any("read as ±inf" in w for w in run.warnings)

    def test_an_unreachable_server_is_exit_3_and_its_password_is_never_printed(
        self, world: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        port = _free_port()
        url = f"http://nemo:s3cret-pw@127.0.0.1:{port}#healthy"
        code, out, err = run_cli(["check-run", url, "--recipe", str(world["recipe"])], capsys)
        message = one_error(err)
        assert code == 3 and "cannot reach the MLflow tracking server" in message
        assert f"nemo:***@127.0.0.1:{port}" in message
        assert "s3cret" not in out + err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(world: dict[str, Path]) -> Iterator[str]:
    """A real ``mlflow server`` on 127.0.0.1 over the kept SQLite store."""
    python = mlflow_python()
    if python is None:
        pytest.skip("no MLflow here (rlgate's pins cannot hold it): set RLGATE_MLFLOW_PYTHON")
    port = _free_port()
    argv = [python, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{world['db']}"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip(f"mlflow server did not start (exit {proc.poll()})")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class TestTrackingServer:
    @pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.value)
    def test_the_gate_gives_the_same_verdicts_through_the_rest_api(
        self, world: dict[str, Path], server: str, fault: Fault
    ) -> None:
        assert _outcomes(world, f"{server}#{EXPERIMENT}/{fault.value}") == _outcomes(
            world, str(world[fault.value])
        )

    def test_values_steps_and_resumes_read_as_from_the_store(
        self, world: dict[str, Path], server: str
    ) -> None:
        for name in ("nan_loss", RESUMED, JOBS):
            mine, store = load_run(f"{server}#{name}"), load_run(f"{world['db']}#{name}")
            assert set(mine.series) == set(store.series)
            for tag, series in store.series.items():
                assert _same(mine.series[tag].values, series.values), (name, tag)
            assert mine.files == store.files

    def test_a_run_id_and_credentials_in_the_url_are_used_and_masked(
        self,
        world: dict[str, Path],
        server: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        with sqlite3.connect(world["db"]) as db:
            (run_id,) = db.execute("SELECT run_uuid FROM runs WHERE name = 'healthy'").fetchone()
        url = server.replace("http://", "http://nemo:s3cret-pw@") + f"#{run_id}"
        history = tmp_path / "history.db"
        code, out, err = run_cli(
            [
                *("check-run", url, "--recipe", str(world["recipe"]), "--tier", "convergence"),
                *("--db", str(history)),
            ],
            capsys,
        )
        assert code == 0, out + err
        assert "s3cret" not in out + err and "nemo:***@" in out
        assert b"s3cret" not in history.read_bytes() and b"nemo:***@" in history.read_bytes()
        missing = url.replace(run_id, "0" * 32)
        code, _, err = run_cli(["check-run", missing, "--recipe", str(world["recipe"])], capsys)
        assert code == 2 and "no MLflow run 00000000" in one_error(err)
