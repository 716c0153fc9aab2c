"""REST API of live observation: a submitted job's pods, events and pod logs (tenant-scoped)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.k8s import PodInfo
from jobs.observe import conf, live
from jobs.observe.access import access_entries
from jobs.observe.eventgroups import summarize_events
from jobs.observe.selectors import attempt_rows, run_record_for_job
from jobs.observe.serializers import (
    EventsSerializer,
    LogQuerySerializer,
    LogSerializer,
    PodAttemptRowSerializer,
    PodsSerializer,
)
from jobs.records import selectors as record_selectors
from rlark_site.foundation.exceptions import ApplicationError

_NOT_FOUND = OpenApiResponse(description="missing, another team's, or not submitted")
_UNREADABLE = OpenApiResponse(description="the cluster cannot be read")


def pod_data(pod: PodInfo) -> dict[str, Any]:
    return {**asdict(pod), "task": pod.labels.get("rlinf.io/task", "")}


class JobPodsView(APIView):
    @extend_schema(responses={200: PodsSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        record = run_record_for_job(request.user, name)
        snapshot = live.job_snapshot(record)
        return Response(PodsSerializer({
            "fetched_at": snapshot.fetched_at, "error": snapshot.error,
            "pods": [pod_data(pod) for pod in snapshot.pods],
            "access": [asdict(entry) for entry in access_entries(record)],
        }).data)


class JobEventsView(APIView):
    @extend_schema(responses={200: EventsSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        snapshot = live.job_snapshot(run_record_for_job(request.user, name))
        summary = summarize_events(snapshot.events)
        return Response(EventsSerializer({
            "fetched_at": snapshot.fetched_at, "error": snapshot.error,
            "events": [asdict(event) for event in snapshot.events],
            "summary": {"warning_count": len(summary.warnings),
                        "normal_count": summary.normal_count,
                        "normal_groups": [asdict(group) for group in summary.normal_groups]},
        }).data)


def log_options(query: Any) -> dict[str, Any]:
    """`tail` (default and maximum from settings), `since` seconds and `previous`, checked."""
    serializer = LogQuerySerializer(data=query)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    return {
        "tail": min(data.get("tail") or conf.log_tail_default(), conf.log_tail_max()),
        "since_seconds": data.get("since"),
        "previous": data["previous"],
    }


class PodLogView(APIView):
    @extend_schema(
        parameters=[LogQuerySerializer],
        responses={200: LogSerializer, 404: _NOT_FOUND,
                   409: OpenApiResponse(description="no such container log (not started yet, "
                                                    "or no previous container)"),
                   503: _UNREADABLE},
    )
    def get(self, request: Request, name: str, pod: str) -> Response:
        options = log_options(request.query_params)
        record = run_record_for_job(request.user, name)
        result = live.pod_log(record, pod, **options)
        if result.log is None:
            raise ApplicationError(result.missing or _("No log."), status_code=409)
        return Response(LogSerializer({
            "pod": pod, "previous": options["previous"], "text": result.log.text,
            "truncated": result.log.truncated,
        }).data)


class RunRecordAttemptsView(APIView):
    @extend_schema(responses={200: PodAttemptRowSerializer(many=True), 404: _NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        record = record_selectors.run_record_get_for_user(request.user, name)
        return Response(PodAttemptRowSerializer(attempt_rows(record), many=True).data)
