"""Observations keep a JISC join's measured key-match selectivity per pair of its streams.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("observations", sa.Column("pair_selectivities", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("observations") as batch:
        batch.drop_column("pair_selectivities")
