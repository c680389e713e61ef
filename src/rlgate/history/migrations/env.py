"""Alembic environment of the history store: runs on the connection ``open_store`` hands it.

``rlgate.history.store.open_store`` upgrades a database to the newest revision inside one
transaction on its own connection (``config.attributes["connection"]``); there is no
``alembic.ini`` and no URL here. For a developer writing a revision: ``alembic -c
/dev/null -x url=sqlite:///x.db revision --autogenerate`` works too (``-x url=``).
"""

from alembic import context
from sqlalchemy import create_engine

from rlgate.history.schema import Base
from rlgate.history.store import VERSION_TABLE

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    """Migrate on the given connection, or on a URL passed as ``-x url=...``."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, version_table=VERSION_TABLE
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url")
    engine = create_engine(url)
    with engine.connect() as conn:
        context.configure(
            connection=conn, target_metadata=target_metadata, version_table=VERSION_TABLE
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations()
