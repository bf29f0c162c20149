"""The applications table, and which application a query belongs to: the store as the contract with ``armd.agent``.

A user's Spark application that imports ``armd.agent`` registers itself here
(one row per application name: where it runs, since when, when it last
reported, whether it applies or only recommends) and its queries in
``queries`` with ``app`` set. Queries of the daemon's own configuration keep
``app`` NULL, so the daemon's configuration sync leaves agent queries alone.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "applications",
        sa.Column("app", sa.String(200), primary_key=True),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", UTC_TIME, nullable=False),
        sa.Column("last_seen_at", UTC_TIME, nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="running"),
        sa.CheckConstraint("mode IN ('apply', 'recommend')", name="ck_applications_mode"),
        sa.CheckConstraint("status IN ('running', 'stopped', 'gone')", name="ck_applications_status"),
    )
    op.add_column("queries", sa.Column("app", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("queries", "app")
    op.drop_table("applications")
