"""The typed row readers: every row read from a history database passes one of them.

A history database is untrusted input like a file (docs/security.md): another tool, a hand
edit, a restore gone wrong or a damaged disk can put anything in a row. So every read of
:class:`~rlgate.history.store.Store` selects its columns raw (:func:`raw_columns`: no
SQLAlchemy conversion, which would fail inside the driver, away from the row) and passes
each row through its table's reader here, which applies the rules recording applied: the
:class:`~rlgate.history.model.RunContext` and :class:`~rlgate.history.model.SweInstanceRow`
models (strict types; one line, no control characters), the Result's enumerations, numbers,
JSON evidence and schema version, the NaN flags. A row that breaks one is a
:class:`CorruptRow` (exit 2): one line naming the database, the table, the row (its key and
run id), the column and what it holds.

One reader per table: :func:`read_run` (``runs``), :func:`read_result` (``results``),
:func:`read_step` (``step_metrics``), :func:`read_swe` (``swe_instances``),
:func:`read_quarantine` (``quarantines``), :func:`read_revision` (Alembic's version table).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType

from rlgate.core.errors import RlgateError
from rlgate.core.results import RESULT_SCHEMA_VERSION, Op, Outcome, Result, Tier
from rlgate.core.text import one_line
from rlgate.core.validate import as_utc
from rlgate.history.model import Quarantine, RunContext, SweInstanceRow, SweOutcome, check_entry

__all__ = [
    "QUARANTINE_COLUMNS",
    "RESULT_COLUMNS",
    "RUN_COLUMNS",
    "STEP_COLUMNS",
    "SWE_COLUMNS",
    "CorruptRow",
    "StoredRun",
    "raw_columns",
    "read_quarantine",
    "read_result",
    "read_revision",
    "read_run",
    "read_step",
    "read_swe",
]

#: The columns each reader reads, in this order (``results``: a tuple per row, the hot path).
RUN_COLUMNS = (
    "id", "run_id", "recipe", "recipe_sha256", "branch", "commits", "versions", "hardware",
    "nightly_id", "recorded_at", "label", "overrides", "source", "promoted", "promoted_at",
    "promotion_forced", "promotion_overrode", "promotion_by",
)  # fmt: skip
RESULT_COLUMNS = (
    "id", "run_pk", "position", "name", "tier", "outcome", "value", "value_nan", "op",
    "threshold", "threshold_nan", "unit", "bound", "message", "metric", "evidence",
    "informational", "schema_version",
)  # fmt: skip
STEP_COLUMNS = ("run_pk", "tag", "step", "value", "value_nan")
SWE_COLUMNS = ("run_pk", "model", "swe_run", "instance_id", "outcome", "reason")
QUARANTINE_COLUMNS = (
    "id", "recipe", "check_name", "hardware", "reason", "owner", "added_at", "added_by",
    "until", "runs", "removed_at", "removed_by",
)  # fmt: skip

_HINT = (
    "rlgate did not write this row: restore the database from a backup, or correct or delete "
    'the row (docs/history.md, "Rows rlgate did not write")'
)
_TIERS = {t.value: t for t in Tier}
_OUTCOMES = {o.value: o for o in Outcome}
_OPS = {o.value: o for o in Op}
_SWE_OUTCOMES = {o.value: o for o in SweOutcome}


class CorruptRow(RlgateError):
    """A row rlgate did not write: the database, table, row, column and what it holds."""

    def __init__(self, shown: str, table: str, row: str, column: str, why: str) -> None:
        super().__init__(
            f"history database {shown}: table {table}, {row}, column {column}: {why}",
            hint=_HINT,
        )


class _Bad(ValueError):
    def __init__(self, column: str, why: str) -> None:
        super().__init__(why)
        self.column, self.why = column, why


def _shown(value: Any) -> str:
    text = "NULL" if value is None else one_line(repr(value))
    return text if len(text) <= 60 else text[:59] + "…"


def _bad(column: str, value: Any, expected: str) -> NoReturn:
    raise _Bad(column, f"holds {_shown(value)}, not {expected}")


def raw_columns(table: sa.Table, names: Sequence[str]) -> list[ColumnElement[Any]]:
    """``names`` of ``table`` as the driver gives them: no SQLAlchemy type conversion.

    JSON columns are read as their text (the same on SQLite and PostgreSQL), every other
    column untyped, so a value no conversion can take reaches the reader, which names it.
    """
    out: list[ColumnElement[Any]] = []
    for name in names:
        column = table.c[name]
        if isinstance(column.type, sa.JSON):
            out.append(sa.cast(column, sa.Text).label(name))
        else:
            out.append(sa.type_coerce(column, NullType()).label(name))
    return out


# --- column values -------------------------------------------------------------------------


def _int(column: str, value: Any) -> int:
    if type(value) is not int:
        _bad(column, value, "an integer")
    return value


def _flag(column: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    _bad(column, value, "a flag (0 or 1)")


def _text(column: str, value: Any, *, null: bool = False) -> Any:
    if isinstance(value, str) or (null and value is None):
        return value
    _bad(column, value, "text" + (" or NULL" if null else ""))


def _number(column: str, value: Any, nan: bool, *, null: bool) -> float | None:
    """A float column with its ``*_nan`` flag: NULL + flag is NaN (schema.py)."""
    if nan:
        if value is not None:
            _bad(column, value, f"NULL, as {column}_nan is set (NaN is stored as NULL + flag)")
        return math.nan
    if value is None:
        if null:
            return None
        _bad(column, value, "a number (a per-step value is a number or NaN)")
    if isinstance(value, float):
        return value
    if type(value) is int:
        return float(value)
    _bad(column, value, "a number")


def _json(column: str, value: Any, expected: type) -> Any:
    if not isinstance(value, str):
        _bad(column, value, "JSON text")
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        _bad(column, value, "JSON")
    if not isinstance(data, expected):
        _bad(column, value, f"a JSON {'object' if expected is dict else 'list'}")
    return data


def _time(column: str, value: Any, *, null: bool = False) -> datetime | None:
    if value is None and null:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            _bad(column, value, "a time")
    if not isinstance(value, datetime):
        _bad(column, value, "a time")
    try:
        return as_utc(value)
    except ValueError as exc:
        raise _Bad(column, f"holds {_shown(value)}, {exc}") from None


def _validation(exc: ValidationError, raw: Mapping[str, Any]) -> _Bad:
    """The first problem pydantic found, as the column (and key) it is in."""
    err = exc.errors()[0]
    column, *path = [str(p) for p in err["loc"]]
    where = ".".join(p for p in path if p != "[key]")
    msg = err["msg"].removeprefix("Value error, ")
    value = raw.get(column, err.get("input"))
    return _Bad(column, f"holds {_shown(value)}: {where + ': ' if where else ''}{msg}")


# --- the tables ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A ``runs`` row as read: its key, its context and its promotion.

    ``forced``, ``overrode``, ``by`` (revision 0003): the last promotion was forced over
    these reasons, by this user.
    """

    pk: int
    context: RunContext
    promoted: bool
    promoted_at: datetime | None
    forced: bool = False
    overrode: tuple[str, ...] = ()
    by: str | None = None


