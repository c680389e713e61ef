"""MLflow stores written by real MLflow through NeMo RL's ``MLflowLogger`` (tools/mlflow_store.py).

MLflow cannot be installed beside rlgate's pins (its releases cap ``cachetools`` below the
pinned 8.0.2), so the stores are made by MLflow 3.15.1 (NeMo RL 7ea279a's pin) in an
environment of its own and kept as test data, ``tests/unit/data/mlflow/`` (regenerate with
``RLGATE_MLFLOW_PYTHON=<its python> NEMO_RL_DIR=<checkout> python -m
tests.unit.helpers.mlflow_stores``). The tests that write fresh stores or start
``mlflow server`` need ``RLGATE_MLFLOW_PYTHON`` and are skipped without it.

Every run is a corpus run (:mod:`rlgate.testing.corpus`) of :data:`PROFILE`: the test writes
the same run as TensorBoard event files (:func:`tensorboard_run`) and compares verdicts.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from rlgate.runs.metrics import load_tensorboard_dir, to_metrics_json
from rlgate.testing.corpus import Fault, Profile, corpus_recipe, write_run

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "unit" / "data" / "mlflow"
TOOL = ROOT / "tools" / "mlflow_store.py"
EXPERIMENT = "rlgate"
# a short run keeps the stores small: 12 steps, the GPU monitor every 20 minutes
PROFILE = Profile(steps=12, val_period=4, monitor_interval_s=1200)
FAULTS = (Fault.HEALTHY, Fault.NAN_LOSS, Fault.STOPPED_EARLY, Fault.REWARD_FLAT)
SEED = 4100
RESUMED = "resumed"  # Fault.RESUMED: the second job resumes the same MLflow run (run_id)
JOBS = "resumed_jobs"  # Fault.RESUMED: each job starts a run of the same name (the default)


def mlflow_python() -> str | None:
    """The interpreter of an environment with MLflow (``RLGATE_MLFLOW_PYTHON``), if set."""
    python = os.environ.get("RLGATE_MLFLOW_PYTHON")
    return python if python and Path(python).exists() else None


def tensorboard_run(root: Path, fault: Fault) -> Path:
    """The corpus run of ``fault`` as NeMo RL's TensorBoard log dir."""
    return write_run(root / fault.value, fault, seed=SEED, profile=PROFILE)


def recipe(root: Path) -> Path:
    """The corpus recipe for :data:`PROFILE`, with its baseline and five band runs beside it."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "recipe.yaml"
    path.write_text(corpus_recipe(PROFILE), encoding="utf-8")
    write_run(root / "baseline", Fault.HEALTHY, seed=SEED + 1, profile=PROFILE)
    for k in range(5):
        write_run(root / "band" / f"seed_{k}", Fault.HEALTHY, seed=SEED + 10 + k, profile=PROFILE)
    return path


def _json(run: Path, out: Path) -> Path:
    out.write_text(json.dumps(to_metrics_json(load_tensorboard_dir(run))), encoding="utf-8")
    return out


def write_store(python: str, nemo_rl_dir: Path, uri: str, work: Path) -> dict[str, str]:
    """Write every run of the fixture into the store at ``uri``; ``{run name: run id}``."""
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}
    ids: dict[str, str] = {}

    def tool(*runs: str, run_id: str | None = None, nested: bool = False) -> None:
        argv = [python, str(TOOL), "--nemo-rl-dir", str(nemo_rl_dir), "--tracking-uri", uri]
        argv += ["--experiment", EXPERIMENT]
        for run in runs:
            argv += ["--run", run]
        argv += ["--run-id", run_id] if run_id else []
        argv += ["--nested"] if nested else []
        out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True, cwd=work)
        for line in out.stdout.splitlines():
            name, _, rid = line.partition(" ")
            ids.setdefault(name, rid)

    runs = []
    for fault in FAULTS:
        tb = tensorboard_run(work / "tb", fault)
        runs.append(f"{fault.value}={_json(tb, work / f'{fault.value}.json')}")
    tool(*runs, nested=True)
    resumed = tensorboard_run(work / "tb", Fault.RESUMED)
    jobs = [_json(resumed / exp, work / f"resumed_{exp}.json") for exp in ("exp_001", "exp_002")]
    tool(f"{RESUMED}={jobs[0]}")
    tool(f"{RESUMED}={jobs[1]}", run_id=ids[RESUMED])
    tool(f"{JOBS}={jobs[0]}")
    tool(f"{JOBS}={jobs[1]}")
    return ids


def make_data(python: str, nemo_rl_dir: Path, out: Path = DATA) -> None:
    """Write the two stores (file and SQLite) and keep them packed in ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_store(python, nemo_rl_dir, f"file://{work}/mlruns", work)
        write_store(python, nemo_rl_dir, f"sqlite:///{work}/mlflow.db", work)
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / "mlruns.tar.gz", "w:gz") as tar:
            tar.add(work / "mlruns", arcname="mlruns")
        with (work / "mlflow.db").open("rb") as src, gzip.open(out / "mlflow.db.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)


def unpack(into: Path) -> tuple[Path, Path]:
    """The kept stores, unpacked into ``into``: ``(mlruns dir, mlflow.db)``."""
    with tarfile.open(DATA / "mlruns.tar.gz") as tar:
        tar.extractall(into, filter="data")
    db = into / "mlflow.db"
    with gzip.open(DATA / "mlflow.db.gz") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return into / "mlruns", db


if __name__ == "__main__":
    python, nemo_rl = mlflow_python(), os.environ.get("NEMO_RL_DIR")
    if not python or not nemo_rl:
        sys.exit("set RLGATE_MLFLOW_PYTHON and NEMO_RL_DIR")
    make_data(python, Path(nemo_rl))
