"""Shapes of the job draft body (SPEC 12) and of the API's answers.

Input serializers check only the shape (which containers hold what); every rule about
the values is the findings engine's, so a GPU count of "eight" is accepted here, stored
and reported as ``gpu.invalid``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, tzinfo
from typing import Any
from urllib.parse import quote

from django.core.validators import ProhibitNullCharactersValidator
from django.urls import reverse
from django.utils import timezone
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from clusters.kueue import ADMISSION_STATES
from clusters.preflight import VERDICTS
from jobs.context import Evaluation
from jobs.core.findings import preflight
from jobs.gpu.selectors import gpu_body
from jobs.gpu.serializers import GpuSerializer
from jobs.models import Job, JobState, Role, SSHKey
from jobs.observe.serializers import CauseSerializer
from jobs.progress.selectors import progress_body
from jobs.progress.serializers import ProgressSerializer
from jobs.records.pending import pending_view
from jobs.usage.selectors import run_gpu_hours
from jobs.usage.serializers import RunGpuHoursSerializer

MAX_ROLES = 64
MAX_CONDITIONS = 64
MAX_ITEMS = 256  # env entries, mounts, devices, SSH key names
MAX_TEXT = 100_000  # scripts and other free text
# The launch list and deployment parameters API (jobs.records) under these URL names.
LAUNCH_LIST_URL = "api:launch-list-detail"
DEPLOYMENT_PARAMETERS_URL = "api:deployment-parameters-detail"

# The schemas of the custom fields below (OpenAPI 3.0 and the job-file schema,
# jobs.jobfiles.schema), with the limits their code enforces; a label key's length is checked
# by the code only (OpenAPI 3.0 has no propertyNames). An integer is also a number: `oneOf`
# over integer and number would match it twice (invalid).
MAX_SCALAR_TEXT = 255
MAX_LABEL_TEXT = 316  # the longest label key: 253-character prefix, '/', 63-character name
_SCALAR_SCHEMA: dict[str, Any] = {
    "oneOf": [{"type": "number"}, {"type": "string", "maxLength": MAX_SCALAR_TEXT}]}
_LABEL_SCHEMA: dict[str, Any] = {"type": "string", "maxLength": MAX_LABEL_TEXT}
_PAIRS_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "object", "additionalProperties": _LABEL_SCHEMA,
         "maxProperties": MAX_CONDITIONS},
        {"type": "array", "maxItems": MAX_CONDITIONS,
         "items": {"type": "array", "items": _LABEL_SCHEMA, "minItems": 2, "maxItems": 2}},
    ]
}
_DEVICES_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "object", "additionalProperties": _SCALAR_SCHEMA,
         "maxProperties": MAX_ITEMS},
        {"type": "array", "maxItems": MAX_ITEMS,
         "items": {"type": "array", "items": _SCALAR_SCHEMA, "minItems": 2, "maxItems": 2}},
    ]
}


def _check_text(value: str) -> None:
    ProhibitNullCharactersValidator()(value)
    ProhibitSurrogateCharactersValidator()(value)


def _text_field(**kwargs: Any) -> serializers.CharField:
    """Free text kept exactly as typed (no trimming, blank allowed)."""
    kwargs.setdefault("max_length", MAX_TEXT)
    return serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                 **kwargs)


def _scalar(value: Any) -> Any:
    """A number or a string, kept as typed; containers are a shape error."""
    if isinstance(value, float) and not math.isfinite(value):
        raise serializers.ValidationError(gettext("Numbers must be finite."))
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        if len(value) > MAX_SCALAR_TEXT:
            raise serializers.ValidationError(gettext("At most 255 characters."))
        _check_text(value)
        return value
    raise serializers.ValidationError(gettext("Expected a number or a string."))


def _label_text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise serializers.ValidationError(
            gettext("Each %(what)s must be a string.") % {"what": what}
        )
    if len(value) > MAX_LABEL_TEXT:
        raise serializers.ValidationError(
            gettext("A label key or value is at most 316 characters.")
        )
    _check_text(value)
    return value


def _pair_items(data: Any, *, limit: int, message: str) -> list[list[Any]]:
    if isinstance(data, Mapping):
        items = [[k, v] for k, v in data.items()]
    elif isinstance(data, list) and all(isinstance(i, list) and len(i) == 2 for i in data):
        items = [list(i) for i in data]
    else:
        raise serializers.ValidationError(message)
    if len(items) > limit:
        raise serializers.ValidationError(gettext("At most %(n)d entries.") % {"n": limit})
    return items


@extend_schema_field(_PAIRS_SCHEMA)
class SelectorField(serializers.Field):
    """``{"key": "value"}`` or ``[["key", "value"], ...]`` (a key may repeat: it is reported)."""

    json_schema = _PAIRS_SCHEMA

    def to_internal_value(self, data: Any) -> list[list[str]]:
        items = _pair_items(
            data, limit=MAX_CONDITIONS,
            message=gettext(
                "A selector is an object of label strings or a list of [key, value] pairs."
            ),
        )
        return [[_label_text(k, "key"), _label_text(v, "value")] for k, v in items]

    def to_representation(self, value: Any) -> Any:
        return _pairs_out(value)


@extend_schema_field(_DEVICES_SCHEMA)
class DevicesField(serializers.Field):
    """``{"rlinf.io/rdma": 1}`` or ``[["rlinf.io/rdma", 1], ...]``; counts kept as typed."""

    json_schema = _DEVICES_SCHEMA

    def to_internal_value(self, data: Any) -> list[list[Any]]:
        items = _pair_items(
            data, limit=MAX_ITEMS,
            message=gettext("Devices are an object of counts or a list of [name, count] pairs."),
        )
        return [[_label_text(name, "device name"), _scalar(count)] for name, count in items]

    def to_representation(self, value: Any) -> Any:
        return _pairs_out(value)


@extend_schema_field(_SCALAR_SCHEMA)
class ScalarField(serializers.Field):
    """A number or a string, kept as typed (the engine judges it)."""

    json_schema = _SCALAR_SCHEMA

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        return _scalar(data)

    def to_representation(self, value: Any) -> Any:
        return value


class ResourceSerializer(serializers.Serializer):
    """CPU or memory: Kubernetes quantities, e.g. ``{"request": "16", "limit": "32"}``."""

    request = ScalarField(required=False, help_text="a Kubernetes quantity")
    limit = ScalarField(required=False, help_text="a Kubernetes quantity, at least the request")

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(k) for k in data if k not in ("request", "limit"))
            if unknown:
                raise serializers.ValidationError(
                    gettext("Unknown keys %(keys)s; use request and limit.") % {"keys": unknown}
                )
        return super().to_internal_value(data)


class EnvSerializer(serializers.Serializer):
    name = _text_field(max_length=255, help_text="a C identifier, unique in the role, not one "
                       "of the platform's reserved names")
    value = _text_field(help_text="the value (text)")


class MountSerializer(serializers.Serializer):
    kind = _text_field(max_length=40, help_text="host_path | object_storage")
    # `source` is also an attribute of DRF fields; the metaclass moves declared fields away.
    source = _text_field(  # type: ignore[assignment]
        max_length=4096, help_text="host_path: absolute path on the node"
    )
    target = _text_field(max_length=4096, help_text="absolute path in the worker")
    storage_class = _text_field(max_length=253, help_text="object_storage: a storage class")
    size = ScalarField(required=False, help_text="object_storage: the claim's storage request")


class RoleSerializer(serializers.Serializer):
    name = _text_field(max_length=255, help_text="the role's name (1-63 letters, digits or "
                       "hyphens); its Task is the lower-cased name")
    cluster = _text_field(max_length=63, help_text="the cluster the role runs in")
    selector = SelectorField(required=False, help_text="node labels every worker's node must "
                             "have (AND); the matched node count becomes the replicas")
    gpus = ScalarField(required=False, help_text="GPUs per worker (an integer >= 0)")
    devices = DevicesField(required=False, help_text="rlinf.io/* resources per worker, by name")
    cpu = ResourceSerializer(required=False, allow_null=True,
                             help_text="CPU per worker (Kubernetes quantities)")
    memory = ResourceSerializer(required=False, allow_null=True,
                                help_text="memory per worker (Kubernetes quantities)")
    image = _text_field(max_length=4096, help_text="the container image; repo@sha256:<64 hex> "
                        "preferred")
    image_digest = _text_field(max_length=255, allow_null=True,
                               help_text="the recorded sha256 digest of a tag reference")
    prepare_script = _text_field(help_text="runs on every worker of the role before ray start")
    env = serializers.ListField(child=EnvSerializer(), required=False, max_length=MAX_ITEMS,
                                help_text="environment variables of the role's workers")
    mounts = serializers.ListField(child=MountSerializer(), required=False, max_length=MAX_ITEMS,
                                   help_text="host directories and object storage")


class JobDraftSerializer(serializers.Serializer):
    """The job draft body of SPEC 12. Every field is optional except `name` on create."""

    team = serializers.CharField(required=False, help_text="team slug; default: your first team")
    name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                 max_length=255, help_text="the job's name, unique platform-wide")
    task_type = _text_field(max_length=40, help_text="rl | data_collection | evaluation | custom")
    header_role = _text_field(max_length=255, allow_null=True,
                              help_text="the name of the Header role (its Task runs the Ray head "
                              "and the run script)")
    roles = serializers.ListField(child=RoleSerializer(), required=False, allow_null=True,
                                  max_length=MAX_ROLES, help_text="the roles, in order; omitted: "
                                  "the job type's initial roles, empty")
    network_domain = _text_field(max_length=255, allow_null=True,
                                 help_text="a cross-cluster network domain")
    ssh_keys = serializers.ListField(child=_text_field(max_length=100), required=False,
                                     allow_null=True, max_length=MAX_ITEMS,
                                     help_text="names of the team's SSH keys")
    run_script = _text_field(help_text="executed by the Head Task after Ray starts; cd "
                             "explicitly")
    tensorboard_log_dir = _text_field(max_length=4096, allow_null=True,
                                      help_text="absolute path in the container")
    image_compatibility_confirmed = serializers.BooleanField(
        required=False, help_text="confirms that different role images are runtime-compatible")
    launch_list = serializers.IntegerField(required=False, allow_null=True,
                                           help_text="id of the team's launch list")
    deployment_parameters = serializers.IntegerField(
        required=False, allow_null=True, help_text="id of the team's deployment parameters")


def _pairs_out(value: Any) -> Any:
    """Stored ``[[k, v], ...]`` as an object, or as the pair list when a key repeats."""
    pairs = [tuple(p) for p in value or () if isinstance(p, (list, tuple)) and len(p) == 2]
    keys = [k for k, _v in pairs]
    if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys):
        return dict(pairs)
    return [list(p) for p in pairs]


class RoleOutSerializer(serializers.ModelSerializer):
    selector = SelectorField()
    devices = DevicesField()
    gpus = ScalarField()
    cpu = serializers.JSONField()
    memory = serializers.JSONField()
    env = serializers.JSONField()
    mounts = serializers.JSONField()

    class Meta:
        model = Role
        fields = ["name", "cluster", "selector", "gpus", "devices", "cpu", "memory", "image",
                  "image_digest", "prepare_script", "env", "mounts"]


class FindingSerializer(serializers.Serializer):
    code = serializers.CharField()
    severity = serializers.ChoiceField(choices=["error", "warning"])
    role = serializers.CharField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()
    detail = serializers.DictField()


_NAME_PLACEHOLDER = "job-name-placeholder-0"


def _url(request: Any, name: str, *args: Any) -> str:
    path = reverse(name, args=args)
    return request.build_absolute_uri(path) if request is not None else path


class PendingSummarySerializer(serializers.Serializer):
    """The job detail's `pending`, as much as a list row shows; null when not Pending."""

    since = serializers.DateTimeField(allow_null=True)
    summary = serializers.CharField(help_text="one sentence, in the caller's language")


