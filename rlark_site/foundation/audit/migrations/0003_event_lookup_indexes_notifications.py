"""The lookup indexes of migration 0001 on the event table of team webhooks (added by
jobs.0008_notifications): 0001's idempotent statements, run again over every event table."""

from importlib import import_module

from django.db import migrations

first = import_module("rlark_site.foundation.audit.migrations.0001_event_lookup_indexes")


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0002_event_lookup_indexes_new_tables"),
        ("jobs", "0008_notifications"),
    ]

    operations = [migrations.RunPython(first.create_indexes, migrations.RunPython.noop)]
