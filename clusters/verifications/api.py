"""REST endpoints: live selector matches, and the verification requests and decisions.

Views only check the shape of the input, call one service or selector, and render.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.inventory.selectors import selector_preflight
from clusters.matching import (
    FIRST_PAGE,
    NODES_PAGE_DEFAULT,
    NODES_PAGE_MAX,
    NodeWindow,
    describe_match_cached,
    node_window,
    parse_selector_input,
)
from clusters.models import Cluster, Verification
from clusters.podrequests import PODS, is_tracked, scheduler_units
from clusters.preflight import VERDICTS
from clusters.quantities import is_quantity, nano_units
from clusters.verifications.selectors import (
    STATE_FILTERS,
    match_summary,
    snapshot_nodes,
    verification_get,
    verification_list,
    verification_result,
)
from clusters.verifications.services import (
    verification_approve,
    verification_reject,
    verification_request_outcome,
)
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.limits import (
    MAX_DEVICE_KINDS,
    MAX_FORM_TEXT,
    MAX_HOST_PATHS,
    MAX_SELECTOR_CONDITIONS,
    BoundedDictField,
)
from rlark_site.foundation.pagination import BoundedLimitOffsetPagination, paginated
from rlark_site.foundation.tenancy.access import IsPlatformAdmin, access_team, teams_for_user
from rlark_site.foundation.tenancy.models import Team


def _cluster_named(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ApplicationError(
            _("Cluster %(name)s does not exist.") % {"name": repr(name[:63])},
            extra={"field": "cluster"}, status_code=400,
        )
    return cluster


@extend_schema_field({
    "oneOf": [
        {"type": "object", "additionalProperties": {"type": "string"},
         "example": {"rlinf.io/pool": "a100-a", "topology.rlinf.io/cluster": "gpu-a"}},
        {"type": "array", "items": {"type": "array", "items": {"type": "string"},
                                    "minItems": 2, "maxItems": 2}},
        {"type": "string", "example": "rlinf.io/pool=a100-a,topology.rlinf.io/cluster=gpu-a"},
    ],
})
class SelectorField(serializers.Field):
    """`{key: value}`, a list of `[key, value]` pairs, or `key=value` text; checked by
    `parse_selector_input` (400 with findings), not here."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, (dict, list)) and len(data) > MAX_SELECTOR_CONDITIONS:
            raise serializers.ValidationError(
                _("A selector has at most %(max)s conditions.") % {"max": MAX_SELECTOR_CONDITIONS}
            )
        if isinstance(data, str) and len(data) > MAX_FORM_TEXT:
            raise serializers.ValidationError(
                _("Ensure this field has no more than %(max)s characters.") % {"max": MAX_FORM_TEXT}
            )
        return data

    def to_representation(self, value: Any) -> Any:
        return value


MAX_NEEDS = MAX_DEVICE_KINDS + 4  # cpu, memory, pods, nvidia.com/gpu and the devices
_RESOURCE_NAME_MAX = 253


def _shown(value: object) -> str:
    return repr(value[:64] if isinstance(value, str) else value)[:80]


@extend_schema_field({
    "type": "object", "additionalProperties": {"oneOf": [{"type": "string"},
                                                         {"type": "integer", "minimum": 0}]},
    "maxProperties": MAX_NEEDS,
    "example": {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"},
})
class NeedsField(serializers.Field):
    """What one worker needs: {resource: Kubernetes quantity} for cpu, memory, pods,
    nvidia.com/gpu and rlinf.io/* (scheduler units inside; one pod unless `pods` is given)."""

    def to_internal_value(self, data: Any) -> dict[str, int]:
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                _("needs is a map of resource names to Kubernetes quantities."))
        if len(data) > MAX_NEEDS:
            raise serializers.ValidationError(
                _("Ensure this field has no more than %(max)s entries.") % {"max": MAX_NEEDS})
        needs: dict[str, int] = {PODS: 1}
        for name, value in data.items():
            if (not isinstance(name, str) or len(name) > _RESOURCE_NAME_MAX or "\x00" in name
                    or not (is_tracked(name) or name == PODS)):
                raise serializers.ValidationError(
                    _("%(name)s is not a resource RLark counts (cpu, memory, pods, "
                      "nvidia.com/gpu, rlinf.io/*).") % {"name": _shown(name)})
            text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
            if not isinstance(text, str) or not is_quantity(text) or text.startswith("-"):
                raise serializers.ValidationError(
                    _("%(name)s: %(value)s is not a Kubernetes quantity of 0 or more (for "
                      "example 500m, 8, 64Gi).") % {"name": name, "value": _shown(value)})
            needs[name] = scheduler_units(name, nano_units(text))
        return needs

    def to_representation(self, value: Any) -> Any:
        return value


