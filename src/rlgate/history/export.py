"""``rlgate history export``: one table of the history as CSV or Parquet, for notebooks.

Each row carries its run's context (run id, recipe, branch, hardware, nightly, time,
label); NaN values are NaN again (the store's ``*_nan`` flags are not exported); JSON
columns (commits, versions, overrides) are JSON text. Every row is read by its table's
typed reader first (:mod:`rlgate.history.rows`). Written with pyarrow (a base dependency),
with each column's own type, atomically, never over the database itself.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from rlgate.core.io import write_bytes_atomic
from rlgate.history.store import Store

__all__ = ["FORMATS", "export_table"]

FORMATS = ("csv", "parquet")
_ARROW = {
    "text": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "time": pa.timestamp("us", tz="UTC"),
}


def export_table(
    store: Store,
    table: str,
    out: str | os.PathLike[str],
    *,
    fmt: str,
    recipe: str | None = None,
) -> int:
    """Write ``table`` (``runs``, ``results``, ``steps``, ``swe``) to ``out``; the row count."""
    columns, rows = store.table(table, recipe=recipe)
    arrays: dict[str, pa.Array] = {}
    for name, kind in columns:
        arrays[name] = pa.array([row[name] for row in rows], type=_ARROW[kind])
    data = pa.table(arrays)
    sink = pa.BufferOutputStream()
    if fmt == "csv":
        pa_csv.write_csv(data, sink)
    else:
        pq.write_table(data, sink)
    db = (
        [store.path, *(store.path.with_name(store.path.name + s) for s in ("-wal", "-shm"))]
        if store.path
        else []
    )
    write_bytes_atomic(out, sink.getvalue().to_pybytes(), inputs=db)
    return len(rows)