def _run(row: Mapping[str, Any]) -> StoredRun:
    overrides = _json("overrides", row["overrides"], list)
    data = {
        name: row[name]
        for name in ("run_id", "recipe", "recipe_sha256", "branch", "hardware", "nightly_id",
                     "label", "source")
    }  # fmt: skip
    data |= {
        "commits": _json("commits", row["commits"], dict),
        "versions": _json("versions", row["versions"], dict),
        "overrides": tuple(overrides),
        "recorded_at": _time("recorded_at", row["recorded_at"]),
    }
    promoted = _flag("promoted", row["promoted"])
    promoted_at = _time("promoted_at", row["promoted_at"], null=True)
    forced = _flag("promotion_forced", row["promotion_forced"])
    overrode = row["promotion_overrode"]  # NULL, or JSON null (SQLAlchemy's None), or a list
    if overrode is not None and overrode != "null":
        overrode = _json("promotion_overrode", overrode, list)
    overrode = overrode if isinstance(overrode, list) else []
    if not all(isinstance(o, str) and o.isprintable() for o in overrode):
        _bad("promotion_overrode", row["promotion_overrode"], "a JSON list of one-line text")
    by = row["promotion_by"]
    if by is not None and not (isinstance(by, str) and by.isprintable() and 0 < len(by) <= 200):
        _bad("promotion_by", by, "a user name or NULL")
    try:
        context = RunContext.model_validate(data, strict=True)
    except ValidationError as exc:
        raise _validation(exc, row) from None
    return StoredRun(row["id"], context, promoted, promoted_at, forced, tuple(overrode), by)