class ProgressSummarySerializer(serializers.Serializer):
    """The job detail's `progress` step and total (SPEC 16); both null before a step is read."""

    step = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)


def pending_summary(state: str | None, facts: Any) -> dict[str, Any] | None:
    """A list row's `pending`: the detail's `since` and `summary` (`pending_view`)."""
    if state != JobState.PENDING:
        return None
    view = pending_view(facts if isinstance(facts, dict) else {})
    return None if view is None else {"since": view["since"], "summary": view["summary"]}


class JobSummarySerializer(serializers.ModelSerializer):
    """A job with its derived state: `draft`, or its run record's state and times."""

    team = serializers.CharField(source="team.slug")
    created_by = serializers.CharField(source="created_by.username")
    state = serializers.ChoiceField(choices=JobState.choices, read_only=True)
    submitted_at = serializers.DateTimeField(source="run.submitted_at", read_only=True,
                                             allow_null=True)
    stalled = serializers.SerializerMethodField()
    pending = serializers.SerializerMethodField()
    pending_flagged = serializers.BooleanField(
        source="run.pending_flagged", read_only=True, default=False,
        help_text="Pending past the deadline (the list's Pending flag; `pending=true` filters "
                  "on it)")
    progress = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["name", "team", "task_type", "state", "wizard_step", "created_by",
                  "created_at", "updated_at", "submitted_at", "stalled", "pending",
                  "pending_flagged", "progress", "url"]

    @extend_schema_field(PendingSummarySerializer(allow_null=True))
    def get_pending(self, job: Job) -> dict[str, Any] | None:
        run = job.run
        return pending_summary(run.state if run is not None else None,
                               run.pending if run is not None else None)

    @extend_schema_field(ProgressSummarySerializer)
    def get_progress(self, job: Job) -> dict[str, Any]:
        body = progress_body(job.run)
        return {"step": body["step"], "total": body["total"]}

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_stalled(self, job: Job) -> bool:
        """Running and no new training step for the launch list's stall limit (SPEC 16)."""
        run = job.run
        return run is not None and run.state == JobState.RUNNING and run.stall_episodes.filter(
            ended_at=None).exists()

    def get_url(self, job: Job) -> str:
        # A page of jobs reverses the route once: the detail URL with a placeholder name,
        # kept in the serializer's context (shared by the rows of a list), then filled in.
        template = self.context.get("_job_url_template")
        if template is None:
            template = _job_url_template(self.context.get("request"))
            self.context["_job_url_template"] = template
        return _job_url(template, job.name)


