"""`GET usage/`: GPU-hours per day, week, user or job of your teams (SPEC 16); `?format=csv`
answers the page's CSV export (`jobs.usage.export`), so a token (the CLI, a script) gets it too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.usage.export import usage_csv
from jobs.usage.selectors import GROUPS, MAX_DAYS, parse_query, usage_report
from jobs.usage.serializers import UsageSerializer

PARAMETERS = [
    OpenApiParameter("team", str, description="team slug (default: all your teams; platform "
                                              "admins: every team)"),
    OpenApiParameter("from", str, description="YYYY-MM-DD or an ISO 8601 date-time (UTC "
                                              "without an offset); default: 30 days before to"),
    OpenApiParameter("to", str, description="YYYY-MM-DD (that day included) or an ISO 8601 "
                                            f"date-time; default now; at most {MAX_DAYS} days "
                                            "after from"),
    OpenApiParameter("group_by", str, enum=list(GROUPS), description="default day"),
    OpenApiParameter("format", str, enum=["json", "csv"],
                     description="json (default) or csv: the usage page's CSV export (one row "
                                 "per group, then a total row); errors stay JSON"),
]
CSV_CONTENT_TYPE = "text/csv; charset=utf-8"


class CsvRenderer(BaseRenderer):
    """Lets `?format=csv` through content negotiation; the view writes the CSV itself and
    everything else is answered as JSON (`UsageView.finalize_response`)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        raise NotImplementedError("UsageView answers CSV with an HttpResponse")


class UsageView(APIView):
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(parameters=PARAMETERS, responses={
        (200, "application/json"): UsageSerializer,
        (200, "text/csv"): OpenApiTypes.STR,
        400: OpenApiResponse(description="a bad date, from after to, a window over a year, an "
                                         "unknown group_by: {detail, field}"),
        404: OpenApiResponse(description="a team that is not yours"),
    })
    def get(self, request: Request) -> HttpResponse:
        query = parse_query(request.user, request.query_params)
        body = usage_report(query).as_dict()
        if request.accepted_renderer.format == CsvRenderer.format:
            return HttpResponse(usage_csv(body), content_type=CSV_CONTENT_TYPE)
        return Response(body)

    def finalize_response(self, request: Request, response: Response, *args: Any,
                          **kwargs: Any) -> Response:  # the CSV is a plain HttpResponse
        """Anything but the CSV itself (an error `{detail, field}`, OPTIONS) is JSON, whatever
        format was asked for."""
        if isinstance(response, Response):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
