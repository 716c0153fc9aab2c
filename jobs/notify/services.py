"""Emitting and delivering notifications.

**Exactly once.** An event is a `NotificationEvent` row whose `key` names it (`job_running:<run
record id>`, ...) and is unique: `emit` inserts it inside the caller's transaction and queues
its delivery only when the insert happened, after the commit. Emitting is therefore safe to
repeat (every status pass may), and a rolled-back change sends nothing. Email is claimed with a
conditional update of `emailed_at`, webhook deliveries are unique per (event, webhook) and
succeed once: a re-delivered task message does not send twice.

**Webhooks** get `POST <url>` with a JSON body `{event, kind, team, job, run_record, state,
at, ...}` and headers `X-RLark-Event` (the key), `X-RLark-Timestamp` (Unix seconds) and
`X-RLark-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the team's secret>`.
Anything but a 2xx is retried by Celery with exponential backoff (`WEBHOOK_TRIES` tries),
each try logged in the delivery log with its status code, or with an error class (`refused`,
`timeout`, `blocked address`, `tls`, `dns`, ...) when there was no answer: never the error's
text. The POST goes through `rlark_site.foundation.egress.post`, which never reaches an
internal address (SPEC 18) and follows no redirect (a 3xx is logged as its status).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation

from clusters.credentials import decrypt, encrypt
from clusters.models import Verification
from jobs.models import (
    EventKind,
    JobState,
    NotificationEvent,
    NotificationPreference,
    RunRecord,
    TeamWebhook,
    WebhookDelivery,
)
from jobs.notify.models import ADMIN_EVENTS, VERIFICATION_EVENTS
from jobs.observe.causes import cause_label
from jobs.records.pending import pending_view, summary
from rlark_site.foundation import egress
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.validators import validate_webhook_url

__all__ = [
    "WEBHOOK_TRIES",
    "deliver_event",
    "deliver_webhook",
    "emit",
    "emit_run_changes",
    "emit_verification",
    "sign",
]

WEBHOOK_TRIES = 5
WEBHOOK_TIMEOUT = 5.0
_STATE_EVENTS = {
    JobState.RUNNING: EventKind.JOB_RUNNING,
    JobState.FAILED: EventKind.JOB_FAILED,
    JobState.SUCCEEDED: EventKind.JOB_SUCCEEDED,
}


def sign(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def _queue(task: str, object_id: int) -> None:
    """Queue a task of `jobs.tasks` (routed to the `notifications` queue by
    `CELERY_TASK_ROUTES`). Imported here, not at the top: that module imports this one, and
    a process that never imported it (a web worker deciding a verification) must still find
    the task."""
    from jobs import tasks

    getattr(tasks, task).delay(object_id)


def _record(*, key: str, kind: EventKind, team: Team, payload: dict[str, Any],
            **about: Any) -> bool:
    """Insert the event once (by key) and queue its delivery after the commit."""
    with transaction.atomic():
        event, created = NotificationEvent.objects.get_or_create(
            key=key, defaults={"kind": kind, "team": team, "payload": payload, **about})
        if created:
            transaction.on_commit(lambda: _queue("notify_event", event.pk))
    return created


def emit(*, kind: EventKind, record: RunRecord, key: str = "",
         details: dict[str, Any] | None = None) -> bool:
    """Record a run's event once (by key) and queue its delivery after the commit."""
    payload = {"kind": str(kind), "team": record.team.slug, "job": record.job_name,
               "run_record": record.pk, "cluster": record.cluster, **(details or {})}
    return _record(key=key or f"{kind}:{record.pk}", kind=kind, team=record.team,
                   payload=payload, run_record=record)


_TRANSITION_EVENTS = {
    "requested": EventKind.VERIFICATION_REQUESTED,
    "approved": EventKind.VERIFICATION_DECIDED,
    "rejected": EventKind.VERIFICATION_DECIDED,
    "stale": EventKind.VERIFICATION_STALE,
}


def _verification_payload(verification: Verification) -> dict[str, Any]:
    drift = verification.drift or {}
    return {
        "team": verification.team.slug, "cluster": verification.cluster.name,
        "verification": verification.pk, "selector": verification.selector_key,
        "state": verification.state,
        "requested_by": verification.requested_by.get_username(),
        "job": verification.requested_for_job, "role": verification.requested_for_role,
        "decided_by": (verification.decided_by.get_username()
                       if verification.decided_by else ""),
        "note": verification.decision_note,
        "nodes_added": len(drift.get("added") or []),
        "nodes_removed": len(drift.get("removed") or []),
    }


