"""REST endpoints of the cluster registry and the global node inventory.

Everyone signed in reads; platform admins write. Credentials are write-only: responses
say only whether a token or CA certificate is stored (`has_token`, `has_ca_cert`).
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.access import MAX_TEMPLATE, validate_command_template, validate_url_template
from clusters.capacity import NodeCapacity, quantities
from clusters.inventory.forms import (
    MAX_KUBECONFIG,
    client_certificate_problems,
    kubeconfig_create_arguments,
    kubeconfig_refusal,
)
from clusters.inventory.selectors import (
    ClusterCapacity,
    cluster_capacity,
    cluster_get,
    cluster_list,
    cluster_queues_answer,
    label_filter_from_text,
    node_capacity_of,
    node_list,
)
from clusters.inventory.services import (
    cluster_create,
    cluster_delete,
    cluster_poll_request,
    cluster_update,
)
from clusters.k8s import KubeconfigError, read_context
from clusters.kueue import MAX_QUEUE_MAP
from clusters.models import AdmissionMode, Cluster, Node
from clusters.validators import validate_api_url
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.pagination import BoundedLimitOffsetPagination
from rlark_site.foundation.tenancy.access import is_platform_admin, teams_for_user


class ReadAllWriteAdmins(BasePermission):
    """Signed-in users read; only platform admins change anything."""

    message = "Only platform admins manage clusters."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or is_platform_admin(request.user)


ACCESS_TEMPLATES = ("tensorboard_url_template", "ray_dashboard_url_template",
                    "exec_command_template")


def _template(validator: Any, help_text: str, **kwargs: Any) -> serializers.CharField:
    """An access-link template (`clusters.access`); blank removes it."""
    return serializers.CharField(max_length=MAX_TEMPLATE, allow_blank=True,
                                 validators=[validator], help_text=help_text, **kwargs)


_URL_HELP = ("http(s) URL template of %s; placeholders {namespace}, {job}, {task}, {pod}, "
             "{log_dir} (the head pod's), values URL-encoded. Blank: kubectl port-forward.")
_EXEC_HELP = ("Command template that opens a shell in the head pod; same placeholders, values "
              "shell-quoted (put placeholders outside quotes). Blank: kubectl exec.")


class AccessTemplatesSerializer(serializers.Serializer):
    """The access-link templates, in the create and update bodies alike."""

    tensorboard_url_template = _template(validate_url_template, _URL_HELP % "TensorBoard",
                                         required=False)
    ray_dashboard_url_template = _template(validate_url_template,
                                           _URL_HELP % "the Ray dashboard", required=False)
    exec_command_template = _template(validate_command_template, _EXEC_HELP, required=False)


class AdmissionSerializer(serializers.Serializer):
    """How the cluster admits Jobs (SPEC 15), in the create and update bodies alike."""

    admission = serializers.ChoiceField(
        choices=AdmissionMode.choices, required=False,
        help_text="`none` (the scheduler alone) or `kueue`: every pod template of the cluster's "
                  "Jobs then names the team's LocalQueue (`kueue_queues`).")
    kueue_queues = serializers.DictField(
        child=serializers.CharField(max_length=63, allow_blank=True), required=False,
        help_text="Team slug -> LocalQueue name (a DNS label, in the Job's namespace); at most "
                  f"{MAX_QUEUE_MAP} teams. Replaces the whole map.")


def _teams_of(serializer: serializers.Serializer) -> set[str] | None:
    """The slugs of the requesting user's teams (None: a platform admin sees every team),
    read once per answer."""
    context = serializer.context
    if "_teams" not in context:
        request = context.get("request")
        user = getattr(request, "user", None)
        if user is None or is_platform_admin(user):
            context["_teams"] = None
        else:
            context["_teams"] = set(teams_for_user(user).values_list("slug", flat=True))
    teams: set[str] | None = context["_teams"]
    return teams


class ClusterSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True, help_text="Nodes not gone.")
    ready_count = serializers.IntegerField(read_only=True, help_text="Ready nodes not gone.")
    gone_count = serializers.IntegerField(read_only=True, help_text="Nodes that vanished.")
    has_token = serializers.SerializerMethodField()
    has_ca_cert = serializers.SerializerMethodField()
    has_client_certificate = serializers.SerializerMethodField()
    kueue_queues = serializers.SerializerMethodField(
        help_text="Team slug -> LocalQueue name; platform admins see every team, others only "
                  "their own teams' entries.")
    capacity = serializers.SerializerMethodField(
        help_text="Per GPU and rlinf.io/* resource: `allocatable`, the sum over present nodes, "
                  "and `free`, the sum of allocatable - requested (never below 0) over ready "
                  "nodes, as quantity strings; `free` is null until an occupancy pass counted "
                  "the cluster.")

    class Meta:
        model = Cluster
        fields = [
            "name", "namespace", "api_url", "verify_tls", "enabled", "has_token", "has_ca_cert",
            "has_client_certificate", *ACCESS_TEMPLATES, "admission", "kueue_queues",
            "state", "last_polled_at", "last_success_at", "last_error", "failure_count",
            "next_poll_at", "generation", "node_count", "ready_count", "gone_count",
            "occupancy_as_of", "occupancy_pods", "occupancy_error", "capacity", "created_at",
        ]
        extra_kwargs = {
            "occupancy_as_of": {"help_text": "When the last good occupancy pass listed the "
                                             "cluster's pods (null: never)."},
            "occupancy_pods": {"help_text": "How many bound, running pods that pass counted."},
            "occupancy_error": {"help_text": "Why the latest pod listing was not used (the "
                                             "last good occupancy is kept); empty when it was."},
        }

    @extend_schema_field(serializers.DictField(child=inline_serializer("ResourceTotal", {
        "allocatable": serializers.CharField(),
        "free": serializers.CharField(allow_null=True),
    })))
    def get_capacity(self, cluster: Cluster) -> dict[str, dict[str, str | None]]:
        totals: dict[int, ClusterCapacity] | None = self.context.get("capacity")
        if totals is None or cluster.id not in totals:
            totals = cluster_capacity([cluster])
        return {r.resource: r.as_dict() for r in totals[cluster.id].resources}

    def get_has_token(self, cluster: Cluster) -> bool:
        return bool(cluster.token_encrypted)

    def get_has_ca_cert(self, cluster: Cluster) -> bool:
        return bool(cluster.ca_cert_encrypted)

    def get_has_client_certificate(self, cluster: Cluster) -> bool:
        return bool(cluster.client_cert_encrypted)

    @extend_schema_field(serializers.DictField(child=serializers.CharField()))
    def get_kueue_queues(self, cluster: Cluster) -> dict[str, str]:
        queues = cluster.kueue_queues if isinstance(cluster.kueue_queues, dict) else {}
        teams = _teams_of(self)
        return {t: q for t, q in queues.items() if teams is None or t in teams}


class ClusterCreateSerializer(AccessTemplatesSerializer, AdmissionSerializer):
    name = serializers.CharField(max_length=63)
    namespace = serializers.CharField(max_length=63)
    api_url = serializers.CharField(max_length=500, validators=[validate_api_url])
    token = serializers.CharField(
        required=False, allow_blank=True, write_only=True, style={"input_type": "password"},
        help_text="Bearer token; stored encrypted, never returned.",
    )
    ca_cert = serializers.CharField(
        required=False, allow_blank=True, write_only=True, trim_whitespace=False,
        help_text="PEM CA certificate; stored encrypted, never returned.",
    )
    verify_tls = serializers.BooleanField(default=True)
    enabled = serializers.BooleanField(default=True)


class ClusterKubeconfigSerializer(serializers.Serializer):
    """A cluster registered from one context of a kubeconfig (token or client certificate)."""

    name = serializers.CharField(max_length=63)
    kubeconfig = serializers.CharField(
        write_only=True, trim_whitespace=False, max_length=MAX_KUBECONFIG,
        help_text="The kubeconfig text (YAML or JSON), everything embedded; stored encrypted "
                  "as the cluster's credentials, never returned.")
    kube_context = serializers.CharField(
        required=False, allow_blank=True, max_length=253,
        help_text="The kubeconfig context to use; blank: its current context.")
    namespace = serializers.CharField(required=False, allow_blank=True, max_length=63,
                                      help_text="Blank: the context's namespace.")
    enabled = serializers.BooleanField(default=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            chosen = read_context(attrs["kubeconfig"], attrs.get("kube_context") or None)
        except KubeconfigError as exc:
            raise serializers.ValidationError({"kubeconfig": [kubeconfig_refusal(exc)]}) from exc
        namespace = attrs.get("namespace") or chosen.namespace
        if not namespace:
            raise serializers.ValidationError(
                {"namespace": [_("The context names no namespace; enter one.")]})
        return kubeconfig_create_arguments(name=attrs["name"], namespace=namespace,
                                           chosen=chosen, enabled=attrs["enabled"])


class ClusterUpdateSerializer(AccessTemplatesSerializer, AdmissionSerializer):
    """Every field optional; an empty `token`/`ca_cert` removes the stored one; a client
    certificate and key are replaced together (both given) or removed together (both empty)."""

    namespace = serializers.CharField(max_length=63, required=False)
    api_url = serializers.CharField(
        max_length=500, required=False, validators=[validate_api_url]
    )
    token = serializers.CharField(
        required=False, allow_blank=True, write_only=True, style={"input_type": "password"}
    )
    ca_cert = serializers.CharField(
        required=False, allow_blank=True, write_only=True, trim_whitespace=False
    )
    client_cert = serializers.CharField(
        required=False, allow_blank=True, write_only=True, trim_whitespace=False,
        help_text="PEM client certificate; with client_key. Both empty: remove them.")
    client_key = serializers.CharField(
        required=False, allow_blank=True, write_only=True, trim_whitespace=False,
        help_text="PEM private key of client_cert.")
    verify_tls = serializers.BooleanField(required=False)
    enabled = serializers.BooleanField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "name" in self.initial_data:
            raise serializers.ValidationError({"name": _("A cluster's name cannot change.")})
        if ("client_cert" in attrs) != ("client_key" in attrs):
            missing = "client_key" if "client_cert" in attrs else "client_cert"
            raise serializers.ValidationError({missing: [
                _("Send the client certificate and its key together.")]})
        if "client_cert" in attrs:
            problems = client_certificate_problems(attrs["client_cert"], attrs["client_key"])
            if problems:
                raise serializers.ValidationError(
                    {field: [str(message)] for field, message in problems.items()})
        return attrs


_QUANTITIES = serializers.DictField(child=serializers.CharField())
_QUANTITIES_OR_NULL = serializers.DictField(child=serializers.CharField(), allow_null=True)


def _capacity(node: Node) -> NodeCapacity:
    """The node's capacity, worked out once per row of an answer."""
    capacity: NodeCapacity | None = getattr(node, "_capacity", None)
    if capacity is None:
        capacity = node_capacity_of(node)
        node._capacity = capacity  # type: ignore[attr-defined]
    return capacity


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    last_seen = serializers.DateTimeField(source="seen_at", allow_null=True, read_only=True)
    allocatable = serializers.SerializerMethodField(
        help_text="Kubernetes quantity strings by resource: cpu, memory, pods, nvidia.com/gpu "
                  "and rlinf.io/*, each when the node reports it.")
    requested = serializers.SerializerMethodField(
        help_text="What the node's bound, running pods request (their effective requests, "
                  "`pods`: how many), 0 for an allocatable resource nobody requests; null "
                  "until an occupancy pass counted the node.")
    free = serializers.SerializerMethodField(
        help_text="allocatable - requested per allocatable resource, never below 0; null "
                  "while `requested` is.")
    occupancy_as_of = serializers.SerializerMethodField(
        help_text="When the occupancy pass behind `requested` and `free` listed the pods; "
                  "null while they are.")

    class Meta:
        model = Node
        fields = [
            "cluster", "name", "namespace", "labels", "gpu", "devices", "ready", "gone",
            "first_seen", "last_seen", "allocatable", "requested", "free", "occupancy_as_of",
        ]

    @extend_schema_field(_QUANTITIES)
    def get_allocatable(self, node: Node) -> dict[str, str]:
        return quantities(_capacity(node).allocatable)

    @extend_schema_field(_QUANTITIES_OR_NULL)
    def get_requested(self, node: Node) -> dict[str, str] | None:
        capacity = _capacity(node)
        return quantities(capacity.requested_with_zeros()) if capacity.counted else None

    @extend_schema_field(_QUANTITIES_OR_NULL)
    def get_free(self, node: Node) -> dict[str, str] | None:
        capacity = _capacity(node)
        return quantities(capacity.free) if capacity.counted else None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_occupancy_as_of(self, node: Node) -> str | None:
        if not _capacity(node).counted or node.cluster.occupancy_as_of is None:
            return None
        return serializers.DateTimeField().to_representation(node.cluster.occupancy_as_of)