class SelectorMatchRequestSerializer(serializers.Serializer):
    cluster = serializers.CharField(max_length=63)
    selector = SelectorField()
    nodes_offset = serializers.IntegerField(
        required=False, min_value=0, help_text="First node of the page of `nodes` (default 0)."
    )
    nodes_limit = serializers.IntegerField(
        required=False, min_value=1, max_value=NODES_PAGE_MAX,
        help_text=f"Nodes per page (default {NODES_PAGE_DEFAULT}, at most {NODES_PAGE_MAX}).",
    )
    needs = NeedsField(
        required=False,
        help_text="One worker's needs; the answer then adds fits_now and fits_ever (node "
                  "counts), verdict, as_of and message (SPEC 15 pre-flight).")


_NODES = inline_serializer("MatchedNodeRef", many=True, fields={
    "cluster": serializers.CharField(), "name": serializers.CharField(),
    "namespace": serializers.CharField(),
})

_PER_CLUSTER = inline_serializer("ClusterMatchCount", many=True, fields={
    "cluster": serializers.CharField(), "count": serializers.IntegerField(),
    "ready": serializers.IntegerField(),
})

_SNAPSHOT_NODES = inline_serializer("SnapshotNode", many=True, fields={
    "cluster": serializers.CharField(), "name": serializers.CharField(),
    "namespace": serializers.CharField(), "gpu": serializers.IntegerField(allow_null=True),
    "devices": serializers.DictField(child=serializers.IntegerField()),
    "ready": serializers.BooleanField(),
})

_DRIFT = inline_serializer("VerificationDrift", fields={
    "added": _NODES, "removed": _NODES,
    "added_count": serializers.IntegerField(), "removed_count": serializers.IntegerField(),
})

SelectorMatchResponse = inline_serializer("SelectorMatch", {
    "cluster": serializers.CharField(),
    "count": serializers.IntegerField(help_text="Every match, whatever the page."),
    "per_cluster": _PER_CLUSTER,
    "nodes": _NODES,
    "nodes_offset": serializers.IntegerField(),
    "nodes_limit": serializers.IntegerField(),
    "nodes_next_offset": serializers.IntegerField(
        allow_null=True, help_text="`nodes_offset` of the next page; null on the last."
    ),
    "clusters": serializers.ListField(child=serializers.CharField()),
    "confined": serializers.BooleanField(),
    "confining_conditions": serializers.ListField(child=serializers.DictField()),
    "foreign_count": serializers.IntegerField(),
    "foreign_nodes": serializers.ListField(
        child=serializers.DictField(), help_text="The first `nodes_limit` of them."
    ),
    "gpu_max": serializers.IntegerField(allow_null=True),
    "devices_max": serializers.DictField(child=serializers.IntegerField()),
    "needs": serializers.DictField(child=serializers.CharField(), required=False,
                                   help_text="With `needs` only: as read (quantities)."),
    "fits_now": serializers.IntegerField(
        required=False, help_text="With `needs` only: matched nodes with room for it now."),
    "fits_ever": serializers.IntegerField(
        required=False, help_text="With `needs` only: matched nodes whose allocatable holds it."),
    "verdict": serializers.ChoiceField(choices=list(VERDICTS), required=False),
    "as_of": serializers.CharField(allow_null=True, required=False),
    "message": serializers.CharField(required=False),
})


class SelectorMatchesView(APIView):
    """The global matches of a selector, judged against the chosen cluster (live, read-only)."""

    @extend_schema(request=SelectorMatchRequestSerializer, responses=SelectorMatchResponse)
    def post(self, request: Request) -> Response:
        data = SelectorMatchRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        selector = parse_selector_input(data.validated_data["selector"])
        cluster = _cluster_named(data.validated_data["cluster"])
        window = node_window(
            data.validated_data.get("nodes_offset"), data.validated_data.get("nodes_limit")
        )
        body = describe_match_cached(selector, cluster=cluster.name, window=window)
        needs = data.validated_data.get("needs")
        if needs is not None:  # occupancy moves with every pod: never cached
            body = {**body, **selector_preflight(selector, needs)}
        return Response(body)


