"""Hostile input refused once, before any view runs (one mechanism instead of a check per view).

- Control characters (C0, DEL, C1) in the path or in any query key or value: 400.
- A path segment or query value made of digits beyond PostgreSQL's bigint cannot name anything:
  404 in the path, 400 in the query (instead of an overflow deep in a query, a 500).
- A declared body larger than DATA_UPLOAD_MAX_MEMORY_SIZE: 413, before anything reads it.

Under /api/ the answer is the one JSON error shape; pages get Django's error pages.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.views import defaults

from rlark_site.foundation.exceptions import api_error_response, is_api_request
from rlark_site.foundation.validators import has_control_characters

BIGINT_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]+")


def _too_big_number(text: str) -> bool:
    return _DIGITS.fullmatch(text) is not None and int(text) > BIGINT_MAX


def _query_problem(request: HttpRequest) -> str | None:
    for key, values in request.GET.lists():
        for text in (key, *values):
            if has_control_characters(text):
                return _("The query contains control characters.")
            if _too_big_number(text):
                return _("A number in the query is out of range.")
    return None


def _body_too_large(request: HttpRequest) -> bool:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return False
    return limit is not None and length > limit


class RequestGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if has_control_characters(request.path):
            return self._refuse(request, 400, _("The path contains control characters."))
        if any(_too_big_number(part) for part in request.path.split("/")):
            return self._refuse(request, 404, _("Not found."))
        problem = _query_problem(request)
        if problem is not None:
            return self._refuse(request, 400, problem)
        if _body_too_large(request):
            return self._refuse(request, 413, _("The request body is too large."))
        return self.get_response(request)

    @staticmethod
    def _refuse(request: HttpRequest, status_code: int, detail: str) -> HttpResponse:
        if is_api_request(request):
            return api_error_response(detail, status_code)
        if status_code == 404:
            return defaults.page_not_found(request, exception=Exception(detail))
        response = defaults.bad_request(request, exception=Exception(detail))
        response.status_code = status_code
        return response
