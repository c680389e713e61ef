"""The initial history schema: runs, results, per-step metrics, SWE instance outcomes.

Revision ID: 0001
Revises:
Create Date: 2026-05-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = 200


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(_ID), nullable=False),
        sa.Column("recipe", sa.String(_ID), nullable=False),
        sa.Column("recipe_sha256", sa.String(64), nullable=True),
        sa.Column("branch", sa.String(_ID), nullable=True),
        sa.Column("commits", sa.JSON(), nullable=False),
        sa.Column("versions", sa.JSON(), nullable=False),
        sa.Column("hardware", sa.String(_ID), nullable=True),
        sa.Column("nightly_id", sa.String(_ID), nullable=True),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.Column("label", sa.String(_ID), nullable=True),
        sa.Column("overrides", sa.JSON(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("promoted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("run_id", name="uq_runs_run_id"),
    )
    op.create_index("ix_runs_recipe", "runs", ["recipe"])
    op.create_index("ix_runs_nightly_id", "runs", ["nightly_id"])
    op.create_index("ix_runs_recorded_at", "runs", ["recorded_at"])
    fk = {"ondelete": "CASCADE"}
    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("value_nan", sa.Boolean(), nullable=False),
        sa.Column("op", sa.String(2), nullable=True),
        sa.Column("threshold", sa.Double(), nullable=True),
        sa.Column("threshold_nan", sa.Boolean(), nullable=False),
        sa.Column("unit", sa.Text(), nullable=False),
        sa.Column("bound", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("informational", sa.Text(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_results"),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_results_run_pk_runs", **fk),
    )
    op.create_index("ix_results_run_pk", "results", ["run_pk"])
    op.create_table(
        "step_metrics",
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(2 * _ID), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("value_nan", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("run_pk", "tag", "step", name="pk_step_metrics"),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_step_metrics_run_pk_runs", **fk),
    )
    op.create_table(
        "swe_instances",
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(_ID), nullable=False),
        sa.Column("swe_run", sa.Text(), nullable=False),
        sa.Column("instance_id", sa.String(_ID), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(
            "run_pk", "model", "swe_run", "instance_id", name="pk_swe_instances"
        ),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_swe_instances_run_pk_runs", **fk),
    )
    op.create_index("ix_swe_instances_model", "swe_instances", ["model"])


def downgrade() -> None:
    """Drop the four tables."""
    for table in ("swe_instances", "step_metrics", "results", "runs"):
        op.drop_table(table)
