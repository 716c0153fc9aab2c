"""Errors raised by the Kubernetes gateway.

Callers never see `kubernetes` or `urllib3` exception types: every failure is a
`KubeError` subclass chosen from the HTTP status (or from the transport error),
carrying the API's own `Status` message and whether retrying may help.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException


class KubeError(Exception):
    """A failed call to a Kubernetes API server.

    `status` is the HTTP status (None when no response arrived), `reason` the
    Status reason (`AlreadyExists`, `Invalid`, ...) or the HTTP reason phrase,
    `message` the Status message, and `transient` whether the same call may
    succeed later.
    """

    transient: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        transient: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        if transient is not None:
            self.transient = transient

    def __str__(self) -> str:
        status = self.status if self.status is not None else "no response"
        return f"{status} {self.reason}: {self.message}"


class NotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


class AlreadyExists(KubeError):
    """409: an object with that name already exists."""


class Invalid(KubeError):
    """422: the object breaks the resource's schema or validation."""


class TooManyRequests(KubeError):
    """429: the API server is throttling; retry later."""

    transient = True


class ServerError(KubeError):
    """5xx: the API server failed; retry later."""

    transient = True


class Unauthorized(KubeError):
    """401 or 403: the credentials are missing, wrong or not allowed."""


class BadRequest(KubeError):
    """Any other 4xx (400 bad body, 410 expired continue token, ...)."""


class ListTooLarge(KubeError):
    """A list answer beyond the caller's bounds (too many items, pages or bytes): the caller
    keeps what it had instead of reading on."""


class Unreachable(KubeError):
    """No HTTP answer: connection refused or dropped, or a timeout."""

    transient = True


def _status_class(status: int) -> type[KubeError]:
    exact: dict[int, type[KubeError]] = {
        401: Unauthorized,
        403: Unauthorized,
        404: NotFound,
        409: AlreadyExists,
        422: Invalid,
        429: TooManyRequests,
    }
    if status in exact:
        return exact[status]
    if status >= 500:
        return ServerError
    if status >= 400:
        return BadRequest
    return KubeError


def _parse_status_body(body: Any) -> dict[str, Any]:
    """Return the Status object in an error body, or {} when there is none."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def from_api_exception(exc: ApiException) -> KubeError:
    """Translate an `ApiException` (an HTTP error answer) into a `KubeError`."""
    status = exc.status or 0
    if status == 0:
        # The client wraps TLS failures as status 0; a bad certificate does not heal by retrying.
        return Unreachable(str(exc.reason or "TLS error"), reason="TLSError", transient=False)
    document = _parse_status_body(exc.body)
    message = document.get("message") or (exc.body if isinstance(exc.body, str) else "") or ""
    reason = document.get("reason") or exc.reason or ""
    return _status_class(status)(str(message), status=status, reason=str(reason))


def from_transport_error(exc: urllib3.exceptions.HTTPError) -> Unreachable:
    """Translate a urllib3 error (timeout, refused or dropped connection) into `Unreachable`."""
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        reason = "ConnectionRefused"
    elif isinstance(exc, urllib3.exceptions.TimeoutError):
        reason = "Timeout"
    else:
        reason = "ConnectionFailed"
    return Unreachable(str(exc), reason=reason)
