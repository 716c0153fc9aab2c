"""Notifications: exactly once per event, signed webhooks against a loopback receiver (with
retries after 500s and a delivery log), and emails in the recipient's language."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app
from django.core import mail
from django.urls import reverse

from jobs.models import (
    EventKind,
    NotificationEvent,
    RunRecord,
    TeamWebhook,
    WebhookDelivery,
)
from jobs.notify.services import emit, preferences_set, webhook_set
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.notify_support import SECRET, Receiver
from tests.jobs.observe_support import CLUSTER, NAMESPACE

pytestmark = pytest.mark.django_db

@pytest.fixture(autouse=True)
def eager_tasks(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_WEBHOOK_RETRY_BASE = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    clear_prefix(OBSERVE_PREFIX)
    yield
    current_app.conf.task_always_eager = before
    clear_prefix(OBSERVE_PREFIX)


def test_a_running_job_is_sent_once_signed(running: RunRecord, team: Team, receiver: Receiver,
                                           django_capture_on_commit_callbacks: Any) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    for _ in range(3):  # every pass sees Running; the event is sent once
        with django_capture_on_commit_callbacks(execute=True):
            sync_submitted_jobs()
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_RUNNING).count() == 1
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    expected = hmac.new(SECRET.encode(), headers["x-rlark-timestamp"].encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    assert headers["x-rlark-signature"] == f"sha256={expected}"
    document = json.loads(body)
    assert (document["kind"], document["job"], document["state"]) == (
        "job_running", "ppo-run", "running")
    assert headers["x-rlark-event"] == document["event"] == f"job_running:{running.pk}"


def test_failures_are_retried_and_logged(running: RunRecord, team: Team, receiver: Receiver,
                                         owner: Any, api_client_for: Any,
                                         django_capture_on_commit_callbacks: Any) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    receiver.answers = [500, 500]
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.attempts, delivery.status_codes) == (3, [500, 500, 200])
    assert delivery.delivered_at is not None
    assert len(receiver.received) == 3
    log = api_client_for(owner).get(reverse("api:team-webhook-deliveries", args=[team.slug]))
    assert [(row["event"], row["status_codes"]) for row in log.json()] == [
        (f"job_running:{running.pk}", [500, 500, 200])]


def test_a_webhook_that_keeps_failing_is_given_up(running: RunRecord, team: Team,
                                                  receiver: Receiver,
                                                  django_capture_on_commit_callbacks: Any
                                                  ) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    receiver.answers = [500] * 10
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.attempts, delivery.delivered_at) == (5, None)
    assert delivery.gave_up_at is not None and delivery.last_error == "HTTP 500"


def test_a_rolled_back_emit_sends_nothing(running: RunRecord, receiver: Receiver, team: Team,
                                          django_capture_on_commit_callbacks: Any) -> None:
    from django.db import transaction

    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                emit(kind=EventKind.JOB_FAILED, record=running)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    assert callbacks == []
    assert not NotificationEvent.objects.filter(kind=EventKind.JOB_FAILED).exists()
    assert receiver.received == []


def test_emails_go_to_those_who_chose_the_event_in_their_language(
    running: RunRecord, owner: Any, member: Any, demo_simulator: Any,
    django_capture_on_commit_callbacks: Any
) -> None:
    owner.email, member.email = "owner@example.com", "member@example.com"
    owner.save(update_fields=["email"])
    member.save(update_fields=["email"])
    preferences_set(user=owner, email_events=["job_failed"], language="zh-hans")
    preferences_set(user=member, email_events=["job_failed", "job_running"], language="en")
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, "ppo-run", "Failed")
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
        sync_submitted_jobs()
    sent = {(message.to[0], message.subject) for message in mail.outbox}
    assert sent == {
        ("member@example.com", "[RLark] ppo-run: job Running"),
        ("member@example.com", "[RLark] ppo-run: job Failed"),
        ("owner@example.com", "[RLark] ppo-run: 任务失败"),
    }
    chinese = next(m for m in mail.outbox if m.to == ["owner@example.com"])
    assert "团队" in chinese.body and "/jobs/job/ppo-run/" in chinese.body
    english = next(m for m in mail.outbox if m.subject.endswith("job Failed"))
    assert "Job ppo-run of team" in english.body


def test_only_maintainers_set_the_webhook(team: Team, owner: Any, member: Any,
                                          outsider: Any, api_client_for: Any) -> None:
    url = reverse("api:team-webhook", args=[team.slug])
    body = {"url": "https://hooks.example.com/rlark", "secret": SECRET}
    assert api_client_for(member).put(url, body, format="json").status_code == 403
    assert api_client_for(outsider).put(url, body, format="json").status_code == 404
    answer = api_client_for(owner).put(url, body, format="json")
    assert answer.status_code == 200 and "secret" not in answer.json()
    short = {"url": "https://hooks.example.com/rlark", "secret": "short"}
    assert api_client_for(owner).put(url, short, format="json").status_code == 400


def test_the_api_refuses_a_webhook_url_that_is_not_http(team: Team, owner: Any,
                                                        api_client_for: Any) -> None:
    url = reverse("api:team-webhook", args=[team.slug])
    body = {"url": "ftp://hooks.example.com/rlark", "secret": SECRET}
    answer = api_client_for(owner).put(url, body, format="json")
    assert answer.status_code == 400
    assert "A webhook URL must start with http:// or https://." in str(answer.json())
    assert not TeamWebhook.objects.filter(team=team).exists()
    garbage = api_client_for(owner).put(url, {**body, "url": "not a url"}, format="json")
    assert garbage.status_code == 400
    assert garbage.json()["errors"] == {"url": ["Enter a valid URL."]}


def test_preferences_choose_known_events(owner: Any, api_client_for: Any) -> None:
    url = reverse("api:notification-preferences")
    client = api_client_for(owner)
    assert client.get(url).json() == {"email_events": [], "language": "en"}
    assert client.put(url, {"email_events": ["nope"]}, format="json").status_code == 400
    saved = client.put(url, {"email_events": ["signal_seen", "job_failed"],
                             "language": "zh-hans"}, format="json")
    assert saved.json() == {"email_events": ["job_failed", "signal_seen"],
                            "language": "zh-hans"}
