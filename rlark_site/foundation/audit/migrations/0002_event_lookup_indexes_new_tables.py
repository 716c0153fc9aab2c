"""The lookup indexes of migration 0001 on the event tables added since (pod attempts, signal
watches, ...): 0001's idempotent statements, run again over every event table."""

from importlib import import_module

from django.db import migrations

first = import_module("rlark_site.foundation.audit.migrations.0001_event_lookup_indexes")


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0001_event_lookup_indexes"),
        ("tenancy", "0003_accounts_tokens_audit"),
        ("clusters", "0010_audit_no_truncate"),
        ("jobs", "0007_run_record_owns_lifecycle"),
    ]

    operations = [migrations.RunPython(first.create_indexes, migrations.RunPython.noop)]
