"""The audit-events API's pagination: a cursor (keyset) instead of limit/offset.

An offset page costs every event before it, and a count every matching event; a cursor page
costs the page (audit.lookup). `?limit=` is the API's usual one (default 50, at most 500);
`next`/`previous` carry an opaque `?cursor=`.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from rlark_site.foundation.audit.lookup import AuditEvent, AuditLookup, decode_position
from rlark_site.foundation.pagination import BoundedLimitOffsetPagination


class AuditCursorPagination(BasePagination):
    cursor_query_param = "cursor"
    limit_query_param = "limit"

    def paginate_queryset(  # type: ignore[override]
        self, queryset: AuditLookup, request: Request, view: Any = None
    ) -> list[AuditEvent]:
        self.request = request
        if "offset" in request.query_params:
            raise ValidationError({"offset": [_(
                "Audit events are paged by cursor: follow the answer's next and previous links."
            )]})
        limit = BoundedLimitOffsetPagination().get_limit(request) or 50
        raw = request.query_params.get(self.cursor_query_param, "")
        decoded = decode_position(raw) if raw else None
        if raw and decoded is None:
            raise ValidationError({self.cursor_query_param: [_("This cursor is not valid.")]})
        position, before = decoded if decoded is not None else (None, False)
        events = queryset.page(limit + 1, after=position, oldest_first=before)
        more = len(events) > limit
        events = events[:limit]
        if before:
            events.reverse()
        # Going back (`before`): there are newer events when `more`, and older ones past the
        # position we came from; going forward it is the other way round.
        has_newer = more if before else position is not None
        has_older = (position is not None) if before else more
        self.next_cursor = events[-1].position.encode() if has_older and events else None
        self.previous_cursor = (events[0].position.encode(before=True)
                                if has_newer and events else None)
        return events

    def _link(self, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        return replace_query_param(self.request.build_absolute_uri(),
                                   self.cursor_query_param, cursor)

    def get_paginated_response(self, data: Any) -> Response:
        return Response({
            "next": self._link(self.next_cursor),
            "previous": self._link(self.previous_cursor),
            "results": data,
        })

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results"],
            "properties": {
                "next": {"type": "string", "nullable": True, "format": "uri",
                         "description": "the page of older events (`?cursor=`)"},
                "previous": {"type": "string", "nullable": True, "format": "uri",
                             "description": "the page of newer events (`?cursor=`)"},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {"name": self.cursor_query_param, "required": False, "in": "query",
             "description": "where a page starts: the cursor of a next or previous link",
             "schema": {"type": "string"}},
            {"name": self.limit_query_param, "required": False, "in": "query",
             "description": "events per page (default 50, at most 500)",
             "schema": {"type": "integer", "minimum": 1}},
        ]
