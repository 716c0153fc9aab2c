"""The image's entrypoint, run outside a container: each command starts the process it names
against the test PostgreSQL and Redis (waits are bounded; none is a timed assertion)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from psycopg.conninfo import make_conninfo

from rlark_site.celery import app
from tests.deploy.conftest import REPO, RLARK

ENTRYPOINT = RLARK / "entrypoint.sh"
WAIT = 60.0


def _database_url() -> str:
    """The test database as a libpq connection string: TCP or, for embedded PostgreSQL, the
    unix-socket directory (a path as host cannot be written into a URL's authority)."""
    db = connection.settings_dict
    params = {"dbname": db["NAME"], "user": db["USER"], "password": db["PASSWORD"],
              "host": db["HOST"], "port": db["PORT"]}
    return make_conninfo(**{key: str(value) for key, value in params.items() if value})


@pytest.fixture
def env(db: None) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update({
        "RLARK_PYTHON": sys.executable, "RLARK_APP_DIR": str(REPO),
        "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
        "RLARK_DEV_SECRETS": "1", "RLARK_LOG_FORMAT": "console",
    })
    return environment


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(ENTRYPOINT), *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@contextmanager
def _started(env: dict[str, str], *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(["sh", str(ENTRYPOINT), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_for(check: object, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what}: the process exited ({proc.returncode})"
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not ready within {WAIT} s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_migrate_applies_migrations_and_then_nothing_is_left(env: dict[str, str]) -> None:
    migrated = _run(env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert _run(env, "wait-for-migrations").returncode == 0


def test_wait_for_migrations_gives_up_when_the_database_is_unreachable(
    env: dict[str, str],
) -> None:
    env.update({"DATABASE_URL": f"postgresql://nobody@127.0.0.1:{_free_port()}/none",
                "RLARK_MIGRATION_WAIT": "1", "RLARK_MIGRATION_POLL": "1"})
    result = _run(env, "wait-for-migrations")
    assert result.returncode == 1
    assert "migrations still unapplied" in result.stderr


def test_manage_runs_django_commands(env: dict[str, str]) -> None:
    result = _run(env, "manage", "check")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_web_serves_the_health_endpoints_through_gunicorn(env: dict[str, str]) -> None:
    port = _free_port()
    env["RLARK_WEB_BIND"] = f"127.0.0.1:{port}"

    def live() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=2) as r:
                return bool(r.status == 200 and b'"ok"' in r.read())
        except OSError:
            return False

    with _started(env, "web", "--workers", "1") as proc:
        _wait_for(live, proc, "gunicorn")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=5) as r:
            assert r.status == 200


def test_worker_consumes_the_queues_it_is_given(env: dict[str, str]) -> None:
    queues = {"deploy-test-a", "deploy-test-b"}
    env.update({"RLARK_WORKER_QUEUES": ",".join(sorted(queues)),
                "RLARK_WORKER_CONCURRENCY": "1"})

    hostname = f"deploy-test-{os.getpid()}@entrypoint"

    def consuming() -> bool:
        # Asked of this worker alone: the answer comes as soon as it replies (a broadcast
        # waits out the whole timeout for replies that may come).
        answers = app.control.inspect(destination=[hostname], timeout=1.0).active_queues()
        return any({q["name"] for q in qs} == queues for qs in (answers or {}).values())

    with _started(env, "worker", "--hostname", hostname) as proc:
        _wait_for(consuming, proc, "celery worker")


def test_beat_starts_the_scheduler_with_its_schedule_file(
    env: dict[str, str], tmp_path: Path,
) -> None:
    schedule = tmp_path / "beat-schedule"
    env["RLARK_BEAT_SCHEDULE"] = str(schedule)
    with _started(env, "beat") as proc:
        _wait_for(lambda: any(tmp_path.glob("beat-schedule*")), proc, "celery beat")


def test_any_other_command_is_executed_as_given(env: dict[str, str]) -> None:
    result = _run(env, "python3", "-c", "import os; print(os.getcwd())")
    assert result.stdout.strip() == str(REPO)
