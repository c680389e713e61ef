"""Two nightly jobs recording into one history database at the same time lose nothing.

Two real processes are released together on a fresh database (so they also race to create
the schema) and each records its runs, run by run, with real check Results, per-step
metrics and SWE instance outcomes; every run of both must be there, complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.history.ingest import steps_of, swe_rows
from rlgate.history.store import open_store

from .helpers.history_inputs import BACKENDS, database, mlperf_gate, same_results, swe_case

RUNS_EACH = 12

RECORDER = r"""
import json, sys, time
from pathlib import Path
from rlgate.core.results import Result
from rlgate.history.model import RunContext, SweInstanceRow
from rlgate.history.store import open_store

db, payload, go, name, n = sys.argv[1:6]
data = json.loads(Path(payload).read_text())
results = [Result.from_json(r) for r in data["results"]]
steps = {tag: [tuple(p) for p in points] for tag, points in data["steps"].items()}
swe = [SweInstanceRow.model_validate(r) for r in data["swe"]]
while not Path(go).exists():
    time.sleep(0.005)
with open_store(db) as store:
    for i in range(int(n)):
        context = RunContext(run_id=f"{name}-{i}", recipe="mlperf", nightly_id=f"{name}-night")
        store.record(context, results, steps, swe if i % 4 == 0 else ())
print("recorded", n)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_recorders_at_once_lose_nothing(backend: str, tmp_path: Path) -> None:
    db = database(backend, tmp_path)
    report = mlperf_gate(3)
    results = [*report.results, *report.skipped]
    steps = steps_of(report.inputs.run)
    swe = swe_rows(swe_case().after, "rl-model")
    payload = tmp_path / "payload.json"
    payload.write_text(
        json.dumps(
            {
                "results": [r.to_json() for r in results],
                "steps": steps,
                "swe": [r.model_dump(mode="json") for r in swe],
            }
        )
    )
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECORDER, db, str(payload), str(go), name, str(RUNS_EACH)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("job-a", "job-b")
    ]
    time.sleep(1.0)  # both started (importing rlgate) before they are released together
    go.write_text("go")
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == f"recorded {RUNS_EACH}"
    with open_store(db) as store:
        runs = store.runs()
        assert len(runs) == 2 * RUNS_EACH
        assert {r.context.run_id for r in runs} == {
            f"{job}-{i}" for job in ("job-a", "job-b") for i in range(RUNS_EACH)
        }
        assert all(same_results(r.results, results) for r in runs)
        assert all(store.steps(r.context.run_id) == steps for r in runs[::5])
        assert len(store.swe_instances(model="rl-model")) == 2 * 3 * len(swe)
        assert len(store.runs(last=1)) == RUNS_EACH  # one nightly per job
