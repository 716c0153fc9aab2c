"""Shapes of the records API: bodies in (shape only) and records out."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.core.findings.base import NAME_MAX, ROLE_NAME
from jobs.core.images import IMAGE_PLACEHOLDER, is_pinned_reference
from jobs.core.progress import (
    PATTERN_MAX as STEP_PATTERN_MAX,
)
from jobs.core.progress import (
    STALL_AFTER_DEFAULT,
    STALL_AFTER_MAX,
    STALL_AFTER_MIN,
    progress_settings,
)
from jobs.core.progress import (
    pattern_problem as step_pattern_problem,
)
from jobs.gpu.serializers import GpuSerializer
from jobs.models import ConfirmationState, DeploymentParameters, LaunchList
from jobs.observe.patterns import PATTERN_MAX, pattern_problem
from jobs.observe.serializers import CauseSerializer
from jobs.progress.serializers import ProgressSerializer
from jobs.records.confirmation import ConfirmationStatus, confirmation_status
from jobs.usage.serializers import RunGpuHoursSerializer
from rlark_site.foundation.limits import (
    MAX_CHECKLIST_ANSWERS,
    MAX_DEVICE_KINDS,
    MAX_EXPECTED_SIGNALS,
    MAX_MOUNTS,
    MAX_REFERENCES,
    MAX_ROLES,
    MAX_SELECTOR_CONDITIONS,
    BoundedDictField,
)
from rlark_site.foundation.validators import no_control_characters

MAX_TEXT = 20_000
MAX_IMAGE_REFERENCE = 500


def image_reference_problem(value: str) -> str | None:
    """Why `value` cannot be a launch list's image (a pinned reference), or None."""
    if is_pinned_reference(value) and value.strip().lower() != IMAGE_PLACEHOLDER.lower():
        return None
    return str(_(
        "%(value)s is not a pinned image reference: write repo@sha256:<64 hex digits>, or an "
        "immutable tag with its digest, repo:tag@sha256:<64 hex digits>."
    ) % {"value": repr(value[:100])})


def role_images_problem(value: dict[str, str]) -> str | None:
    """Why `value` (role name -> reference) cannot be a launch list's per-role images, or None."""
    seen: set[str] = set()
    for role, reference in value.items():
        if len(role) > NAME_MAX or not ROLE_NAME.fullmatch(role):
            return str(_("%(role)s is not a role name (1-63 letters, digits or '-', starting and "
                         "ending with a letter or digit).") % {"role": repr(role[:100])})
        if role.lower() in seen:
            return str(_("Role %(role)s is listed twice (names are compared ignoring case).")
                       % {"role": role})
        seen.add(role.lower())
        problem = image_reference_problem(reference)
        if problem is not None:
            return str(_("Role %(role)s: %(problem)s") % {"role": role, "problem": problem})
    return None


class ExpectedSignalSerializer(serializers.Serializer):
    signal = serializers.CharField(max_length=500, help_text=_("what to look for"))
    where = serializers.CharField(max_length=500, allow_blank=True, default="",
                                  help_text=_("where to look: a log, a TensorBoard scalar, ..."))
    within_minutes = serializers.IntegerField(min_value=1, max_value=100_000, allow_null=True,
                                              default=None,
                                              help_text=_("how long after Running at most"))
    pattern = serializers.CharField(
        max_length=PATTERN_MAX, allow_blank=True, required=False,
        help_text=_("optional: text to find in the Head Task's log, or a regular expression "
                    "between slashes (/reward=\\d+/)"))

    def validate_pattern(self, value: str) -> str:
        problem = pattern_problem(value) if value else None
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


class ProgressSettingsSerializer(serializers.Serializer):
    """A launch list's `progress` (SPEC 16); absent fields take their defaults."""

    pattern = serializers.CharField(
        max_length=STEP_PATTERN_MAX, allow_blank=True, required=False, default="",
        trim_whitespace=False,
        help_text=_("a regular expression (RE2 syntax) with a named group step and optionally "
                    "total, matched on the Head Task's log lines; blank: RLinf's own step "
                    "lines, Global Step:\\s*(?P<step>\\d+)\\s*/\\s*(?P<total>\\d+) (the "
                    "metric table's and the tqdm bar's)"))
    stall_after_seconds = serializers.IntegerField(
        min_value=STALL_AFTER_MIN, max_value=STALL_AFTER_MAX, required=False,
        default=STALL_AFTER_DEFAULT,
        help_text=_("a Running job with no new step for this long is stalled"))
    cancel_after_stalled_seconds = serializers.IntegerField(
        min_value=STALL_AFTER_MIN, max_value=STALL_AFTER_MAX, required=False,
        allow_null=True, default=None,
        help_text=_("cancel a job stalled this long (once, its pods captured first); null: "
                    "never"))

    def validate_pattern(self, value: str) -> str:
        problem = step_pattern_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return progress_settings(attrs).as_dict()


