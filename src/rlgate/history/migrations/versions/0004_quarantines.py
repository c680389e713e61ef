"""Quarantine entries: a check whose failure does not block, for a while (issue 23).

``rlgate history quarantine add|list|remove`` (:mod:`rlgate.history.quarantine`): the
scope (recipe, check name, optional hardware), reason and owner, who added it and when,
its expiry (a time, or a number of nightlies), and its removal (kept as history).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``quarantines`` (a new table: nothing existing is touched)."""
    op.create_table(
        "quarantines",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("recipe", sa.String(200), nullable=False),
        sa.Column("check_name", sa.Text(), nullable=False),
        sa.Column("hardware", sa.String(200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("added_at", sa.DateTime(), nullable=False),
        sa.Column("added_by", sa.String(200), nullable=True),
        sa.Column("until", sa.DateTime(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=True),
        sa.Column("removed_at", sa.DateTime(), nullable=True),
        sa.Column("removed_by", sa.String(200), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantines")),
    )
    op.create_index(op.f("ix_quarantines_recipe"), "quarantines", ["recipe"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index(op.f("ix_quarantines_recipe"), table_name="quarantines")
    op.drop_table("quarantines")
