"""Nightly history: every Result rlgate produces, stored with its context (SQLite or PostgreSQL).

``model`` holds the plain typed records (:class:`~rlgate.history.model.RunContext`,
:class:`~rlgate.history.model.RecordedRun`, :class:`~rlgate.history.model.SweInstanceRow`);
``schema`` the SQLAlchemy tables; ``store`` the :class:`~rlgate.history.store.Store`
(``open_store``), which migrates a database to this rlgate's schema with the Alembic
revisions under ``migrations/``; ``ingest`` turns what a command read (JUnit, check-run and
SWE documents, a run directory) into what the store records; ``bands`` builds a recipe's
reference band from its promoted runs; ``triage`` labels a candidate's failing gate
checks against the recorded nightlies (pure: records in, labels out); ``swe_flaky`` finds
the SWE instances that flip between a model's stored runs (pure). SQLAlchemy and
Alembic (the ``[history]`` extra) are imported by ``schema``, ``store`` and ``bands`` only,
so importing this package or ``model``/``ingest``/``triage``/``swe_flaky`` needs neither.
See ``docs/history.md``.
"""
