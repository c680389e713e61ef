"""Real databases and real Results for the history tests.

Databases: an SQLite file in the test's folder, or a fresh database on one real PostgreSQL
server per test process (``rlgate.testing.postgres``; skipped with the reason only where
the server binaries are absent). Results come from real producers: the planned checks of
the MLPerf reference recipe run over the real MLPerf logs, the fault corpus's runs, and the
SWE gate compared on the real SWE-bench Verified instance set.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rlgate.checks.plan import GateReport, load_inputs, load_plan, run_gate
from rlgate.swe.compare import GateOptions, SweComparison, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import SweArm, load_universe
from rlgate.testing.corpus import Fault

from . import swe_inputs as si
from .corpus_build import corpus
from .mlperf_runs import GBS_OVERRIDES, RECIPE, mlperf_path

BACKENDS = ("sqlite", "postgresql")


@functools.cache
def _server():
    from rlgate.testing.postgres import PostgresUnavailable, start_postgres

    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        return str(exc)
    atexit.register(server.stop)
    return server


def postgres_url() -> str:
    """A new, empty database on the process's PostgreSQL server (skips where there is none)."""
    sqlalchemy = pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")
    server = _server()
    if isinstance(server, str):
        pytest.skip(server)
    name = f"h_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(server.url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return server.url.rsplit("/", 1)[0] + "/" + name


def database(backend: str, tmp_path: Path) -> str:
    """A fresh database of ``backend``: an SQLite file path or a postgresql:// URL."""
    if backend == "sqlite":
        return str(tmp_path / "history.db")
    return postgres_url().replace("postgresql+psycopg://", "postgresql://")


# --- real Results ----------------------------------------------------------------------------

MLPERF_GBS = 512


@functools.cache
def mlperf_gate(seed: int, *, band: bool = True) -> GateReport:
    """The MLPerf recipe's checks (GBS 512 row) on one real run: baseline the next seed, band
    the other five (``band=False``: no band, the band checks are skipped)."""
    plan = load_plan(RECIPE, overrides=GBS_OVERRIDES[MLPERF_GBS])
    others = [s for s in range(1, 7) if s != seed]
    inputs = load_inputs(
        plan,
        mlperf_path(MLPERF_GBS, seed),
        baseline=mlperf_path(MLPERF_GBS, others[0]),
        band_runs=[mlperf_path(MLPERF_GBS, s) for s in others] if band else [],
    )
    return run_gate(plan, inputs)


@functools.cache
def corpus_gate(fault: Fault) -> GateReport:
    """The corpus recipe's checks on one of its runs (a NaN loss gives NaN values)."""
    c = corpus()
    plan = load_plan(c.recipe)
    inputs = load_inputs(
        plan, c.runs[fault], baseline=c.baseline, rollouts=c.rollouts.get("healthy")
    )
    return run_gate(plan, inputs)


@dataclass(frozen=True)
class SweCase:
    comparison: SweComparison
    before: SweArm
    after: SweArm


@functools.cache
def swe_case() -> SweCase:
    """A real SWE comparison on SWE-bench Verified: two seeds per arm, per-instance maps."""
    root = Path(tempfile.mkdtemp(prefix="rlgate-swe-history-"))
    atexit.register(shutil.rmtree, root, True)
    ids = [r["instance_id"] for r in si.verified_rows()]
    rng = np.random.default_rng(13)
    paths: dict[str, list[Path]] = {"before": [], "after": []}
    for arm, p in (("before", 0.40), ("after", 0.45)):
        for seed in range(2):
            path = root / f"{arm}_{seed}.json"
            resolved = rng.random(len(ids)) < p
            path.write_text(
                json.dumps({i: {"resolved": bool(v)} for i, v in zip(ids, resolved, strict=True)})
            )
            paths[arm].append(path)
    universe = load_universe(si.DATASET)
    before = load_arm("before", paths["before"], universe)
    after = load_arm("after", paths["after"], universe)
    comparison = compare_arms(before, after, universe, GateOptions(n_resamples=1000))
    return SweCase(comparison, before, after)


def same_results(a, b) -> bool:
    """Result lists equal field for field (NaN equal to NaN, as their JSON text is)."""
    dump = lambda rs: [json.dumps(r.to_json(), sort_keys=True) for r in rs]  # noqa: E731
    return dump(a) == dump(b)
