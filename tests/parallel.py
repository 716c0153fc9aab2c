"""What keeps pytest-xdist's workers (`-n 2`: gw0, gw1, ...) out of each other's way.

- PostgreSQL: pytest-django gives each worker its own test database (`test_<name>_gw0`, ...);
  `django_db_setup` in tests/conftest.py migrates one template per run and clones it.
- Redis: each worker uses a database of its own (cache, throttles, Celery broker, beat lock),
  so a test that empties its database (tests/jobs/test_worker_crash.py) or starts real Celery
  workers and beat (tests/site/test_scale_out.py) never sees another worker's keys or
  messages. Worker K takes the K-th number of `RLARK_TEST_REDIS_DBS` (comma-separated) when
  set, else REDIS_URL's database + K (the embedded Redis of `make test` has 16 databases).
  Processes a test starts inherit the worker's REDIS_URL.
- Ports: every server a test starts (simulator, gunicorn, Django's live server) binds port 0
  or a port just found free; no test uses a fixed port.
- Files: `tmp_path` is per test; screenshots are named after their test.

A serial run (`-n 0`, or plain `pytest` without `-n`) uses REDIS_URL as it is.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

WORKER_DBS = "RLARK_TEST_REDIS_DBS"
# REDIS_URL as this process was given it (before `isolate_redis`).
given_redis_url = ""


def worker_index(worker: str) -> int | None:
    """0 for `gw0`, 1 for `gw1`, ...; None outside xdist (the controller or a serial run)."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    return int(worker[2:])


def worker_redis_url(url: str, worker: str, dbs: str = "") -> str:
    """REDIS_URL with worker `worker`'s database number in its path."""
    index = worker_index(worker)
    if index is None:
        return url
    parts = urlsplit(url)
    path = parts.path.strip("/")
    base = int(path) if path.isdigit() else 0
    if dbs.strip():
        numbers = [int(n) for n in dbs.split(",") if n.strip()]
        if index >= len(numbers):
            raise pytest.UsageError(
                f"{WORKER_DBS}={dbs!r} names {len(numbers)} Redis databases, "
                f"not enough for worker {worker}: give one per worker (-n)"
            )
        db = numbers[index]
    else:
        db = base + index
    return urlunsplit(parts._replace(path=f"/{db}"))


def isolate_redis(worker: str) -> None:
    """Point this worker's settings (and the processes its tests start) at its own database.

    Called from `pytest_configure`, after Django's settings are loaded but before anything
    opened a cache connection or read the Celery app's configuration."""
    import redis
    from django.conf import settings

    global given_redis_url
    given_redis_url = given_redis_url or settings.REDIS_URL
    url = worker_redis_url(settings.REDIS_URL, worker, os.environ.get(WORKER_DBS, ""))
    if url == settings.REDIS_URL:
        return
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except redis.RedisError as exc:
        raise pytest.UsageError(
            f"worker {worker} cannot use Redis database {url!r} ({exc}); set {WORKER_DBS} to "
            "one free database number per worker, or run fewer workers (-n)"
        ) from exc
    os.environ["REDIS_URL"] = url
    settings.REDIS_URL = url
    settings.CELERY_BROKER_URL = url
    settings.CACHES = {
        **settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": url},
    }
    from django.core.cache import caches

    caches.__dict__.pop("settings", None)  # re-read CACHES if the handler already had

    from rlark_site.celery import app

    app.conf.broker_url = url


@contextlib.contextmanager
def _template_lock(connection: Any, template: str) -> Iterator[Any]:
    """A cursor on the maintenance database holding an advisory lock named after `template`
    (PostgreSQL-wide, so the workers of one run take turns)."""
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(hashtext(%s))", [template])
        try:
            yield cursor
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [template])


def _run_comment(cursor: Any, name: str) -> str | None:
    cursor.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database "
                   "WHERE datname = %s", [name])
    row = cursor.fetchone()
    return None if row is None else (row[0] or "")


def template_name(test_database: str, worker: str = "") -> str:
    """The run's template database: the test database's name without the worker's suffix."""
    return f"{test_database.removesuffix(f'_{worker}') if worker else test_database}_template"


