"""REST API of job files (SPEC 17; the contract is docs/api.md, "Job files and the CLI").

Views read the file (the raw request body) or the JSON body, call one service, and answer.
A bad file is a 400 (413 when too large) with `problems`; another team's job answers 404.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.core.jobfile import JobFile, JobFileError, parse_job_file
from jobs.drafts.api import YAML_CONTENT_TYPE
from jobs.drafts.selectors import job_get_for_user
from jobs.drafts.serializers import FindingSerializer
from jobs.jobfiles.document import document_of, dump_job_file
from jobs.jobfiles.schema import job_file_schema
from jobs.jobfiles.services import (
    Applied,
    SweepTooLarge,
    job_file_apply,
    job_file_clone,
    job_file_sweep,
    job_file_validate,
    job_for_file_export,
    job_verify_roles,
    source_spec,
    sweep_row,
)
from jobs.models import Job
from rlark_site.foundation.exceptions import ApplicationError, validated
from rlark_site.foundation.findings import Finding

FILE_MEDIA_TYPES = ("application/yaml", "text/yaml")
_FILE_BODY = {media: OpenApiTypes.STR for media in FILE_MEDIA_TYPES}
_TRUE, _FALSE = ("true", "1"), ("false", "0")


# --- answers ----------------------------------------------------------------------------------


class ProblemSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    path = serializers.CharField(allow_null=True)
    line = serializers.IntegerField(allow_null=True)
    column = serializers.IntegerField(allow_null=True)
    suggestion = serializers.CharField(allow_null=True)


class FileErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(required=False)
    problems = ProblemSerializer(many=True, required=False)
    findings = FindingSerializer(many=True, required=False)


class ChangeSerializer(serializers.Serializer):
    path = serializers.CharField()
    change = serializers.ChoiceField(choices=["changed", "added", "removed"])
    # `from` and `to`: any JSON value (declared in the OpenAPI document by name)


class ValidateAnswerSerializer(serializers.Serializer):
    name = serializers.CharField()
    team = serializers.CharField()
    findings = FindingSerializer(many=True)
    has_errors = serializers.BooleanField()


class AppliedAnswerSerializer(ValidateAnswerSerializer):
    action = serializers.ChoiceField(choices=["created", "updated", "unchanged"])
    dry_run = serializers.BooleanField()
    changes = serializers.ListField(child=serializers.DictField())
    state = serializers.CharField()
    url = serializers.CharField()
    wizard_url = serializers.CharField()


class CloneAnswerSerializer(AppliedAnswerSerializer):
    source = serializers.DictField()  # type: ignore[assignment]
    overrides = serializers.ListField(child=serializers.DictField())


class SweepAnswerSerializer(serializers.Serializer):
    name = serializers.CharField()
    count = serializers.IntegerField()
    dry_run = serializers.BooleanField()
    submitted = serializers.BooleanField()
    drafts = serializers.ListField(child=serializers.DictField())


class VerifyAnswerSerializer(serializers.Serializer):
    name = serializers.CharField()
    roles = serializers.ListField(child=serializers.DictField())


class CloneInSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, trim_whitespace=False,
                                 help_text="the new draft's name")
    set = serializers.ListField(child=serializers.CharField(max_length=100_000,
                                                            trim_whitespace=False),
                                required=False, max_length=100,
                                help_text="PATH=VALUE overrides, applied in order")
    dry_run = serializers.BooleanField(required=False, default=False)


_FILE_ERRORS = {
    400: OpenApiResponse(FileErrorSerializer, description="a bad file (problems), or refused"),
    404: OpenApiResponse(FileErrorSerializer, description="another team's job or team"),
    413: OpenApiResponse(FileErrorSerializer, description="the file is over 256 KiB"),
}


def _findings(findings: list[Finding]) -> list[dict[str, Any]]:
    return [f.as_dict() for f in findings]


def _urls(request: Request, name: str) -> dict[str, str]:
    return {
        "url": request.build_absolute_uri(reverse("api:job-detail", args=[name])),
        "wizard_url": request.build_absolute_uri(reverse("jobs:wizard", args=[name])),
    }


def applied_body(item: Applied, request: Request, *, dry_run: bool) -> dict[str, Any]:
    return {
        "name": item.name, "team": item.team.slug, "action": item.action, "dry_run": dry_run,
        "changes": item.changes, "findings": _findings(item.evaluation.findings),
        "has_errors": item.evaluation.has_errors, "state": item.state,
        **_urls(request, item.name),
    }


def file_error(exc: JobFileError) -> ApplicationError:
    """A bad file in the one error shape, with every problem (docs/api.md)."""
    problems = [p.as_dict() for p in exc.problems]
    first = exc.problems[0]
    extra: dict[str, Any] = {"problems": problems}
    if exc.source or first.path:
        extra["field"] = exc.source or first.path
    errors: dict[str, list[str]] = {}
    for problem in exc.problems:
        errors.setdefault(problem.path or "", []).append(problem.message)
    extra["errors"] = errors
    if isinstance(exc, SweepTooLarge):
        extra.update({"count": exc.count, "limit": 100})
    return ApplicationError(first.one_line(), extra=extra,
                            status_code=413 if exc.too_large else 400)


def _flag(request: Request, name: str) -> bool:
    value = str(request.query_params.get(name, "false")).lower()
    if value not in (*_TRUE, *_FALSE):
        raise ApplicationError(_("%(name)s must be true or false.") % {"name": name},
                               extra={"field": name})
    return value in _TRUE


def read_job_file(data: bytes) -> JobFile:
    try:
        return parse_job_file(data, job_file_schema())
    except JobFileError as exc:
        raise file_error(exc) from None


def _body(request: Request) -> bytes:
    return bytes(request._request.body)


# --- views ------------------------------------------------------------------------------------


class JobFileSchemaView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, auth=[])
    def get(self, request: Request) -> Response:
        """The JSON Schema (draft 2020-12) of a job file, for editors and CI."""
        return Response(job_file_schema())


def _schema_url(request: Request) -> str:
    return request.build_absolute_uri(reverse("api:job-file-schema"))


def export_text(job: Job, *, schema_url: str) -> str:
    """The job as a job file's text (the header comment names where it came from)."""
    spec = source_spec(job)
    origin = (_("the body frozen when it was submitted") if job.run is not None
              else _("the draft as stored"))
    comment = [
        f"yaml-language-server: $schema={schema_url}",
        _("RLark job file: job %(name)s of team %(team)s, %(origin)s.")
        % {"name": job.name, "team": job.team.slug, "origin": origin},
        _("Apply it with `rlark apply -f FILE` (POST /api/v1/job-files/apply/)."),
    ]
    document = document_of(name=job.name, team=job.team.slug, spec=spec)
    return dump_job_file(document, comment=comment)


