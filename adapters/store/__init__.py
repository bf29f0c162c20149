"""The SQL metadata store: every observation, estimate, decision, migration and
alert of the daemon as a row a person can query (SQLite or PostgreSQL).

``SqlStore`` implements the ``Store`` port of ``armd.control.ports`` and the
read side the CLI prints; the schema is versioned with Alembic inside this
package (``schema/``) and described in docs/metadata-schema.md.
"""

from armd.adapters.store.errors import RecordRejected, SchemaOutdated, StoreError, StoreLost, StoreUnavailable, TableMissing
from armd.adapters.store.sql import SqlStore, redact_url

__all__ = ["SqlStore", "StoreError", "StoreUnavailable", "StoreLost", "RecordRejected", "SchemaOutdated", "TableMissing", "redact_url"]