class LaunchListInSerializer(serializers.Serializer):
    team = serializers.SlugField(required=False, help_text=_("team slug (default: your first)"))
    title = serializers.CharField(max_length=200, validators=[no_control_characters])
    entry = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False)
    datasets = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False)
    models_used = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False)
    hyperparameters = serializers.CharField(max_length=MAX_TEXT, allow_blank=True,
                                            required=False)
    notes = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False)
    expected_signals = serializers.ListField(child=ExpectedSignalSerializer(), required=False,
                                             max_length=MAX_EXPECTED_SIGNALS)
    image = serializers.CharField(
        max_length=MAX_IMAGE_REFERENCE, allow_blank=True, required=False,
        help_text=_("the main container image of every role role_images does not name: "
                    "repo@sha256:<64 hex> or repo:tag@sha256:<64 hex>"))
    role_images = BoundedDictField(
        child=serializers.CharField(max_length=MAX_IMAGE_REFERENCE), required=False,
        max_items=MAX_ROLES,
        help_text=_("role name -> the main container image of that role (pinned like image)"))
    deployment_parameters = serializers.IntegerField(allow_null=True, required=False)
    progress = ProgressSettingsSerializer(
        required=False,
        help_text=_("how RLark reads training progress and detects stalls; replaced whole"))

    def validate_image(self, value: str) -> str:
        problem = image_reference_problem(value) if value else None
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value

    def validate_role_images(self, value: dict[str, str]) -> dict[str, str]:
        problem = role_images_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


class LaunchListSerializer(serializers.ModelSerializer):
    team: Any = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by: Any = serializers.SlugRelatedField(slug_field="username", read_only=True)
    deployment_parameters = serializers.SerializerMethodField()
    jobs: Any = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = LaunchList
        fields = [
            "id", "team", "title", "entry", "datasets", "models_used", "hyperparameters",
            "notes", "expected_signals", "image", "role_images", "deployment_parameters", "jobs",
            "progress", "created_by",
            "created_at", "updated_at",
        ]

    @extend_schema_field(ProgressSettingsSerializer)
    def get_progress(self, obj: LaunchList) -> dict[str, Any]:
        return progress_settings(obj.progress).as_dict()

    def get_deployment_parameters(self, obj: LaunchList) -> int | None:
        linked = getattr(obj, "deployment_parameters", None)
        return linked.pk if linked is not None else None


class ResourcePairSerializer(serializers.Serializer):
    request = serializers.CharField(max_length=40, allow_blank=True, required=False)
    limit = serializers.CharField(max_length=40, allow_blank=True, required=False)


class MountConstraintSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["host_path", "object_storage"])
    source = serializers.CharField(  # type: ignore[assignment]
        max_length=4096, allow_blank=True, required=False
    )
    target = serializers.CharField(max_length=4096)
    storage_class = serializers.CharField(max_length=253, allow_blank=True, required=False)
    size = serializers.CharField(max_length=40, allow_blank=True, required=False)


class RoleConstraintSerializer(serializers.Serializer):
    role = serializers.CharField(max_length=63)
    cluster = serializers.CharField(max_length=63, allow_blank=True)
    selector = BoundedDictField(child=serializers.CharField(max_length=317, allow_blank=True),
                                max_items=MAX_SELECTOR_CONDITIONS)
    gpus = serializers.IntegerField(min_value=0, allow_null=True, required=False, default=0)
    devices = BoundedDictField(child=serializers.IntegerField(min_value=0), required=False,
                               default=dict, max_items=MAX_DEVICE_KINDS)
    cpu = ResourcePairSerializer(required=False, default=dict)
    memory = ResourcePairSerializer(required=False, default=dict)
    mounts = serializers.ListField(child=MountConstraintSerializer(), required=False,
                                   default=list, max_length=MAX_MOUNTS)


class DeploymentParametersInSerializer(serializers.Serializer):
    team = serializers.SlugField(required=False, help_text=_("team slug (default: your first)"))
    title = serializers.CharField(max_length=200, validators=[no_control_characters])
    launch_list = serializers.IntegerField(allow_null=True, required=False)
    roles = serializers.ListField(child=RoleConstraintSerializer(), required=False,
                                  max_length=MAX_ROLES)
    network_domain = serializers.CharField(max_length=63, allow_blank=True, required=False)
    storage_notes = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False)
    network_notes = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False)
    verifications = serializers.ListField(child=serializers.IntegerField(), required=False,
                                          max_length=MAX_REFERENCES)


