"""The record of each pod attempt of a run, kept after the pods are gone.

Imported by `jobs.models` (same app, `jobs`). One row per pod incarnation (its UID): a pod
recreated under the same name is a new attempt; container restarts inside one pod are
counted in `restarts`, with the previous container's end and log kept beside the current.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from rlark_site.foundation.audit.tracking import audited


class FailureTag(models.TextChoices):
    NONE = "", _("no failure")
    OOM = "oom", _("out of memory (OOMKilled)")
    IMAGE_PULL = "image_pull", _("image pull failed")
    CRASH_LOOP = "crash_loop", _("crash loop")
    CUDA_OOM = "cuda_oom", _("CUDA out of memory")
    NCCL_TIMEOUT = "nccl_timeout", _("NCCL timeout")
    RAY_ACTOR_DIED = "ray_actor_died", _("Ray actor died")
    NCCL_WATCHDOG = "nccl_watchdog", _("NCCL watchdog stuck")
    HOST_OOM = "host_oom", _("node low on memory (Ray)")
    NODE_DEAD = "node_dead", _("Ray node marked dead")
    ROLLOUT_ENGINE = "rollout_engine", _("rollout engine died")
    EVICTED = "evicted", _("pod evicted")
    PREEMPTED = "preempted", _("pod preempted")
    UNKNOWN = "unknown", _("unknown failure")


class CaptureReason(models.TextChoices):
    SEEN = "seen", _("seen running")
    POD_ENDED = "pod_ended", _("the pod ended or restarted")
    JOB_ENDED = "job_ended", _("the Job ended")
    CANCELLED = "cancelled", _("the job was cancelled")


# The log tails are big and not history: the audit keeps every other field's changes. The
# status sync writes attempts thousands at a time: recorded per statement.
@audited(exclude=["log_tail", "previous_log_tail", "pod_events"], per_statement=True)
class PodAttempt(models.Model):
    run_record = models.ForeignKey(
        "jobs.RunRecord", on_delete=models.CASCADE, related_name="pod_attempts"
    )
    task = models.CharField(max_length=63)
    replica = models.PositiveIntegerField()
    pod_name = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)
    node = models.CharField(max_length=253, blank=True, default="")
    phase = models.CharField(max_length=20, blank=True, default="")
    pod_created_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    restarts = models.PositiveIntegerField(default=0)
    container_state = models.CharField(max_length=20, blank=True, default="")
    reason = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField(blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    previous_reason = models.CharField(max_length=255, blank=True, default="")
    previous_exit_code = models.IntegerField(null=True, blank=True)
    pod_events = models.JSONField(default=list, blank=True)
    # zlib-compressed UTF-8: the last `LOG_TAIL_BYTES` of the current / previous container.
    log_tail = models.BinaryField(blank=True, default=b"")
    previous_log_tail = models.BinaryField(blank=True, default=b"")
    logs_captured = models.BooleanField(default=False)
    failure_tag = models.CharField(
        max_length=20, choices=FailureTag.choices, blank=True, default=FailureTag.NONE
    )
    failure_evidence = models.TextField(blank=True, default="")
    capture_reason = models.CharField(
        max_length=20, choices=CaptureReason.choices, default=CaptureReason.SEEN
    )
    captured_at = models.DateTimeField()

    class Meta:
        app_label = "jobs"
        ordering = ["run_record", "task", "replica", "pod_created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run_record", "pod_uid"], name="unique_pod_attempt")
        ]

    def __str__(self) -> str:
        return f"{self.pod_name} ({self.pod_uid})"


class SignalState(models.TextChoices):
    WATCHING = "watching", _("watching")
    SEEN = "seen", _("seen")
    MISSED = "missed", _("not seen in time")
    UNMATCHABLE = "unmatchable", _("pattern timed out")


@audited(exclude=["scanned_until", "checked_at"])
class SignalWatch(models.Model):
    """The search for one expected first signal (with a pattern) in the Head Task's log."""

    run_record = models.ForeignKey(
        "jobs.RunRecord", on_delete=models.CASCADE, related_name="signal_watches"
    )
    index = models.PositiveSmallIntegerField()  # position in the launch list's signals
    signal = models.CharField(max_length=500)
    pattern = models.CharField(max_length=500)
    pod = models.CharField(max_length=253, blank=True, default="")
    state = models.CharField(
        max_length=20, choices=SignalState.choices, default=SignalState.WATCHING
    )
    running_since = models.DateTimeField()
    deadline = models.DateTimeField(null=True, blank=True)
    scanned_until = models.DateTimeField(null=True, blank=True)
    seen_at = models.DateTimeField(null=True, blank=True)
    line = models.TextField(blank=True, default="")
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "jobs"
        ordering = ["run_record", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run_record", "index"], name="unique_signal_watch")
        ]

    def __str__(self) -> str:
        return f"{self.run_record_id}#{self.index} {self.state}"
