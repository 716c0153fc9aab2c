"""Attach who/what/where to every audited change made while serving a request."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from pghistory.middleware import HistoryMiddleware

REQUEST_ID_HEADER = "HTTP_X_REQUEST_ID"


class AuditContextMiddleware(HistoryMiddleware):
    """pghistory context with user, URL, method, request id and the current team."""

    def get_context(self, request: HttpRequest) -> dict[str, Any]:
        context = super().get_context(request)
        request_id = request.META.get(REQUEST_ID_HEADER) or uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        context.update(
            {
                "request_id": request_id[:64],
                "method": request.method,
                "team": getattr(request, "session", {}).get("current_team"),
            }
        )
        return context
