"""The request context's user and team as columns of their own, generated from its metadata
(`metadata -> 'user'`, `metadata -> 'team'`, stored), each indexed together with the context's
id: an actor's or a team's contexts are read from the index alone (an index-only scan)
instead of one table page per context, which was most of an `?actor=` page's time (2,000
pages for one user of bench/audit_lookup.py). They replace the expression indexes of 0004.

pghistory's `Context` model does not know the columns; nothing writes them (PostgreSQL
computes them) and Django names the columns it reads. Adding a stored generated column
rewrites pghistory_context once: writes that attach a context wait meanwhile
(docs/operations.md, upgrading)."""

from django.db import migrations

from rlark_site.foundation.audit.indexes import CONTEXT_KEY_COLUMNS, CONTEXT_KEY_INDEXES

FORWARD = [
    "ALTER TABLE pghistory_context "
    + ", ".join(
        f"ADD COLUMN IF NOT EXISTS {column} jsonb GENERATED ALWAYS AS (metadata -> '{key}') STORED"
        for column, key in CONTEXT_KEY_COLUMNS
    ),
    *CONTEXT_KEY_INDEXES,
    "DROP INDEX IF EXISTS pghistory_context_user",
    "DROP INDEX IF EXISTS pghistory_context_team",
]

BACKWARD = [
    "CREATE INDEX IF NOT EXISTS pghistory_context_user ON pghistory_context ((metadata -> 'user'))",
    "CREATE INDEX IF NOT EXISTS pghistory_context_team ON pghistory_context ((metadata -> 'team'))",
    "ALTER TABLE pghistory_context "
    + ", ".join(f"DROP COLUMN IF EXISTS {column}" for column, _key in CONTEXT_KEY_COLUMNS),
]


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0004_event_page_indexes"),
        ("pghistory", "0007_auto_20250421_0444"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
