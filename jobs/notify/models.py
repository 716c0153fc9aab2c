"""Notifications: one row per event (its unique key is the exactly-once claim), per-team
webhooks with their delivery log, and each user's choice of events that email them.

Imported by `jobs.models` (same app, `jobs`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from rlark_site.foundation.audit.tracking import audited
from rlark_site.foundation.egress import ErrorClass
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.validators import validate_webhook_url


class EventKind(models.TextChoices):
    JOB_RUNNING = "job_running", _("job Running")
    JOB_FAILED = "job_failed", _("job Failed")
    JOB_SUCCEEDED = "job_succeeded", _("job Succeeded")
    PENDING_OVERDUE = "pending_overdue", _("job Pending past the deadline")
    SIGNAL_SEEN = "signal_seen", _("first signal seen")
    SIGNAL_MISSED = "signal_missed", _("first signal missed")
    JOB_STALLED = "job_stalled", _("job stalled (no new training step)")
    JOB_RECOVERED = "job_recovered", _("job recovered from a stall")
    JOB_GPU_IDLE = "job_gpu_idle", _("job's GPUs idle")
    VERIFICATION_REQUESTED = "verification_requested", _("verification requested")
    VERIFICATION_DECIDED = "verification_decided", _("verification decided")
    VERIFICATION_STALE = "verification_stale", _("verification gone stale")


# Who may get an event's email: team members (job events), platform admins (a request for
# their queue), or the user who asked for the verification.
VERIFICATION_EVENTS = frozenset({EventKind.VERIFICATION_REQUESTED,
                                 EventKind.VERIFICATION_DECIDED, EventKind.VERIFICATION_STALE})
ADMIN_EVENTS = frozenset({EventKind.VERIFICATION_REQUESTED})


class NotificationEvent(models.Model):
    """Something worth telling a team; `key` is unique, so each event is sent once. It is
    about one run (job events) or one verification (verification events)."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=30, choices=EventKind.choices)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    run_record = models.ForeignKey(
        "jobs.RunRecord", on_delete=models.CASCADE, null=True, blank=True,
        related_name="notification_events",
    )
    verification = models.ForeignKey(
        "clusters.Verification", on_delete=models.CASCADE, null=True, blank=True,
        related_name="+",
    )
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "jobs"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(run_record__isnull=False, verification__isnull=True)
                | models.Q(run_record__isnull=True, verification__isnull=False),
                name="notification_event_about_one_thing",
            ),
        ]

    def __str__(self) -> str:
        return self.key


@audited(exclude=["secret_encrypted"])
class TeamWebhook(models.Model):
    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500, validators=[validate_webhook_url])
    secret_encrypted = models.TextField()
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "jobs"

    def __str__(self) -> str:
        return f"{self.team_id}: {self.url}"


# How the page names a try that got no HTTP answer (`last_error` holds the class itself, the
# API's value; an answer is logged as "HTTP <status>").
DELIVERY_ERROR_LABELS = {
    ErrorClass.BLOCKED: pgettext_lazy("webhook delivery error", "blocked address"),
    ErrorClass.REFUSED: pgettext_lazy("webhook delivery error", "refused"),
    ErrorClass.TIMEOUT: pgettext_lazy("webhook delivery error", "timeout"),
    ErrorClass.TLS: pgettext_lazy("webhook delivery error", "tls"),
    ErrorClass.DNS: pgettext_lazy("webhook delivery error", "dns"),
    ErrorClass.CONNECTION: pgettext_lazy("webhook delivery error", "connection"),
    ErrorClass.INVALID_URL: pgettext_lazy("webhook delivery error", "invalid url"),
}


class WebhookDelivery(models.Model):
    """One event's delivery to one team webhook: tries, last status code, outcome. The last
    error is a status ("HTTP 500") or an error class (`ErrorClass`), never an error's text."""

    event = models.ForeignKey(NotificationEvent, on_delete=models.CASCADE,
                              related_name="deliveries")
    webhook = models.ForeignKey(TeamWebhook, on_delete=models.CASCADE, related_name="deliveries")
    url = models.URLField(max_length=500)
    attempts = models.PositiveIntegerField(default=0)
    status_codes = models.JSONField(default=list)  # one per try; null when no answer
    last_error = models.TextField(blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "jobs"
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["event", "webhook"],
                                               name="unique_delivery")]

    def __str__(self) -> str:
        return f"{self.event_id} -> {self.url}"

    @property
    def error_label(self) -> str:
        return str(DELIVERY_ERROR_LABELS.get(self.last_error, self.last_error))  # type: ignore[call-overload]


@audited()
class NotificationPreference(models.Model):
    """The events that email one user (none unless chosen), and the language of the mail;
    set through `services.preferences_set` by the API and the account page, audited."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    email_events = models.JSONField(default=list)
    language = models.CharField(max_length=10, default="en")

    class Meta:
        app_label = "jobs"

    def __str__(self) -> str:
        return f"{self.user_id}: {', '.join(self.email_events)}"
