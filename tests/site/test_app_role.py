"""The application's database role (manage.py grant_app_role) cannot rewrite the audit: no
TRUNCATE, DELETE or UPDATE on event tables, no disabling or dropping their triggers; and every
event table refuses TRUNCATE even for its owner."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pghistory.models
import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection, transaction
from django.db.utils import DatabaseError
from psycopg import sql

from rlark_site.foundation.audit.management.commands.grant_app_role import event_tables
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def app_role() -> Iterator[str]:
    role = f"rlark_app_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
    call_command("grant_app_role", role)
    yield role
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        cursor.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _as_role(role: str, statement: str) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
        cursor.execute(statement)


def test_every_event_model_is_guarded_against_truncate() -> None:
    models = [m for m in apps.get_models()
              if issubclass(m, pghistory.models.Event) and not m._meta.proxy]
    assert models
    for model in models:
        names = {trigger.name for trigger in model._meta.triggers}
        assert {"no_truncate", "append_only"} <= names, model


def test_even_the_owner_cannot_truncate_an_event_table(team: Team) -> None:
    with pytest.raises(DatabaseError, match="Cannot truncate"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute('TRUNCATE "tenancy_teamevent"')


@pytest.mark.parametrize("statement", [
    'TRUNCATE "{table}"',
    'DELETE FROM "{table}"',
    'UPDATE "{table}" SET pgh_label = \'rewritten\'',
    'ALTER TABLE "{table}" DISABLE TRIGGER ALL',
    'ALTER TABLE "{table}" DISABLE TRIGGER "pgtrigger_append_only_e6a4b"',
    'DROP TABLE "{table}"',
    "SET pgtrigger.ignore = '{{pgtrigger_append_only_e6a4b}}'; DELETE FROM \"{table}\"",
])
def test_the_app_role_cannot_rewrite_the_audit(app_role: str, team: Team,
                                               statement: str) -> None:
    for table in event_tables():
        with pytest.raises(DatabaseError):
            _as_role(app_role, statement.format(table=table))


def test_the_app_role_writes_data_and_its_audit(app_role: str) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(app_role)))
        Team.objects.create(slug="made-by-app", name="App")
        Team.objects.filter(slug="made-by-app").update(name="App 2")
        cursor.execute("SELECT count(*) FROM tenancy_teamevent WHERE slug = 'made-by-app'")
        events = cursor.fetchone()[0]
        cursor.execute("RESET ROLE")  # SET LOCAL outlives a released savepoint
    assert events == 2
