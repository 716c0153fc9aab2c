"""Job drafts and their roles, SSH keys, launch lists, deployment parameters and run records.

Draft fields keep what the user typed, even when it breaks a rule (a GPU count of "eight",
an unknown cluster name): the findings engine reports it and nothing is lost.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from clusters.models import Verification
from rlark_site.foundation.audit.tracking import audited
from rlark_site.foundation.tenancy.models import Team


def _zero() -> int:
    return 0


class TaskType(models.TextChoices):
    RL = "rl", _("reinforcement learning")
    DATA_COLLECTION = "data_collection", _("data collection")
    EVALUATION = "evaluation", _("evaluation")
    CUSTOM = "custom", _("custom")


@audited()
class SSHKey(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=100)
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=100)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_ssh_key_name")]

    def __str__(self) -> str:
        return self.name


@audited()
class LaunchList(models.Model):
    """启动清单: the application inputs of a run and the first valid signals to expect."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="launch_lists")
    title = models.CharField(max_length=200)
    entry = models.TextField(blank=True, default="")  # entry command / config
    datasets = models.TextField(blank=True, default="")
    models_used = models.TextField(blank=True, default="")
    hyperparameters = models.TextField(blank=True, default="")
    notes = models.TextField(blank=True, default="")
    # [{"signal": ..., "where": ..., "within_minutes": int}]
    expected_signals = models.JSONField(default=list, blank=True)
    # The main container image (manual, step 4: each role's image must equal it), pinned:
    # `repo@sha256:<64 hex>` or `repo:tag@sha256:<64 hex>`. `image` holds for every role that
    # `role_images` ({role name: reference}, names compared ignoring case) does not name.
    image = models.CharField(max_length=500, blank=True, default="")
    role_images = models.JSONField(default=dict, blank=True)
    # {pattern, stall_after_seconds, cancel_after_stalled_seconds}: how RLark reads training
    # progress from the Head Task's log and when a run counts as stalled (jobs.core.progress).
    progress = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return self.title


class ConfirmationState(models.TextChoices):
    PENDING = "pending", _("pending")
    CONFIRMED = "confirmed", _("confirmed")
    REJECTED = "rejected", _("rejected")
    STALE = "stale", _("stale")


@audited()
class DeploymentParameters(models.Model):
    """部署参数: per-role placement, resources, storage and network constraints, as confirmed.

    `launch_list` links the two records both ways (`launch_list.deployment_parameters`).

    Confirmation (`jobs.records.confirmation`): ``pending`` -> ``confirmed`` | ``rejected`` by a
    platform admin; ``confirmed`` -> ``stale`` when the record changes (stored) or the job it
    was confirmed for changes (computed by the findings engine from `confirmed_content`).
    A member requests confirmation again (-> ``pending``) after a rejection or staleness.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="deployment_parameters")
    title = models.CharField(max_length=200)
    launch_list = models.OneToOneField(
        LaunchList, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="deployment_parameters",
    )
    # [{"role", "cluster", "selector": {k: v}, "gpus", "devices", "cpu", "memory", "mounts"}]
    roles = models.JSONField(default=list, blank=True)
    network_domain = models.CharField(max_length=63, blank=True, default="")
    storage_notes = models.TextField(blank=True, default="")
    network_notes = models.TextField(blank=True, default="")
    verifications = models.ManyToManyField(Verification, blank=True, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # -- the admin's confirmation -----------------------------------------------------------
    confirmation_state = models.CharField(
        max_length=16, choices=ConfirmationState.choices, default=ConfirmationState.PENDING
    )
    # The job the confirmation is asked for and covers (its deployment fields are compared).
    confirmation_job = models.ForeignKey(
        "Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confirmation_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="+",
    )
    confirmation_requested_at = models.DateTimeField(null=True, blank=True)
    confirmation_request_note = models.TextField(blank=True, default="")
    confirmation_decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="+",
    )
    confirmation_decided_at = models.DateTimeField(null=True, blank=True)
    confirmation_note = models.TextField(blank=True, default="")
    # What was confirmed: {"record": ..., "job": ... | null, "job_name": ...}
    # (`jobs.core.parameters.record_content` / `job_content`), and its sha256.
    confirmed_content = models.JSONField(default=dict, blank=True)
    confirmed_fingerprint = models.CharField(max_length=64, blank=True, default="")
    confirmation_stale_at = models.DateTimeField(null=True, blank=True)
    # [{"part", "role", "field"}]: what changed, when the record itself made it stale
    confirmation_stale_reasons = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        verbose_name_plural = "deployment parameters"
        indexes = [
            models.Index(fields=["confirmation_state", "confirmation_requested_at"],
                         name="parameters_confirmation"),
        ]

    def __str__(self) -> str:
        return self.title


class JobState(models.TextChoices):
    DRAFT = "draft", _("draft")
    QUEUED = "queued", _("queued")
    SUBMITTING = "submitting", _("submitting")
    SUBMIT_FAILED = "submit_failed", _("submit failed")
    PENDING = "pending", _("pending")
    RUNNING = "running", _("running")
    SUCCEEDED = "succeeded", _("succeeded")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")


@audited()
class Job(models.Model):
    """A draft as typed; once submitted, `run_record` owns everything about the run."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="jobs")
    name = models.CharField(max_length=255, unique=True)  # validated by the findings engine
    task_type = models.CharField(max_length=40, default=TaskType.RL)
    header_role = models.CharField(max_length=255, blank=True, default="")
    network_domain = models.CharField(max_length=255, blank=True, default="")
    ssh_key_names = models.JSONField(default=list, blank=True)
    run_script = models.TextField(blank=True, default="")
    tensorboard_log_dir = models.TextField(blank=True, default="")
    image_compatibility_confirmed = models.BooleanField(default=False)
    launch_list = models.ForeignKey(
        LaunchList, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    deployment_parameters = models.ForeignKey(
        DeploymentParameters, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    wizard_step = models.PositiveSmallIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["team", "-updated_at"], name="job_team_recent")]

    def __str__(self) -> str:
        return self.name

    @property
    def run(self) -> RunRecord | None:
        """The run this draft was submitted as, or None while it is a draft."""
        try:
            return self.run_record
        except RunRecord.DoesNotExist:
            return None

    @property
    def state(self) -> str:
        """Derived: `draft` without a run, else the run's state (`RunRecord.state` owns it)."""
        run = self.run
        return JobState.DRAFT if run is None else run.state

    def get_state_display(self) -> str:
        return str(JobState(self.state).label)

    @staticmethod
    def in_state(state: str) -> models.Q:
        """The filter for jobs whose derived state is `state` (a draft has no run record)."""
        if state == JobState.DRAFT:
            return models.Q(run_record__isnull=True)
        return models.Q(run_record__state=state)