class ConfirmationChangeSerializer(serializers.Serializer):
    part = serializers.ChoiceField(choices=["record", "job"])
    role = serializers.CharField(allow_null=True)
    field = serializers.CharField(help_text=_("the changed field, or added / removed"))


class ConfirmationSerializer(serializers.Serializer):
    """Where the admin's confirmation stands (docs/records.md)."""

    state = serializers.ChoiceField(choices=ConfirmationState.choices,
                                    help_text=_("effective: stale when anything confirmed changed"))
    stored_state = serializers.ChoiceField(choices=ConfirmationState.choices)
    job = serializers.CharField(allow_null=True, help_text=_("the job it is asked for"))
    changes = ConfirmationChangeSerializer(many=True)
    reasons = serializers.ListField(child=serializers.CharField())
    fingerprint = serializers.CharField(help_text=_("of what a confirmation now would cover"))
    requested_by = serializers.CharField(allow_null=True)
    requested_at = serializers.DateTimeField(allow_null=True)
    request_note = serializers.CharField()
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField()
    stale_at = serializers.DateTimeField(allow_null=True)


def confirmation_body(parameters: DeploymentParameters,
                      status: ConfirmationStatus | None = None) -> dict[str, Any]:
    """`status`: the record's `confirmation_status` when the caller computed it for a list."""
    status = status if status is not None else confirmation_status(parameters)
    requested_by = parameters.confirmation_requested_by
    decided_by = parameters.confirmation_decided_by
    return {
        **status.as_dict(),
        "requested_by": requested_by.get_username() if requested_by is not None else None,
        "requested_at": parameters.confirmation_requested_at,
        "request_note": parameters.confirmation_request_note,
        "decided_by": decided_by.get_username() if decided_by is not None else None,
        "decided_at": parameters.confirmation_decided_at,
        "note": parameters.confirmation_note,
        "stale_at": parameters.confirmation_stale_at,
    }


class DeploymentParametersSerializer(serializers.ModelSerializer):
    team: Any = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by: Any = serializers.SlugRelatedField(slug_field="username", read_only=True)
    verifications: Any = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    jobs: Any = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    confirmation = serializers.SerializerMethodField()

    class Meta:
        model = DeploymentParameters
        fields = [
            "id", "team", "title", "launch_list", "roles", "network_domain", "storage_notes",
            "network_notes", "verifications", "jobs", "created_by", "created_at", "updated_at",
            "confirmation",
        ]

    @extend_schema_field(ConfirmationSerializer)
    def get_confirmation(self, obj: DeploymentParameters) -> dict[str, Any]:
        statuses = self.context.get("confirmation_statuses") or {}
        return ConfirmationSerializer(confirmation_body(obj, statuses.get(obj.pk))).data


class ConfirmationRequestInSerializer(serializers.Serializer):
    job = serializers.CharField(max_length=255, required=False, allow_blank=True, default="",
                                help_text=_("the job it is for (default: the newest job "
                                            "using these parameters)"))
    note = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False,
                                 default="")


class ConfirmInSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False,
                                 default="")
    fingerprint = serializers.CharField(
        max_length=64, allow_blank=True, required=False, default="",
        help_text=_("confirmation.fingerprint as you reviewed it: 409 when it changed since"))


class RejectInSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=MAX_TEXT, allow_blank=True,
                                 help_text=_("why (required)"))


class FillFromJobSerializer(serializers.Serializer):
    job = serializers.CharField(max_length=255, help_text=_("name of a job of the same team"))


class FirstRunCheckInSerializer(serializers.Serializer):
    observed = serializers.BooleanField()
    evidence = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False,
                                     default="")
    notes = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False,
                                  default="")
    troubleshooting = BoundedDictField(
        required=False, default=dict, max_items=MAX_CHECKLIST_ANSWERS,
        help_text=_('checklist code -> {"answer": "ok"|"problem"|"unchecked", "note": "..."}'),
    )


class FirstRunCheckSerializer(serializers.Serializer):
    observed = serializers.BooleanField()
    evidence = serializers.CharField()
    notes = serializers.CharField()
    troubleshooting = serializers.DictField()
    checked_by = serializers.CharField()
    checked_at = serializers.DateTimeField()


class ChecklistItemSerializer(serializers.Serializer):
    code = serializers.CharField()
    question = serializers.CharField()
    hint = serializers.CharField()


