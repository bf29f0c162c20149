"""Retention and grouping: ``decisions.trigger_code`` beside the trigger text, an index on ``estimates.decision_id``.

``estimates`` gains one row per query per observation and the CLI reads a
decision's estimates by ``decision_id``: without an index each lookup scans
millions of rows, and so does retention when it clears references to pruned
decisions. The trigger text carries figures; its code
(``adapters/store/triggers.py``) is what can be grouped. Existing decisions
get their code from their text.

Revision ID: 0007
Revises: 0005 (another branch may add a 0006; the chain is set when they are merged)
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from armd.adapters.store.triggers import OTHER, TRIGGER_CODES

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("decisions", sa.Column("trigger_code", sa.String(40)))
    cases = " ".join(f"WHEN substr(trigger, 1, {len(prefix)}) = '{prefix}' THEN '{code}'" for prefix, code in TRIGGER_CODES)
    op.execute(f"UPDATE decisions SET trigger_code = CASE {cases} ELSE '{OTHER}' END")
    op.create_index("ix_decisions_trigger_code", "decisions", ["trigger_code"])
    op.create_index("ix_estimates_decision_id", "estimates", ["decision_id"])


def downgrade() -> None:
    op.drop_index("ix_estimates_decision_id", "estimates")
    op.drop_index("ix_decisions_trigger_code", "decisions")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("trigger_code")
