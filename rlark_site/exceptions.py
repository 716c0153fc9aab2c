"""One domain error type and one DRF handler that turns errors into JSON."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApplicationError(Exception):
    """A domain rule refused the request; `extra` is returned to API clients as is."""

    status_code: int = status.HTTP_400_BAD_REQUEST

    def __init__(self, message: str, *, extra: dict[str, Any] | None = None,
                 status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        if status_code is not None:
            self.status_code = status_code


class NotFoundError(ApplicationError):
    """Missing, or another team's: the same answer for both (no existence leak)."""

    status_code: int = status.HTTP_404_NOT_FOUND


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response({"detail": exc.message, **exc.extra}, status=exc.status_code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ParseError):
        response.data = {"detail": f"Malformed request body: {exc.detail}"}
    elif isinstance(exc, exceptions.ValidationError) and not isinstance(response.data, dict):
        response.data = {"detail": response.data}
    return response
