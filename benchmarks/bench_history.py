"""Benchmark recording one nightly into the history store, on SQLite and on PostgreSQL.

    RLGATE_MLPERF_DIR=... RLGATE_SWE_DATASET=... python benchmarks/bench_history.py

One nightly is what the nightly jobs record: the planned checks of the MLPerf reference
recipe over the 18 real MLPerf runs (each run one ``Store.record``: ~12 Results and its
per-step metrics; ~216 Results in all), and one SWE comparison of 4 + 4 runs on the 500
SWE-bench Verified instances (its 5 criteria and 500 x 8 = 4,000 per-instance outcomes, read
by rlgate's SWE readers), i.e. 19 transactions. Timed: ``Store.record`` of all of them,
against a named baseline measured on the same rows in the same process: a plain DB-API
``executemany`` of the already-built rows into the same tables (``sqlite3`` /
``psycopg``), one transaction per run, no validation, no SQLAlchemy. Prints wall times
and ratios; asserts nothing. Target: under 1 s on SQLite on 2 cores.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from rlgate.checks.plan import load_inputs, load_plan, run_gate
from rlgate.history import store as store_module
from rlgate.history.ingest import make_context, steps_of, swe_rows
from rlgate.history.store import open_store
from rlgate.swe.compare import GateOptions, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import load_universe

REPO = Path(__file__).resolve().parents[1]
MLPERF = Path(os.environ.get("RLGATE_MLPERF_DIR", REPO.parent / "shared/mlperf-qwen35-grpo-rcp"))
DATASET = os.environ.get(
    "RLGATE_SWE_DATASET", str(REPO.parent / "shared/swebench/SWE-bench_Verified")
)
RECIPE = REPO / "recipes/reference/grpo-qwen3.5-397ba17b-64n4g-megatron-async-r2egym-mlperf.yaml"
GBS = {
    256: (),
    512: ("grpo.num_prompts_per_step=32", "grpo.max_num_steps=20", "grpo.val_start_at=10",
          "policy.max_grad_norm=0.08838834765", "policy.megatron_cfg.optimizer.lr=1.4142135624e-6"),
    1024: ("grpo.num_prompts_per_step=64", "grpo.max_num_steps=10", "grpo.val_start_at=7",
           "policy.max_grad_norm=0.0625", "policy.megatron_cfg.optimizer.lr=2.0e-6"),
}  # fmt: skip
REPEATS = 3


def nightly(work: Path) -> list[tuple[str, list, dict, list]]:
    """(recipe, results, steps, swe rows) per record of one nightly, from real producers."""
    records = []
    for gbs, overrides in GBS.items():
        plan = load_plan(RECIPE, overrides=overrides)
        for seed in range(1, 7):
            baseline = MLPERF / f"GBS{gbs}" / f"seed_{seed % 6 + 1}.out"
            inputs = load_inputs(plan, MLPERF / f"GBS{gbs}" / f"seed_{seed}.out", baseline=baseline)
            report = run_gate(plan, inputs)
            records.append(
                (f"mlperf-gbs{gbs}", [*report.results, *report.skipped], steps_of(inputs.run), [])
            )
    universe = load_universe(DATASET)
    rng = np.random.default_rng(0)
    arms = {}
    for arm, p in (("before", 0.40), ("after", 0.44)):
        paths = []
        for seed in range(4):
            path = work / f"{arm}_{seed}.json"
            resolved = rng.random(universe.n) < p
            doc = {i: {"resolved": bool(v)} for i, v in zip(universe.ids, resolved, strict=True)}
            path.write_text(json.dumps(doc))
            paths.append(path)
        arms[arm] = load_arm(arm, paths, universe)
    comparison = compare_arms(
        arms["before"], arms["after"], universe, GateOptions(n_resamples=1000)
    )
    rows = swe_rows(arms["before"], "base") + swe_rows(arms["after"], "rl")
    records.append(("swe_gate", list(comparison.criteria), {}, rows))
    return records


READS: list[tuple[str, float]] = []


def record_store(url: str, records, tag: str) -> float:
    store = open_store(url)
    start = time.perf_counter()
    for i, (recipe, results, steps, swe) in enumerate(records):
        context = make_context(run_id=f"{tag}-{i}", recipe=recipe, nightly_id=tag)
        store.record(context, results, steps, swe)
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    runs = store.runs(last=1)
    READS.append((store.engine.dialect.name, time.perf_counter() - start))
    assert len(runs) == len(records)
    store.close()
    return elapsed


def plain_rows(records, pk0: int):
    """The rows Store.record writes, built beforehand (the baseline only inserts them)."""
    out = []
    for i, (recipe, results, steps, swe) in enumerate(records):
        pk = pk0 + i
        context = make_context(run_id=f"plain-{pk}", recipe=recipe)
        run = store_module._context_row(context) | {"id": pk}
        run = {**run, "commits": "{}", "versions": "{}", "overrides": "[]"}
        run["recorded_at"] = run["recorded_at"].replace(tzinfo=None)
        res = [store_module._result_row(pk, j, r) for j, r in enumerate(results)]
        out.append((run, res, store_module._step_rows(pk, steps), store_module._swe_rows(pk, swe)))
    return out


def _insert_sql(table: str, row: dict, style: str) -> str:
    cols = ", ".join(row)
    marks = ", ".join("?" if style == "qmark" else f"%({c})s" for c in row)
    return f"INSERT INTO {table} ({cols}) VALUES ({marks})"


def record_plain(execute_many, begin, commit, built, style: str) -> float:
    start = time.perf_counter()
    for run, res, steps, swe in built:
        begin()
        execute_many(_insert_sql("runs", run, style), [run], style)
        for table, rows in (("results", res), ("step_metrics", steps), ("swe_instances", swe)):
            if rows:
                execute_many(_insert_sql(table, rows[0], style), rows, style)
        commit()
    return time.perf_counter() - start


def bench_sqlite(records, work: Path) -> tuple[float, float]:
    import sqlite3

    times, plain = [], []
    for k in range(REPEATS):
        path = work / f"store-{k}.db"
        times.append(record_store(str(path), records, f"n{k}"))
        db = work / f"plain-{k}.db"
        open_store(db).close()  # the same schema, WAL, created by the store
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        built = plain_rows(records, 1)

        def many(sql, rows, style, conn=conn):
            conn.executemany(sql, [tuple(r.values()) for r in rows])

        plain.append(
            record_plain(
                many,
                lambda c=conn: c.execute("BEGIN"),
                lambda c=conn: c.execute("COMMIT"),
                built,
                "qmark",
            )
        )
        conn.close()
    return min(times), min(plain)


def bench_postgres(records) -> tuple[float, float] | str:
    try:
        from rlgate.testing.postgres import PostgresUnavailable, start_postgres
    except ImportError as exc:  # pragma: no cover
        return str(exc)
    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        return str(exc)
    import psycopg
    import sqlalchemy as sa

    try:
        times, plain = [], []
        admin = sa.create_engine(server.url, isolation_level="AUTOCOMMIT")
        for k in range(REPEATS):
            with admin.connect() as conn:
                conn.execute(sa.text(f"CREATE DATABASE s{k}"))
                conn.execute(sa.text(f"CREATE DATABASE p{k}"))
            base = server.url.rsplit("/", 1)[0]
            times.append(record_store(f"{base}/s{k}", records, f"n{k}"))
            open_store(f"{base}/p{k}").close()
            dsn = f"{base}/p{k}".replace("postgresql+psycopg://", "postgresql://")
            with psycopg.connect(dsn) as conn:
                built = plain_rows(records, 1)

                def many(sql, rows, style, conn=conn):
                    with conn.cursor() as cur:
                        cur.executemany(sql, rows)

                plain.append(record_plain(many, lambda: None, conn.commit, built, "pyformat"))
        admin.dispose()
        return min(times), min(plain)
    finally:
        server.stop()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        records = nightly(work)
        n_results = sum(len(r[1]) for r in records)
        n_steps = sum(len(v) for r in records for v in r[2].values())
        n_swe = sum(len(r[3]) for r in records)
        print(
            f"one nightly: {len(records)} records, {n_results} Results, {n_steps} per-step "
            f"values, {n_swe} SWE instance outcomes (built in {time.perf_counter() - start:.1f} s "
            "by the real checks and SWE readers)"
        )
        start = time.perf_counter()
        open_store(work / "fresh.db").close()
        print(f"open_store on a new SQLite file (schema created by Alembic): "
              f"{time.perf_counter() - start:.3f} s")  # fmt: skip
        store_s, plain_s = bench_sqlite(records, work)
        size = (work / "store-0.db").stat().st_size
        print(f"SQLite file after one nightly: {size / 2**20:.2f} MiB")
        print(
            f"SQLite (WAL, one transaction per run): Store.record {store_s:.3f} s; "
            f"baseline sqlite3 executemany of the same rows {plain_s:.3f} s; "
            f"ratio {store_s / plain_s:.2f}x (target: under 1 s)"
        )
        pg = bench_postgres(records)
        for name in ("sqlite", "postgresql"):
            best = min((t for n, t in READS if n == name), default=None)
            if best is not None:
                print(f"{name}: Store.runs(last=1) reads the nightly back ({n_results} "
                      f"Results as Result records) in {best:.3f} s")  # fmt: skip
        if isinstance(pg, str):
            print(f"PostgreSQL: not measured ({pg})")
        else:
            print(
                f"PostgreSQL (local server): Store.record {pg[0]:.3f} s; baseline psycopg "
                f"executemany of the same rows {pg[1]:.3f} s; ratio {pg[0] / pg[1]:.2f}x"
            )


if __name__ == "__main__":
    main()
