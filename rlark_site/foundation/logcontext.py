"""Who and what a log line is about: request id, user and team of the request being served,
or the id of the Celery task being run. A logging filter copies them onto every record, so
the JSON formatter (`RLARK_LOG_FORMAT=json`) emits them as fields; the console format shows
the request id only.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar

from celery import current_task
from django.http import HttpRequest, HttpResponse

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_EMPTY = ""

request_id_var: ContextVar[str] = ContextVar("rlark_request_id", default=_EMPTY)
user_var: ContextVar[str] = ContextVar("rlark_user", default=_EMPTY)
team_var: ContextVar[str] = ContextVar("rlark_team", default=_EMPTY)

request_logger = logging.getLogger("rlark.request")


def request_id_from(request: HttpRequest) -> str:
    """The caller's `X-Request-ID` when it is a sane token, otherwise a new one."""
    offered = request.headers.get(REQUEST_ID_HEADER, "")
    return offered if _REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex


def _task_id() -> str:
    if not current_task:  # a proxy: false outside a running task
        return _EMPTY
    return str(current_task.request.id or _EMPTY)


class ContextFilter(logging.Filter):
    """Put request_id, user, team and task_id on every record (empty when not known)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        record.user = user_var.get()
        record.team = team_var.get()
        record.task_id = _task_id()
        return True


class RequestContextMiddleware:
    """Bind the request's id, user and team for its log lines, answer the id in
    `X-Request-ID`, and log one line per request (method, path, status, duration)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = getattr(request, "request_id", None) or request_id_from(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        user = request.user.get_username() if request.user.is_authenticated else _EMPTY
        team = str(request.session.get("current_team") or _EMPTY)
        tokens = (request_id_var.set(request_id), user_var.set(user), team_var.set(team))
        started = time.monotonic()
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            if not user and request.user.is_authenticated:  # API tokens authenticate in views
                user_var.set(request.user.get_username())
            request_logger.info(
                "%s %s %s", request.method, request.path, response.status_code,
                extra={"method": request.method, "path": request.path,
                       "status": response.status_code,
                       "duration_ms": round((time.monotonic() - started) * 1000, 1)},
            )
            return response
        finally:
            for var, token in zip((request_id_var, user_var, team_var), tokens, strict=True):
                var.reset(token)
