"""The results store: record runs with their context, read them back, promote good runs.

:func:`open_store` opens (and creates) a history database:

* ``None``: ``$RLGATE_DB`` if set, else ``$XDG_DATA_HOME/rlgate/history.db`` (default
  ``~/.local/share/rlgate/history.db``, its folder created);
* a path, or a ``sqlite:///PATH`` URL (no host, no user): an SQLite file (created if absent,
  its folder must exist; ``create=False``, for read-only commands: it must exist). A path
  that reads as a libpq ``keyword=value`` string (``host=db password=...``) is refused, not
  taken for a file name. WAL mode, a busy timeout of :data:`BUSY_TIMEOUT_S`, and every
  transaction begins ``IMMEDIATE`` (takes the write lock at once), so two recorders wait
  for each other instead of failing or losing a write;
* ``postgresql://...``: PostgreSQL through psycopg 3 (``postgresql+psycopg://``). A URL
  component that decodes to a control character (``%00`` ends a libpq string) is refused.

The database is then upgraded to this rlgate's newest schema revision (Alembic, revisions
in ``migrations/versions``, version table ``rlgate_history_version``) in one transaction,
under an advisory lock on PostgreSQL, so concurrent first opens create the schema once. A
database that holds other tables, or was written by a newer rlgate, is refused, never
changed.

Every :meth:`Store.record` is one transaction: the run, its Results, its per-step metrics
and its SWE instance outcomes are all stored or none is. A run id is unique: recording it
again is refused (nothing recorded is ever replaced).

Every read passes its rows through the typed readers of :mod:`rlgate.history.rows` (one
per table): a row rlgate did not write is an error naming table, row and column, never a
traceback or a record that was not validated.

Errors are :class:`~rlgate.core.errors.RlgateError` with one line naming the database
(exit 2: a bad URL or path, checked before anything is connected to, a file that is not an
SQLite database, a row rlgate did not write, a run id that does not exist; exit 3
(:class:`~rlgate.core.errors.InfraError`): a well-formed URL whose server cannot be reached,
a database locked for longer than the busy timeout). A URL is shown only through
:func:`rlgate.core.text.redact_url`: no password or other secret of it is ever printed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine

from rlgate.core.errors import InfraError, RlgateError
from rlgate.core.results import Result
from rlgate.core.text import SECRET_PARAMETER, one_line, redact_url
from rlgate.history.model import (
    CommitRef,
    RecordedRun,
    RunContext,
    SweInstanceRow,
    is_bisect,
    is_canary,
    last_nightlies,
    utc_now,
)
from rlgate.history.rows import (
    RESULT_COLUMNS,
    RUN_COLUMNS,
    STEP_COLUMNS,
    SWE_COLUMNS,
    CorruptRow,
    StoredRun,
    raw_columns,
    read_result,
    read_revision,
    read_run,
    read_step,
    read_swe,
)
from rlgate.history.schema import ResultRow, RunRow, StepRow, SweRow, UtcDateTime

__all__ = [
    "BUSY_TIMEOUT_S",
    "DB_ENV",
    "HEAD_REVISION",
    "MIGRATIONS",
    "VERSION_TABLE",
    "Promotion",
    "PruneResult",
    "Store",
    "default_db_path",
    "open_store",
    "sqlite_path",
]

DB_ENV = "RLGATE_DB"
#: Seconds a writer waits for another's transaction on SQLite before giving up (exit 3).
BUSY_TIMEOUT_S = 60.0
#: Seconds to wait for a PostgreSQL server to accept a connection.
CONNECT_TIMEOUT_S = 10
#: The Alembic revisions (package data).
MIGRATIONS = Path(__file__).with_name("migrations")
#: Alembic's version table for this schema (a shared database may hold other Alembic apps).
VERSION_TABLE = "rlgate_history_version"
#: The newest revision in ``migrations/versions`` (a unit test checks Alembic agrees).
HEAD_REVISION = "0004"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_PG_LOCK = 0x726C67617465  # "rlgate": the advisory lock migrations take on PostgreSQL
_CHUNK = 500  # ids per IN (...) list
_HINT_URL = "give an SQLite file path or postgresql://user@host:port/database"

_RUNS, _RESULTS = RunRow.__table__, ResultRow.__table__
_STEPS, _SWE = StepRow.__table__, SweRow.__table__


def default_db_path() -> Path:
    """``$XDG_DATA_HOME/rlgate/history.db`` (``~/.local/share`` when unset or relative)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "rlgate" / "history.db"


# --- where the database is ---------------------------------------------------------------


def _absent(shown: str, why: str = "") -> RlgateError:
    return RlgateError(
        f"no history database at {shown}{why}",
        hint="only recording commands (history record, check-run/report/swe --db) create one; "
        f"check --db or ${DB_ENV}",
    )


def _sqlite_file(path: Path, shown: str, create: bool) -> Path:
    """Check an SQLite path: a regular SQLite file, or absent in an existing folder.

    Absent (or empty) and not ``create``: :func:`_absent` (connecting would create it).
    """
    if path.is_dir():
        raise RlgateError(f"history database {shown} is a directory", hint=_HINT_URL)
    if path.exists():
        if not path.is_file():
            raise RlgateError(f"history database {shown} is not a regular file")
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
        if head and head != _SQLITE_MAGIC:
            raise RlgateError(
                f"history database {shown} is not an SQLite database (it starts with {head!r})",
                hint="give the path of an rlgate history database, or of a file to create",
            )
    elif not path.parent.is_dir():
        if not create:
            raise _absent(shown, f" (folder {path.parent} does not exist)")
        raise RlgateError(
            f"history database {shown}: folder {path.parent} does not exist",
            hint="create the folder, or give a path in an existing one",
        )
    if not create and (not path.exists() or path.stat().st_size == 0):
        raise _absent(shown)
    return path.resolve()


