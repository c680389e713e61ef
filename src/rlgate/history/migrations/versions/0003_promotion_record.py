"""How a run was promoted: whether it was forced, what was overridden, by whom.

``rlgate history promote --force`` promotes a run whose gate checks did not all pass; the
record keeps that it was forced, the reasons it overrode and who did it
(``Store.promotion``), so a band built from the run can be questioned later.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add runs.promotion_forced, runs.promotion_overrode and runs.promotion_by.

    Plain ``ALTER TABLE ... ADD COLUMN`` (no batch mode): on SQLite a batch operation that
    recreates ``runs`` drops it first, and with ``PRAGMA foreign_keys`` on (rlgate's
    connections) that deletes every result, step and SWE row of every run.
    """
    op.add_column(
        "runs",
        sa.Column("promotion_forced", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("runs", sa.Column("promotion_overrode", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("promotion_by", sa.String(200), nullable=True))


def downgrade() -> None:
    """Drop them (SQLite 3.35+ drops a column in place)."""
    for column in ("promotion_by", "promotion_overrode", "promotion_forced"):
        op.drop_column("runs", column)
