"""The REST API's version, defined once, and the middleware that sends it on every answer.

`X-RLark-API-Version: <major>.<minor>` is on every answer under /api/ (successes, errors, answers
refused before a view runs). The minor number goes up when something is added (an endpoint, a
field, an optional parameter, a code); the major number when something is removed, renamed or
changes meaning. Clients (the `rlark` CLI) warn on another minor and refuse another major.
The OpenAPI document's `info.version` is `<major>.<minor>.0` (rlark_site/settings/api.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # settings import this module: no Django import at run time
    from django.http import HttpRequest, HttpResponse

API_VERSION = (1, 0)
API_VERSION_TEXT = f"{API_VERSION[0]}.{API_VERSION[1]}"
API_VERSION_HEADER = "X-RLark-API-Version"
_API_PREFIX = "/api/"


class ApiVersionMiddleware:
    """Outermost: whatever answered (a view, the guard, an error handler), the header is set."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(_API_PREFIX):
            response[API_VERSION_HEADER] = API_VERSION_TEXT
        return response
