"""Migration tests' moves, on a scratch database of their own.

A data migration is tested by migrating to the state before it, writing rows with the
historical models, migrating on and comparing. That used to happen on the worker's test
database, fully migrated: taking jobs back to 0006 unapplied (and then re-applied) ~60
migrations of several apps, each rendering the project's model states, about 190-200 s of
one worker per module, the two slowest modules of the suite. It was also fragile: migrating
one app backwards unapplies every migration of another app that depends on the ones undone
(audit.0002..0005 depend on jobs migrations), going forward by that app's leaf alone left them
unapplied, and every later test on the worker failed on audit.0005's missing column.

So `migrated_to` creates an empty database beside the test database, points the default
connection at it, migrates it forward from nothing to the target (only what the target
depends on), and on leaving drops it and points the connection back. The worker's test
database is never migrated by a test, and the historical path is the one a deployment of
that time took: forward from its own beginning.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.migrations.executor import MigrationExecutor


def migrate(target: list[tuple[str, str]]) -> Any:
    """Migrate the default database to `target`; the historical apps at that point."""
    executor = MigrationExecutor(connections["default"])
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


def applied() -> set[tuple[str, str]]:
    """The migrations recorded as applied on the default database."""
    return set(MigrationExecutor(connections["default"]).recorder.applied_migrations())


def _point_at(connection: Any, name: str) -> None:
    connection.close()
    connection.settings_dict["NAME"] = name
    settings.DATABASES["default"]["NAME"] = name


@contextmanager
def migrated_to(target: list[tuple[str, str]]) -> Iterator[Any]:
    """The historical apps at `target`, on a new database migrated forward from nothing; the
    default connection is back on the test database, untouched, when the block is left."""
    connection = connections["default"]
    test_database = connection.settings_dict["NAME"]
    scratch = f"{test_database}_migrations"
    quote = connection.ops.quote_name

    def recreate(create: bool) -> None:
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(scratch)} WITH (FORCE)")
            if create:
                cursor.execute(f"CREATE DATABASE {quote(scratch)}")

    before = applied()
    recreate(create=True)
    _point_at(connection, scratch)
    try:
        yield migrate(target)
    finally:
        _point_at(connection, test_database)
        recreate(create=False)
    assert applied() == before, "a migration test changed the worker's test database"