def _build_template(connection: Any, cursor: Any, template: str, run: str, *,
                    verbosity: int) -> None:
    """Under the template's lock: (re)create `template` through Django's own test-database
    creation (migrations, post-migrate receivers) unless it is already the run's, marked
    with the run's id. Leaves `connection` closed, its TEST NAME as it was."""
    from django.test.utils import setup_databases

    if _run_comment(cursor, template) == run:
        return
    quote = connection.ops.quote_name
    cursor.execute(f"DROP DATABASE IF EXISTS {quote(template)}")
    test_settings = connection.settings_dict["TEST"]
    given = test_settings.get("NAME")
    test_settings["NAME"] = template
    try:
        setup_databases(verbosity=verbosity, interactive=False, aliases={"default"},
                        serialized_aliases=set())
    finally:
        test_settings["NAME"] = given
        connection.close()
    cursor.execute(f"COMMENT ON DATABASE {quote(template)} IS %s", [run])


def clone_test_database(worker: str, *, verbosity: int) -> list[tuple[Any, str, bool]]:
    """Create this worker's test database as a copy of a template migrated once per run.

    The template `<test name>_template` is made through Django's own test-database creation
    (migrations, post-migrate triggers) and marked with the run's id
    (PYTEST_XDIST_TESTRUNUID), by the controller's builder process (`start_template_builder`,
    while the workers start and collect) or else by the first worker to get the lock; every
    worker then copies it (CREATE DATABASE ... TEMPLATE, a file copy instead of running every
    migration again). Returns what `django.test.utils.teardown_databases` takes."""
    from django.conf import settings
    from django.db import connections

    connection = connections["default"]
    creation = connection.creation
    old_name = connection.settings_dict["NAME"]
    target = creation._get_test_db_name()
    template = template_name(target, worker)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "") or f"pid-{os.getppid()}"
    quote = connection.ops.quote_name
    with _template_lock(connection, template) as cursor:
        try:
            _build_template(connection, cursor, template, run, verbosity=verbosity)
        finally:
            connection.settings_dict["NAME"] = old_name
            settings.DATABASES["default"]["NAME"] = old_name
        if verbosity >= 1:
            creation.log(f"Cloning test database {target} from {template}...")
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(target)}")
        cursor.execute(f"CREATE DATABASE {quote(target)} WITH TEMPLATE {quote(template)}")
    connection.close()
    connection.settings_dict["NAME"] = target
    settings.DATABASES["default"]["NAME"] = target
    connection.ensure_connection()
    return [(connection, old_name, True)]


# The controller's template builder (one per run, or None).
_builder: subprocess.Popen[bytes] | None = None


def builds_template_early(config: pytest.Config) -> bool:
    """Whether this process is the pytest-xdist controller of a run whose workers will clone
    a template migrated for the run (as `django_db_setup` in tests/conftest.py decides: more
    than one worker, no --reuse-db, migrations on)."""
    option = config.option
    if hasattr(config, "workerinput") or getattr(option, "dist", "no") == "no" \
            or getattr(option, "collectonly", False):
        return False
    if not isinstance(getattr(option, "numprocesses", None), int) or option.numprocesses < 2:
        return False
    keepdb = getattr(option, "reuse_db", False) and not getattr(option, "create_db", False)
    return not keepdb and not getattr(option, "nomigrations", False)


def start_template_builder(config: pytest.Config) -> None:
    """In the xdist controller: fix the run's id (`--testrunuid`, which the workers get as
    PYTEST_XDIST_TESTRUNUID) and start a process that migrates the run's template at once, so
    the ~50 s of migrations overlap the workers' start and collection instead of following
    them with every worker waiting. A worker that gets the lock first builds it itself and
    the builder finds it done; a builder that fails leaves it to the first worker (its
    output is in test-artifacts/template-builder.log)."""
    global _builder
    if not builds_template_early(config):
        return
    if not config.option.testrunuid:
        config.option.testrunuid = uuid.uuid4().hex
    log_dir = Path(str(config.rootpath)) / "test-artifacts"
    log_dir.mkdir(exist_ok=True)
    with open(log_dir / "template-builder.log", "wb") as log:
        _builder = subprocess.Popen(
            [sys.executable, "-m", "tests.parallel", "build-template", config.option.testrunuid],
            cwd=str(config.rootpath), stdout=log, stderr=subprocess.STDOUT,
        )


