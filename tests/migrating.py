"""Migration tests' moves: to a historical state, and back to the whole project's latest.

Migrating one app backwards also unapplies every migration of another app that depends on
the ones undone (audit.0002..0005 depend on jobs migrations: taking jobs back to 0006 drops
the request context's generated `metadata_user`/`metadata_team` columns of audit.0005).
Going forward again by that app's leaf alone leaves the others unapplied, and every later
test on the same database worker fails on a missing column. So a migration test always
returns with `migrate` for every app (its `post_migrate` receivers too, as a deploy runs
them), and checks that nothing is left to apply.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(target: list[tuple[str, str]]) -> Any:
    """Migrate to `target`; the historical apps at that point."""
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


def unapplied() -> list[str]:
    """The migrations the project's latest state still needs, as "app.name"."""
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


def restore_latest() -> None:
    """Every app at its latest migration, as `manage.py migrate` leaves a deployment."""
    call_command("migrate", verbosity=0, interactive=False)
    left = unapplied()
    assert not left, f"migrations left unapplied after a migration test: {left}"


@contextmanager
def migrated_to(target: list[tuple[str, str]]) -> Iterator[Any]:
    """The historical apps at `target`; on leaving, the whole project at its latest again."""
    try:
        yield migrate(target)
    finally:
        restore_latest()