class FirstRunCheckStateSerializer(serializers.Serializer):
    """`GET jobs/{name}/first-run-check/`: what to look for, the checks so far, the checklist."""

    checks = FirstRunCheckSerializer(many=True)
    expected_signals = ExpectedSignalSerializer(many=True)
    checklist = ChecklistItemSerializer(many=True)
    answers = serializers.DictField(child=serializers.CharField())


class SubmitAcceptedSerializer(serializers.Serializer):
    state = serializers.CharField()
    run_record = serializers.CharField(help_text=_("job name of the run record"))


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, help_text=_("the new draft's job name"))


class AttemptSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    task_id = serializers.CharField()
    outcome = serializers.CharField()
    http_status = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class StatusChangeSerializer(serializers.Serializer):
    phase = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    observed_at = serializers.DateTimeField()


class SubmissionSerializer(serializers.Serializer):
    state = serializers.CharField()
    submitted_at = serializers.DateTimeField(allow_null=True)
    remote_uid = serializers.CharField()
    failure_message = serializers.CharField()
    cancelled_at = serializers.DateTimeField(allow_null=True)
    # What the capture of the run's pods (at cancel or at the run's end) could not read.
    capture_incomplete = serializers.CharField()
    attempts = AttemptSerializer(many=True)


class ManifestSerializer(serializers.Serializer):
    yaml = serializers.CharField()
    sha256 = serializers.CharField()
    frozen_at = serializers.DateTimeField()
    frozen_by = serializers.CharField()
    findings_accepted = serializers.ListField(child=serializers.DictField())


class AuditEventSerializer(serializers.Serializer):
    id = serializers.CharField()
    at = serializers.DateTimeField()
    model = serializers.CharField()
    object_id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    diff = serializers.JSONField(allow_null=True)
    data = serializers.JSONField()  # type: ignore[assignment]
    actor = serializers.IntegerField(allow_null=True)
    actor_username = serializers.CharField(allow_null=True)
    team = serializers.CharField(allow_null=True)
    url = serializers.CharField(allow_null=True)
    request_id = serializers.CharField(allow_null=True)
    task = serializers.CharField(allow_null=True)


_AUDIT_TIME = serializers.DateTimeField()


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def audit_events_data(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `AuditEventSerializer(rows, many=True).data` gives, without DRF's work per field
    (serializing a page was the audit list's main cost after the lookup itself)."""
    return [{
        "id": _text(row["id"]), "at": _AUDIT_TIME.to_representation(row["at"]),
        "model": _text(row["model"]), "object_id": _text(row["object_id"]),
        "label": _text(row["label"]), "diff": row.get("diff"), "data": row.get("data"),
        "actor": None if row.get("actor") is None else int(row["actor"]),
        "actor_username": _text(row.get("actor_username")), "team": _text(row.get("team")),
        "url": _text(row.get("url")), "request_id": _text(row.get("request_id")),
        "task": _text(row.get("task")),
    } for row in rows]


class RunRecordChainSerializer(serializers.Serializer):
    """The documented shape of `GET run-records/{name}/` (the chain, in order)."""

    job = serializers.DictField()
    launch_list = serializers.DictField()
    deployment_parameters = serializers.DictField()
    verifications = serializers.ListField(child=serializers.DictField())
    manifest = ManifestSerializer()
    submission = SubmissionSerializer()
    status_history = StatusChangeSerializer(many=True)
    first_run_checks = FirstRunCheckSerializer(many=True)
    progress = ProgressSerializer()
    cause = CauseSerializer(allow_null=True)
    gpu = GpuSerializer()
    gpu_hours = RunGpuHoursSerializer(allow_null=True)
    audit_events = AuditEventSerializer(many=True)


class RunRecordSummarySerializer(serializers.Serializer):
    job_name = serializers.CharField()
    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    manifest_sha256 = serializers.CharField()
    submission_state = serializers.CharField()
    job_state = serializers.CharField(source="state")
    frozen_at = serializers.DateTimeField()


def errors_detail(errors: Any) -> str:
    """A one-line summary of DRF's nested errors, for the `detail` of a 400."""
    if isinstance(errors, dict):
        key, value = next(iter(errors.items()))
        inner = errors_detail(value)
        return inner if key == "non_field_errors" else f"{key}: {inner}"
    if isinstance(errors, list):
        for index, item in enumerate(errors):
            if item:
                inner = errors_detail(item)
                return f"{index}.{inner}" if isinstance(item, dict) else inner
    return str(errors)
