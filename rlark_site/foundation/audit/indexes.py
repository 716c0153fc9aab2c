"""The audit lookups' indexes on every event table, kept after every `migrate`.

pghistory's `Events` exposes each event table's `pgh_obj_id` as text, so a lookup by object
(a run's audit trail, `audit-events/?job=`) compares `pgh_obj_id::text`; computing an event's
diff reads the object's previous event. Every event table gets an index on each, created
idempotently after each `migrate` (migrations audit.0001/0002 made them for the tables of
their time), so an event table added later is covered without a migration of its own.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import connection


def event_tables() -> list[str]:
    """The tables of pghistory event models that track an object."""
    return sorted(
        model._meta.db_table for model in apps.get_models()
        if model.__name__.endswith("Event")
        and {"pgh_obj", "pgh_id"} <= {field.name for field in model._meta.fields}
    )


def ensure_lookup_indexes(**_: Any) -> None:
    """`post_migrate` receiver: create any missing lookup index (cheap when all exist)."""
    with connection.cursor() as cursor:
        for table in event_tables():
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS "{table}_obj_text" ON "{table}" ((pgh_obj_id::text))'
            )
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS "{table}_obj_pgh" ON "{table}" (pgh_obj_id, pgh_id)'
            )
