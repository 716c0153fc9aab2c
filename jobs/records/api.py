"""REST API: launch lists, deployment parameters, submit/cancel/first-run check, run records,
audit events (SPEC 12). Views check shape, call one service or selector, and render.
"""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.drafts.selectors import job_get_for_user, team_for_user
from jobs.models import DeploymentParameters, JobState, LaunchList, RunRecord
from jobs.records import confirmation, selectors, services
from jobs.records.checklist import ANSWERS, CHECKLIST
from jobs.records.serializers import (
    AuditEventSerializer,
    CloneSerializer,
    ConfirmationRequestInSerializer,
    ConfirmInSerializer,
    DeploymentParametersInSerializer,
    DeploymentParametersSerializer,
    FillFromJobSerializer,
    FirstRunCheckInSerializer,
    FirstRunCheckSerializer,
    FirstRunCheckStateSerializer,
    LaunchListInSerializer,
    LaunchListSerializer,
    RejectInSerializer,
    RunRecordChainSerializer,
    RunRecordSummarySerializer,
    SubmitAcceptedSerializer,
    audit_events_data,
)
from jobs.records.submission import job_submit
from rlark_site.foundation.audit.paging import AuditCursorPagination
from rlark_site.foundation.audit.selectors import AuditLookup
from rlark_site.foundation.exceptions import ApplicationError, validated
from rlark_site.foundation.tenancy.access import IsPlatformAdmin

_NOT_FOUND = OpenApiResponse(description="missing, or another team's")
_TEAM_PARAM = OpenApiParameter("team", str, description="team slug (default: all your teams)")


def _team_filter(request: Request) -> Any:
    slug = request.query_params.get("team")
    return team_for_user(request.user, slug) if slug else None


# --- launch lists -----------------------------------------------------------------------------