# A host name (RFC 1123 labels; '_' as Docker and Kubernetes names use it) or an address.
_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?")
#: libpq connection parameters whose value is one of a few words, and those that are numbers
#: (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS).
_PG_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "sslcertmode": ("disable", "allow", "require"),
    "sslnegotiation": ("postgres", "direct"),
    "load_balance_hosts": ("disable", "random"),
    "target_session_attrs": (
        "any", "read-write", "read-only", "primary", "standby", "prefer-standby",
    ),
}  # fmt: skip
_PG_INTEGERS = (
    "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "sslcompression",
)  # fmt: skip


#: The libpq keywords a connection string starts with, when psycopg is not installed.
_PG_KEYWORDS = frozenset(
    ("host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service",
     "sslmode", "options", "application_name", "connect_timeout")
)  # fmt: skip


def _libpq_parameters() -> frozenset[str] | None:
    """The connection parameters the installed libpq knows (None: psycopg is missing)."""
    try:
        from psycopg import pq
    except ImportError:  # connecting says so (exit 3, naming the extra)
        return None
    return frozenset(o.keyword.decode() for o in pq.Conninfo.get_defaults())


def _host(value: str, shown: str, where: str) -> None:
    if "@" in value:  # user:p@ss@host: the host part holds the end of a password
        raise RlgateError(
            f"history database {shown}: the host part holds '@' (a '@' in a password is "
            "written %40)",
            hint=_HINT_URL,
        )
    for entry in value.split(","):
        host = entry.strip()
        if host.startswith("/"):
            continue  # a Unix socket folder
        if where == "host=" and host.count(":") == 1:  # SQLAlchemy's host=h:port entries
            host, port = host.split(":")
            _port(port, shown)
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            if not _HOSTNAME.fullmatch(host):
                raise RlgateError(
                    f"history database {shown}: {where}{host[:80]!r} is not a host name or address",
                    hint=_HINT_URL,
                ) from None


def _port(value: object, shown: str) -> None:
    text = str(value).strip()
    if not (text.isdigit() and 1 <= int(text) <= 65535):
        raise RlgateError(
            f"history database {shown}: port {text[:20]!r} is not a TCP port (1..65535)",
            hint=_HINT_URL,
        )


def _check_postgres(url: URL, shown: str) -> None:
    """Refuse a malformed PostgreSQL URL before connecting (exit 2, never 3).

    Host, port and query parameters are checked as libpq would check them at connection
    time: an unknown parameter, a value not among a parameter's words, a number that is not
    one, a parameter given twice. Only a well-formed URL reaches the server.
    """
    if url.host:
        _host(url.host, shown, "host ")
    elif not url.query.get("host"):
        raise RlgateError(f"history database {shown}: no host", hint=_HINT_URL)
    if url.port is not None:
        _port(url.port, shown)
    known = _libpq_parameters() if url.query else None
    for key, value in url.query.items():
        if known is not None and key not in known:
            raise RlgateError(
                f"history database {shown}: {key[:40]!r} is not a PostgreSQL connection "
                "parameter (libpq-connect.html#LIBPQ-PARAMKEYWORDS)",
                hint=_HINT_URL,
            )
        values = value if isinstance(value, tuple) else (value,)
        if len(values) > 1 and key != "host":
            raise RlgateError(
                f"history database {shown}: parameter {key!r} is given twice", hint=_HINT_URL
            )
        for item in values:
            if key == "host":
                _host(item, shown, "host=")
            elif key == "port":
                for port in item.split(","):
                    _port(port, shown)
            elif key in _PG_INTEGERS and not item.strip().lstrip("-").isdigit():
                raise RlgateError(
                    f"history database {shown}: {key} {item[:20]!r} is not an integer",
                    hint=_HINT_URL,
                )
            elif key in _PG_CHOICES and item not in _PG_CHOICES[key]:
                raise RlgateError(
                    f"history database {shown}: {key} {item[:20]!r} is not one of "
                    f"{', '.join(_PG_CHOICES[key])}",
                    hint=_HINT_URL,
                )


def _keyword_dsn(text: str) -> tuple[str, ...]:
    """The keywords of ``text`` when it reads as a libpq ``keyword=value`` string, else ()."""
    first = re.match(r"\s*([A-Za-z_]+)\s*=", text)
    if first is None or first.group(1) not in (_libpq_parameters() or _PG_KEYWORDS):
        return ()
    return tuple(re.findall(r"(?:^|\s)([A-Za-z_]+)\s*=", text))


