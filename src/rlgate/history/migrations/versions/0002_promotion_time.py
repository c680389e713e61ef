"""When a run was promoted or demoted; results indexed by check name.

``rlgate history show`` says since when a run is in its recipe's band, and the history of
one check across nightlies (``history show --check``, triage) is read by name.

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add runs.promoted_at and the results name index."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("promoted_at", sa.DateTime(), nullable=True))
    op.create_index("ix_results_name", "results", ["name"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_results_name", table_name="results")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("promoted_at")