def emit_verification(*, verification: Verification, transition: str) -> bool:
    """Record a verification's transition (requested, approved, rejected, stale) once and
    queue its delivery after the commit; other transitions are not events."""
    kind = _TRANSITION_EVENTS.get(transition)
    if kind is None:
        return False
    payload = {"kind": str(kind), **_verification_payload(verification)}
    return _record(key=f"{kind}:{verification.pk}", kind=kind, team=verification.team,
                   payload=payload, verification=verification)


def emit_run_changes(records: Iterable[RunRecord]) -> int:
    """Emit the state events the runs have reached (each once, by key).

    A status pass calls this with every active run of a cluster, each pass: the runs' states
    as stored now and the events already recorded are read in two queries whatever the
    number of runs, and only an event not recorded yet is written (with its team, read once
    per team), so a pass over thousands of runs that reached nothing new costs two queries.
    """
    runs = {record.pk: record for record in records}
    if not runs:
        return 0
    stored = (RunRecord.objects.filter(pk__in=runs).order_by()
              .values_list("pk", "state", "pending_flagged", "cause"))
    wanted: list[tuple[str, EventKind, RunRecord, str]] = []
    causes: dict[int, dict[str, Any]] = {}
    for pk, state, flagged, cause in stored:
        record = runs[pk]
        causes[pk] = cause or {}
        kind = _STATE_EVENTS.get(JobState(state)) if state in JobState.values else None
        if kind is not None:
            wanted.append((f"{kind}:{pk}", kind, record, state))
        if flagged:
            kind = EventKind.PENDING_OVERDUE
            wanted.append((f"{kind}:{pk}", kind, record, state))
    if not wanted:
        return 0
    recorded = set(NotificationEvent.objects.filter(
        key__in=[key for key, *_rest in wanted]).order_by().values_list("key", flat=True))
    missing = [item for item in wanted if item[0] not in recorded]
    teams = Team.objects.in_bulk({record.team_id for _key, _kind, record, _state in missing})
    emitted = 0
    for key, kind, record, state in missing:
        record.team = teams[record.team_id]
        details: dict[str, Any] = {"state": state}
        if kind == EventKind.JOB_FAILED:  # the capture of this pass has offered its cause
            details["cause"] = causes.get(record.pk) or None
        if kind == EventKind.PENDING_OVERDUE:
            details.update(_pending_details(record))
        emitted += emit(kind=kind, record=record, key=key, details=details)
    return emitted


def _pending_details(record: RunRecord) -> dict[str, Any]:
    """What a `pending_overdue` event carries of why the run waits (SPEC 15): `pending` as
    the API shows it, its summary in the site's language (webhooks have no reader's
    language; each email is written in its recipient's from the same facts)."""
    with translation.override(settings.LANGUAGE_CODE):
        view = pending_view(record.pending if isinstance(record.pending, dict) else {})
    if view is None:
        return {}
    return {"pending": view, "pending_facts": record.pending}


def _audience(event: NotificationEvent) -> Q:
    """Who may get the event's email: platform admins for a new verification request, the
    requester for its decision or staleness, the team's members for a run's events."""
    if event.kind in ADMIN_EVENTS:
        return Q(user__is_staff=True)
    if event.kind in VERIFICATION_EVENTS:
        requester = (Verification.objects.filter(pk=event.verification_id or 0)
                     .values_list("requested_by_id", flat=True).first())
        return Q(user_id=requester)
    return Q(user__memberships__team=event.team_id)


def _recipients(event: NotificationEvent) -> list[NotificationPreference]:
    """The users of the audience who chose the event, are active and have an address."""
    return [
        pref for pref in NotificationPreference.objects.filter(
            _audience(event), user__is_active=True).exclude(user__email="")
        .select_related("user").distinct().order_by("user_id")
        if event.kind in pref.email_events
    ]


def _link(event: NotificationEvent, *, admin: bool) -> str:
    if event.kind in ADMIN_EVENTS and admin:
        path = reverse("clusters:queue") + "?" + urlencode(
            {"state": "pending", "cluster": event.payload.get("cluster", "")})
    elif event.kind in VERIFICATION_EVENTS:
        path = reverse("clusters:verifications")
    else:
        path = reverse("jobs:job-detail", args=[event.payload["job"]])
    return settings.RLARK_BASE_URL.rstrip("/") + path


