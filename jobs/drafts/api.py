"""REST API for job drafts, their manifests and the team's SSH keys (SPEC 12).

Views check the body's shape, call one service or selector, and answer with the draft as
stored plus the engine's findings. Another team's job or key answers 404 everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.context import evaluate
from jobs.core.render import build_manifest
from jobs.drafts.forms import JobListForm
from jobs.drafts.selectors import (
    JOB_SORTS,
    JobListQuery,
    job_get_for_evaluation,
    job_get_for_user,
    job_search,
    job_summaries,
    ssh_key_get_for_team,
    ssh_keys_for_team,
    team_for_user,
)
from jobs.drafts.serializers import (
    FindingsErrorSerializer,
    JobDetailSerializer,
    JobDraftSerializer,
    JobSummarySerializer,
    SSHKeyInSerializer,
    SSHKeySerializer,
    job_summary_rows,
)
from jobs.drafts.services import job_create, job_delete, job_update, ssh_key_create, ssh_key_delete
from jobs.models import Job, JobState, SSHKey
from rlark_site.foundation.exceptions import ApplicationError, validated

YAML_CONTENT_TYPE = "text/yaml; charset=utf-8"
MANIFEST_SHA256_HEADER = "X-Manifest-SHA256"

_TEAM_PARAM = OpenApiParameter("team", str, description="team slug (default: your first team)")
_ERRORS = {
    400: OpenApiResponse(FindingsErrorSerializer, description="malformed body or name refused"),
    404: OpenApiResponse(description="missing, or another team's"),
}


def _detail(job: Job, request: Request, *, status_code: int = status.HTTP_200_OK) -> Response:
    context = {"evaluation": evaluate(job), "request": request}
    return Response(JobDetailSerializer(job, context=context).data, status=status_code)


class JobListView(generics.ListAPIView):
    serializer_class = JobSummarySerializer

    def get_queryset(self) -> QuerySet[Job]:
        if not self.request.query_params:  # the plain list: what the form answers for no data
            return job_search(self.request.user, JobListQuery())
        form = JobListForm(self.request.query_params)
        if not form.is_valid():
            raise ApplicationError(
                _("Malformed query: %(problem)s") % {"problem": "; ".join(
                    f"{name}: {' '.join(map(str, errors))}"
                    for name, errors in form.errors.items())},
                extra={"errors": {name: [str(e) for e in errors]
                                   for name, errors in form.errors.items()}},
            )
        slug = form.cleaned_data["team"]
        team = team_for_user(self.request.user, slug) if slug else None
        return job_search(self.request.user, form.query(), team=team)

    @extend_schema(parameters=[
        _TEAM_PARAM,
        OpenApiParameter("q", str, description="name contains (ignoring case)"),
        OpenApiParameter("state", str, enum=JobState.values, description="only jobs in this state"),
        OpenApiParameter("cluster", str, description="submitted to this cluster, or a draft "
                         "with a role placed on it"),
        OpenApiParameter("creator", str, description="created by this username"),
        OpenApiParameter("pending", bool, description="only jobs flagged Pending too long"),
        OpenApiParameter("stalled", bool, description="only Running jobs stalled: no new "
                         "training step for their launch list's stall limit (docs/progress.md)"),
        OpenApiParameter("sort", str, enum=list(JOB_SORTS), description="order (default "
                         "-updated: last change, newest first)"),
    ])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of JobSummarySerializer rows, read and rendered lean (`job_summary_rows`)."""
        rows: Any = job_summaries(self.get_queryset())  # counted and sliced as a queryset is
        page: list[dict[str, Any]] = self.paginate_queryset(rows) or []
        return self.get_paginated_response(job_summary_rows(page, request=request))

    @extend_schema(request=JobDraftSerializer, responses={201: JobDetailSerializer, **_ERRORS})
    def post(self, request: Request) -> Response:
        data = validated(JobDraftSerializer(data=request.data))
        team = team_for_user(request.user, data.get("team"))
        job = job_create(team=team, user=request.user, data=data)
        return _detail(job, request, status_code=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(responses={200: JobDetailSerializer, 404: _ERRORS[404]})
    def get(self, request: Request, name: str) -> Response:
        return _detail(job_get_for_user(request.user, name), request)

    def _update(self, request: Request, name: str, *, partial: bool) -> Response:
        job = job_get_for_user(request.user, name)
        data = validated(JobDraftSerializer(data=request.data, partial=partial))
        job = job_update(job=job, user=request.user, data=data, partial=partial)
        return _detail(job, request)

    @extend_schema(request=JobDraftSerializer, responses={200: JobDetailSerializer, **_ERRORS})
    def patch(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=True)

    @extend_schema(request=JobDraftSerializer, responses={200: JobDetailSerializer, **_ERRORS})
    def put(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=False)

    @extend_schema(responses={204: None, 404: _ERRORS[404],
                              409: OpenApiResponse(description="the job was submitted")})
    def delete(self, request: Request, name: str) -> Response:
        job_delete(job=job_get_for_user(request.user, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class YAMLRenderer(BaseRenderer):
    """Lets ``?format=yaml`` through content negotiation; errors render as YAML documents."""

    media_type = "text/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        if data is None:
            return b""
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


class JobManifestView(APIView):
    renderer_classes = [JSONRenderer, YAMLRenderer]

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["yaml", "json"],
                                     description="yaml (default) or json")],
        responses={
            (200, "text/yaml"): OpenApiTypes.STR,
            (200, "application/json"): OpenApiTypes.OBJECT,
            422: OpenApiResponse(FindingsErrorSerializer, description="errors remain"),
            404: _ERRORS[404],
        },
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        """The manifest RLark would submit; 422 with the findings while an error remains."""
        job = job_get_for_evaluation(request.user, name)
        evaluation = evaluate(job)
        if evaluation.has_errors:
            raise ApplicationError(
                _("The job still has errors; no manifest can be built."),
                extra={"findings": [f.as_dict() for f in evaluation.findings]},
                status_code=status.HTTP_422_UNPROCESSABLE_ENTITY,
            )
        manifest = build_manifest(evaluation.spec, evaluation.ctx)
        if request.query_params.get("format") == "json":
            response: HttpResponse = Response(manifest.data)
        else:
            response = HttpResponse(manifest.yaml, content_type=YAML_CONTENT_TYPE)
        response[MANIFEST_SHA256_HEADER] = manifest.sha256
        return response


class SSHKeyListView(generics.ListAPIView):
    serializer_class = SSHKeySerializer

    def get_queryset(self) -> QuerySet[SSHKey]:
        return ssh_keys_for_team(
            team_for_user(self.request.user, self.request.query_params.get("team"))
        )

    @extend_schema(parameters=[_TEAM_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=SSHKeyInSerializer, responses={201: SSHKeySerializer, **_ERRORS})
    def post(self, request: Request) -> Response:
        data = validated(SSHKeyInSerializer(data=request.data))
        key = ssh_key_create(
            team=team_for_user(request.user, data.get("team")), user=request.user,
            name=data["name"], public_key=data["public_key"],
        )
        return Response(SSHKeySerializer(key).data, status=status.HTTP_201_CREATED)


class SSHKeyDetailView(APIView):
    def _key(self, request: Request, name: str) -> SSHKey:
        team = team_for_user(request.user, request.query_params.get("team"))
        return ssh_key_get_for_team(team, name=name)

    @extend_schema(parameters=[_TEAM_PARAM], responses={200: SSHKeySerializer, 404: _ERRORS[404]})
    def get(self, request: Request, name: str) -> Response:
        return Response(SSHKeySerializer(self._key(request, name)).data)

    @extend_schema(parameters=[_TEAM_PARAM], responses={204: None, 404: _ERRORS[404]})
    def delete(self, request: Request, name: str) -> Response:
        ssh_key_delete(key=self._key(request, name))
        return Response(status=status.HTTP_204_NO_CONTENT)
