"""Observations keep a query's measured model inputs: groups per window size and bytes per state row, per node.

Why: the daemon deciding for an ``armd.agent`` application reads its
statistics back from the store; without these its model of the query falls
back to one group and the plan's bytes per row, hundreds of times off.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("observations", sa.Column("measured_inputs", sa.JSON))


def downgrade() -> None:
    op.drop_column("observations", "measured_inputs")  # not a batch copy: SQLite's views over the table must stay valid
