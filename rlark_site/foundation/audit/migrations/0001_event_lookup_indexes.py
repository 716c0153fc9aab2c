"""Indexes for the audit lookups over pghistory's aggregated `Events`.

`Events` exposes every event table's `pgh_obj_id` as text, so a lookup by object (a run's
audit trail, `audit-events/?job=`) compares `pgh_obj_id::text`: each event table gets an
index on that expression, and one on (pgh_obj_id, pgh_id) for the previous version of each
event that `Events` reads to compute its diff (one index probe instead of reading the
object's whole history per event). The actor filter reads `metadata -> 'user'` of the request
context: indexed too. A new audited model's event table needs the same index
(tests/site/test_audit_indexes.py says which).
"""

from django.db import migrations


def _event_tables(apps):
    for model in apps.get_models():
        names = {field.name for field in model._meta.fields}
        if model.__name__.endswith("Event") and {"pgh_obj", "pgh_id"} <= names:
            yield model._meta.db_table


def create_indexes(apps, schema_editor):
    for table in sorted(_event_tables(apps)):
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{table}_obj_text" ON "{table}" ((pgh_obj_id::text))'
        )
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{table}_obj_pgh" ON "{table}" (pgh_obj_id, pgh_id)'
        )
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS pghistory_context_user "
        "ON pghistory_context ((metadata -> 'user'))"
    )


def drop_indexes(apps, schema_editor):
    for table in sorted(_event_tables(apps)):
        schema_editor.execute(f'DROP INDEX IF EXISTS "{table}_obj_text"')
        schema_editor.execute(f'DROP INDEX IF EXISTS "{table}_obj_pgh"')
    schema_editor.execute("DROP INDEX IF EXISTS pghistory_context_user")


class Migration(migrations.Migration):

    dependencies = [
        ("pghistory", "__latest__"),
        ("tenancy", "0002_team_name_no_control_characters"),
        ("clusters", "0007_verification_match_summary"),
        ("jobs", "0003_role_position_deferred"),
    ]

    operations = [migrations.RunPython(create_indexes, drop_indexes)]
