"""rlgate.testing.postgres: a real PostgreSQL server in a temporary directory (history tests)."""

import pytest

from rlgate.testing.postgres import PostgresUnavailable, start_postgres


def test_a_real_server_starts_answers_sql_and_is_removed_on_stop():
    sqlalchemy = pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")
    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    try:
        engine = sqlalchemy.create_engine(server.url)
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("create table t (x int)"))
            conn.execute(sqlalchemy.text("insert into t values (41), (1)"))
            total = conn.execute(sqlalchemy.text("select sum(x) from t")).scalar()
            version = conn.execute(sqlalchemy.text("show server_version")).scalar()
        engine.dispose()
        assert total == 42 and version
    finally:
        server.stop()
    assert not server.folder.exists()
