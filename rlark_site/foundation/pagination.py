"""The API's one pagination: limit/offset, both validated and bounded (see docs/security.md)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

MAX_LIMIT = 500
MAX_OFFSET = 1_000_000


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`limit` (1 or more) is capped at MAX_LIMIT; `offset` goes up to MAX_OFFSET. Anything else
    (not a whole number, out of range) is a 400, never a database error."""

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int | None:
        raw = request.query_params.get(self.limit_query_param, "")
        if raw == "":
            return self.default_limit
        return min(_whole_number(raw, self.limit_query_param, lowest=1), MAX_LIMIT)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param, "")
        if raw == "":
            return 0
        offset = _whole_number(raw, self.offset_query_param, lowest=0)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [
                _("Enter a whole number from 0 to %(max)s.") % {"max": MAX_OFFSET}
            ]})
        return offset


def _whole_number(raw: str, name: str, *, lowest: int) -> int:
    if not (raw.isascii() and raw.isdigit()) or int(raw) < lowest:
        raise ValidationError({name: [
            _("Enter a whole number, %(lowest)s or more.") % {"lowest": lowest}
        ]})
    return int(raw)


def paginated(view: Any, request: Request, queryset: Any, serializer_class: Any) -> Response:
    """A list answer as every list of the API gives it: `{count, next, previous, results}`.
    The view declares `pagination_class = BoundedLimitOffsetPagination` so the schema says so."""
    paginator = BoundedLimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
