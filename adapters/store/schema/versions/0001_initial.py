"""The first schema: configuration, history tables and the views people query.

Revision ID: 0001
Revises:
Create Date: 2025-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)

QUERY_OVERVIEW = """
CREATE VIEW query_overview AS
SELECT q.name, q.status, q.status_reason, q.weight, q.settings, q.qos_fraction, q.settings_changed_at,
       e.memory_bytes AS estimated_memory_bytes, e.cpu AS estimated_cpu, e.at AS estimated_at,
       o.state_bytes AS measured_state_bytes, o.state_rows AS measured_state_rows, o.at AS measured_at
FROM queries AS q
LEFT JOIN estimates AS e ON e.id = (
    SELECT e2.id FROM estimates AS e2
    WHERE e2.query = q.name
    ORDER BY e2.at DESC, e2.id DESC LIMIT 1)
LEFT JOIN observations AS o ON o.id = (
    SELECT o2.id FROM observations AS o2
    WHERE o2.query = q.name AND (o2.state_bytes IS NOT NULL OR o2.state_rows IS NOT NULL)
    ORDER BY o2.at DESC, o2.id DESC LIMIT 1)
"""

OPEN_MIGRATIONS = "CREATE VIEW open_migrations AS SELECT * FROM migrations WHERE finished_at IS NULL"

# "The last hour" is computed by the database at query time; SQLite keeps
# times as 'YYYY-MM-DD HH:MM:SS.ffffff' text in UTC, which compares as text.
SINCE = {
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now', '-{n} {unit}')",
    "postgresql": "now() - interval '{n} {unit}'",
}


def _since(n: int, unit: str) -> str:
    dialect = op.get_bind().dialect.name
    if dialect not in SINCE:
        raise NotImplementedError(f"the armd metadata store supports SQLite and PostgreSQL, not {dialect}")
    return SINCE[dialect].format(n=n, unit=unit)


def upgrade() -> None:
    op.create_table(
        "streams",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("size_bytes", sa.Float, nullable=False),
        sa.Column("g", sa.Float, nullable=False),
        sa.Column("configured_d", sa.Float, nullable=False),
        sa.Column("last_d", sa.Float),
        sa.Column("last_rate_per_second", sa.Float),
        sa.Column("updated_at", UTC_TIME, nullable=False),
    )
    op.create_table(
        "queries",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("qos", sa.JSON, nullable=False),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text),
        sa.Column("settings", sa.JSON),
        sa.Column("qos_fraction", sa.Float),
        sa.Column("settings_changed_at", UTC_TIME),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.CheckConstraint("status IN ('pending', 'active', 'rejected', 'failed', 'removed')", name="ck_queries_status"),
    )
    op.create_table(
        "plan_nodes",
        sa.Column("query", sa.String(200), sa.ForeignKey("queries.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("node_id", sa.String(200), primary_key=True),
        sa.Column("op", sa.String(50), nullable=False),
        sa.Column("inputs", sa.JSON, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
    )
    op.create_table(
        "observations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTC_TIME, nullable=False),
        sa.Column("stream", sa.String(200)),
        sa.Column("query", sa.String(200)),
        sa.Column("rows", sa.BigInteger),
        sa.Column("interval_seconds", sa.Float),
        sa.Column("rate_per_second", sa.Float),
        sa.Column("d", sa.Float),
        sa.Column("l", sa.Float),
        sa.Column("g", sa.Float),
        sa.Column("state_rows", sa.BigInteger),
        sa.Column("state_bytes", sa.BigInteger),
        sa.Column("selectivities", sa.JSON),
    )
    op.create_index("ix_observations_at", "observations", ["at"])
    op.create_index("ix_observations_query_at", "observations", ["query", "at"])
    op.create_index("ix_observations_stream_at", "observations", ["stream", "at"])
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTC_TIME, nullable=False),
        sa.Column("policy", sa.String(100), nullable=False),
        sa.Column("trigger", sa.Text, nullable=False),
        sa.Column("feasible", sa.Boolean, nullable=False),
        sa.Column("dry_run", sa.Boolean, nullable=False),
        sa.Column("applied", sa.Boolean, nullable=False),
        sa.Column("weighted_qos", sa.Float, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("estimated_memory_bytes", sa.Float, nullable=False),
        sa.Column("estimated_cpu", sa.Float, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("inputs", sa.JSON, nullable=False),
        sa.Column("outputs", sa.JSON, nullable=False),
    )
    op.create_index("ix_decisions_at", "decisions", ["at"])
    op.create_table(
        "estimates",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTC_TIME, nullable=False),
        sa.Column("decision_id", sa.Integer, sa.ForeignKey("decisions.id", ondelete="SET NULL")),
        sa.Column("query", sa.String(200)),
        sa.Column("memory_bytes", sa.Float, nullable=False),
        sa.Column("cpu", sa.Float, nullable=False),
    )
    op.create_index("ix_estimates_at", "estimates", ["at"])
    op.create_index("ix_estimates_query_at", "estimates", ["query", "at"])
    op.create_table(
        "migrations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("query", sa.String(200), nullable=False),
        sa.Column("strategy", sa.String(50), nullable=False),
        sa.Column("state", sa.String(50), nullable=False),
        sa.Column("split_time", UTC_TIME),
        sa.Column("started_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.Column("finished_at", UTC_TIME),
        sa.Column("lost", sa.BigInteger),
        sa.Column("duplicated", sa.BigInteger),
        sa.Column("differing", sa.BigInteger),
        sa.Column("details", sa.JSON, nullable=False),
    )
    op.create_index("ix_migrations_query", "migrations", ["query"])
    op.create_index("ix_migrations_finished_at", "migrations", ["finished_at"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTC_TIME, nullable=False),
        sa.Column("kind", sa.String(100), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("query", sa.String(200)),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
    )
    op.create_index("ix_events_at", "events", ["at"])
    op.create_index("ix_events_query_at", "events", ["query", "at"])

    op.execute(QUERY_OVERVIEW)
    op.execute(f"CREATE VIEW recent_decisions AS SELECT * FROM decisions WHERE at >= {_since(1, 'hour')}")
    op.execute(OPEN_MIGRATIONS)
    op.execute(
        "CREATE VIEW recent_alerts AS SELECT * FROM events "
        f"WHERE severity IN ('warning', 'error') AND at >= {_since(24, 'hours')}"
    )


def downgrade() -> None:
    for view in ("recent_alerts", "open_migrations", "recent_decisions", "query_overview"):
        op.execute(f"DROP VIEW IF EXISTS {view}")
    for table in ("events", "migrations", "estimates", "decisions", "observations", "plan_nodes", "queries", "streams"):
        op.drop_table(table)