def _job_url_template(request: Any) -> str:
    """The detail URL of a job with a placeholder for its name (reversed once per page)."""
    return _url(request, "api:job-detail", _NAME_PLACEHOLDER)


def _job_url(template: str, name: str) -> str:
    # quoted as reverse() quotes a path
    return template.replace(_NAME_PLACEHOLDER, quote(name, safe=f"{RFC3986_SUBDELIMS}~:@"), 1)


def _iso_datetime(value: datetime | None, zone: tzinfo) -> str | None:
    """A datetime as DRF's DateTimeField renders it (ISO 8601 in `zone`, UTC as `Z`)."""
    if not value:
        return None
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def job_summary_rows(rows: Iterable[Mapping[str, Any]], *, request: Any) -> list[dict[str, Any]]:
    """`JobSummarySerializer(jobs, many=True).data` for the columns `job_summaries` reads: the
    same JSON (tests/jobs/test_job_list_answer.py), without a model instance or a DRF field
    call per value, which cost more than the rest of a list request."""
    template = _job_url_template(request)
    zone = timezone.get_current_timezone()
    return [
        {
            "name": row["name"],
            "team": row["team__slug"],
            "task_type": row["task_type"],
            "state": row["run_record__state"] or JobState.DRAFT.value,
            "wizard_step": row["wizard_step"],
            "created_by": row["created_by__username"],
            "created_at": _iso_datetime(row["created_at"], zone),
            "updated_at": _iso_datetime(row["updated_at"], zone),
            "submitted_at": _iso_datetime(row["run_record__submitted_at"], zone),
            "stalled": bool(row.get("stalled")),
            "pending": pending_summary(row["run_record__state"], row["run_record__pending"]),
            "pending_flagged": bool(row["run_record__pending_flagged"]),
            "progress": {"step": row["run_record__progress__step"],
                         "total": row["run_record__progress__total"]},
            "url": _job_url(template, row["name"]),
        }
        for row in rows
    ]