class NodeFilterSerializer(serializers.Serializer):
    cluster = serializers.CharField(required=False, allow_blank=True, max_length=63)
    selector = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    include_gone = serializers.BooleanField(default=False)


def _cluster_response(request: Request, name: str, *,
                      code: int = status.HTTP_200_OK) -> Response:
    cluster = cluster_get(user=request.user, name=name)
    return Response(ClusterSerializer(cluster, context={
        "request": request, "capacity": cluster_capacity([cluster])}).data, status=code)


class ClusterListView(APIView):
    permission_classes = [ReadAllWriteAdmins]
    pagination_class = BoundedLimitOffsetPagination

    @extend_schema(responses=ClusterSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Every cluster with its poll state and node counts."""
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(cluster_list(user=request.user), request, view=self)
        context = {"request": request, "capacity": cluster_capacity(page or [])}
        return paginator.get_paginated_response(
            ClusterSerializer(page, many=True, context=context).data)

    @extend_schema(request=ClusterCreateSerializer, responses={201: ClusterSerializer})
    def post(self, request: Request) -> Response:
        """Register a cluster (platform admins). It is polled at the next beat round."""
        data = ClusterCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = cluster_create(**data.validated_data)
        return _cluster_response(request, cluster.name, code=status.HTTP_201_CREATED)


class ClusterKubeconfigView(APIView):
    permission_classes = [ReadAllWriteAdmins]

    @extend_schema(request=ClusterKubeconfigSerializer, responses={201: ClusterSerializer})
    def post(self, request: Request) -> Response:
        """Register a cluster from a kubeconfig context (platform admins); exec-plugin and
        auth-provider users are refused."""
        data = ClusterKubeconfigSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = cluster_create(**data.validated_data)
        return _cluster_response(request, cluster.name, code=status.HTTP_201_CREATED)


class ClusterDetailView(APIView):
    permission_classes = [ReadAllWriteAdmins]

    @extend_schema(responses=ClusterSerializer)
    def get(self, request: Request, name: str) -> Response:
        return _cluster_response(request, name)

    @extend_schema(request=ClusterUpdateSerializer, responses=ClusterSerializer)
    def patch(self, request: Request, name: str) -> Response:
        """Change a cluster (platform admins); the name is fixed."""
        cluster = cluster_get(user=request.user, name=name)
        data = ClusterUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster_update(cluster=cluster, **data.validated_data)
        return _cluster_response(request, name)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        """Remove a cluster and its inventory (platform admins); 409 while verified."""
        cluster_delete(cluster=cluster_get(user=request.user, name=name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ClusterPollView(APIView):
    permission_classes = [ReadAllWriteAdmins]

    @extend_schema(
        request=None,
        responses={202: inline_serializer("PollQueued", {
            "cluster": serializers.CharField(), "state": serializers.CharField(),
        })},
    )
    def post(self, request: Request, name: str) -> Response:
        """Poll the cluster's inventory now, in the background (platform admins)."""
        cluster = cluster_get(user=request.user, name=name)
        cluster_poll_request(cluster=cluster)
        return Response({"cluster": cluster.name, "state": "queued"},
                        status=status.HTTP_202_ACCEPTED)


class QuotaRowSerializer(serializers.Serializer):
    flavor = serializers.CharField()
    resource = serializers.CharField()
    nominal = serializers.CharField(help_text="nominalQuota")
    borrowing_limit = serializers.CharField(allow_null=True, help_text="borrowingLimit")
    lending_limit = serializers.CharField(allow_null=True, help_text="lendingLimit")
    used = serializers.CharField(help_text="status.flavorsUsage: what admitted Workloads use")
    reserved = serializers.CharField(help_text="status.flavorsReservation")
    borrowed = serializers.CharField()
    potential = serializers.CharField(
        help_text="the most it could ever hold: nominal plus what it may borrow in its cohort")


class ClusterQueueSerializer(serializers.Serializer):
    name = serializers.CharField()
    cohort = serializers.CharField(allow_null=True)
    pending_workloads = serializers.IntegerField()
    reserving_workloads = serializers.IntegerField()
    admitted_workloads = serializers.IntegerField()
    resources = QuotaRowSerializer(many=True)


class TeamUsageSerializer(serializers.Serializer):
    flavor = serializers.CharField()
    resource = serializers.CharField()
    used = serializers.CharField(help_text="the LocalQueue's status.flavorUsage")
    nominal = serializers.CharField(allow_null=True)
    share_percent = serializers.FloatField(allow_null=True, help_text="used / nominal, in %")


class TeamQueueSerializer(serializers.Serializer):
    team = serializers.CharField()
    local_queue = serializers.CharField()
    namespace = serializers.CharField(allow_null=True)
    cluster_queue = serializers.CharField(allow_null=True)
    found = serializers.BooleanField(
        help_text="the LocalQueue and its ClusterQueue were on the cluster at the last poll")
    pending_workloads = serializers.IntegerField()
    admitted_workloads = serializers.IntegerField()
    usage = TeamUsageSerializer(many=True)


class ClusterQueuesSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    admission = serializers.CharField()
    as_of = serializers.DateTimeField(allow_null=True, help_text="when the last poll read them")
    error = serializers.CharField(
        help_text="why the last read failed; the queues are the last good ones")
    cluster_queues = ClusterQueueSerializer(many=True)
    teams = TeamQueueSerializer(many=True)


class ClusterQueuesView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("team", str, description="only this team (one of yours)")],
        responses=ClusterQueuesSerializer,
    )
    def get(self, request: Request, name: str) -> Response:
        """A Kueue cluster's ClusterQueues (quota per flavor and resource: nominal, borrowing
        limit, used) and your teams' LocalQueues with their share, as the last poll read them.
        RLark enforces no quota: Kueue admits."""
        cluster = cluster_get(user=request.user, name=name)
        team = request.query_params.get("team") or None
        return Response(cluster_queues_answer(user=request.user, cluster=cluster, team=team))


class NodeListView(APIView):
    pagination_class = BoundedLimitOffsetPagination
    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", str, description="only this cluster"),
            OpenApiParameter(
                "selector", str, description="label conditions `k=v,k2=v2` (AND)"
            ),
            OpenApiParameter("include_gone", bool, description="also vanished nodes"),
        ],
        responses=NodeSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """The global node inventory, filtered; a bad selector answers 400 with `problems`."""
        data = NodeFilterSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        label_filter = label_filter_from_text(data.validated_data.get("selector", ""))
        if label_filter.problems:
            raise ApplicationError(
                _("The selector is not valid."),
                extra={"problems": [p.as_dict() for p in label_filter.problems]},
            )
        nodes = node_list(
            user=request.user, cluster=data.validated_data.get("cluster") or None,
            selector=label_filter.selector,
            include_gone=data.validated_data["include_gone"],
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(nodes, request, view=self)
        return paginator.get_paginated_response(NodeSerializer(page, many=True).data)
