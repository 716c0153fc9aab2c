"""The account page where the signed-in user chooses which events email them: the same
choices and the same service as `PUT notifications/preferences/`, audited, both languages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app
from django.core import mail
from django.test import Client
from django.urls import reverse
from pghistory.models import Events

from jobs.models import EventKind, NotificationPreference, RunRecord
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.observe_support import CLUSTER, NAMESPACE, running_job

pytestmark = pytest.mark.django_db

URL = "/account/notifications/"


def checked(page: str) -> set[str]:
    return set(re.findall(r'<input[^>]*value="([a-z_]+)"[^>]*checked', page))


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
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


def test_the_page_is_routed_and_linked_from_the_navigation(owner: Any) -> None:
    assert reverse("notification-preferences") == URL
    page = signed_in(owner).get(reverse("tokens")).content.decode()
    assert f'href="{URL}"' in page


def test_every_event_of_the_api_has_a_checkbox(owner: Any) -> None:
    answer = signed_in(owner).get(URL)
    assert answer.status_code == 200
    page = answer.content.decode()
    for kind in EventKind:
        assert f'value="{kind.value}"' in page
    assert checked(page) == set()  # none by default


def test_saving_stores_the_choice_through_the_service_and_is_audited(
    owner: Any, api_client_for: Any
) -> None:
    web = signed_in(owner)
    answer = web.post(URL, {"email_events": ["job_failed", "verification_decided"],
                            "language": "zh-hans"})
    assert answer.status_code == 302 and answer["Location"] == URL
    preference = NotificationPreference.objects.get(user=owner)
    assert (preference.email_events, preference.language) == (
        ["job_failed", "verification_decided"], "zh-hans")
    # the API reads what the page saved
    api = api_client_for(owner).get(reverse("api:notification-preferences")).json()
    assert api == {"email_events": ["job_failed", "verification_decided"],
                   "language": "zh-hans"}
    page = web.get(URL).content.decode()
    assert checked(page) == {"job_failed", "verification_decided"}
    event = Events.objects.filter(
        pgh_model="jobs.NotificationPreferenceEvent").latest("pgh_created_at")
    assert event.pgh_context["user"] == owner.pk
    assert event.pgh_data["email_events"] == ["job_failed", "verification_decided"]
    # unchecking everything stores no events
    assert web.post(URL, {"language": "en"}).status_code == 302
    assert NotificationPreference.objects.get(user=owner).email_events == []


def test_an_unknown_event_or_language_is_refused_and_nothing_is_saved(owner: Any) -> None:
    web = signed_in(owner)
    answer = web.post(URL, {"email_events": ["nope"], "language": "en"})
    assert answer.status_code == 200 and "nope" in answer.content.decode()
    answer = web.post(URL, {"email_events": ["job_failed"], "language": "fr"})
    assert answer.status_code == 200
    assert not NotificationPreference.objects.filter(user=owner).exists()


def test_anonymous_users_are_sent_to_log_in() -> None:
    answer = Client().get(URL)
    assert answer.status_code == 302 and answer["Location"].startswith(reverse("login"))
    assert Client().post(URL, {"language": "en"}).status_code == 302
    assert not NotificationPreference.objects.exists()


def test_the_page_renders_in_chinese(owner: Any) -> None:
    answer = signed_in(owner).get(URL, HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = answer.content.decode()
    assert answer["Content-Language"] == "zh-hans"
    assert "通知" in page and "保存" in page and "任务失败" in page


@pytest.mark.usefixtures("eager_tasks")
def test_the_choice_made_on_the_page_decides_who_gets_mail(
    demo_simulator: Any, team: Team, owner: Any, member: Any, admin_user: Any,
    django_capture_on_commit_callbacks: Any
) -> None:
    record: RunRecord = running_job(demo_simulator, team=team, owner=owner, admin=admin_user,
                                    capture=django_capture_on_commit_callbacks)
    owner.email, member.email = "owner@example.com", "member@example.com"
    owner.save(update_fields=["email"])
    member.save(update_fields=["email"])
    assert signed_in(owner).post(URL, {"email_events": ["job_failed"],
                                       "language": "en"}).status_code == 302
    assert signed_in(member).post(URL, {"email_events": ["job_running"],
                                        "language": "en"}).status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, record.job_name, "Failed")
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
    sent = {(message.to[0], message.subject) for message in mail.outbox}
    assert sent == {
        ("member@example.com", f"[RLark] {record.job_name}: job Running"),
        ("owner@example.com", f"[RLark] {record.job_name}: job Failed"),
    }