@audited()
class Role(models.Model):
    """One role of a job draft; becomes one Task of the manifest."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="roles")
    position = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=255, blank=True, default="")
    cluster = models.CharField(max_length=63, blank=True, default="")
    selector = models.JSONField(default=list, blank=True)  # [[key, value], ...] as typed
    gpus = models.JSONField(default=_zero, blank=True)  # raw: int when valid
    devices = models.JSONField(default=list, blank=True)  # [[name, count], ...]
    cpu = models.JSONField(default=dict, blank=True)  # {"request": "", "limit": ""}
    memory = models.JSONField(default=dict, blank=True)
    image = models.TextField(blank=True, default="")
    image_digest = models.CharField(max_length=255, blank=True, default="")
    prepare_script = models.TextField(blank=True, default="")
    env = models.JSONField(default=list, blank=True)  # [{"name", "value"}]
    # [{"kind", "source", "target", "storage_class"}]
    mounts = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["job", "position"]
        constraints = [
            # Deferred to the commit: roles saved in place may swap positions in any order.
            models.UniqueConstraint(fields=["job", "position"], name="unique_role_position",
                                    deferrable=models.Deferrable.DEFERRED)
        ]

    def __str__(self) -> str:
        return f"{self.job_id}:{self.name}"


class SubmissionState(models.TextChoices):
    QUEUED = "queued", _("queued")
    SUBMITTING = "submitting", _("submitting")
    SUBMITTED = "submitted", _("submitted")
    FAILED = "failed", _("failed")


@audited(exclude=["status_checked_at", "admission", "pending"])
class RunRecord(models.Model):
    """Everything about one job name, frozen at submission, in one place.

    The one owner of a run's lifecycle: `state` moves only through
    `jobs.records.lifecycle` (the run state machine), together with where the run is
    (`cluster`, `namespace`), when it was submitted and what the cluster last said.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="run_records")
    job = models.OneToOneField(Job, on_delete=models.PROTECT, related_name="run_record")
    job_name = models.CharField(max_length=63, unique=True)
    cluster = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63)
    manifest_yaml = models.TextField()
    manifest_sha256 = models.CharField(max_length=64)
    launch_list_snapshot = models.JSONField(default=dict)
    deployment_parameters_snapshot = models.JSONField(default=dict)
    verifications_snapshot = models.JSONField(default=list)
    findings_snapshot = models.JSONField(default=list)  # warnings accepted at submission
    # The draft body as submitted, as a job file's `spec` (jobs.jobfiles.document.spec_of): what
    # `GET jobs/{name}/job-file/` exports and `clone` starts from. {} for runs frozen before it.
    job_file_snapshot = models.JSONField(default=dict, blank=True)
    frozen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    frozen_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.QUEUED)
    submission_lease_until = models.DateTimeField(null=True, blank=True)
    remote_uid = models.CharField(max_length=64, blank=True, default="")
    submitted_at = models.DateTimeField(null=True, blank=True)
    failure_message = models.TextField(blank=True, default="")
    cancelled_at = models.DateTimeField(null=True, blank=True)
    pending_since = models.DateTimeField(null=True, blank=True)
    pending_flagged = models.BooleanField(default=False)
    status_reason = models.CharField(max_length=255, blank=True, default="")
    status_message = models.TextField(blank=True, default="")
    status_checked_at = models.DateTimeField(null=True, blank=True)
    # What the last capture of the run's pods (at cancel, or when the run ended) could not
    # read; "" when it read everything (jobs.observe.capture).
    capture_incomplete = models.TextField(blank=True, default="")
    # On a Kueue cluster (SPEC 15): `{queue}` from submission, then what the status sync read of
    # the Job's Workload (`clusters.kueue.AdmissionStatus.as_dict`); {} without Kueue. Not
    # audited: the queue position moves with other teams' jobs.
    admission = models.JSONField(default=dict, blank=True)
    # What caused the run's failure or stall (SPEC 16): `{tag, evidence, pod, at}`, the earliest
    # evidence found across every role's captured log tail and pod state and the Head Task's
    # log read for progress; {} while none is known (jobs.observe.causes).
    cause = models.JSONField(default=dict, blank=True)
    # While Pending (SPEC 15): why, as the last status pass found it
    # (`jobs.records.pending.explain`); {} otherwise. Not audited: it follows the cluster.
    pending = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-frozen_at"]
        indexes = [models.Index(fields=["cluster", "state"], name="run_cluster_state")]
        constraints = [
            models.CheckConstraint(condition=~models.Q(state=JobState.DRAFT), name="run_not_draft")
        ]

    def __str__(self) -> str:
        return self.job_name

    @property
    def submission_state(self) -> str:
        """Derived from `state`: where the submission of this run stands."""
        if self.state in (JobState.QUEUED, JobState.SUBMITTING):
            return str(self.state)
        if self.state == JobState.SUBMIT_FAILED:
            return SubmissionState.FAILED
        if self.submitted_at is None:  # cancelled before the cluster had it
            return SubmissionState.QUEUED
        return SubmissionState.SUBMITTED