class JobLinksSerializer(serializers.Serializer):
    self = serializers.CharField()
    manifest = serializers.CharField()
    submit = serializers.CharField(allow_null=True)
    launch_list = serializers.CharField(allow_null=True)
    deployment_parameters = serializers.CharField(allow_null=True)


class AdmissionSerializer(serializers.Serializer):
    """A submitted job's admission on a Kueue cluster (SPEC 15), as the last status pass read
    its Workload; null for drafts and for clusters without Kueue."""

    queue = serializers.CharField(help_text="the team's LocalQueue")
    cluster_queue = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(choices=ADMISSION_STATES)
    reason = serializers.CharField(help_text="the deciding condition's reason (Kueue's)")
    message = serializers.CharField(help_text="the deciding condition's message, verbatim")
    position = serializers.IntegerField(
        allow_null=True, help_text="while pending: place in the ClusterQueue, 1 = next")
    position_in_local_queue = serializers.IntegerField(allow_null=True)


class CapacityShortSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    node = serializers.CharField()
    resource = serializers.CharField()
    free = serializers.CharField(help_text="free now (Kubernetes quantity)")
    allocatable = serializers.CharField()
    needed = serializers.CharField(help_text="what one worker needs")


class CapacityRoleSerializer(serializers.Serializer):
    role = serializers.CharField(allow_null=True)
    verdict = serializers.ChoiceField(choices=list(VERDICTS))
    replicas = serializers.IntegerField(help_text="workers: one per matched node")
    fits_now = serializers.IntegerField(help_text="matched nodes with room for a worker now")
    fits_ever = serializers.IntegerField(
        help_text="matched nodes whose allocatable holds a worker")
    message = serializers.CharField()
    short = CapacityShortSerializer(many=True, help_text="the nodes short, at most 50")


