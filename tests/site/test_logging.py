"""Logs: JSON lines (RLARK_LOG_FORMAT=json) carry the request id, user, team and Celery task
id; console stays readable; Celery logs through Django's configuration, without a line per
beat tick."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from django.conf import settings
from django.test import Client
from pythonjsonlogger.json import JsonFormatter

from rlark_site.celery import app
from rlark_site.foundation.logcontext import ContextFilter
from rlark_site.foundation.tenancy.models import Team
from rlark_site.settings.observability import JSON_FORMATTER
from tests.conftest import PASSWORD, REPO


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Everything logged during the test, formatted as the JSON format writes it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    options = {k: v for k, v in JSON_FORMATTER.items() if k != "()"}
    handler.setFormatter(JsonFormatter(**options))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def _records(stream: io.StringIO, logger: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if line["logger"] == logger]


def test_a_request_logs_its_id_user_team_status_and_duration(
    client: Client, member: Any, team: Team, json_lines: io.StringIO,
) -> None:
    client.login(username=member.username, password=PASSWORD)
    session = client.session
    session["current_team"] = team.slug
    session.save()
    response = client.get("/jobs/", HTTP_X_REQUEST_ID="req-42")
    assert response["X-Request-ID"] == "req-42"
    (line,) = _records(json_lines, "rlark.request")
    assert line["request_id"] == "req-42"
    assert line["user"] == member.username
    assert line["team"] == team.slug
    assert line["status"] == response.status_code
    assert line["method"] == "GET" and line["path"] == "/jobs/"
    assert line["duration_ms"] >= 0 and line["level"] == "INFO" and "time" in line


def test_an_unusable_request_id_is_replaced(db: None, client: Client,
                                            json_lines: io.StringIO) -> None:
    response = client.get("/health/live", HTTP_X_REQUEST_ID="bad id\nwith newline")
    (line,) = _records(json_lines, "rlark.request")
    assert line["request_id"] == response["X-Request-ID"]
    assert len(line["request_id"]) == 32 and line["user"] == ""


def test_api_token_users_are_named_on_the_request_line(
    db: None, member: Any, api_client_for: Any, json_lines: io.StringIO,
) -> None:
    api_client_for(member).get("/api/v1/teams/")
    (line,) = _records(json_lines, "rlark.request")
    assert line["user"] == member.username


# Its own app, so that RLark's app (whose every task must be routed) does not grow a test task.
_task_app = Celery("rlark-log-test", set_as_current=False)


@_task_app.task(name="log_from_a_task", shared=False)
def log_from_a_task() -> None:
    logging.getLogger("rlark.test.task").info("inside a task")


def test_a_celery_task_logs_its_task_id(json_lines: io.StringIO) -> None:
    result = log_from_a_task.apply()
    (line,) = _records(json_lines, "rlark.test.task")
    assert line["task_id"] == result.id and line["request_id"] == ""


def _log_once(log_format: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLARK_LOG_FORMAT": log_format, "DJANGO_SETTINGS_MODULE":
           "rlark_site.settings"}
    code = "import django, logging; django.setup(); logging.getLogger('rlark.x').warning('hi')"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)


def test_the_format_is_switched_from_the_environment() -> None:
    line = json.loads(_log_once("json").stderr.strip().splitlines()[-1])
    assert line["message"] == "hi" and line["logger"] == "rlark.x"
    console = _log_once("console").stderr.strip().splitlines()[-1]
    assert console.endswith("WARNING rlark.x: hi")
    refused = _log_once("xml")
    assert refused.returncode != 0 and "RLARK_LOG_FORMAT" in refused.stderr


def test_celery_uses_django_logging_and_keeps_beat_ticks_quiet() -> None:
    app.log.already_setup = False
    app.log.setup(loglevel="INFO")  # what a worker or beat does at start
    root = logging.getLogger()
    assert any(isinstance(f, ContextFilter) for h in root.handlers for f in h.filters)
    assert not logging.getLogger("celery.beat").isEnabledFor(logging.INFO)
    assert not logging.getLogger("celery.app.trace").isEnabledFor(logging.INFO)
    assert logging.getLogger("celery.beat").isEnabledFor(logging.WARNING)
    assert settings.LOGGING["loggers"]["celery.beat"]["level"] == "WARNING"