class AttemptOutcome(models.TextChoices):
    CREATED = "created", _("created")
    ALREADY_EXISTS = "already_exists", _("already existed (ours)")
    TRANSIENT_ERROR = "transient_error", _("transient error, will retry")
    PERMANENT_ERROR = "permanent_error", _("permanent error")
    IN_PROGRESS = "in_progress", _("in progress")


@audited()
class SubmissionAttempt(models.Model):
    run_record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    task_id = models.CharField(max_length=255, blank=True, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=20, choices=AttemptOutcome.choices, default=AttemptOutcome.IN_PROGRESS
    )
    http_status = models.IntegerField(null=True, blank=True)
    message = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["run_record", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run_record", "number"], name="unique_attempt_number")
        ]

    def __str__(self) -> str:
        return f"{self.run_record_id}#{self.number} {self.outcome}"


# The status sync writes thousands of phase changes at a time: recorded per statement.
@audited(per_statement=True)
class StatusChange(models.Model):
    """One observed phase change of a submitted Job."""

    run_record = models.ForeignKey(
        RunRecord, on_delete=models.CASCADE, related_name="status_changes"
    )
    phase = models.CharField(max_length=40)
    reason = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField(blank=True, default="")
    observed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_record", "observed_at", "id"]

    def __str__(self) -> str:
        return f"{self.run_record_id}: {self.phase}"


@audited()
class FirstRunCheck(models.Model):
    """Whether the expected first signal of a run was observed (Running is not enough)."""

    run_record = models.ForeignKey(
        RunRecord, on_delete=models.CASCADE, related_name="first_run_checks"
    )
    observed = models.BooleanField()
    evidence = models.TextField(blank=True, default="")
    notes = models.TextField(blank=True, default="")
    troubleshooting = models.JSONField(default=dict, blank=True)  # checklist item -> answer
    checked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    checked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_record", "checked_at", "id"]

    def __str__(self) -> str:
        return f"{self.run_record_id}: {'observed' if self.observed else 'not observed'}"


# The pod-attempt record lives beside the rest of live observation (jobs/observe/).
from jobs.gpu.models import GpuIdleEpisode as GpuIdleEpisode  # noqa: E402
from jobs.gpu.models import GpuMetric as GpuMetric  # noqa: E402
from jobs.gpu.models import IdleEnd as IdleEnd  # noqa: E402
from jobs.gpu.models import RunGpu as RunGpu  # noqa: E402
from jobs.notify.models import EventKind as EventKind  # noqa: E402
from jobs.notify.models import NotificationEvent as NotificationEvent  # noqa: E402
from jobs.notify.models import NotificationPreference as NotificationPreference  # noqa: E402
from jobs.notify.models import TeamWebhook as TeamWebhook  # noqa: E402
from jobs.notify.models import WebhookDelivery as WebhookDelivery  # noqa: E402
from jobs.observe.models import CaptureReason as CaptureReason  # noqa: E402
from jobs.observe.models import FailureTag as FailureTag  # noqa: E402
from jobs.observe.models import PodAttempt as PodAttempt  # noqa: E402
from jobs.observe.models import SignalState as SignalState  # noqa: E402
from jobs.observe.models import SignalWatch as SignalWatch  # noqa: E402
from jobs.progress.models import EpisodeEnd as EpisodeEnd  # noqa: E402
from jobs.progress.models import RunProgress as RunProgress  # noqa: E402
from jobs.progress.models import StallEpisode as StallEpisode  # noqa: E402
