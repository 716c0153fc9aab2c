"""Shared fixtures: a team with an owner (maintainer) and a second member, an outsider in another
team, and a platform admin, so every view test can also prove cross-tenant denial."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pgtrigger
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.commands import flush
from django.test.utils import override_settings
from django.utils import translation
from rest_framework.test import APIClient

from rlark_site.foundation.tenancy.models import ApiToken, MemberRole, Membership, Team
from tests.parallel import (
    clone_test_database,
    drop_template,
    heaviest_first,
    isolate_redis,
    start_template_builder,
    stop_template_builder,
    unique_nodeids,
)
from tests.query_bounds import bounded_queries

User = get_user_model()
REPO = Path(__file__).resolve().parent.parent
DEMO_FLEET = REPO / "deploy" / "fleets" / "demo.yaml"
PASSWORD = "correct-horse-battery"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist every worker gets a Redis database of its own, and the controller
    starts migrating the run's template database at once (tests/parallel.py)."""
    isolate_redis(os.environ.get("PYTEST_XDIST_WORKER", ""))
    start_template_builder(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_template_builder()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test has a node id of its own (`unique_nodeids`); under pytest-xdist the longest
    modules are collected first (tests/parallel.py HEAVY_MODULES), so `--dist loadscope
    --no-loadscope-reorder` starts them first; a serial run keeps pytest's order."""
    unique_nodeids(items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = heaviest_first(items)


@pytest.fixture(scope="session")
def django_db_setup(request: pytest.FixtureRequest, django_test_environment: None,
                    django_db_blocker: Any, django_db_use_migrations: bool,
                    django_db_keepdb: bool, django_db_createdb: bool,
                    django_db_modify_db_settings: None) -> Iterator[None]:
    """pytest-django's fixture; under xdist each worker's database is a copy of one template
    migrated once per run (tests/parallel.py) instead of every worker running the migrations.
    With --reuse-db or --no-migrations, pytest-django's own way."""
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _disable_migrations, _get_databases_for_setup

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    keepdb = django_db_keepdb and not django_db_createdb
    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    verbosity = request.config.option.verbose
    cloned = bool(worker) and aliases == {"default"} and not serialized_aliases and \
        not keepdb and django_db_use_migrations
    if not django_db_use_migrations:
        _disable_migrations()
    with django_db_blocker.unblock():
        if cloned:
            db_cfg = clone_test_database(worker, verbosity=verbosity)
        else:
            db_cfg = setup_databases(verbosity=verbosity, interactive=False, aliases=aliases,
                                     serialized_aliases=serialized_aliases, keepdb=keepdb)
    yield
    if django_db_keepdb:
        return
    with django_db_blocker.unblock():
        _end_other_sessions()
        teardown_databases(db_cfg, verbosity=verbosity)
        if cloned:
            drop_template(worker)


def _end_other_sessions() -> None:
    """End what is still connected to this worker's test database when the run is over, so
    dropping it does not fail with "is being accessed by other users" (seen once in a
    fresh-clone run: a connection a test's thread or process left open until the very end)."""
    from django.db import connection, connections

    name = connection.settings_dict["NAME"]
    connections.close_all()
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [name])


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hasher() -> Iterator[None]:
    """Full-strength PBKDF2 costs ~0.65 s a user here; tests only need a hasher that works.
    Production keeps Django's defaults (the setting is untouched outside the test process)."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


# Rows post_migrate writes after every flush (see `deleting_flush`).
KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def deleting_flush(original: Callable[..., list[str]], quote: Callable[[str], str]
                   ) -> Callable[..., list[str]]:
    """`connection.ops.sql_flush` emptying every table with one DELETE each instead of one
    TRUNCATE of them all. On PostgreSQL a TRUNCATE makes new files for every table, index and
    TOAST table (~300 relations here): 2-6 s a flush on a loaded machine against ~0.2 s for
    DELETEs of the few rows a test wrote. Django's foreign keys are DEFERRABLE INITIALLY
    DEFERRED and the flush runs in one transaction, so the order of the DELETEs does not
    matter. The content types and permissions are kept: post_migrate, which the flush sends,
    would write the same rows again (what a fresh migrate has), and finding them all present
    costs it a few SELECTs instead of ~500 INSERTs. A flush that resets sequences or cascades
    to tables outside the list keeps Django's TRUNCATE."""

    def sql_flush(style: Any, tables: list[str], *, reset_sequences: bool = False,
                  allow_cascade: bool = False) -> list[str]:
        if reset_sequences or allow_cascade:
            return original(style, tables, reset_sequences=reset_sequences,
                            allow_cascade=allow_cascade)
        return [f"DELETE FROM {quote(table)};" for table in tables if table not in KEPT_BY_FLUSH]

    return sql_flush


@pytest.fixture(scope="session", autouse=True)
def _flush_may_empty_the_audit() -> Iterator[None]:
    """Transactional tests empty every table between tests (`deleting_flush`); every
    pgtrigger trigger is ignored meanwhile, so the event tables' append_only and no_truncate
    guards let that (and only that) through in the test process, and no history trigger
    writes an event for a row being emptied."""
    from django.db import connections

    original = flush.Command.handle

    def handle(self: flush.Command, *args: Any, **options: Any) -> Any:
        ops = connections[options["database"]].ops
        ops.sql_flush = deleting_flush(type(ops).sql_flush.__get__(ops),  # type: ignore[method-assign]
                                       ops.quote_name)
        try:
            with pgtrigger.ignore():
                return original(self, *args, **options)
        finally:
            del ops.sql_flush

    flush.Command.handle = handle  # type: ignore[method-assign]
    yield
    flush.Command.handle = original  # type: ignore[method-assign]


@pytest.fixture
def django_assert_num_queries() -> Callable[..., Any]:
    """pytest-django's fixture, but a block expecting queries fails if it captured none."""
    return bounded_queries(exact=True)


@pytest.fixture
def django_assert_max_num_queries() -> Callable[..., Any]:
    """pytest-django's fixture, but an upper bound fails if the block captured no query at all."""
    return bounded_queries(exact=False)


@pytest.fixture(autouse=True)
def _default_language() -> Iterator[None]:
    """A request in another language leaves that language active in the thread (Django's
    LocaleMiddleware never resets it); each test starts from the default again."""
    yield
    translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture
def private_cache() -> Iterator[None]:
    """A cache of the test's own (a fresh key prefix): nothing cached by earlier tests or runs,
    which reuse the same ids, is found in it."""
    default = {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    with override_settings(CACHES={**settings.CACHES, "default": default}):
        yield


def make_user(username: str, *, team: Team | None = None, role: str = MemberRole.MEMBER,
              is_staff: bool = False) -> Any:
    user = User.objects.create_user(username=username, password=PASSWORD, is_staff=is_staff)
    if team is not None:
        Membership.objects.create(team=team, user=user, role=role)
    return user


@pytest.fixture
def team(db: None) -> Team:
    return Team.objects.create(slug="vision-rl", name="Vision RL")


@pytest.fixture
def other_team(db: None) -> Team:
    return Team.objects.create(slug="nlp-rl", name="NLP RL")


@pytest.fixture
def owner(team: Team) -> Any:
    return make_user("owner", team=team, role=MemberRole.MAINTAINER)


@pytest.fixture
def member(team: Team) -> Any:
    return make_user("member", team=team)


@pytest.fixture
def outsider(other_team: Team) -> Any:
    return make_user("outsider", team=other_team)


@pytest.fixture
def admin_user(db: None) -> Any:
    return make_user("platform-admin", is_staff=True)


@pytest.fixture
def api_client_for() -> Callable[[Any], APIClient]:
    """An API client authenticated with a new API token (django-rest-knox) of the given user."""

    def build(user: Any) -> APIClient:
        client = APIClient()
        _token, secret = ApiToken.objects.create(user=user, expiry=timedelta(days=1),
                                                 name="tests")
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        return client

    return build


@pytest.fixture
def demo_simulator() -> Iterator[Any]:
    """The fleet simulator serving the demo fleet over real HTTP on a free port."""
    from clusters.simulator.testing import run_simulator

    with run_simulator(DEMO_FLEET) as handle:
        yield handle


@pytest.fixture
def running(demo_simulator: Any, team: Team, owner: Any, admin_user: Any,
            django_capture_on_commit_callbacks: Any) -> Any:
    """A two-role job of `team` submitted to the demo simulator and started there (its run
    record; no status pass has run yet)."""
    from tests.jobs.observe_support import running_job

    return running_job(demo_simulator, team=team, owner=owner, admin=admin_user,
                       capture=django_capture_on_commit_callbacks)