def _run_name(value: Any) -> str | None:
    """A run id fit to name a row in a message (None: it is what is wrong)."""
    ok = isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()
    return value if ok else None


def read_run(row: Mapping[str, Any], shown: str) -> StoredRun:
    """A ``runs`` row (:data:`RUN_COLUMNS`) as a :class:`StoredRun` (:class:`CorruptRow`)."""
    try:
        return _run(row)
    except _Bad as bad:
        name = _run_name(row["run_id"]) if bad.column != "run_id" else None
        ident = f"row id={row['id']}" + (f" (run_id {name!r})" if name else "")
        raise CorruptRow(shown, "runs", ident, bad.column, bad.why) from None


def _result(row: Sequence[Any]) -> tuple[int, Result]:
    (_, _, position, name, tier, outcome, value, value_nan, op, threshold) = row[:10]
    (threshold_nan, unit, bound, message, metric, evidence, informational, version) = row[10:]
    if _int("position", position) < 0:
        _bad("position", position, "a position (0, 1, ...)")
    for column, text in (("name", name), ("unit", unit), ("bound", bound), ("message", message),
                         ("informational", informational)):  # fmt: skip
        if not isinstance(text, str):
            _bad(column, text, "text")
    _text("metric", metric, null=True)
    if tier not in _TIERS:
        _bad("tier", tier, f"a tier ({', '.join(_TIERS)})")
    if outcome not in _OUTCOMES:
        _bad("outcome", outcome, f"an outcome ({', '.join(_OUTCOMES)})")
    if op is not None and op not in _OPS:
        _bad("op", op, f"a comparison ({' '.join(_OPS)}) or NULL")
    data = {} if evidence == "{}" else _json("evidence", evidence, dict)
    if not (_int("schema_version", version) >= 1 and version <= RESULT_SCHEMA_VERSION):
        _bad("schema_version", version, f"a result schema version (1..{RESULT_SCHEMA_VERSION})")
    result = Result.model_construct(  # every field checked above (reading is the hot path)
        name=name,
        tier=_TIERS[tier],
        outcome=_OUTCOMES[outcome],
        value=_number("value", value, _flag("value_nan", value_nan), null=True),
        op=_OPS[op] if op is not None else None,
        threshold=_number("threshold", threshold, _flag("threshold_nan", threshold_nan), null=True),
        unit=unit,
        bound=bound,
        message=message,
        metric=metric,
        evidence=data,
        informational=informational,
        schema_version=version,
    )
    return position, result


def read_result(row: Sequence[Any], run_id: str, shown: str) -> tuple[int, Result]:
    """A ``results`` row (:data:`RESULT_COLUMNS`) of run ``run_id``: its position and Result."""
    try:
        return _result(row)
    except _Bad as bad:
        ident = f"row id={row[0]} (run {run_id!r}, position {one_line(row[2])[:20]})"
        raise CorruptRow(shown, "results", ident, bad.column, bad.why) from None


