"""Engine batches: every progress event of a managed Spark query.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("query", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("plan_version", sa.Integer),
        sa.Column("batch_id", sa.BigInteger, nullable=False),
        sa.Column("at", UTC_TIME, nullable=False),
        sa.Column("input_rows", sa.BigInteger, nullable=False),
        sa.Column("batch_ms", sa.BigInteger, nullable=False),
        sa.Column("event_min", UTC_TIME),
        sa.Column("event_max", UTC_TIME),
        sa.Column("watermark", UTC_TIME),
        sa.Column("state_rows", sa.BigInteger, nullable=False),
        sa.Column("state_bytes", sa.BigInteger, nullable=False),
        sa.Column("rows_dropped_by_watermark", sa.BigInteger, nullable=False),
        sa.Column("durations_ms", sa.JSON, nullable=False),
        sa.Column("operators", sa.JSON, nullable=False),
    )
    op.create_index("ix_batches_at", "batches", ["at"])
    op.create_index("ix_batches_query_at", "batches", ["query", "at"])


def downgrade() -> None:
    op.drop_table("batches")
