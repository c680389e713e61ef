"""``rlgate history export``: one table of the history as CSV or Parquet, for notebooks.

Each row carries its run's context (run id, recipe, branch, hardware, nightly, time,
label); NaN values are NaN again (the store's ``*_nan`` flags are not exported); JSON
columns (commits, versions, overrides) are JSON text. Written with pyarrow (a base
dependency), atomically, never over the database itself.
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


def export_table(
    store: Store,
    table: str,
    out: str | os.PathLike[str],
    *,
    fmt: str,
    recipe: str | None = None,
) -> int:
    """Write ``table`` (``runs``, ``results``, ``steps``, ``swe``) to ``out``; the row count."""
    names, rows = store.table(table, recipe=recipe)
    columns = {name: [row[name] for row in rows] for name in names}
    data = pa.table(columns) if rows else pa.table({n: pa.array([], pa.string()) for n in names})
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