class VerificationRequestSerializer(serializers.Serializer):
    team = serializers.SlugField(required=False, max_length=50)
    cluster = serializers.CharField(max_length=63)
    selector = SelectorField()
    for_header_role = serializers.BooleanField(default=False)
    requested_gpu = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    requested_devices = BoundedDictField(
        child=serializers.IntegerField(min_value=0), required=False, max_items=MAX_DEVICE_KINDS
    )
    requested_host_paths = serializers.ListField(
        child=serializers.CharField(max_length=4096), required=False, max_length=MAX_HOST_PATHS
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=4000, default="")
    job = serializers.CharField(required=False, allow_blank=True, max_length=63, default="",
                                help_text="the job draft that asks (shown to the admins)")
    role = serializers.CharField(required=False, allow_blank=True, max_length=63, default="",
                                 help_text="the role of that job whose selector this is")


class ApproveSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=4000, default="")
    confirm_gpu = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    confirm_devices = BoundedDictField(
        child=serializers.IntegerField(min_value=0), required=False, max_items=MAX_DEVICE_KINDS
    )
    confirm_host_paths = serializers.ListField(
        child=serializers.CharField(max_length=4096), required=False, max_length=MAX_HOST_PATHS
    )


class RejectSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=4000)


class VerificationSerializer(serializers.ModelSerializer):
    """A verification without its snapshot's node list: counts per cluster and one page of
    the matched nodes (`matches`; the detail takes `?nodes_offset=&nodes_limit=`)."""

    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="cluster.name")
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True)
    count = serializers.SerializerMethodField()
    per_cluster = serializers.SerializerMethodField()
    matches = serializers.SerializerMethodField()
    matches_offset = serializers.SerializerMethodField()
    matches_limit = serializers.SerializerMethodField()
    matches_next_offset = serializers.SerializerMethodField()
    drift = serializers.SerializerMethodField()

    class Meta:
        model = Verification
        fields = [
            "id", "team", "cluster", "selector", "selector_key", "for_header_role",
            "requested_gpu", "requested_devices", "requested_host_paths", "request_note",
            "requested_for_job", "requested_for_role", "requested_by", "created_at", "state",
            "count", "per_cluster", "matches",
            "matches_offset", "matches_limit", "matches_next_offset", "inventory_generations",
            "decided_by", "decided_at", "decision_note", "confirmed_gpu", "confirmed_devices",
            "confirmed_host_paths", "stale_at", "drift",
        ]

    def _window(self) -> NodeWindow:
        return self.context.get("window", FIRST_PAGE)  # type: ignore[no-any-return]

    def _page(self, verification: Verification) -> tuple[list[dict[str, Any]], int | None]:
        pages = self.context.setdefault("pages", {})
        if verification.pk not in pages:
            pages[verification.pk] = snapshot_nodes(verification, self._window())
        return pages[verification.pk]  # type: ignore[no-any-return]

    def get_count(self, verification: Verification) -> int:
        return match_summary(verification).count

    @extend_schema_field(_PER_CLUSTER)
    def get_per_cluster(self, verification: Verification) -> list[dict[str, Any]]:
        return [asdict(c) for c in match_summary(verification).per_cluster]

    @extend_schema_field(_SNAPSHOT_NODES)
    def get_matches(self, verification: Verification) -> list[dict[str, Any]]:
        return self._page(verification)[0]

    def get_matches_offset(self, verification: Verification) -> int:
        return self._window().offset

    def get_matches_limit(self, verification: Verification) -> int:
        return self._window().limit

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_matches_next_offset(self, verification: Verification) -> int | None:
        return self._page(verification)[1]

    @extend_schema_field(_DRIFT)
    def get_drift(self, verification: Verification) -> dict[str, Any]:
        """The nodes added and removed by drift: complete counts, the first page of each."""
        limit = self._window().limit
        added = verification.drift.get("added", [])
        removed = verification.drift.get("removed", [])
        if not (added or removed):
            return {}
        return {"added": added[:limit], "removed": removed[:limit],
                "added_count": len(added), "removed_count": len(removed)}


class VerificationDetailSerializer(VerificationSerializer):
    """A verification with its automated result (one live match for confinement)."""

    result = serializers.SerializerMethodField()

    class Meta(VerificationSerializer.Meta):
        fields = [*VerificationSerializer.Meta.fields, "result"]

    def get_result(self, verification: Verification) -> dict[str, Any]:
        return verification_result(verification).as_dict()


class VerificationRequestedSerializer(VerificationDetailSerializer):
    reused = serializers.BooleanField(help_text="An open identical request answered this one.")
    updated = serializers.BooleanField(help_text="... and its asks were widened.")
    message = serializers.CharField(required=False)

    class Meta(VerificationDetailSerializer.Meta):
        fields = [*VerificationDetailSerializer.Meta.fields, "reused", "updated", "message"]