class CapacityQuotaSerializer(serializers.Serializer):
    cluster_queue = serializers.CharField()
    resource = serializers.CharField()
    unused = serializers.CharField()
    needed = serializers.CharField()


class CapacitySerializer(serializers.Serializer):
    """The pre-flight (SPEC 15, docs/capacity.md): will the job fit now, queue, never fit?"""

    verdict = serializers.ChoiceField(choices=list(VERDICTS))
    as_of = serializers.CharField(allow_null=True,
                                  help_text="the occupancy poll used (the oldest cluster's)")
    roles = CapacityRoleSerializer(many=True)
    quota = CapacityQuotaSerializer(many=True,
                                    help_text="Kueue resources short of unused quota now")

class PendingRoleSerializer(serializers.Serializer):
    role = serializers.CharField()
    workers = serializers.IntegerField(help_text="the role's pods listed")
    waiting = serializers.IntegerField(help_text="of them, not bound to a node")
    message = serializers.CharField(
        help_text="kube-scheduler's FailedScheduling message or Kueue's, verbatim (control "
                  "characters dropped, at most 2,000 characters); \"\" when none")
    attempts = serializers.IntegerField(
        allow_null=True, help_text="how many times the scheduler tried the role's waiting pods "
        "(the largest count of their FailedScheduling events); null when none was seen")
    last_attempt_at = serializers.DateTimeField(
        allow_null=True, help_text="the newest of those events' last time")
    short = CapacityShortSerializer(many=True, help_text="matching nodes lacking capacity now")


class PendingQueueSerializer(serializers.Serializer):
    queue = serializers.CharField(allow_null=True)
    cluster_queue = serializers.CharField(allow_null=True)
    state = serializers.CharField(allow_null=True)
    position = serializers.IntegerField(allow_null=True)


class PendingSerializer(serializers.Serializer):
    """Why a submitted Pending job waits (SPEC 15), as the last status pass found it; null
    when the job is not Pending."""

    since = serializers.DateTimeField(allow_null=True)
    source = serializers.ChoiceField(choices=["scheduler", "kueue", "rlark"])  # type: ignore[assignment]  # the field, not Field.source
    summary = serializers.CharField(help_text="one sentence, in the caller's language")
    roles = PendingRoleSerializer(many=True)
    queue = PendingQueueSerializer(required=False, help_text="source kueue only")


