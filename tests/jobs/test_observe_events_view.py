"""The job page's events and the events API's `summary`, read live from the simulator: Warnings
first, the Normal events grouped and collapsed, the same grouping in the API (both languages),
another team's job still 404."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs.models import RunRecord
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE

pytestmark = pytest.mark.django_db

PODS = 5  # the shared running job: the Header on one node, the Rollout on four
GROUPS = [("Pod", "Started"), ("Pod", "Created"), ("Pod", "Pulled"), ("Pod", "Scheduled"),
          ("Job", "SuccessfulCreate")]


@pytest.fixture(autouse=True)
def fresh_cache(settings: Any) -> Iterator[None]:
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 60.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def failed_head(running: RunRecord, demo_simulator: Any) -> RunRecord:
    """The running job whose head pod's container ended OOMKilled (a Warning event)."""
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "OOMKilled", "exitCode": 137})
    return running


def _live(client: Client, owner: Any, language: str = "en") -> str:
    client.force_login(owner)
    answer = client.get(reverse("jobs:job-live", args=["ppo-run"]),
                        headers={"accept-language": language})
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_api_summary_groups_the_normal_events_and_counts_the_warnings(
    failed_head: RunRecord, owner: Any, api_client_for: Any
) -> None:
    body = api_client_for(owner).get(reverse("api:job-events", args=["ppo-run"])).json()
    summary = body["summary"]
    assert summary["warning_count"] == 1
    assert summary["normal_count"] == 5 * PODS == len(
        [e for e in body["events"] if e["type"] == "Normal"])
    assert [(g["kind"], g["reason"]) for g in summary["normal_groups"]] == GROUPS
    started = summary["normal_groups"][0]
    assert set(started) == {"kind", "reason", "objects", "event_count", "count", "first_at",
                            "last_at", "message", "message_count"}
    assert started["event_count"] == started["count"] == PODS
    assert sorted(started["objects"]) == sorted(
        e["name"] for e in body["events"] if e["reason"] == "Started")
    assert started["message"] == "Started container main" and started["message_count"] == 1
    created = summary["normal_groups"][-1]
    assert created["objects"] == ["ppo-run"] and created["message_count"] == PODS
    assert min(e["first_at"] for e in body["events"]) <= created["first_at"] <= created["last_at"]
    # the events themselves are listed as before, newest first, the Warning among them
    assert len(body["events"]) == 5 * PODS + 1
    assert body["events"][0]["reason"] == "Failed" and body["events"][0]["type"] == "Warning"


def test_the_api_summary_is_empty_when_the_cluster_cannot_be_read(
    running: RunRecord, demo_simulator: Any, owner: Any, api_client_for: Any
) -> None:
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")
    body = api_client_for(owner).get(reverse("api:job-events", args=["ppo-run"])).json()
    assert body["error"] and body["events"] == []
    assert body["summary"] == {"warning_count": 0, "normal_count": 0, "normal_groups": []}


def test_another_teams_job_still_answers_404(running: RunRecord, outsider: Any,
                                             api_client_for: Any, client: Client) -> None:
    answer = api_client_for(outsider).get(reverse("api:job-events", args=["ppo-run"]))
    assert answer.status_code == 404 and "summary" not in answer.json()
    client.force_login(outsider)
    assert client.get(reverse("jobs:job-live", args=["ppo-run"])).status_code == 404


def test_the_page_shows_warnings_first_and_the_normal_events_collapsed_in_groups(
    failed_head: RunRecord, client: Client, owner: Any
) -> None:
    page = _live(client, owner)
    warnings = page.index('<table class="events warnings">')
    normal = page.index('<details class="normal-events" id="normal-events" data-keep-open>')
    assert page.index('id="events-heading"') < warnings < normal
    assert "1 warning</h3>" in page
    assert "Container main terminated: OOMKilled (exit code 137)" in page[warnings:normal]
    assert "Started container main" not in page[warnings:normal]  # no Normal event there
    assert f"{5 * PODS} Normal events in {len(GROUPS)} groups</summary>" in page
    rows = page[normal:].split("<tr data-event-group=")[1:]
    assert [row.split('"')[1] for row in rows] == [f"{kind}/{reason}" for kind, reason in GROUPS]
    started = rows[0]
    assert f"Pod × {PODS}" in started and HEAD_POD in started
    assert f"<td>{PODS}</td>" in started
    assert f"the newest of {PODS} different messages" in rows[-1]  # "Created pod: <pod>"


def test_without_warnings_the_page_says_so(running: RunRecord, client: Client,
                                           owner: Any) -> None:
    page = _live(client, owner)
    assert "No warnings." in page and '<table class="events warnings">' not in page
    assert f"{5 * PODS} Normal events in {len(GROUPS)} groups" in page


def test_the_events_are_chinese(failed_head: RunRecord, client: Client, owner: Any) -> None:
    page = _live(client, owner, "zh-hans")
    assert "1 条警告</h3>" in page
    assert f"{5 * PODS} 条 Normal 事件，分为 {len(GROUPS)} 组</summary>" in page
    assert "最新消息" in page and "首次出现" in page