def read_step(row: Sequence[Any], run_id: str, shown: str) -> tuple[str, int, float]:
    """A ``step_metrics`` row (:data:`STEP_COLUMNS`) of run ``run_id``: tag, step, value."""
    _, tag, step, value, nan = row
    try:
        if not isinstance(tag, str) or not tag:
            _bad("tag", tag, "a metric's name")
        return tag, _int("step", step), _number("value", value, _flag("value_nan", nan), null=False)
    except _Bad as bad:
        ident = f"row (run {run_id!r}, tag {_shown(tag)}, step {_shown(step)})"
        raise CorruptRow(shown, "step_metrics", ident, bad.column, bad.why) from None


def read_swe(row: Sequence[Any], run_id: str, shown: str) -> SweInstanceRow:
    """A ``swe_instances`` row (:data:`SWE_COLUMNS`) of run ``run_id``."""
    _, model, swe_run, instance_id, outcome, reason = row
    raw = dict(zip(SWE_COLUMNS, row, strict=True))
    try:
        if outcome not in _SWE_OUTCOMES:
            _bad("outcome", outcome, f"an outcome ({', '.join(_SWE_OUTCOMES)})")
        data = {"model": model, "swe_run": swe_run, "instance_id": instance_id,
                "outcome": _SWE_OUTCOMES[outcome], "reason": reason, "run_id": run_id}  # fmt: skip
        try:
            return SweInstanceRow.model_validate(data, strict=True)
        except ValidationError as exc:
            raise _validation(exc, raw) from None
    except _Bad as bad:
        ident = (
            f"row (run {run_id!r}, model {_shown(model)}, swe_run {_shown(swe_run)}, "
            f"instance_id {_shown(instance_id)})"
        )
        raise CorruptRow(shown, "swe_instances", ident, bad.column, bad.why) from None


def read_quarantine(row: Sequence[Any], shown: str) -> Quarantine:
    """A ``quarantines`` row (:data:`QUARANTINE_COLUMNS`), by the rules adding applied."""
    pk = row[0]
    try:
        (_, recipe, check, hardware, reason, owner, added_at, added_by, until, runs,
         removed_at, removed_by) = row  # fmt: skip
        runs = None if runs is None else _int("runs", runs)
        entry = Quarantine(
            id=_int("id", pk), recipe=_text("recipe", recipe), check=_text("check_name", check),
            hardware=_text("hardware", hardware, null=True), reason=_text("reason", reason),
            owner=_text("owner", owner), added_at=_time("added_at", added_at),
            added_by=_text("added_by", added_by, null=True), until=_time("until", until, null=True),
            runs=runs, removed_at=_time("removed_at", removed_at, null=True),
            removed_by=_text("removed_by", removed_by, null=True),
        )  # fmt: skip
        try:
            return check_entry(entry)
        except ValueError as exc:
            column = str(exc).split(" ", 1)[0]
            column = {"check": "check_name", "exactly": "until"}.get(column, column)
            raise _Bad(column, str(exc)) from None
    except _Bad as bad:
        ident = f"row id={_shown(pk)}"
        raise CorruptRow(shown, "quarantines", ident, bad.column, bad.why) from None


def read_revision(
    table: str, rows: Sequence[Sequence[Any]], others: Sequence[str], shown: str
) -> str | None:
    """The schema revision Alembic's version ``table`` holds (None: a new database).

    A database is at one revision: two rows (two Alembic heads), a value that is not a
    revision name, or no row beside rlgate's tables (``others``) is a :class:`CorruptRow`.
    """
    values = [r[0] for r in rows]
    if len(values) > 1:
        held = ", ".join(_shown(v) for v in values[:4])
        raise CorruptRow(shown, table, f"{len(values)} rows", "version_num",
                         f"holds {held}: a database is at one schema revision (one Alembic "
                         "head)")  # fmt: skip
    if not values:
        if others:
            tables = ", ".join(sorted(others)[:5])
            why = f"holds no schema revision, beside the tables {tables}"
            raise CorruptRow(shown, table, "no row", "version_num", why)
        return None
    value = values[0]
    if not (isinstance(value, str) and value.isprintable() and 0 < len(value) <= 32):
        raise CorruptRow(shown, table, "1 row", "version_num",
                         f"holds {_shown(value)}, not a schema revision")  # fmt: skip
    return value