class LaunchListsView(generics.ListAPIView):
    serializer_class = LaunchListSerializer

    def get_queryset(self) -> QuerySet[LaunchList]:
        return selectors.launch_lists_for_user(self.request.user, team=_team_filter(self.request))

    @extend_schema(parameters=[_TEAM_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=LaunchListInSerializer, responses={201: LaunchListSerializer})
    def post(self, request: Request) -> Response:
        data = validated(LaunchListInSerializer(data=request.data))
        team = team_for_user(request.user, data.pop("team", None))
        launch_list = services.launch_list_create(team=team, user=request.user, fields=data)
        return Response(LaunchListSerializer(launch_list).data, status=status.HTTP_201_CREATED)


class LaunchListDetailView(APIView):
    @extend_schema(responses={200: LaunchListSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, pk: int) -> Response:
        launch_list = selectors.launch_list_get_for_user(request.user, pk)
        return Response(LaunchListSerializer(launch_list).data)

    @extend_schema(request=LaunchListInSerializer, responses={200: LaunchListSerializer})
    def patch(self, request: Request, pk: int) -> Response:
        launch_list = selectors.launch_list_get_for_user(request.user, pk)
        data = validated(LaunchListInSerializer(data=request.data, partial=True))
        data.pop("team", None)
        updated = services.launch_list_update(
            launch_list=launch_list, user=request.user, fields=data
        )
        return Response(LaunchListSerializer(updated).data)


# --- deployment parameters --------------------------------------------------------------------


class _ParametersListMixin(generics.GenericAPIView):
    """A page of deployment parameters: their effective confirmation states computed for the
    page at once (`confirmation.confirmation_statuses`), not one record at a time."""

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("many") and args:
            records = list(args[0])
            kwargs["context"] = {
                **self.get_serializer_context(),
                "confirmation_statuses": confirmation.confirmation_statuses(records),
            }
            return self.get_serializer_class()(records, *args[1:], **kwargs)
        return super().get_serializer(*args, **kwargs)


class DeploymentParametersListView(_ParametersListMixin, generics.ListAPIView):
    serializer_class = DeploymentParametersSerializer

    def get_queryset(self) -> QuerySet[DeploymentParameters]:
        return selectors.deployment_parameters_for_user(
            self.request.user, team=_team_filter(self.request)
        )

    @extend_schema(parameters=[_TEAM_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=DeploymentParametersInSerializer,
                   responses={201: DeploymentParametersSerializer})
    def post(self, request: Request) -> Response:
        data = validated(DeploymentParametersInSerializer(data=request.data))
        team = team_for_user(request.user, data.pop("team", None))
        parameters = services.deployment_parameters_create(
            team=team, user=request.user, fields=data
        )
        return Response(
            DeploymentParametersSerializer(parameters).data, status=status.HTTP_201_CREATED
        )


class DeploymentParametersDetailView(APIView):
    @extend_schema(responses={200: DeploymentParametersSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, pk: int) -> Response:
        parameters = selectors.deployment_parameters_get_for_user(request.user, pk)
        return Response(DeploymentParametersSerializer(parameters).data)

    @extend_schema(request=DeploymentParametersInSerializer,
                   responses={200: DeploymentParametersSerializer})
    def patch(self, request: Request, pk: int) -> Response:
        parameters = selectors.deployment_parameters_get_for_user(request.user, pk)
        data = validated(DeploymentParametersInSerializer(data=request.data, partial=True))
        data.pop("team", None)
        updated = services.deployment_parameters_update(
            parameters=parameters, user=request.user, fields=data
        )
        return Response(DeploymentParametersSerializer(updated).data)


class FillFromJobView(APIView):
    @extend_schema(request=FillFromJobSerializer,
                   responses={200: DeploymentParametersSerializer, 404: _NOT_FOUND})
    def post(self, request: Request, pk: int) -> Response:
        parameters = selectors.deployment_parameters_get_for_user(request.user, pk)
        data = validated(FillFromJobSerializer(data=request.data))
        job = job_get_for_user(request.user, data["job"])
        updated = services.deployment_parameters_fill_from_job(
            parameters=parameters, job=job, user=request.user
        )
        return Response(DeploymentParametersSerializer(updated).data)


class ParametersConfirmationRequestView(APIView):
    @extend_schema(request=ConfirmationRequestInSerializer,
                   responses={200: DeploymentParametersSerializer, 404: _NOT_FOUND,
                              409: OpenApiResponse(description="confirmed and unchanged")})
    def post(self, request: Request, pk: int) -> Response:
        parameters = selectors.deployment_parameters_get_for_user(request.user, pk)
        data = validated(ConfirmationRequestInSerializer(data=request.data))
        job = job_get_for_user(request.user, data["job"]) if data["job"] else None
        updated = confirmation.confirmation_request(
            parameters=parameters, user=request.user, job=job, note=data["note"]
        )
        return Response(DeploymentParametersSerializer(updated).data)


_ADMIN_DECISION = {
    200: DeploymentParametersSerializer,
    403: OpenApiResponse(description="not a platform admin"),
    404: OpenApiResponse(description="missing"),
    409: OpenApiResponse(description="not pending (decided already), or changed since reviewed"),
}


class ParametersConfirmView(APIView):
    permission_classes = [IsAuthenticated, IsPlatformAdmin]

    @extend_schema(request=ConfirmInSerializer, responses=_ADMIN_DECISION)
    def post(self, request: Request, pk: int) -> Response:
        parameters = selectors.parameters_for_decision(request.user, pk)
        data = validated(ConfirmInSerializer(data=request.data))
        decided = confirmation.confirmation_confirm(
            parameters_id=parameters.pk, admin=request.user, note=data["note"],
            expected_fingerprint=data["fingerprint"],
        )
        return Response(DeploymentParametersSerializer(decided).data)


class ParametersRejectView(APIView):
    permission_classes = [IsAuthenticated, IsPlatformAdmin]

    @extend_schema(request=RejectInSerializer, responses=_ADMIN_DECISION)
    def post(self, request: Request, pk: int) -> Response:
        parameters = selectors.parameters_for_decision(request.user, pk)
        data = validated(RejectInSerializer(data=request.data))
        decided = confirmation.confirmation_reject(
            parameters_id=parameters.pk, admin=request.user, note=data["note"]
        )
        return Response(DeploymentParametersSerializer(decided).data)


class ParametersQueueView(_ParametersListMixin, generics.ListAPIView):
    """Platform admins: deployment parameters waiting for (or past) a confirmation."""

    serializer_class = DeploymentParametersSerializer
    permission_classes = [IsAuthenticated, IsPlatformAdmin]

    def get_queryset(self) -> QuerySet[DeploymentParameters]:
        params = self.request.query_params
        state = params.get("state", "pending")
        if state not in selectors.QUEUE_STATES:
            raise ApplicationError(
                _("Unknown state %(state)s; use one of: %(states)s.")
                % {"state": state[:20], "states": ", ".join(selectors.QUEUE_STATES)},
                extra={"field": "state"},
            )
        return selectors.parameters_confirmation_queue(
            self.request.user, state=state, team=params.get("team", "")
        )

    @extend_schema(parameters=[
        OpenApiParameter("state", str, enum=list(selectors.QUEUE_STATES),
                         description="confirmation state (default pending)"),
        OpenApiParameter("team", str, description="team slug"),
    ], responses={200: DeploymentParametersSerializer(many=True),
                  403: OpenApiResponse(description="not a platform admin")})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


# --- lifecycle --------------------------------------------------------------------------------


class JobSubmitView(APIView):
    @extend_schema(
        request=None,
        responses={
            202: SubmitAcceptedSerializer,
            409: OpenApiResponse(description="already submitted"),
            422: OpenApiResponse(description="{detail, findings}: an error-level finding remains"),
            404: _NOT_FOUND,
        },
    )
    def post(self, request: Request, name: str) -> Response:
        job = job_get_for_user(request.user, name)
        record = job_submit(job=job, user=request.user)
        return Response(
            {"state": JobState.QUEUED, "run_record": record.job_name},
            status=status.HTTP_202_ACCEPTED,
        )


class JobCancelView(APIView):
    @extend_schema(request=None, responses={200: SubmitAcceptedSerializer, 404: _NOT_FOUND,
                                            409: OpenApiResponse(description="not cancellable")})
    def post(self, request: Request, name: str) -> Response:
        job = job_get_for_user(request.user, name)
        record = services.job_cancel(job=job, user=request.user)
        return Response({"state": JobState.CANCELLED, "run_record": record.job_name})


class FirstRunCheckView(APIView):
    @extend_schema(responses={200: FirstRunCheckStateSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        job = job_get_for_user(request.user, name)
        record = RunRecord.objects.filter(job=job).first()
        return Response({
            "checks": selectors.first_run_checks_of(record) if record is not None else [],
            "expected_signals": (
                record.launch_list_snapshot.get("expected_signals", []) if record else []
            ),
            "checklist": [
                {"code": item.code, "question": str(item.question), "hint": str(item.hint)}
                for item in CHECKLIST
            ],
            "answers": {code: str(label) for code, label in ANSWERS.items()},
        })

    @extend_schema(request=FirstRunCheckInSerializer,
                   responses={201: FirstRunCheckSerializer, 404: _NOT_FOUND,
                              409: OpenApiResponse(description="not seen Running yet")})
    def post(self, request: Request, name: str) -> Response:
        job = job_get_for_user(request.user, name)
        data = validated(FirstRunCheckInSerializer(data=request.data))
        check = services.first_run_check_record(job=job, user=request.user, **data)
        body = {
            "observed": check.observed, "evidence": check.evidence, "notes": check.notes,
            "troubleshooting": check.troubleshooting,
            "checked_by": request.user.get_username(), "checked_at": check.checked_at,
        }
        return Response(FirstRunCheckSerializer(body).data, status=status.HTTP_201_CREATED)


# --- run records ------------------------------------------------------------------------------


class RunRecordListView(generics.ListAPIView):
    serializer_class = RunRecordSummarySerializer

    def get_queryset(self) -> QuerySet[RunRecord]:
        return selectors.run_records_for_user(
            self.request.user, name_contains=self.request.query_params.get("name", "")
        )

    @extend_schema(parameters=[OpenApiParameter("name", str, description="job name contains")])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class RunRecordView(APIView):
    @extend_schema(responses={200: RunRecordChainSerializer, 404: _NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        record = selectors.run_record_get_for_user(request.user, name)
        return Response(selectors.run_record_chain(record))


class RunRecordCloneView(APIView):
    @extend_schema(request=CloneSerializer,
                   responses={201: OpenApiResponse(description="{name}: the new draft")})
    def post(self, request: Request, name: str) -> Response:
        record = selectors.run_record_get_for_user(request.user, name)
        data = validated(CloneSerializer(data=request.data))
        job_get_for_user(request.user, record.job_name)  # admins read records, teams clone
        job = services.run_record_clone(run_record=record, user=request.user, name=data["name"])
        return Response({"name": job.name, "state": job.state}, status=status.HTTP_201_CREATED)


class RunRecordDiffView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("against", str, required=True,
                                     description="job name of another run record of the team")],
        responses={200: OpenApiResponse(description=(
            "{from, to, changes: {job: [{field, from, to, lines}], roles: [{role, change, "
            "fields: [...]}]}, diff}: the semantic diff by role and field (the job name's own "
            "changes left out) and the unified diff of the frozen YAML"))},
    )
    def get(self, request: Request, name: str) -> Response:
        record = selectors.run_record_get_for_user(request.user, name)
        against = request.query_params.get("against", "")
        if not against:
            raise ApplicationError(_("Name the run record to compare with: ?against=<job name>."))
        other = selectors.other_run_record_for_diff(request.user, record, against)
        return Response({
            "from": other.job_name, "to": record.job_name,
            "changes": selectors.run_diff(record, other).as_dict(),
            "diff": selectors.manifest_diff(record, other),
        })


class AuditEventsView(generics.ListAPIView):
    """Newest first, paged by cursor (docs/api.md): each page costs its own size whatever the
    number of events."""

    serializer_class = AuditEventSerializer
    pagination_class = AuditCursorPagination

    def get_queryset(self) -> AuditLookup:  # type: ignore[override]
        params = self.request.query_params
        return selectors.audit_events_for_user(
            self.request.user, job=params.get("job", ""), actor=params.get("actor", ""),
            model=params.get("model", ""),
        )

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        paginator = cast(AuditCursorPagination, self.paginator)
        page = paginator.paginate_queryset(self.get_queryset(), request, view=self)
        return paginator.get_paginated_response(
            audit_events_data(selectors.events_as_dicts(page))
        )

    @extend_schema(parameters=[
        OpenApiParameter("job", str, description="one job's whole trail"),
        OpenApiParameter("actor", str, description="username or user id"),
        OpenApiParameter("model", str, description='model label or name, e.g. "jobs.Job"'),
    ])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