def attachment_name(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100] or "job"
    return f'attachment; filename="{safe}.rlark.yaml"'


class JobFileExportView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["yaml", "json"],
                                     description="yaml (default) or json")],
        responses={(200, "text/yaml"): OpenApiTypes.STR,
                   (200, "application/json"): OpenApiTypes.OBJECT,
                   404: OpenApiResponse(description="missing, or another team's (a platform "
                                                    "admin gets any submitted job)")},
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        """The job as a job file: a draft as stored, a submitted job as frozen (platform
        admins: any team's submitted job, as they read its run record)."""
        job = job_for_file_export(request.user, name)
        if request.query_params.get("format") == "json":
            return Response(document_of(name=job.name, team=job.team.slug,
                                        spec=source_spec(job)))
        response = HttpResponse(export_text(job, schema_url=_schema_url(request)),
                                content_type=YAML_CONTENT_TYPE)
        response["Content-Disposition"] = attachment_name(job.name)
        return response


class JobFileValidateView(APIView):
    @extend_schema(request=_FILE_BODY,
                   responses={200: ValidateAnswerSerializer, **_FILE_ERRORS})
    def post(self, request: Request) -> Response:
        """The findings of the file; nothing is stored."""
        job_file = read_job_file(_body(request))
        item = job_file_validate(user=request.user, job_file=job_file)
        return Response({"name": item.name, "team": item.team.slug,
                         "findings": _findings(item.evaluation.findings),
                         "has_errors": item.evaluation.has_errors})


