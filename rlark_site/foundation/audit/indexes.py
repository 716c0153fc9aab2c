"""The audit lookups' indexes on every event table, kept after every `migrate`.

The lookup (audit.lookup) pages each event table in the order (pgh_created_at, pgh_id), so
each table gets that order as an index, alone (a model's or everyone's events; the
request-context filters by team or actor check `pgh_context_id`, included so the walk reads
the index only) and behind each equality filter it pushes down: the object
(`pgh_obj_id`: a run's audit trail) and the team (`team_id`, where the table has it). The
previous event of an object (for the diff) is found on (pgh_obj_id, pgh_id). The request
contexts of an actor or a team are found on their generated `metadata_user`/`metadata_team`
columns with the id (audit.0005). The older `pgh_obj_id::text` index serves pghistory's own
`Events`. All are created idempotently after each `migrate` (migrations audit.0001..0005
made them for the tables of their time), so an event table added later is covered without a
migration of its own.
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


def _has_team(table: str) -> bool:
    return any(model._meta.db_table == table
               and "team_id" in {field.column for field in model._meta.fields}
               for model in apps.get_models())


def index_statements(table: str, *, has_team: bool) -> list[str]:
    """CREATE INDEX IF NOT EXISTS statements of one event table's lookup indexes."""
    statements = [
        f'CREATE INDEX IF NOT EXISTS "{table}_obj_text" ON "{table}" ((pgh_obj_id::text))',
        f'CREATE INDEX IF NOT EXISTS "{table}_obj_pgh" ON "{table}" (pgh_obj_id, pgh_id)',
        f'CREATE INDEX IF NOT EXISTS "{table}_at" ON "{table}" (pgh_created_at, pgh_id) '
        f"INCLUDE (pgh_context_id)",
        f'CREATE INDEX IF NOT EXISTS "{table}_obj_at" ON "{table}" '
        f"(pgh_obj_id, pgh_created_at, pgh_id)",
    ]
    if has_team:
        statements.append(
            f'CREATE INDEX IF NOT EXISTS "{table}_team_at" ON "{table}" '
            f"(team_id, pgh_created_at, pgh_id)"
        )
    return statements


# The expression indexes of migration audit.0004 (which still creates them); audit.0005
# replaces them with the columns below.
CONTEXT_INDEXES = [
    "CREATE INDEX IF NOT EXISTS pghistory_context_user ON pghistory_context ((metadata -> 'user'))",
    "CREATE INDEX IF NOT EXISTS pghistory_context_team ON pghistory_context ((metadata -> 'team'))",
]

# The request context's user and team, generated from its metadata (audit.0005): (column, key).
CONTEXT_KEY_COLUMNS = [("metadata_user", "user"), ("metadata_team", "team")]
# Each with the context's id, so that the contexts of an actor or a team are an index-only scan.
CONTEXT_KEY_INDEXES = [
    f"CREATE INDEX IF NOT EXISTS pghistory_context_{column} ON pghistory_context ({column}, id)"
    for column, _key in CONTEXT_KEY_COLUMNS
]


def _has_context_columns(cursor: Any) -> bool:
    cursor.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'pghistory_context' "
        "AND column_name = ANY(%s)", [[column for column, _key in CONTEXT_KEY_COLUMNS]],
    )
    return bool(cursor.fetchone()[0] == len(CONTEXT_KEY_COLUMNS))


def ensure_lookup_indexes(**_: Any) -> None:
    """`post_migrate` receiver: create any missing lookup index (cheap when all exist)."""
    with connection.cursor() as cursor:
        for table in event_tables():
            for statement in index_statements(table, has_team=_has_team(table)):
                cursor.execute(statement)
        if _has_context_columns(cursor):  # (not before audit.0005 is applied)
            for statement in CONTEXT_KEY_INDEXES:
                cursor.execute(statement)
