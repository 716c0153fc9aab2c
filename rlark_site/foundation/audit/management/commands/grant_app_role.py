"""Give the application's database role data rights only, the audit append-only.

Run as the tables' owner (the role migrations run as), after every `migrate`:

    DATABASE_URL=postgresql://owner@db/rlark manage.py grant_app_role rlark_app

The application then connects as `rlark_app`: it owns nothing, so it can neither disable nor
drop a trigger nor alter a table; it may read and write the product's tables, and only read and
append to the audit's event tables (no UPDATE, DELETE or TRUNCATE). See docs/security.md.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction
from pghistory.models import Context, Event
from psycopg import sql

DML = sql.SQL("SELECT, INSERT, UPDATE, DELETE")
APPEND_ONLY = sql.SQL("SELECT, INSERT")


def event_tables() -> list[str]:
    """Every audit event table (pghistory event models), which the app may only append to."""
    return sorted(model._meta.db_table for model in apps.get_models()
                  if issubclass(model, Event) and not model._meta.proxy)


def statements(role: str) -> list[sql.Composed]:
    who = sql.Identifier(role)
    events = set(event_tables())
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = sorted(row[0] for row in cursor.fetchall())
    plan = [
        sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {}").format(who),
        sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(who),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(who),
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(who),
    ]
    special = {
        "django_migrations": sql.SQL("SELECT"),
        # pghistory upserts the request context (who, where) that events point to.
        Context._meta.db_table: sql.SQL("SELECT, INSERT, UPDATE"),
    }
    for table in tables:
        rights = special.get(table) or (APPEND_ONLY if table in events else DML)
        plan.append(sql.SQL("GRANT {} ON {} TO {}").format(rights, sql.Identifier(table), who))
    return plan


class Command(BaseCommand):
    help = "Grant the application's database role DML rights only; the audit append-only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("role", help="an existing role (CREATE ROLE rlark_app LOGIN ...)")

    def handle(self, *args: Any, **options: Any) -> None:
        plan = statements(options["role"])
        with transaction.atomic(), connection.cursor() as cursor:
            for statement in plan:
                cursor.execute(statement)
        self.stdout.write(f"Granted {options['role']} rights on {len(plan) - 4} tables.")
