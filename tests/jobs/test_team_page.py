"""The team page: members and the webhook settings and delivery log. Maintainers (and platform
admins) set the URL and the write-only secret; members see but cannot change; outsiders get
404."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pghistory.models import Events

from clusters.credentials import decrypt
from clusters.models import Cluster
from clusters.verifications.services import verification_request
from jobs.models import NotificationEvent, TeamWebhook, WebhookDelivery
from jobs.notify.services import webhook_set
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.notify_support import SECRET

pytestmark = pytest.mark.django_db

URL = "https://hooks.example.com/rlark"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_of(team: Team, **query: Any) -> str:
    return reverse("teams:detail", args=[team.slug]) + (
        "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def deliveries(team: Team, member: Any, count: int) -> list[WebhookDelivery]:
    """`count` deliveries of the team's webhook, oldest first (one verification event each)."""
    load_fleet_rows()
    webhook = TeamWebhook.objects.get(team=team)
    verification = verification_request(team=team, user=member,
                                        cluster=Cluster.objects.get(name="gpu-a"),
                                        selector={"rlinf.io/gpu-model": "a100",
                                                  "topology.rlinf.io/cluster": "gpu-a"})
    made = []
    start = timezone.now() - timedelta(hours=1)
    for number in range(count):
        event = NotificationEvent.objects.create(
            key=f"verification_decided:test-{number}", kind="verification_decided", team=team,
            verification=verification, payload={})
        delivery = WebhookDelivery.objects.create(event=event, webhook=webhook, url=URL,
                                                  attempts=2, status_codes=[500, 204],
                                                  delivered_at=timezone.now())
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            created_at=start + timedelta(minutes=number))
        made.append(delivery)
    return made


def test_a_maintainer_sets_the_webhook_and_the_secret_is_never_shown(
    team: Team, owner: Any
) -> None:
    web = signed_in(owner)
    answer = web.post(page_of(team), {"url": URL, "secret": SECRET, "enabled": "on"})
    assert answer.status_code == 302
    webhook = TeamWebhook.objects.get(team=team)
    assert (webhook.url, webhook.enabled, decrypt(webhook.secret_encrypted)) == (URL, True, SECRET)
    page = web.get(page_of(team)).content.decode()
    assert URL in page and "stored (encrypted), never shown" in page
    assert SECRET not in page and webhook.secret_encrypted not in page
    event = Events.objects.filter(pgh_model="jobs.TeamWebhookEvent").latest("pgh_created_at")
    assert event.pgh_context["user"] == owner.pk and "secret_encrypted" not in event.pgh_data


def test_a_blank_secret_keeps_the_stored_one(team: Team, owner: Any) -> None:
    webhook_set(team=team, url=URL, secret=SECRET, enabled=True)
    signed_in(owner).post(page_of(team), {"url": "https://other.example.com/hook", "secret": ""})
    webhook = TeamWebhook.objects.get(team=team)
    assert (webhook.url, webhook.enabled, decrypt(webhook.secret_encrypted)) == (
        "https://other.example.com/hook", False, SECRET)


def test_without_a_secret_rlark_generates_one_and_shows_it_once(team: Team, owner: Any) -> None:
    web = signed_in(owner)
    answer = web.post(page_of(team), {"url": URL, "secret": "", "enabled": "on"})
    secret = decrypt(TeamWebhook.objects.get(team=team).secret_encrypted)
    assert answer.status_code == 200 and len(secret) >= 32
    assert secret in answer.content.decode()
    assert secret not in web.get(page_of(team)).content.decode()


@pytest.mark.parametrize(("url", "secret", "message"), [
    ("ftp://hooks.example.com/x", SECRET, "A webhook URL must start with http:// or https://."),
    ("javascript:alert(1)", SECRET, "Enter a valid URL."),
    (URL, "short", "Ensure this value has at least 16 characters"),
])
def test_bad_settings_are_refused_and_nothing_is_saved(team: Team, owner: Any, url: str,
                                                       secret: str, message: str) -> None:
    answer = signed_in(owner).post(page_of(team), {"url": url, "secret": secret})
    assert answer.status_code == 200 and answer.content.decode().count(message) == 1
    assert secret not in answer.content.decode()
    assert not TeamWebhook.objects.exists()


def test_members_see_the_webhook_and_log_but_cannot_change_them(team: Team, member: Any) -> None:
    webhook_set(team=team, url=URL, secret=SECRET, enabled=True)
    deliveries(team, member, 1)
    web = signed_in(member)
    page = web.get(page_of(team)).content.decode()
    assert URL in page and "verification_decided:test-0" in page
    assert 'name="secret"' not in page and SECRET not in page
    refused = web.post(page_of(team), {"url": "https://evil.example.com/", "secret": SECRET * 2})
    assert refused.status_code == 403
    assert TeamWebhook.objects.get(team=team).url == URL


def test_outsiders_get_404(team: Team, outsider: Any) -> None:
    webhook_set(team=team, url=URL, secret=SECRET, enabled=True)
    web = signed_in(outsider)
    assert web.get(page_of(team)).status_code == 404
    assert web.post(page_of(team), {"url": "https://evil.example.com/",
                                    "secret": SECRET}).status_code == 404
    assert TeamWebhook.objects.get(team=team).url == URL
    assert team.slug not in web.get(reverse("teams:list")).content.decode()


def test_platform_admins_manage_any_team(team: Team, admin_user: Any) -> None:
    web = signed_in(admin_user)
    assert team.slug in web.get(reverse("teams:list")).content.decode()
    assert web.post(page_of(team), {"url": URL, "secret": SECRET}).status_code == 302
    assert TeamWebhook.objects.get(team=team).enabled is False


def test_the_delivery_log_shows_status_codes_attempts_and_time_a_page_at_a_time(
    team: Team, owner: Any, member: Any
) -> None:
    webhook_set(team=team, url=URL, secret=SECRET, enabled=True)
    made = deliveries(team, member, 30)
    web = signed_in(member)
    first = web.get(page_of(team)).content.decode()
    assert first.count('data-delivery="') == 25
    assert 'data-delivery="verification_decided:test-29"' in first  # newest first
    assert 'data-delivery="verification_decided:test-4"' not in first
    assert "500, 204" in first and "1 / 2" in first
    second = web.get(page_of(team, page=2)).content.decode()
    assert second.count('data-delivery="') == 5
    assert 'data-delivery="verification_decided:test-0"' in second
    made[0].refresh_from_db()
    assert made[0].created_at.strftime("%Y-%m-%d %H:%M:%S") in second
