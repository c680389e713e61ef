r"""``rlgate history export``: one table of the history as CSV or Parquet, for notebooks.

Each row carries its run's context (run id, recipe, branch, hardware, nightly, time,
label); NaN values are NaN again (the store's ``*_nan`` flags are not exported); JSON
columns (commits, versions, overrides) are JSON text. Every row is read by its table's
typed reader first (:mod:`rlgate.history.rows`). Written with pyarrow (a base dependency),
with each column's own type, atomically, never over the database itself.

CSV is read by people, in two ways, and a *text* column's value is made safe for both
(:func:`csv_cell`):

* ``cat``/``less`` in a terminal, which an ESC sequence (an OSC 8 link, a screen clear), a C1
  control, NUL or a bidi override would drive: control characters are escaped as rlgate
  escapes them everywhere (:func:`rlgate.core.text.escape_controls`: ``\x1b``, ``\u202e``,
  a backslash that would read as an escape doubled; ``unescape_controls`` gives the value
  back); newline and tab stay (CSV quotes them);
* spreadsheets, which run a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or
  carriage return) as a formula: an escaped value that starts with one of them is prefixed
  with ``'`` (OWASP's rule for CSV injection), so it reads as the text it is.

Number columns (a negative value rlgate measured) stay numbers, and Parquet keeps every
value as it is.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from rlgate.core.io import write_bytes_atomic
from rlgate.core.text import escape_controls
from rlgate.history.store import Store

__all__ = ["FORMATS", "FORMULA_START", "csv_cell", "export_table", "neutralise_cell"]

FORMATS = ("csv", "parquet")
#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_ARROW = {
    "text": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "time": pa.timestamp("us", tz="UTC"),
}


def neutralise_cell(value: str | None) -> str | None:
    """A CSV text cell a spreadsheet shows as text: ``'`` before a formula's first character."""
    if value is not None and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_cell(value: str | None) -> str | None:
    """A text value as CSV shows it: controls escaped (reversibly), then formulas neutralised."""
    return None if value is None else neutralise_cell(escape_controls(value))


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
        values: list[Any] = [row[name] for row in rows]
        if fmt == "csv" and kind == "text":
            values = [csv_cell(v) for v in values]
        arrays[name] = pa.array(values, type=_ARROW[kind])
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
