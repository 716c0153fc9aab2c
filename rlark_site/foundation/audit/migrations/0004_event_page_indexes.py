"""The paged lookup's indexes (audit.lookup): on every event table (pgh_created_at, pgh_id)
including pgh_context_id, (pgh_obj_id, pgh_created_at, pgh_id) and, where the table has a
team, (team_id, pgh_created_at, pgh_id); on the request context, its team.

Built without CONCURRENTLY (inside the migration's transaction): writes to an event table
wait while its indexes are built (docs/operations.md, upgrading)."""

from django.db import migrations


def _event_tables(apps):
    for model in apps.get_models():
        names = {field.name for field in model._meta.fields}
        if model.__name__.endswith("Event") and {"pgh_obj", "pgh_id"} <= names:
            yield model._meta.db_table, "team_id" in {f.column for f in model._meta.fields}


def create_indexes(apps, schema_editor):
    from rlark_site.foundation.audit.indexes import CONTEXT_INDEXES, index_statements

    for table, has_team in sorted(_event_tables(apps)):
        for statement in index_statements(table, has_team=has_team):
            schema_editor.execute(statement)
    for statement in CONTEXT_INDEXES:
        schema_editor.execute(statement)


def drop_indexes(apps, schema_editor):
    for table, _has_team in sorted(_event_tables(apps)):
        for suffix in ("at", "obj_at", "team_at"):
            schema_editor.execute(f'DROP INDEX IF EXISTS "{table}_{suffix}"')
    schema_editor.execute("DROP INDEX IF EXISTS pghistory_context_team")


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0003_event_lookup_indexes_notifications"),
        ("tenancy", "0003_accounts_tokens_audit"),
        ("clusters", "0010_audit_no_truncate"),
        ("jobs", "0008_notifications"),
    ]

    operations = [migrations.RunPython(create_indexes, drop_indexes)]
