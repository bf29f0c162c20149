"""The heralds table: heralds (paper 002) that people and programs write with SQL or ``armd herald add``.

A herald promises that a stream's next tuples match a range per attribute,
for a lifespan: the next ``lifespan_count`` tuples, or the tuples whose
event time lies in ``[starts_at, starts_at + lifespan_seconds)``. Exactly
one of the two is set. ``patterns`` is a JSON object from attribute to
``[low, high]`` (closed; ``null`` for an unbounded end). The times default
to the database's clock so a plain SQL ``INSERT`` needs only the stream,
the patterns and a lifespan.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "heralds",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("stream", sa.String(200), nullable=False),
        sa.Column("patterns", sa.JSON, nullable=False),
        sa.Column("lifespan_count", sa.BigInteger, nullable=True),
        sa.Column("lifespan_seconds", sa.Float, nullable=True),
        sa.Column("starts_at", UTC_TIME, nullable=False, server_default=sa.func.current_timestamp()),
        sa.Column("created_at", UTC_TIME, nullable=False, server_default=sa.func.current_timestamp()),
        sa.Column("source", sa.String(50), nullable=False, server_default="sql"),
        sa.CheckConstraint(
            "(lifespan_count IS NULL AND lifespan_seconds > 0) OR (lifespan_seconds IS NULL AND lifespan_count > 0)",
            name="ck_heralds_one_lifespan",
        ),
    )
    op.create_index("ix_heralds_stream_starts_at", "heralds", ["stream", "starts_at"])


def downgrade() -> None:
    op.drop_index("ix_heralds_stream_starts_at", table_name="heralds")
    op.drop_table("heralds")