def _resolve(
    url_or_path: str | os.PathLike[str] | None, create: bool = True
) -> tuple[URL, Path | None]:
    """The SQLAlchemy URL to connect to, and the SQLite file if it is one.

    Everything is checked here, before any connection: a malformed URL, a port out of
    range or an unknown driver is exit 2; only a well-formed URL whose server does not
    answer is exit 3 (when connecting). Not ``create``: an SQLite file that does not exist
    is exit 2 too (and the default folder is not created).
    """
    if url_or_path is None:
        env = os.environ.get(DB_ENV, "")
        if env:
            return _resolve(env, create)
        path = default_db_path()
        if not create:
            return _resolve(path, create)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RlgateError(
                f"cannot create the default history folder {path.parent}: {exc.strerror}",
                hint=f"set {DB_ENV} or pass --db",
            ) from None
        return _resolve(path, create)
    text = os.fspath(url_or_path)
    if not text.strip() or "\x00" in text:
        raise RlgateError(
            f"history database {redact_url(text)!r} is empty or not a path", hint=_HINT_URL
        )
    if "://" not in text:
        keywords = _keyword_dsn(text)
        if keywords:  # never a file named after it (it may hold a password: not shown)
            raise RlgateError(
                f"history database: --db reads as a libpq keyword=value connection string "
                f"({', '.join(dict.fromkeys(keywords))[:120]}), not an SQLite path; rlgate takes "
                "a PostgreSQL database as a URL",
                hint=_HINT_URL,
            )
        path = _sqlite_file(Path(text).expanduser(), text, create)
        return URL.create("sqlite+pysqlite", database=str(path)), path
    if one_line(text) != text:  # a control character or line break
        raise RlgateError(
            f"history database URL {one_line(redact_url(text))[:200]!r} holds a control character",
            hint=_HINT_URL,
        )
    decoded = unquote(text)
    if one_line(decoded) != decoded or "\t" in decoded:  # %00 would end a libpq string
        raise RlgateError(
            f"history database URL {redact_url(text)[:200]!r} holds a percent-encoded "
            "control character",
            hint=_HINT_URL,
        )
    try:
        url = sa.engine.make_url(text)
    except (sa.exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise RlgateError(
            f"history database URL {redact_url(text)[:200]!r} cannot be parsed",
            hint=_HINT_URL,
        ) from None
    shown = _display(url)
    backend, _, driver = url.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
            raise RlgateError(
                f"history database {shown}: give a file (sqlite:///PATH); an in-memory "
                "database would lose what is recorded",
                hint=_HINT_URL,
            )
        if url.host or url.username or url.password or url.port:
            raise RlgateError(
                f"history database {shown}: an SQLite URL names a file, no host or user "
                "(sqlite:///relative/path, sqlite:////absolute/path)",
                hint="give sqlite:///PATH, or the path alone",
            )
        if url.query:
            raise RlgateError(
                f"history database {shown}: rlgate opens an SQLite file itself (WAL, a busy "
                f"timeout); it takes no parameters ({', '.join(url.query)[:80]})",
                hint="give sqlite:///PATH, or the path alone",
            )
        path = _sqlite_file(Path(url.database).expanduser(), shown, create)
        return URL.create("sqlite+pysqlite", database=str(path)), path
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        _check_postgres(url, shown)
        return url.set(drivername="postgresql+psycopg"), None
    raise RlgateError(
        f"history database {shown}: unsupported database {url.drivername!r} (rlgate's "
        "history is stored in SQLite files or PostgreSQL through psycopg 3)",
        hint=_HINT_URL,
    )


def _display(url: URL) -> str:
    """A URL as every message shows it: no password, no secret query parameter."""
    return redact_url(url.render_as_string(hide_password=True))


def _secrets(url: URL) -> tuple[str, ...]:
    """The URL's secrets (kept out of a driver's messages too)."""
    found = [url.password] if url.password else []
    for key, value in url.query.items():
        if SECRET_PARAMETER.search(key):
            found += [v for v in (value if isinstance(value, tuple) else (value,)) if v]
    return tuple(sorted(map(str, found), key=len, reverse=True))


# --- errors ------------------------------------------------------------------------------


def _db_message(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    message = text[0] if text else type(orig).__name__
    for secret in secrets:
        message = message.replace(secret, "***")
    return one_line(redact_url(message))[:300]


@contextlib.contextmanager
def _errors(shown: str, sqlite: bool, secrets: Sequence[str] = ()) -> Iterator[None]:
    """Database exceptions as one-line rlgate errors naming the database (never a secret)."""
    try:
        yield
    except RlgateError:
        raise
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "psycopg":
            raise
        raise InfraError(
            f"history database {shown} needs the Python module 'psycopg', which is not installed",
            hint="pip install 'rlgate[history]' (ci/install.sh installs every extra)",
        ) from None
    except sa.exc.OperationalError as exc:
        why = _db_message(exc, secrets)
        if sqlite and "locked" not in why and "busy" not in why:
            raise RlgateError(f"history database {shown}: {why}") from None
        raise InfraError(
            f"history database {shown}: {why}",
            hint="is the server running and reachable, and the database free? "
            f"(SQLite waits {BUSY_TIMEOUT_S:g} s for another writer)",
        ) from None
    except sa.exc.DatabaseError as exc:
        raise RlgateError(
            f"history database {shown}: {_db_message(exc, secrets)}",
            hint="is it an rlgate history database? (restore it from a backup: docs/history.md)",
        ) from None


# --- engine --------------------------------------------------------------------------------


def _sqlite_engine(url: URL) -> Engine:
    engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi: Any, record: Any) -> None:
        dbapi.isolation_level = None  # transactions are begun below, not by the driver
        cursor = dbapi.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock now, or wait for it

    return engine


def _alembic_config(conn: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def _upgrade(conn: Connection, shown: str, create: bool = True) -> None:
    """Bring the schema to the newest revision, refusing a foreign, newer or corrupt database.

    The version table is read by its typed reader (:func:`rlgate.history.rows.read_revision`:
    one revision, or none in a new database). A database already at :data:`HEAD_REVISION`
    (every open but the first after an upgrade) is recognised without importing Alembic
    (0.2 s of a ``rlgate triage``).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK})
    tables = set(sa.inspect(conn).get_table_names())
    current = None
    if VERSION_TABLE in tables:
        rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
        current = read_revision(VERSION_TABLE, rows, sorted(tables - {VERSION_TABLE}), shown)
        if current == HEAD_REVISION:
            return
    elif tables:
        raise RlgateError(
            f"history database {shown} is not an rlgate history database: it holds "
            f"other tables ({', '.join(sorted(tables)[:5])})",
            hint="give a new file or an empty database (docs/history.md: a shared database)",
        )
    elif not create:  # an empty database: a read-only command does not make it a history
        raise _absent(shown)
    from alembic import command
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(MIGRATIONS))
    head = script.get_current_head()
    if current is not None:
        known = {rev.revision for rev in script.walk_revisions()}
        if current not in known:
            raise RlgateError(
                f"history database {shown} is at schema revision {current!r}, which this "
                f"rlgate does not know (its newest is {head!r}): a newer rlgate wrote it",
                hint="upgrade rlgate; an older one never downgrades a history database",
            )
        if current == head:
            return
    command.upgrade(_alembic_config(conn), "head")


# --- records <-> rows --------------------------------------------------------------------


def _number(value: float | None) -> tuple[float | None, bool]:
    if value is None:
        return None, False
    if math.isnan(value):
        return None, True
    return value, False


def _result_row(run_pk: int, position: int, result: Result) -> dict[str, Any]:
    value, value_nan = _number(result.value)
    threshold, threshold_nan = _number(result.threshold)
    return {
        "run_pk": run_pk,
        "position": position,
        "name": result.name,
        "tier": result.tier.value,
        "outcome": result.outcome.value,
        "value": value,
        "value_nan": value_nan,
        "op": result.op.value if result.op is not None else None,
        "threshold": threshold,
        "threshold_nan": threshold_nan,
        "unit": result.unit,
        "bound": result.bound,
        "message": result.message,
        "metric": result.metric,
        "evidence": json.dumps(result.evidence, sort_keys=True),
        "informational": result.informational,
        "schema_version": result.schema_version,
    }


def _context_row(context: RunContext) -> dict[str, Any]:
    return {
        "run_id": context.run_id,
        "recipe": context.recipe,
        "recipe_sha256": context.recipe_sha256,
        "branch": context.branch,
        "commits": dict(context.commits),
        "versions": dict(context.versions),
        "hardware": context.hardware,
        "nightly_id": context.nightly_id,
        "recorded_at": context.recorded_at,
        "label": context.label,
        "overrides": list(context.overrides),
        "source": context.source,
        "promoted": False,
    }


def _step_rows(
    run_pk: int, steps: Mapping[str, Sequence[tuple[int, float]]]
) -> list[dict[str, Any]]:
    rows = []
    for tag, points in steps.items():
        if not isinstance(tag, str) or not tag or len(tag) > 2 * 200:
            raise RlgateError(f"per-step metric tag {tag!r:.80} is empty or too long")
        seen: set[int] = set()
        for step, raw in points:
            if step in seen:
                raise RlgateError(f"per-step metric {tag!r}: step {step} given twice")
            seen.add(step)
            value, nan = _number(float(raw))
            rows.append(
                {"run_pk": run_pk, "tag": tag, "step": int(step), "value": value, "value_nan": nan}
            )
    return rows


def _swe_rows(run_pk: int, swe: Sequence[SweInstanceRow]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for item in swe:
        key = (item.model, item.swe_run, item.instance_id)
        row = {
            "run_pk": run_pk,
            "model": item.model,
            "swe_run": item.swe_run,
            "instance_id": item.instance_id,
            "outcome": item.outcome.value,
            "reason": item.reason,
        }
        if key in rows and rows[key] != row:
            raise RlgateError(
                f"SWE instance {item.instance_id} of run {item.swe_run} (model {item.model}) "
                "is given twice with different outcomes"
            )
        rows[key] = row
    return list(rows.values())


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


# --- the store ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What :meth:`Store.prune` deleted (or would delete): runs and the rows that went with them."""

    run_ids: tuple[str, ...]
    results: int
    steps: int
    swe: int
    promoted_kept: int  # old enough, but promoted: kept
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Promotion:
    """How a run was last promoted or demoted (:meth:`Store.promotion`).

    ``forced``: ``history promote --force`` promoted it over ``overrode`` (the reasons it
    could not serve a band); ``by``: who (the user name), ``at``: when (None: never).
    """

    promoted: bool
    at: datetime | None
    forced: bool = False
    overrode: tuple[str, ...] = ()
    by: str | None = None


class Store:
    """A history database, migrated to this rlgate's schema (use :func:`open_store`)."""

    def __init__(
        self, engine: Engine, shown: str, path: Path | None, secrets: Sequence[str] = ()
    ) -> None:
        self.engine = engine
        #: The database as messages name it (the file, or the URL through ``redact_url``).
        self.shown = shown
        #: The SQLite file, None for a server.
        self.path = path
        self._secrets = tuple(secrets)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    @contextlib.contextmanager
    def _begin(self) -> Iterator[Connection]:
        """One transaction. After an error the store holds no open connection.

        A command that stops on the error may never close the store itself.
        """
        try:
            with _errors(self.shown, self.path is not None, self._secrets):
                with self.engine.begin() as conn:
                    yield conn
        except BaseException:
            self.engine.dispose()
            raise

    def _missing(self, run_id: str) -> RlgateError:
        return RlgateError(
            f"no run {run_id!r} in the history database {self.shown}",
            hint="`rlgate history show RECIPE` lists the recorded runs and their ids",
        )

    # --- writing ---------------------------------------------------------------------

    def record(
        self,
        context: RunContext,
        results: Sequence[Result],
        steps: Mapping[str, Sequence[tuple[int, float]]] | None = None,
        swe: Sequence[SweInstanceRow] = (),
    ) -> None:
        """Store one run in one transaction: its context, Results, per-step metrics, SWE rows.

        Raises:
            RlgateError: the run id is already recorded (nothing is stored).
        """
        if not isinstance(context, RunContext) or not all(isinstance(r, Result) for r in results):
            raise TypeError("record() takes a RunContext and Results")
        with self._begin() as conn:
            exists = conn.execute(
                sa.select(_RUNS.c.id).where(_RUNS.c.run_id == context.run_id)
            ).first()
            if exists is not None:
                raise RlgateError(
                    f"run {context.run_id!r} is already recorded in {self.shown}; nothing "
                    "recorded again",
                    hint="give this recording another --run-id (a recorded run is never replaced)",
                )
            pk = conn.execute(
                sa.insert(_RUNS).returning(_RUNS.c.id), _context_row(context)
            ).scalar_one()
            rows = [_result_row(pk, i, r) for i, r in enumerate(results)]
            if rows:
                conn.execute(sa.insert(_RESULTS), rows)
            step_rows = _step_rows(pk, steps or {})
            if step_rows:
                conn.execute(sa.insert(_STEPS), step_rows)
            swe_rows = _swe_rows(pk, swe)
            if swe_rows:
                conn.execute(sa.insert(_SWE), swe_rows)

    def _set_promoted(
        self, run_id: str, promoted: bool, *, overrode: Sequence[str] = (), by: str | None = None
    ) -> None:
        with self._begin() as conn:
            done = conn.execute(
                sa.update(_RUNS)
                .where(_RUNS.c.run_id == run_id)
                .values(
                    promoted=promoted,
                    promoted_at=utc_now(),
                    promotion_forced=bool(overrode),
                    promotion_overrode=list(overrode) or None,
                    promotion_by=by,
                )
            )
            if done.rowcount != 1:
                raise self._missing(run_id)

    def promote(self, run_id: str, *, force: bool = False, by: str | None = None) -> RecordedRun:
        """Mark a run as a good run of its recipe: its per-step metrics join the band.

        A run whose gate checks did not all pass (:func:`rlgate.history.bands.
        promotion_blockers`: a FAIL, an ERROR, no judged check, no passed completion) is
        refused unless ``force``; a forced promotion is recorded as such, with the reasons
        it overrode and ``by`` (who): :meth:`promotion` reads them back.

        Raises:
            RlgateError: no such run; it has no per-step metrics (it could not serve a
                band, forced or not); a reason above without ``force``.
        """
        from rlgate.history.bands import promotion_blockers

        run = self.run(run_id)
        if is_bisect(run.context.branch):
            raise RlgateError(
                f"run {run_id!r} is a bisection step (branch {run.context.branch}): it judges "
                "another commit's code and never serves a reference band",
                hint="promote a nightly run",
            )
        if is_canary(run.context.branch):
            raise RlgateError(
                f"run {run_id!r} is a canary run (branch {run.context.branch}): a candidate "
                "stack's run never serves the pinned stack's reference band",
                hint="promote a run of the pinned stack",
            )
        if not self.steps(run_id):
            raise RlgateError(
                f"run {run_id!r} has no per-step metrics in {self.shown}: it cannot serve "
                "a reference band",
                hint="record the run with its metrics (check-run --db, or history record "
                "--run-dir) and promote that recording",
            )
        blockers = promotion_blockers(run.results)
        if blockers and not force:
            shown = "; ".join(one_line(b)[:120] for b in blockers[:5])
            more = f"; and {len(blockers) - 5} more" if len(blockers) > 5 else ""
            raise RlgateError(
                f"run {run_id!r} cannot serve a reference band: {shown}{more} (a band of runs "
                "that failed or stopped short would wave the same failure through)",
                hint="promote a run whose gate checks all passed (record it with check-run "
                "--db, or history record --run-dir with its --run-json); --force overrides "
                "these reasons and records that it did",
            )
        self._set_promoted(run_id, True, overrode=blockers, by=by)
        return run

    def demote(self, run_id: str, *, by: str | None = None) -> None:
        """Take a run out of its recipe's band (raises RlgateError if there is no such run)."""
        self._set_promoted(run_id, False, by=by)

    def promotion(self, run_id: str) -> Promotion:
        """How the run was last promoted or demoted (:class:`Promotion`)."""
        with self._begin() as conn:
            rows = self._contexts(conn, [_RUNS.c.run_id == run_id])
        if not rows:
            raise self._missing(run_id)
        run = rows[0]
        return Promotion(run.promoted, run.promoted_at, run.forced, run.overrode, run.by)

    def prune(self, *, before: datetime, keep_last: int, dry_run: bool = False) -> PruneResult:
        """Delete old runs in one transaction; what was (or, ``dry_run``, would be) deleted.

        A run is deleted when it was recorded before ``before``, is not promoted (bands
        are built from promoted runs), and is not among the ``keep_last`` newest nightlies
        of its recipe on its branch (what triage looks back over). Its Results, per-step
        metrics and SWE outcomes go with it (foreign keys cascade).
        """
        if keep_last < 0:
            raise RlgateError(f"keep_last must be >= 0, got {keep_last}")
        if before.tzinfo is None:
            before = before.replace(tzinfo=UTC)
        with self._begin() as conn:
            rows = self._contexts(conn, [])  # newest first
            kept: dict[tuple[str, str | None], set[Any]] = {}
            doomed, promoted = [], 0
            for row in rows:
                c = row.context
                nightlies = kept.setdefault((c.recipe, c.branch), set())
                key = ("nightly", c.nightly_id) if c.nightly_id else ("run", row.pk)
                if key in nightlies:
                    continue
                if len(nightlies) < keep_last:
                    nightlies.add(key)
                    continue
                if c.recorded_at >= before:
                    continue
                if row.promoted:
                    promoted += 1
                    continue
                doomed.append(row)
            pks = [r.pk for r in doomed]
            counts = {}
            for name, table in (("results", _RESULTS), ("steps", _STEPS), ("swe", _SWE)):
                counts[name] = sum(
                    conn.execute(
                        sa.select(sa.func.count()).where(table.c.run_pk.in_(chunk))
                    ).scalar_one()
                    for chunk in _chunks(pks)
                )
            if not dry_run:
                for chunk in _chunks(pks):
                    conn.execute(sa.delete(_RUNS).where(_RUNS.c.id.in_(chunk)))
        return PruneResult(
            run_ids=tuple(r.context.run_id for r in doomed),
            results=counts["results"],
            steps=counts["steps"],
            swe=counts["swe"],
            promoted_kept=promoted,
            dry_run=dry_run,
        )

    # --- reading ---------------------------------------------------------------------

    def _contexts(self, conn: Connection, where: Sequence[Any]) -> list[StoredRun]:
        """The ``runs`` rows matching ``where``, read by their typed reader, newest first."""
        query = sa.select(*raw_columns(_RUNS, RUN_COLUMNS)).where(*where)
        rows = [read_run(row._mapping, self.shown) for row in conn.execute(query)]
        rows.sort(key=lambda r: (r.context.recorded_at, r.pk), reverse=True)
        return rows

    def _result_rows(
        self, conn: Connection, runs: Sequence[StoredRun]
    ) -> Iterator[tuple[int, int, Result]]:
        """``(run pk, position, Result)`` of ``runs``, by run key and position.

        Each row is read by the ``results`` reader; a position held twice in a run is
        refused too.
        """
        names = {r.pk: r.context.run_id for r in runs}
        columns = raw_columns(_RESULTS, RESULT_COLUMNS)
        for chunk in _chunks(sorted(names)):
            query = (
                sa.select(*columns)
                .where(_RESULTS.c.run_pk.in_(chunk))
                .order_by(_RESULTS.c.run_pk, _RESULTS.c.position)
            )
            last = None
            for row in conn.execute(query).all():
                pk = row[1]
                position, result = read_result(row, names[pk], self.shown)
                if last == (pk, position):
                    raise CorruptRow(self.shown, "results",
                                     f"row id={row[0]} (run {names[pk]!r}, position {position})",
                                     "position", "holds a position another result of the run "
                                     "holds too")  # fmt: skip
                last = (pk, position)
                yield pk, position, result

    def _recorded(self, conn: Connection, rows: Sequence[StoredRun]) -> list[RecordedRun]:
        results: dict[int, list[Result]] = {r.pk: [] for r in rows}
        for pk, _, result in self._result_rows(conn, rows):
            results[pk].append(result)
        return [
            RecordedRun(context=r.context, results=results[r.pk], promoted=r.promoted) for r in rows
        ]

    def runs(
        self,
        *,
        recipe: str | None = None,
        branch: str | None = None,
        last: int | None = None,
        label: str | None = None,
        hardware: str | None = None,
        commit: CommitRef | None = None,
        canaries: bool = True,
    ) -> list[RecordedRun]:
        """Recorded runs, newest first (by ``recorded_at``), with their Results.

        ``last`` counts nightlies: the runs of the ``last`` most recent distinct
        ``nightly_id`` values, a run without one counting as a nightly of its own.
        ``commit``: only runs whose recorded commits hold it (:class:`CommitRef`).
        ``canaries`` False: no run of a canary branch (``canary/...``), before ``last``
        counts nightlies (a canary never takes a main nightly's place).
        """
        if last is not None and last < 1:
            raise RlgateError(f"last must be >= 1, got {last}")
        where = [
            column == value
            for column, value in (
                (_RUNS.c.recipe, recipe),
                (_RUNS.c.branch, branch),
                (_RUNS.c.label, label),
                (_RUNS.c.hardware, hardware),
            )
            if value is not None
        ]
        with self._begin() as conn:
            rows = self._contexts(conn, where)
            if commit is not None:
                rows = [r for r in rows if commit.matches(r.context.commits)]
            if not canaries:
                rows = [r for r in rows if not is_canary(r.context.branch)]
            if last is not None:
                rows = last_nightlies(rows, last, lambda row: row.context)
            return self._recorded(conn, rows)

    def nightly(self, nightly_id: str) -> list[RunContext]:
        """The contexts (no Results) of the runs recorded with ``nightly_id``, newest first."""
        with self._begin() as conn:
            return [r.context for r in self._contexts(conn, [_RUNS.c.nightly_id == nightly_id])]

    def exists(self, run_id: str) -> bool:
        """Whether ``run_id`` is recorded."""
        with self._begin() as conn:
            query = sa.select(_RUNS.c.id).where(_RUNS.c.run_id == run_id)
            return conn.execute(query).first() is not None

    def run(self, run_id: str) -> RecordedRun:
        """One recorded run (raises RlgateError naming the database if there is none)."""
        with self._begin() as conn:
            rows = self._contexts(conn, [_RUNS.c.run_id == run_id])
            if not rows:
                raise self._missing(run_id)
            return self._recorded(conn, rows)[0]

    def promoted(
        self,
        recipe: str,
        hardware: str | None,
        *,
        overrides: Sequence[str] | None = None,
    ) -> list[RecordedRun]:
        """The promoted runs of ``recipe`` on ``hardware``, newest first.

        ``hardware`` None matches runs recorded without one; ``overrides`` (when given)
        keeps the runs judged with exactly these NeMo RL overrides.
        """
        hw = _RUNS.c.hardware.is_(None) if hardware is None else _RUNS.c.hardware == hardware
        with self._begin() as conn:
            # promotion is read by the runs reader (a flag rlgate did not write is named)
            rows = [
                r
                for r in self._contexts(conn, [_RUNS.c.recipe == recipe, hw])
                if r.promoted
                and not is_canary(r.context.branch)  # a canary is no band
                and not is_bisect(r.context.branch)  # nor a bisection's step
            ]
            if overrides is not None:
                rows = [r for r in rows if list(r.context.overrides) == list(overrides)]
            return self._recorded(conn, rows)

    def promoted_at(self, run_id: str) -> datetime | None:
        """When the run was last promoted or demoted (None: never)."""
        with self._begin() as conn:
            rows = self._contexts(conn, [_RUNS.c.run_id == run_id])
        if not rows:
            raise self._missing(run_id)
        return rows[0].promoted_at

    def steps(
        self, run_id: str, *, tags: Sequence[str] | None = None
    ) -> dict[str, list[tuple[int, float]]]:
        """A run's per-step metrics (only ``tags``, if given): tag -> [(step, value)] by step."""
        with self._begin() as conn:
            pk = conn.execute(sa.select(_RUNS.c.id).where(_RUNS.c.run_id == run_id)).scalar()
            if pk is None:
                raise self._missing(run_id)
            query = (
                sa.select(*raw_columns(_STEPS, STEP_COLUMNS))
                .where(_STEPS.c.run_pk == pk)
                .order_by(_STEPS.c.tag, _STEPS.c.step)
            )
            if tags is not None:
                query = query.where(_STEPS.c.tag.in_(list(tags)))
            out: dict[str, list[tuple[int, float]]] = {}
            for row in conn.execute(query):
                tag, step, value = read_step(row, run_id, self.shown)
                out.setdefault(tag, []).append((step, value))
        return out

    def swe_instances(self, *, model: str | None = None) -> list[SweInstanceRow]:
        """SWE instance outcomes (of ``model``), oldest recorded run first."""
        query = (
            sa.select(*raw_columns(_SWE, SWE_COLUMNS))
            .join(_RUNS, _RUNS.c.id == _SWE.c.run_pk)
            .order_by(_RUNS.c.recorded_at, _RUNS.c.id, _SWE.c.swe_run, _SWE.c.instance_id)
        )
        holders = sa.select(_SWE.c.run_pk).distinct()
        if model is not None:
            query = query.where(_SWE.c.model == model)
            holders = holders.where(_SWE.c.model == model)
        with self._begin() as conn:
            names = {
                r.pk: r.context.run_id for r in self._contexts(conn, [_RUNS.c.id.in_(holders)])
            }
            return [read_swe(row, names[row[0]], self.shown) for row in conn.execute(query)]

    def table(
        self, name: str, *, recipe: str | None = None
    ) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
        """One table's columns (name, kind) and rows, each with its run's context, for export.

        ``name`` is ``runs``, ``results``, ``steps`` or ``swe``; a kind is ``text``,
        ``int``, ``float``, ``bool`` or ``time`` (the column's type). Every row is read by
        its table's typed reader first. Plain values: NaN restored (the ``*_nan`` flags
        dropped), JSON columns as JSON text, times as aware UTC; oldest run first.
        """
        if name not in _EXPORT:
            raise RlgateError(f"no table {name!r} (one of {', '.join(_EXPORT)})")
        table = _EXPORT[name]
        own = [c for c in table.c if c.name not in ("id", "run_pk") and not c.name.endswith("_nan")]
        columns = own if table is _RUNS else [*(_RUNS.c[n] for n in _CONTEXT), *own]
        where = [] if recipe is None else [_RUNS.c.recipe == recipe]
        with self._begin() as conn:
            runs = self._contexts(conn, where)[::-1]  # oldest first
            values = {r.pk: _run_values(r) for r in runs}
            if table is _RUNS:
                rows = list(values.values())
            else:
                items: dict[int, list[dict[str, Any]]] = {pk: [] for pk in values}
                for pk, item in self._export_rows(conn, name, runs):
                    items[pk].append(item)
                context = {pk: {n: v[n] for n in _CONTEXT} for pk, v in values.items()}
                rows = [{**context[pk], **item} for pk in values for item in items[pk]]
        names = [c.name for c in columns]
        return [(c.name, _kind(c)) for c in columns], [{n: r[n] for n in names} for r in rows]

    def _export_rows(
        self, conn: Connection, name: str, runs: Sequence[StoredRun]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(run pk, its table's values)`` of ``runs``' rows of table ``name``, read typed."""
        if name == "results":
            for pk, position, r in self._result_rows(conn, runs):
                yield pk, {
                    "position": position, "name": r.name, "tier": r.tier.value,
                    "outcome": r.outcome.value, "value": r.value,
                    "op": r.op.value if r.op is not None else None, "threshold": r.threshold,
                    "unit": r.unit, "bound": r.bound, "message": r.message, "metric": r.metric,
                    "evidence": json.dumps(r.evidence, sort_keys=True),
                    "informational": r.informational, "schema_version": r.schema_version,
                }  # fmt: skip
            return
        names = {r.pk: r.context.run_id for r in runs}
        table, columns = (_STEPS, STEP_COLUMNS) if name == "steps" else (_SWE, SWE_COLUMNS)
        order = ["tag", "step"] if name == "steps" else ["model", "swe_run", "instance_id"]
        for chunk in _chunks(sorted(names)):
            query = (
                sa.select(*raw_columns(table, columns))
                .where(table.c.run_pk.in_(chunk))
                .order_by(table.c.run_pk, *(table.c[n] for n in order))
            )
            for row in conn.execute(query):
                pk = row[0]
                if name == "steps":
                    tag, step, value = read_step(row, names[pk], self.shown)
                    yield pk, {"tag": tag, "step": step, "value": value}
                else:
                    swe = read_swe(row, names[pk], self.shown)
                    yield pk, {"model": swe.model, "swe_run": swe.swe_run,
                               "instance_id": swe.instance_id, "outcome": swe.outcome.value,
                               "reason": swe.reason}  # fmt: skip


_EXPORT = {"runs": _RUNS, "results": _RESULTS, "steps": _STEPS, "swe": _SWE}
#: The context columns every exported row of a run's table carries.
_CONTEXT = ("run_id", "recipe", "branch", "hardware", "nightly_id", "recorded_at", "label")


def _kind(column: sa.Column[Any]) -> str:
    """An exported column's kind, by its type: only ``text`` columns are ever neutralised."""
    kind = column.type
    if isinstance(kind, sa.Boolean):
        return "bool"
    if isinstance(kind, sa.Integer):
        return "int"
    if isinstance(kind, sa.Float):
        return "float"
    if isinstance(kind, UtcDateTime):
        return "time"
    return "text"  # String, Text, JSON (exported as JSON text)


def _run_values(run: StoredRun) -> dict[str, Any]:
    c = run.context
    return {
        "run_id": c.run_id, "recipe": c.recipe, "recipe_sha256": c.recipe_sha256,
        "branch": c.branch, "commits": json.dumps(c.commits, sort_keys=True),
        "versions": json.dumps(c.versions, sort_keys=True), "hardware": c.hardware,
        "nightly_id": c.nightly_id, "recorded_at": c.recorded_at, "label": c.label,
        "overrides": json.dumps(list(c.overrides)), "source": c.source,
        "promoted": run.promoted, "promoted_at": run.promoted_at,
        "promotion_forced": run.forced,
        "promotion_overrode": json.dumps(list(run.overrode)) if run.overrode else None,
        "promotion_by": run.by,
    }  # fmt: skip


def open_store(url_or_path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
    """Open a history database (module docstring), creating and migrating it as needed.

    ``create=False`` (read-only commands): a database that does not exist yet (no SQLite
    file, an empty file or PostgreSQL database) is exit 2, ``no history database at ...``,
    and nothing is created.
    """
    url, path = _resolve(url_or_path, create)
    shown = str(path) if path is not None else _display(url)
    secrets = _secrets(url)
    with _errors(shown, path is not None, secrets):
        if path is not None:
            engine = _sqlite_engine(url)
        else:
            engine = sa.create_engine(
                url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}, pool_pre_ping=True
            )
        try:
            with engine.begin() as conn:
                _upgrade(conn, shown, create)
        except BaseException:
            engine.dispose()
            raise
    return Store(engine, shown, path, secrets)


def sqlite_path(
    url_or_path: str | os.PathLike[str] | None = None, *, create: bool = True
) -> Path | None:
    """The SQLite file :func:`open_store` opens for ``url_or_path`` (None: a server), unopened.

    Checked as :func:`open_store` checks it with the same ``create`` (exit 2 on a bad path or
    URL; not ``create``: nothing made, not even the default folder), before any connection,
    so a caller can look at the file and its companions first.
    """
    return _resolve(url_or_path, create)[1]
