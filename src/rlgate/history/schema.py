"""The history's tables (SQLAlchemy 2 declarative), the same on SQLite and PostgreSQL.

* ``runs``: one row per recorded run: its context (:class:`~rlgate.history.model.RunContext`)
  and whether it is promoted into its recipe's reference band;
* ``results``: one row per :class:`~rlgate.core.results.Result` of a run, field for field
  (``outcome`` is the Result's status, ``evidence`` its JSON text), in the order given;
* ``step_metrics``: a run's per-step scalar metrics (tag, step, value);
* ``swe_instances``: SWE-bench per-instance outcomes of each SWE run (seed) of each model;
* ``quarantines`` (revision 0004): quarantine entries (:mod:`rlgate.history.quarantine`),
  removed ones kept.

Numbers: a NaN is a measurement (a NaN loss), not a missing value, and SQLite cannot store
one (it becomes NULL), so every float column has a ``*_nan`` flag beside it: NULL with the
flag set is NaN, NULL without it is "no value". Infinities are stored as they are. Times are
UTC. The schema is created and changed only by the Alembic revisions in ``migrations/``
(:func:`rlgate.history.store.open_store` upgrades a database to the newest one);
``tests/unit/test_history_store.py`` checks that these tables are what the revisions build.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "QuarantineRow", "ResultRow", "RunRow", "StepRow", "SweRow", "UtcDateTime"]

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """A UTC time stored without a zone (the same on SQLite and PostgreSQL)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        """Store as naive UTC."""
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        """Read back as aware UTC."""
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    """Declarative base with the constraint naming the migrations use."""

    metadata = MetaData(naming_convention=NAMING)


_ID = 200  # model.MAX_ID_CHARS


class RunRow(Base):
    """A recorded run: its context and its promotion."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(_ID), unique=True)
    recipe: Mapped[str] = mapped_column(String(_ID), index=True)
    recipe_sha256: Mapped[str | None] = mapped_column(String(64))
    branch: Mapped[str | None] = mapped_column(String(_ID))
    commits: Mapped[dict] = mapped_column(JSON)
    versions: Mapped[dict] = mapped_column(JSON)
    hardware: Mapped[str | None] = mapped_column(String(_ID))
    nightly_id: Mapped[str | None] = mapped_column(String(_ID), index=True)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    label: Mapped[str | None] = mapped_column(String(_ID))
    overrides: Mapped[list] = mapped_column(JSON)
    source: Mapped[str | None] = mapped_column(Text)
    promoted: Mapped[bool] = mapped_column(Boolean, default=False)
    # revision 0002: when the run was last promoted or demoted (None: never)
    promoted_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # revision 0003: the last promotion or demotion was forced (--force), the reasons it
    # overrode (a JSON list of text), who made it (the user name)
    promotion_forced: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    promotion_overrode: Mapped[list | None] = mapped_column(JSON)
    promotion_by: Mapped[str | None] = mapped_column(String(_ID))


def _run_fk() -> ForeignKey:
    return ForeignKey("runs.id", ondelete="CASCADE")


class ResultRow(Base):
    """One Result of a run, field for field."""

    __tablename__ = "results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_pk: Mapped[int] = mapped_column(Integer, _run_fk(), index=True)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    tier: Mapped[str] = mapped_column(String(16))
    outcome: Mapped[str] = mapped_column(String(8))
    value: Mapped[float | None] = mapped_column(Double)
    value_nan: Mapped[bool] = mapped_column(Boolean, default=False)
    op: Mapped[str | None] = mapped_column(String(2))
    threshold: Mapped[float | None] = mapped_column(Double)
    threshold_nan: Mapped[bool] = mapped_column(Boolean, default=False)
    unit: Mapped[str] = mapped_column(Text)
    bound: Mapped[str] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text)
    metric: Mapped[str | None] = mapped_column(Text)
    evidence: Mapped[str] = mapped_column(Text)  # JSON text (core.junit writes the same)
    informational: Mapped[str] = mapped_column(Text)
    schema_version: Mapped[int] = mapped_column(Integer)

    # revision 0002: "the history of one check" (history show --check, triage) by name
    __table_args__ = (Index("ix_results_name", "name"),)


class StepRow(Base):
    """One per-step scalar of a run."""

    __tablename__ = "step_metrics"

    run_pk: Mapped[int] = mapped_column(Integer, _run_fk(), primary_key=True)
    tag: Mapped[str] = mapped_column(String(_ID * 2), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    value: Mapped[float | None] = mapped_column(Double)
    value_nan: Mapped[bool] = mapped_column(Boolean, default=False)


class SweRow(Base):
    """One SWE-bench instance's outcome in one SWE run of one model, within a recorded run."""

    __tablename__ = "swe_instances"

    run_pk: Mapped[int] = mapped_column(Integer, _run_fk(), primary_key=True)
    model: Mapped[str] = mapped_column(String(_ID), primary_key=True)
    swe_run: Mapped[str] = mapped_column(Text, primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(_ID), primary_key=True)
    outcome: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_swe_instances_model", "model"),)


class QuarantineRow(Base):
    """A quarantine entry (revision 0004): its scope, why, who, its expiry, its removal."""

    __tablename__ = "quarantines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    recipe: Mapped[str] = mapped_column(String(_ID), index=True)
    check_name: Mapped[str] = mapped_column(Text)
    hardware: Mapped[str | None] = mapped_column(String(_ID))
    reason: Mapped[str] = mapped_column(Text)
    owner: Mapped[str] = mapped_column(String(_ID))
    added_at: Mapped[datetime] = mapped_column(UtcDateTime)
    added_by: Mapped[str | None] = mapped_column(String(_ID))
    until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    runs: Mapped[int | None] = mapped_column(Integer)
    removed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    removed_by: Mapped[str | None] = mapped_column(String(_ID))
