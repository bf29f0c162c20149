"""Desired settings and actual state per query: the contract between deciding and applying.

The control cycle writes what it wants each query to run with
(``desired_settings``); the reconciler applies it and reports what runs
(``actual_states``). One row per query in each, upserted; history stays in
``decisions`` and ``migrations``, which gain ``uid``: the id armd generates
for a decision or a migration, so later records name it without waiting for
the store to answer.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "desired_settings",
        sa.Column("query", sa.String(200), primary_key=True),
        sa.Column("plan_version", sa.BigInteger, nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("join_order", sa.JSON),
        sa.Column("may_start", sa.Boolean, nullable=False),
        sa.Column("recommend_only", sa.Boolean, nullable=False),
        sa.Column("decision_id", sa.String(64)),
        sa.Column("at", UTC_TIME),
        sa.Column("reason", sa.JSON),
    )
    op.create_table(
        "actual_states",
        sa.Column("query", sa.String(200), primary_key=True),
        sa.Column("plan_version", sa.BigInteger, nullable=False),
        sa.Column("settings", sa.JSON),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("join_order", sa.JSON),
        sa.Column("migration_state", sa.String(50)),
        sa.Column("target_version", sa.BigInteger),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("retry_at", UTC_TIME),
        sa.Column("extra_state_bytes", sa.Float),
        sa.Column("at", UTC_TIME),
        sa.CheckConstraint("phase IN ('steady', 'migrating', 'retrying', 'failed')", name="ck_actual_states_phase"),
    )
    # Ids armd generates itself, so a record can name another before the store has answered.
    for table in ("decisions", "migrations"):
        op.add_column(table, sa.Column("uid", sa.String(36)))
        op.create_index(f"ux_{table}_uid", table, ["uid"], unique=True)


def downgrade() -> None:
    for table in ("decisions", "migrations"):
        op.drop_index(f"ux_{table}_uid", table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("uid")
    op.drop_table("actual_states")
    op.drop_table("desired_settings")
