"""Alembic entry point, run by ``SqlStore.upgrade`` with an open connection.

``SqlStore`` passes the connection in ``config.attributes["connection"]``;
there is no alembic.ini and no URL here, so credentials never reach Alembic's
configuration or logs.
"""

from __future__ import annotations

from alembic import context

from armd.adapters.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None or context.is_offline_mode():
    raise RuntimeError("the armd schema is upgraded through SqlStore.upgrade(), which passes an open connection")

context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