class JobDetailSerializer(JobSummarySerializer):
    """A draft as stored, with the engine's findings (context: `evaluation`, `request`)."""

    roles = RoleOutSerializer(many=True)
    ssh_keys = serializers.JSONField(source="ssh_key_names")
    cluster = serializers.CharField(source="run.cluster", read_only=True, default="")
    namespace = serializers.CharField(source="run.namespace", read_only=True, default="")
    status_reason = serializers.CharField(source="run.status_reason", read_only=True,
                                          default="")
    status_message = serializers.CharField(source="run.status_message", read_only=True,
                                           default="")
    findings = serializers.SerializerMethodField()
    has_errors = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    gpu = serializers.SerializerMethodField()
    gpu_hours = serializers.SerializerMethodField()
    admission = serializers.SerializerMethodField()
    capacity = serializers.SerializerMethodField()
    cause = serializers.SerializerMethodField()
    pending = serializers.SerializerMethodField()

    class Meta(JobSummarySerializer.Meta):
        fields = [*(f for f in JobSummarySerializer.Meta.fields if f not in ("pending",
                                                                            "progress")),
                  "header_role", "roles", "network_domain",
                  "ssh_keys", "run_script", "tensorboard_log_dir",
                  "image_compatibility_confirmed", "launch_list", "deployment_parameters",
                  "cluster", "namespace", "status_reason", "status_message", "admission",
                  "capacity", "pending", "findings", "has_errors", "links", "progress", "cause",
                  "gpu", "gpu_hours"]

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, job: Job) -> dict[str, Any]:
        return progress_body(job.run)

    @extend_schema_field(CauseSerializer(allow_null=True))
    def get_cause(self, job: Job) -> dict[str, Any] | None:
        run = job.run
        return dict(run.cause) if run is not None and run.cause else None

    @extend_schema_field(GpuSerializer)
    def get_gpu(self, job: Job) -> dict[str, Any]:
        return gpu_body(job.run)

    @extend_schema_field(RunGpuHoursSerializer(allow_null=True))
    def get_gpu_hours(self, job: Job) -> dict[str, Any] | None:
        return run_gpu_hours(job.run)

    def _evaluation(self) -> Evaluation:
        evaluation: Evaluation = self.context["evaluation"]
        return evaluation

    @extend_schema_field(AdmissionSerializer(allow_null=True))
    def get_admission(self, job: Job) -> dict[str, Any] | None:
        run = job.run
        return dict(run.admission) if run is not None and run.admission else None

    @extend_schema_field(CapacitySerializer)
    def get_capacity(self, job: Job) -> dict[str, Any]:
        evaluation = self._evaluation()
        return preflight(evaluation.spec, evaluation.ctx)

    @extend_schema_field(PendingSerializer(allow_null=True))
    def get_pending(self, job: Job) -> dict[str, Any] | None:
        run = job.run
        if run is None or run.state != JobState.PENDING:
            return None
        return pending_view(run.pending if isinstance(run.pending, dict) else {})

    @extend_schema_field(FindingSerializer(many=True))
    def get_findings(self, job: Job) -> list[dict[str, Any]]:
        return [f.as_dict() for f in self._evaluation().findings]

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_has_errors(self, job: Job) -> bool:
        return self._evaluation().has_errors

    @extend_schema_field(JobLinksSerializer)
    def get_links(self, job: Job) -> dict[str, str | None]:
        request = self.context.get("request")
        links = {
            "self": _url(request, "api:job-detail", job.name),
            "manifest": _url(request, "api:job-manifest", job.name),
            "submit": _url(request, "api:job-submit", job.name),
            "launch_list": None,
            "deployment_parameters": None,
        }
        if job.launch_list_id is not None:
            links["launch_list"] = _url(request, LAUNCH_LIST_URL, job.launch_list_id)
        if job.deployment_parameters_id is not None:
            links["deployment_parameters"] = _url(
                request, DEPLOYMENT_PARAMETERS_URL, job.deployment_parameters_id
            )
        return links


class FindingsErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    # absent on a shape error (the one error shape: `field` and `errors` instead)
    findings = FindingSerializer(many=True, required=False)


class SSHKeyInSerializer(serializers.Serializer):
    team = serializers.CharField(required=False, help_text="team slug; default: your first team")
    name = serializers.CharField(max_length=100)
    public_key = serializers.CharField(max_length=16 * 1024,
                                       help_text="one OpenSSH public key line")


class SSHKeySerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    created_by = serializers.CharField(source="created_by.username")

    class Meta:
        model = SSHKey
        fields = ["name", "team", "public_key", "fingerprint", "created_by", "created_at"]