_DRY_RUN = OpenApiParameter("dry_run", bool, description="answer what would happen; store "
                            "nothing")


class JobFileApplyView(APIView):
    @extend_schema(
        request=_FILE_BODY, parameters=[_DRY_RUN],
        responses={200: AppliedAnswerSerializer, 201: AppliedAnswerSerializer, **_FILE_ERRORS,
                   409: OpenApiResponse(FileErrorSerializer,
                                        description="the job was submitted")},
    )
    def post(self, request: Request) -> Response:
        """Create or update the draft of the file's name so that it is the file."""
        dry_run = _flag(request, "dry_run")
        job_file = read_job_file(_body(request))
        item = job_file_apply(user=request.user, job_file=job_file, dry_run=dry_run)
        code = status.HTTP_201_CREATED if item.action == "created" and not dry_run else 200
        return Response(applied_body(item, request, dry_run=dry_run), status=code)


def _refused_file(call: Any) -> Any:
    try:
        return call()
    except JobFileError as exc:
        raise file_error(exc) from None


class JobCloneView(APIView):
    @extend_schema(request=CloneInSerializer,
                   responses={200: CloneAnswerSerializer, 201: CloneAnswerSerializer,
                              **_FILE_ERRORS})
    def post(self, request: Request, name: str) -> Response:
        """A new draft from this draft or submitted job, with PATH=VALUE overrides."""
        source = job_get_for_user(request.user, name)
        data = validated(CloneInSerializer(data=request.data))
        item = _refused_file(lambda: job_file_clone(
            user=request.user, source=source, name=data["name"],
            overrides=data.get("set") or [], dry_run=data["dry_run"]))
        body = applied_body(item, request, dry_run=data["dry_run"])
        body["source"] = {"name": source.name, "state": source.state}
        body["overrides"] = [{"path": p, "value": v} for p, v in item.values.items()]
        return Response(body, status=200 if data["dry_run"] else status.HTTP_201_CREATED)


class JobFileSweepView(APIView):
    @extend_schema(
        request=_FILE_BODY,
        parameters=[
            OpenApiParameter("grid", str, many=True, description="PATH=V1,V2 (repeated)"),
            OpenApiParameter("submit", bool, description="submit every draft too"),
            _DRY_RUN,
        ],
        responses={200: SweepAnswerSerializer, 201: SweepAnswerSerializer, **_FILE_ERRORS,
                   409: OpenApiResponse(FileErrorSerializer,
                                        description="a member was submitted"),
                   422: OpenApiResponse(FileErrorSerializer,
                                        description="submit: a draft has errors")},
    )
    def post(self, request: Request) -> Response:
        """One draft per combination of the grids, all or none, optionally submitted."""
        dry_run, submit = _flag(request, "dry_run"), _flag(request, "submit")
        job_file = read_job_file(_body(request))
        grids = request.query_params.getlist("grid")
        items = _refused_file(lambda: job_file_sweep(
            user=request.user, job_file=job_file, grids=grids, submit=submit, dry_run=dry_run))
        rows = [{**sweep_row(item), "url": _urls(request, item.name)["url"]} for item in items]
        wrote = not dry_run and (submit or any(i.action == "created" for i in items))
        return Response({"name": job_file.name, "count": len(items), "dry_run": dry_run,
                         "submitted": submit and not dry_run, "drafts": rows},
                        status=status.HTTP_201_CREATED if wrote else 200)


class JobVerifyView(APIView):
    @extend_schema(request=None, responses={
        200: VerifyAnswerSerializer, 404: _FILE_ERRORS[404],
        409: OpenApiResponse(FileErrorSerializer, description="the job was submitted")})
    def post(self, request: Request, name: str) -> Response:
        """Request verification of every role that lacks one (the wizard's rules)."""
        job = job_get_for_user(request.user, name)
        return Response({"name": job.name, "roles": job_verify_roles(job=job,
                                                                     user=request.user)})