def stop_template_builder() -> None:
    """At the controller's end: the builder is done (or stopped, if the run ended first)."""
    global _builder
    if _builder is None:
        return
    if _builder.poll() is None:
        _builder.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            _builder.wait(timeout=30)
    _builder = None


def _build_template_main(run: str) -> int:
    """`python -m tests.parallel build-template RUN`: the run's template, as a worker makes it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    import django

    django.setup()
    from django.db import connections
    from django.test.utils import setup_test_environment

    setup_test_environment()
    connection = connections["default"]
    template = template_name(connection.creation._get_test_db_name())
    with _template_lock(connection, template) as cursor:
        _build_template(connection, cursor, template, run, verbosity=1)
    return 0


def drop_template(worker: str) -> None:
    """Drop the run's template database (a worker still to clone would build it again)."""
    from django.db import connections

    connection = connections["default"]
    target = connection.creation._get_test_db_name()
    template = template_name(target, worker)
    with _template_lock(connection, template) as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(template)}")


# The modules that take longest, longest first (serial seconds measured on the shared 2-core
# machine under load, setup + call + teardown). pytest-xdist's `--dist loadscope` hands out
# whole modules; by default it orders them by their number of tests (`--loadscope-reorder`),
# which sends these last: a one-test migration module of ~190 s started when the other worker
# has little left pins the run's end on one worker. `make test` passes --no-loadscope-reorder
# and the workers collect in the order below (longest processing time first): these, then the
# browser journeys (a live server and Chromium each), then the rest as collected.
HEAVY_MODULES = (
    # First, and it needs no database: its worker computes while the run's template is
    # migrated (start_template_builder) instead of waiting for it.
    "tests/jobs/test_properties.py",  # ~140 s of hypothesis examples (engine and renderer)
    "tests/cli/test_cli_files.py",  # ~250 s (26 tests, each a live gunicorn's rows and flush)
    "tests/jobs/test_lifecycle_migration.py",  # ~70 s: a new database to jobs 0006, round trip
    "tests/jobs/test_confirmation_migration.py",  # ~60 s: a new database to jobs 0010, on to 0011
    "tests/cli/test_cli_runs.py",  # 118 s (submissions pumped through the simulator)
    "tests/site/test_outsiders_generated.py",  # ~100 s: every route, hostile bytes
)


def module_rank(nodeid: str, browser: bool) -> int:
    """Where a test's module goes in a worker's collection (see HEAVY_MODULES)."""
    module = nodeid.split("::", 1)[0]
    if module in HEAVY_MODULES:
        return HEAVY_MODULES.index(module)
    return len(HEAVY_MODULES) + (0 if browser else 1)


def heaviest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items` with the heavy modules first; a stable sort, so each module's tests and the
    other modules keep their order."""
    return sorted(items, key=lambda item: module_rank(
        item.nodeid, item.get_closest_marker("browser") is not None))


def unique_nodeids(items: list[pytest.Item]) -> None:
    """Give each test a node id of its own, or refuse the run.

    schemathesis (4.x under pytest 9) names each API operation's test
    `test_...[GET /api/v1/jobs/]` but leaves every one of them the node id of the function.
    pytest-xdist schedules by node id, so it kept one of the 74 operations and silently never
    ran the other 73 (the fresh-clone run reported 3,080 passed of 3,153 collected). An item
    whose name is not the end of its node id gets the node id its name says; any node id still
    shared after that stops the run, so no test can go missing this way again."""
    counts = Counter(item.nodeid for item in items)
    for item in items:
        parent = item.parent
        if counts[item.nodeid] > 1 and parent is not None and not item.nodeid.endswith(
                f"::{item.name}"):
            # pytest 9 keeps the structured id in `_id` (`nodeid` is its text): parse the id
            # the item's name says, the way pytest parses an id given on the command line.
            item._id = type(parent._id).parse(f"{parent.nodeid}::{item.name}")
    shared = sorted(nodeid for nodeid, n in Counter(i.nodeid for i in items).items() if n > 1)
    if shared:
        raise pytest.UsageError(f"{len(shared)} node ids are shared by several tests (pytest-"
                                f"xdist would run one of each): {shared[:5]}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["build-template"] or len(sys.argv) != 3:
        sys.exit("usage: python -m tests.parallel build-template RUN")
    sys.exit(_build_template_main(sys.argv[2]))
