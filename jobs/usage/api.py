"""`GET usage/`: GPU-hours per day, week, user or job of your teams (SPEC 16)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

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
]


class UsageView(APIView):
    @extend_schema(parameters=PARAMETERS, responses={
        200: UsageSerializer,
        400: OpenApiResponse(description="a bad date, from after to, a window over a year, an "
                                         "unknown group_by: {detail, field}"),
        404: OpenApiResponse(description="a team that is not yours"),
    })
    def get(self, request: Request) -> Response:
        query = parse_query(request.user, request.query_params)
        return Response(usage_report(query).as_dict())
