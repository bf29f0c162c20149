"""Stream observations say how far in event time their rows reached.

Why: several applications read one stream, and one that fell behind reports
the past; the daemon combining their reports needs each report's position
to take the stream's rate from the readers at its front
(``costmodel.measured.StreamFrontier``), not a mix of before and after a step.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("observations", sa.Column("event_end", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("observations", "event_end")  # not a batch copy: SQLite's views over the table must stay valid
