"""What transactional tests leave behind: nothing. The test process empties every table with
DELETEs instead of Django's TRUNCATE (tests/conftest.py `deleting_flush`); the database after
the flush must be what a fresh migrate gives (no rows but the content types and permissions
post_migrate writes, no event written by the emptying, triggers armed again)."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import ProgrammingError, connection, transaction
from django.db.backends.postgresql.operations import DatabaseOperations

from clusters.models import Cluster
from jobs.models import Job
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import deleting_flush, make_user

REPOPULATED = {"django_content_type", "auth_permission"}  # kept, as post_migrate writes them


def _counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in connection.introspection.django_table_names(only_existing=True,
                                                                 include_views=False):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


@pytest.mark.django_db(transaction=True)
def test_a_flush_empties_every_table_and_its_audit_events() -> None:
    team = Team.objects.create(slug="vision-rl", name="Vision RL")
    owner = make_user("owner", team=team)
    Job.objects.create(team=team, name="a-job", created_by=owner)
    Cluster.objects.create(name="gpu-a", namespace="rl", api_url="https://gpu-a:6443")
    written = {table for table, count in _counts().items() if count}
    assert {"jobs_job", "jobs_jobevent", "tenancy_team", "tenancy_teamevent",
            "clusters_cluster", "clusters_clusterevent", "auth_user"} <= written

    kinds = apps.get_model("contenttypes", "ContentType")
    permissions = apps.get_model("auth", "Permission")
    before = (set(kinds.objects.values_list("pk", "app_label", "model")),
              set(permissions.objects.values_list("pk", "codename")))

    call_command("flush", interactive=False, verbosity=0, reset_sequences=False)

    assert (set(kinds.objects.values_list("pk", "app_label", "model")),
            set(permissions.objects.values_list("pk", "codename"))) == before
    left = {table: count for table, count in _counts().items()
            if count and table not in REPOPULATED}
    assert left == {}
    assert apps.get_model("contenttypes", "ContentType").objects.filter(
        app_label="jobs", model="job").exists()
    # the history triggers work again after the flush: a new row writes its event
    Team.objects.create(slug="again", name="Again")
    assert apps.get_model("tenancy", "TeamEvent").objects.filter(slug="again").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_append_only_guard_holds_outside_a_flush() -> None:
    Team.objects.create(slug="vision-rl", name="Vision RL")
    with pytest.raises(ProgrammingError, match="Cannot update or delete rows"), \
            transaction.atomic():
        apps.get_model("tenancy", "TeamEvent").objects.all().delete()


def test_the_deleting_flush_keeps_truncate_where_delete_would_differ() -> None:
    ops: Any = DatabaseOperations(connection)
    original = DatabaseOperations.sql_flush.__get__(ops)
    flush = deleting_flush(original, ops.quote_name)
    from django.core.management.color import no_style

    style = no_style()
    assert flush(style, ["a", "django_content_type", "b", "auth_permission"]) == [
        'DELETE FROM "a";', 'DELETE FROM "b";']
    assert flush(style, ["a"], reset_sequences=True) == ['TRUNCATE "a" RESTART IDENTITY;']
    assert flush(style, ["a"], allow_cascade=True) == ['TRUNCATE "a" CASCADE;']
    assert flush(style, []) == []


@pytest.mark.django_db
def test_every_foreign_key_is_checked_at_commit() -> None:
    """The DELETEs run in any order inside one transaction: only foreign keys checked at commit
    (Django's DEFERRABLE INITIALLY DEFERRED) let a referenced row go before its referrer."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT conrelid::regclass::text, conname FROM pg_constraint "
                       "WHERE contype = 'f' AND NOT (condeferrable AND condeferred)")
        assert cursor.fetchall() == []
