"""Verification notifications through the real services: a new request emails the platform
admins who chose it, a decision or an approval gone stale emails the requester who chose it,
each in their language; each event once, only after the commit; the team's webhook gets them
signed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core import mail
from django.db import transaction
from django.urls import reverse

from clusters.models import Cluster, Node, Verification
from clusters.verifications.services import (
    verification_approve,
    verification_reject,
    verification_request,
    verifications_follow_inventory,
)
from jobs.models import EventKind, NotificationEvent
from jobs.notify.services import preferences_set, webhook_set
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import make_user
from tests.factories import load_fleet_rows
from tests.jobs.notify_support import SECRET, Receiver, signature_ok

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_notifications")]

A100_IN_A = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}
SELECTOR_TEXT = "rlinf.io/gpu-model=a100,topology.rlinf.io/cluster=gpu-a"
ALL_VERIFICATION_EVENTS = ["verification_requested", "verification_decided",
                           "verification_stale"]


@pytest.fixture(autouse=True)
def demo_inventory(settings: Any) -> None:
    settings.RLARK_BASE_URL = "https://rlark.example.com"
    load_fleet_rows()


def gpu_a() -> Cluster:
    return Cluster.objects.get(name="gpu-a")


def wants(user: Any, address: str, events: list[str], language: str = "en") -> Any:
    user.email = address
    user.save(update_fields=["email"])
    preferences_set(user=user, email_events=events, language=language)
    return user


def request(team: Team, user: Any, capture: Any, **kwargs: Any) -> Verification:
    with capture(execute=True):
        return verification_request(team=team, user=user, cluster=gpu_a(), selector=A100_IN_A,
                                    job_name="ppo-run", role_name="Actor", **kwargs)


def to(address: str) -> list[Any]:
    return [message for message in mail.outbox if message.to == [address]]


def test_a_request_emails_the_admins_who_chose_it_once(
    team: Team, member: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    wants(admin_user, "admin@example.com", ["verification_requested"])
    wants(make_user("admin-zh", is_staff=True), "zh@example.com", ALL_VERIFICATION_EVENTS,
          "zh-hans")
    wants(make_user("admin-quiet", is_staff=True), "quiet@example.com", ["job_failed"])
    wants(member, "member@example.com", ALL_VERIFICATION_EVENTS)  # not an admin
    verification = request(team, member, django_capture_on_commit_callbacks)
    request(team, member, django_capture_on_commit_callbacks)  # the same request, reused
    assert NotificationEvent.objects.filter(kind=EventKind.VERIFICATION_REQUESTED).count() == 1
    assert sorted(m.to[0] for m in mail.outbox) == ["admin@example.com", "zh@example.com"]
    english = to("admin@example.com")[0]
    assert english.subject == f"[RLark] vision-rl: verification requested (gpu-a: {SELECTOR_TEXT})"
    assert "Verification request of team vision-rl on cluster gpu-a" in english.body
    assert "Requested by: member (job ppo-run, role Actor)" in english.body
    assert ("https://rlark.example.com/clusters/verifications/queue/?state=pending&cluster=gpu-a"
            in english.body)
    chinese = to("zh@example.com")[0]
    assert chinese.subject == f"[RLark] vision-rl: 已申请核验 (gpu-a: {SELECTOR_TEXT})"
    assert "团队 vision-rl" in chinese.body and "申请人: member" in chinese.body
    assert verification.pk == NotificationEvent.objects.get().verification_id


def test_nothing_is_sent_before_the_commit_nor_after_a_rollback(
    team: Team, member: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    wants(admin_user, "admin@example.com", ["verification_requested"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            verification_request(team=team, user=member, cluster=gpu_a(), selector=A100_IN_A)
            raise RuntimeError("rolled back")
    assert callbacks == [] and not NotificationEvent.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        verification_request(team=team, user=member, cluster=gpu_a(), selector=A100_IN_A)
    assert mail.outbox == [] and len(callbacks) == 1
    callbacks[0]()
    assert [m.to for m in mail.outbox] == [["admin@example.com"]]


def test_a_decision_emails_the_requester_in_their_language(
    team: Team, member: Any, owner: Any, admin_user: Any,
    django_capture_on_commit_callbacks: Any
) -> None:
    wants(member, "member@example.com", ["verification_decided"], "zh-hans")
    wants(owner, "owner@example.com", ALL_VERIFICATION_EVENTS)  # same team, not the requester
    rejected = request(team, member, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        verification_reject(verification_id=rejected.pk, admin=admin_user,
                            note="These GPUs are reserved")
    assert [m.to[0] for m in mail.outbox] == ["member@example.com"]
    message = mail.outbox[0]
    assert message.subject == f"[RLark] vision-rl: 核验已有结论 (gpu-a: {SELECTOR_TEXT})"
    assert "状态: 已拒绝" in message.body and "备注: These GPUs are reserved" in message.body
    assert "处理人: platform-admin" in message.body
    assert "https://rlark.example.com/clusters/verifications/" in message.body

    mail.outbox.clear()
    wants(owner, "owner@example.com", ["verification_decided"])
    approved = request(team, owner, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        verification_approve(verification_id=approved.pk, admin=admin_user, note="fine")
    assert [(m.to[0], m.subject) for m in mail.outbox] == [
        ("owner@example.com", f"[RLark] vision-rl: verification decided (gpu-a: {SELECTOR_TEXT})")]
    assert "State: approved" in mail.outbox[0].body


def test_an_approval_gone_stale_emails_the_requester_once(
    team: Team, member: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    wants(member, "member@example.com", ["verification_stale"])
    verification = request(team, member, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        verification_approve(verification_id=verification.pk, admin=admin_user)
    assert mail.outbox == []
    Node.objects.filter(name="a-node-03").update(labels={"rlinf.io/gpu-model": "h100"})
    Node.objects.filter(name="a-cpu-01").update(labels=A100_IN_A)
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            verifications_follow_inventory(cluster=gpu_a())
    assert [(m.to[0], m.subject) for m in mail.outbox] == [
        ("member@example.com",
         f"[RLark] vision-rl: verification gone stale (gpu-a: {SELECTOR_TEXT})")]
    assert "The matched nodes changed since the approval: 1 added, 1 removed." in (
        mail.outbox[0].body)


def test_the_team_webhook_gets_each_verification_event_signed(
    team: Team, member: Any, admin_user: Any, receiver: Receiver,
    django_capture_on_commit_callbacks: Any
) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    verification = request(team, member, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    documents = [json.loads(body) for _headers, body in receiver.received]
    assert all(signature_ok(headers, body) for headers, body in receiver.received)
    assert [(d["kind"], d["state"], d["event"]) for d in documents] == [
        ("verification_requested", "pending", f"verification_requested:{verification.pk}"),
        ("verification_decided", "approved", f"verification_decided:{verification.pk}"),
    ]
    assert documents[1] | {"at": None} == {
        "at": None, "event": f"verification_decided:{verification.pk}",
        "kind": "verification_decided", "team": "vision-rl", "cluster": "gpu-a",
        "verification": verification.pk, "selector": SELECTOR_TEXT, "state": "approved",
        "requested_by": "member", "job": "ppo-run", "role": "Actor",
        "decided_by": "platform-admin", "note": "ok", "nodes_added": 0, "nodes_removed": 0,
    }


def test_preferences_offer_the_verification_events(owner: Any, api_client_for: Any) -> None:
    answer = api_client_for(owner).put(
        reverse("api:notification-preferences"),
        {"email_events": ALL_VERIFICATION_EVENTS, "language": "zh-hans"}, format="json")
    assert answer.status_code == 200
    assert answer.json()["email_events"] == sorted(ALL_VERIFICATION_EVENTS)