def _message(event: NotificationEvent, pref: NotificationPreference) -> tuple[str, str]:
    """The subject and body, in the recipient's language."""
    template = "verification" if event.kind in VERIFICATION_EVENTS else "email"
    with translation.override(pref.language or settings.LANGUAGE_CODE):
        facts = event.payload.get("pending_facts")
        context = {"event": event, "kind": EventKind(event.kind).label,
                   "payload": event.payload, "base_url": settings.RLARK_BASE_URL,
                   "cause_label": cause_label(event.payload.get("cause")),
                   "link": _link(event, admin=pref.user.is_staff),
                   "pending_summary": summary(facts) if isinstance(facts, dict) else ""}
        subject = render_to_string(f"jobs/notify/{template}_subject.txt", context).strip()
        body = render_to_string(f"jobs/notify/{template}_body.txt", context)
    return " ".join(subject.split()), body


def _send_emails(event: NotificationEvent) -> int:
    claimed = NotificationEvent.objects.filter(pk=event.pk, emailed_at__isnull=True).update(
        emailed_at=timezone.now())
    if not claimed:
        return 0
    sent = 0
    for pref in _recipients(event):
        subject, body = _message(event, pref)
        sent += send_mail(subject, body, None, [pref.user.email])
    return sent


def deliver_event(event_id: int) -> None:
    """Email the users who chose this event; queue one delivery per enabled team webhook."""
    event = NotificationEvent.objects.select_related("team").get(pk=event_id)
    _send_emails(event)
    webhook = TeamWebhook.objects.filter(team=event.team, enabled=True).first()
    if webhook is None:
        return
    delivery, created = WebhookDelivery.objects.get_or_create(
        event=event, webhook=webhook, defaults={"url": webhook.url})
    if created:
        _queue("notify_webhook", delivery.pk)


_NOT_SENT = frozenset({"pending_facts"})  # kept for the emails' own language, not sent


def _body(event: NotificationEvent) -> bytes:
    shown = {key: value for key, value in event.payload.items() if key not in _NOT_SENT}
    document = {"event": event.key, "at": event.created_at.isoformat(), **shown}
    return json.dumps(document, sort_keys=True).encode()


def deliver_webhook(delivery_id: int) -> float | None:
    """One try of a webhook delivery; the pause before the next try, or None when done."""
    delivery = WebhookDelivery.objects.select_related("event", "webhook").get(pk=delivery_id)
    if delivery.delivered_at is not None or delivery.gave_up_at is not None:
        return None
    body = _body(delivery.event)
    timestamp = str(int(time.time()))
    secret = decrypt(delivery.webhook.secret_encrypted)
    answer = egress.post(delivery.url, body=body, timeout=WEBHOOK_TIMEOUT,
                         allowed=egress.allowed_networks(), headers={
        "Content-Type": "application/json",
        "X-RLark-Event": delivery.event.key, "X-RLark-Timestamp": timestamp,
        "X-RLark-Signature": sign(secret, timestamp, body),
    })
    status = answer.status
    ok = status is not None and 200 <= status < 300
    tries = delivery.attempts + 1
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        attempts=F("attempts") + 1, status_codes=[*delivery.status_codes, status],
        last_error="" if ok else str(answer.error or f"HTTP {status}"),
        delivered_at=now if ok else None,
        gave_up_at=now if not ok and tries >= WEBHOOK_TRIES else None,
    )
    if ok or tries >= WEBHOOK_TRIES:
        return None
    return float(settings.RLARK_WEBHOOK_RETRY_BASE) * 2 ** (tries - 1)


SECRET_MIN, SECRET_MAX = 16, 200


def webhook_save(*, team: Any, url: str, enabled: bool,
                 secret: str | None) -> tuple[TeamWebhook, str]:
    """Set the team's webhook, the secret stored encrypted. `secret` None keeps the stored
    one; with none stored, RLark generates one. Returns the webhook and the generated secret
    ("" when none was generated), to be shown once. The URL is checked by the one webhook
    rule (the form and the API checked it already; this holds for any other caller)."""
    validate_webhook_url(url)
    generated = ""
    with transaction.atomic():
        current = TeamWebhook.objects.select_for_update().filter(team=team).first()
        if secret is None and current is None:
            secret = generated = secrets.token_urlsafe(32)
        values: dict[str, Any] = {"url": url, "enabled": enabled}
        if secret is not None:
            values["secret_encrypted"] = encrypt(secret)
        webhook, _created = TeamWebhook.objects.update_or_create(team=team, defaults=values)
    return webhook, generated


def webhook_set(*, team: Any, url: str, secret: str, enabled: bool) -> TeamWebhook:
    """Set (or replace) the team's webhook; the secret is stored encrypted."""
    return webhook_save(team=team, url=url, enabled=enabled, secret=secret)[0]


def preferences_set(*, user: Any, email_events: list[str], language: str
                    ) -> NotificationPreference:
    with transaction.atomic():
        preference, _created = NotificationPreference.objects.update_or_create(
            user=user, defaults={"email_events": sorted(set(email_events)),
                                 "language": language})
    return preference
