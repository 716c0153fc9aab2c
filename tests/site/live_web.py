"""RLark's web process as `make run` starts it (`devservices.web_command`: gunicorn with
rlark_site.gunicorn_conf), on a free port against the test database, for tests of what only a
real HTTP server shows (framing, Connection headers, Django's DEBUG pages).

`live_web` is session-scoped and parametrized: `make-run` (DEBUG on, as `make run` sets it)
and `production` (DEBUG off). Data a test wants the server to see must be committed
(`transactional_db`). Every wait is bounded; the server is stopped at the end of the session.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rlark_site import devservices
from tests.jobs.test_worker_crash import child_database_conninfo

START_SECONDS = 60


@dataclass(frozen=True)
class LiveWeb:
    mode: str
    port: int
    log: Path

    def connection(self, timeout: float = 30) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One request on a connection of its own: (status, headers lower-cased, body)."""
        connection = self.connection()
        try:
            connection.request(method, path, body=body, headers=headers or {})
            answer = connection.getresponse()
            return (answer.status, {k.lower(): v for k, v in answer.getheaders()},
                    answer.read())
        finally:
            connection.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/health/live")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def start(mode: str, log: Path, *, database_url: str | None = None
          ) -> tuple[subprocess.Popen[bytes], LiveWeb]:
    """Gunicorn against the test database, or against `database_url` when given."""
    port = free_port()
    env = devservices.web_environment({
        **os.environ, "DATABASE_URL": database_url or child_database_conninfo(),
        "DEBUG": "1" if mode == "make-run" else "0", "RLARK_DEV_SECRETS": "1",
        "RLARK_WEB_WORKERS": "1", "RLARK_WEB_THREADS": "2", "RLARK_DB_CONN_MAX_AGE": "0",
        "RLARK_LOG_FORMAT": "console",
    })
    with log.open("wb") as out:
        process = subprocess.Popen(devservices.web_command(f"127.0.0.1:{port}"), env=env,
                                   cwd=devservices.BASE_DIR, stdout=out, stderr=out,
                                   start_new_session=True)
    deadline = time.monotonic() + START_SECONDS
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise AssertionError(f"gunicorn did not answer: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    return process, LiveWeb(mode=mode, port=port, log=log)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="session", params=["make-run", "production"])
def live_web(request: Any, django_db_setup: None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveWeb]:
    mode = request.param
    process, web = start(mode, tmp_path_factory.mktemp(f"web-{mode}") / "gunicorn.log")
    try:
        yield web
    finally:
        stop(process)