def _detail(verification: Verification, window: NodeWindow = FIRST_PAGE) -> dict[str, Any]:
    return dict(VerificationDetailSerializer(verification, context={"window": window}).data)


def _team_for_request(request: Request, slug: str | None) -> Team:
    if slug:
        return access_team(request.user, slug)
    teams = list(teams_for_user(request.user)[:2])
    if len(teams) != 1:
        raise ApplicationError(
            _("Say which team the request is for."), extra={"field": "team"}, status_code=400
        )
    return teams[0]


class VerificationsView(APIView):
    pagination_class = BoundedLimitOffsetPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, enum=list(STATE_FILTERS)),
            OpenApiParameter("cluster", str), OpenApiParameter("team", str),
        ],
        responses=VerificationSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """The caller's teams' requests (every team's for platform admins), oldest first."""
        state = request.query_params.get("state") or None
        if state is not None and state not in STATE_FILTERS:
            raise ApplicationError(
                _("Unknown state filter."), extra={"field": "state"}, status_code=400
            )
        queryset = verification_list(
            user=request.user, state=state,
            cluster=request.query_params.get("cluster") or None,
            team=request.query_params.get("team") or None,
        )
        return paginated(self, request, queryset, VerificationSerializer)

    @extend_schema(request=VerificationRequestSerializer,
                   responses={201: VerificationRequestedSerializer,
                              200: VerificationRequestedSerializer,
                              422: OpenApiResponse(description=(
                                  "the selector fails automated checks no admin can lift; "
                                  "`findings` lists them"))})
    def post(self, request: Request) -> Response:
        """Request verification; an open identical request is reused (200, `reused: true`).
        A selector that already fails the placement rules is refused: 422 with `findings`."""
        data = VerificationRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        selector = parse_selector_input(values["selector"])
        team = _team_for_request(request, values.get("team"))
        outcome = verification_request_outcome(
            team=team, user=request.user, cluster=_cluster_named(values["cluster"]),
            selector=selector, for_header_role=values["for_header_role"],
            requested_gpu=values.get("requested_gpu"),
            requested_devices=values.get("requested_devices"),
            requested_host_paths=values.get("requested_host_paths"), note=values["note"],
            job_name=values["job"], role_name=values["role"],
        )
        body = {**_detail(outcome.verification), "reused": outcome.reused,
                "updated": outcome.updated}
        if outcome.reused:
            body["message"] = _(
                "An open request for the same cluster and selector exists; it was reused."
            )
        return Response(body, status=status.HTTP_200_OK if outcome.reused else
                        status.HTTP_201_CREATED)


class VerificationDetailView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("nodes_offset", int, description="first node of `matches`"),
            OpenApiParameter(
                "nodes_limit", int,
                description=f"nodes in `matches` (default {NODES_PAGE_DEFAULT}, "
                f"at most {NODES_PAGE_MAX})",
            ),
        ],
        responses=VerificationDetailSerializer,
    )
    def get(self, request: Request, verification_id: int) -> Response:
        """One verification with its automated result and a page of its matched nodes."""
        window = node_window(
            request.query_params.get("nodes_offset"), request.query_params.get("nodes_limit")
        )
        verification = verification_get(user=request.user, verification_id=verification_id)
        return Response(_detail(verification, window))


class VerificationApproveView(APIView):
    permission_classes = [IsAuthenticated, IsPlatformAdmin]

    @extend_schema(request=ApproveSerializer, responses=VerificationDetailSerializer)
    def post(self, request: Request, verification_id: int) -> Response:
        """Approve (platform admins); 409 when the request is no longer pending."""
        data = ApproveSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        verification = verification_approve(
            verification_id=verification_id, admin=request.user, note=values["note"],
            confirm_gpu=values.get("confirm_gpu"), confirm_devices=values.get("confirm_devices"),
            confirm_host_paths=values.get("confirm_host_paths"),
        )
        return Response(_detail(verification))


class VerificationRejectView(APIView):
    permission_classes = [IsAuthenticated, IsPlatformAdmin]

    @extend_schema(request=RejectSerializer, responses=VerificationDetailSerializer)
    def post(self, request: Request, verification_id: int) -> Response:
        """Reject with a note (platform admins); 409 when the request is no longer pending."""
        data = RejectSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        verification = verification_reject(
            verification_id=verification_id, admin=request.user,
            note=data.validated_data["note"],
        )
        return Response(_detail(verification))
