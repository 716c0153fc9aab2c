"""Attach who/what/where to every audited change made while serving a request."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from pghistory.middleware import HistoryMiddleware

from rlark_site.foundation.logcontext import request_id_from


class AuditContextMiddleware(HistoryMiddleware):
    """pghistory context with user, URL, method, request id and the current team."""

    def get_context(self, request: HttpRequest) -> dict[str, Any]:
        context = super().get_context(request)
        request_id = request_id_from(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        context.update(
            {
                "request_id": request_id,
                "method": request.method,
                "team": getattr(request, "session", {}).get("current_team"),
            }
        )
        return context
