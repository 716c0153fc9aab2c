"""One domain error type, one error shape, and the handlers that give every API answer that shape.

Every error the API returns is JSON of one shape (documented in docs/api.md and in the OpenAPI
schema as `Error`)::

    {"detail": str, "field"?: str, "errors"?: {field: [str]}, "findings"?: [finding], ...}

`detail` is always present and readable on its own; `field` names the first field at fault,
`errors` lists every field's messages (dotted paths for nested fields), `findings` carries the
findings engine's output. A few answers add context keys (for example `state` on a 409).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import is_valid_path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import exception_handler

API_PREFIX = "/api/"


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


class AdminOnlyError(ApplicationError):
    """Only platform admins may do this (403: the route is public knowledge; no data leaks)."""

    status_code: int = status.HTTP_403_FORBIDDEN


class DomainErrorMiddleware:
    """The one mapping of domain errors raised in pages: NotFoundError -> the 404 page,
    AdminOnlyError -> the 403 page (the API's handler maps them for DRF views)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        if isinstance(exception, NotFoundError):
            raise Http404(exception.message) from exception
        if isinstance(exception, AdminOnlyError):
            raise PermissionDenied(exception.message) from exception


# What an error answer under /api/ says when the answer that reached the outermost layer was
# not JSON (Django's debug pages, a view's plain HttpResponseNotAllowed, ...).
_STATUS_DETAIL = {
    400: gettext_lazy("Bad request."),
    403: gettext_lazy("You do not have permission to perform this action."),
    404: gettext_lazy("Not found."),
    405: gettext_lazy("Method not allowed."),
    413: gettext_lazy("The request body is too large."),
    500: gettext_lazy("Server error."),
}
# Headers of the replaced answer that still mean something on the JSON one.
_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate", "Vary", "Content-Language")


class ApiErrorShapeMiddleware:
    """Every error answer under /api/ is JSON in the one shape, whatever produced it: DRF's
    handler and `handler400/403/404/500` already do, but with `DEBUG` on (`make run`) Django
    answers an unknown URL, a refused Host or an exception with its HTML debug pages instead
    of calling those handlers, and a plain Django view may answer 405 as text. Outermost in
    MIDDLEWARE, so it sees every answer; pages outside /api/ keep their HTML."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or not is_api_request(request) or _is_json(response):
            return response
        return _json_error(response)


class ApiTrailingSlashMiddleware:
    """Just before CommonMiddleware: a POST, PUT, PATCH or DELETE to an /api/ route named
    without its trailing slash answers 404 in the one shape, naming the path with the slash,
    whatever DEBUG says (CommonMiddleware would raise with DEBUG on, a 500, and redirect with it
    off, a 301 that drops the body). A GET still redirects; pages are left to Django."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        missing_slash = _missing_slash(request)
        if missing_slash is None:
            return self.get_response(request)
        return api_error_response(
            _("Not found: %(method)s %(path)s needs its trailing slash.")
            % {"method": request.method, "path": missing_slash},
            status.HTTP_404_NOT_FOUND, path=missing_slash)


# Methods Django's CommonMiddleware cannot redirect to the slashed path without losing the
# body: with DEBUG on it raises (a RuntimeError, its 500 page), off it answers a 301 that
# clients follow as a GET.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _missing_slash(request: HttpRequest) -> str | None:
    """The path with its slash, when an /api/ request with a body names a route only by it
    (the same test as CommonMiddleware's APPEND_SLASH), else None."""
    path = request.path_info
    if (request.method not in _BODY_METHODS or not settings.APPEND_SLASH
            or path.endswith("/") or not is_api_request(request)):
        return None
    urlconf = getattr(request, "urlconf", None)
    if is_valid_path(path, urlconf) or not is_valid_path(f"{path}/", urlconf):
        return None
    return f"{request.path}/"


def _is_json(response: HttpResponse) -> bool:
    media_type = response.get("Content-Type", "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def _json_error(response: HttpResponse) -> HttpResponse:
    status_code = response.status_code
    known = _STATUS_DETAIL.get(status_code)
    if known is not None:
        detail = str(known)
    elif status_code in HTTPStatus._value2member_map_:
        detail = HTTPStatus(status_code).phrase + "."
    else:
        detail = _("Error.")
    answer = api_error_response(detail, status_code)
    for name in _KEPT_HEADERS:
        if response.has_header(name):
            answer[name] = response[name]
    for cookie in response.cookies.values():
        answer.cookies[cookie.key] = cookie
    return answer


def error_body(detail: str, **extra: Any) -> dict[str, Any]:
    """The one error shape: `detail`, then any of `field`, `errors`, `findings`, context."""
    return {"detail": str(detail), **{k: v for k, v in extra.items() if v is not None}}


def is_api_request(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every error in the one shape, as JSON whatever format was asked (e.g. `?format=yaml`)."""
    request = context.get("request")
    if request is not None:
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.message, **exc.extra), status=exc.status_code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ParseError):
        response.data = error_body(_("Malformed request body: %(reason)s") % {"reason": exc.detail})
    elif isinstance(exc, exceptions.ValidationError):
        response.data = validation_body(exc.detail)
    else:
        response.data = error_body(str(getattr(exc, "detail", exc)))
    return response


def validation_body(detail: Any) -> dict[str, Any]:
    """DRF's nested field errors as the one shape: `detail` names the first problem, `field` its
    place (a dotted path), `errors` every problem by place."""
    errors = _flatten(detail)
    general = errors.pop("non_field_errors", None) or errors.pop("", None)
    if general is not None:
        problem, field = general[0], None
    elif errors:
        field, messages = next(iter(errors.items()))
        problem = f"{field}: {messages[0]}"
    else:
        problem, field = _("Invalid input."), None
    return error_body(_("Malformed request body: %(problem)s") % {"problem": problem},
                      field=field, errors=errors or None)


def validated(serializer: Serializer) -> dict[str, Any]:
    """The shape-checked body, or a 400 in the one error shape (see `validation_body`)."""
    if not serializer.is_valid():
        body = validation_body(serializer.errors)
        raise ApplicationError(body.pop("detail"), extra=body)
    data: dict[str, Any] = serializer.validated_data
    return data


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, Mapping):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if key == "non_field_errors" and prefix:
                here = prefix  # a nested object's own errors belong to its place
            else:
                here = f"{prefix}.{key}" if prefix else str(key)
            flat.update(_flatten(value, here))
        return flat
    if isinstance(detail, list) and any(isinstance(item, (Mapping, list)) for item in detail):
        flat = {}
        for index, item in enumerate(detail):
            flat.update(_flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix: [str(m) for m in messages]} if messages else {}


def api_error_response(detail: str, status_code: int, **extra: Any) -> JsonResponse:
    return JsonResponse(error_body(detail, **extra), status=status_code)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return api_error_response(_("Bad request."), 400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return api_error_response(_("You do not have permission to perform this action."), 403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return api_error_response(_("Not found."), 404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        return api_error_response(_("Server error."), 500)
    return defaults.server_error(request)
