"""The API's one pagination: limit/offset, both validated and bounded (see docs/security.md)."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

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
