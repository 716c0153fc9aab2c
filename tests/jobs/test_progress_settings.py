"""The launch list's `progress` settings: API and page, defaults, clear refusals in both
languages, audited, frozen into the run record."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from jobs.models import LaunchList
from jobs.records.snapshots import launch_list_snapshot
from rlark_site.foundation.tenancy.models import Team

LISTS = "/api/v1/launch-lists/"
DEFAULTS = {"pattern": "", "stall_after_seconds": 1800, "cancel_after_stalled_seconds": None}


@pytest.mark.django_db
def test_a_launch_list_without_settings_answers_the_defaults(owner: Any,
                                                             api_client_for: Any) -> None:
    answer = api_client_for(owner).post(LISTS, {"title": "plain"}, format="json")
    assert answer.status_code == 201
    assert answer.json()["progress"] == DEFAULTS


@pytest.mark.django_db
def test_settings_are_stored_with_missing_fields_defaulted(owner: Any,
                                                           api_client_for: Any) -> None:
    body = {"title": "t", "progress": {"pattern": r"step (?P<step>\d+)",
                                       "cancel_after_stalled_seconds": 7200}}
    answer = api_client_for(owner).post(LISTS, body, format="json")
    assert answer.status_code == 201, answer.json()
    stored = LaunchList.objects.get(pk=answer.json()["id"])
    assert stored.progress == {"pattern": r"step (?P<step>\d+)", "stall_after_seconds": 1800,
                               "cancel_after_stalled_seconds": 7200}


@pytest.mark.django_db
@pytest.mark.parametrize("progress, field", [
    ({"pattern": r"(?P<step>\d+)(?=ms)"}, "pattern"),
    ({"pattern": r"(\d+)"}, "pattern"),
    ({"stall_after_seconds": 30}, "stall_after_seconds"),
    ({"stall_after_seconds": "soon"}, "stall_after_seconds"),
    ({"cancel_after_stalled_seconds": 10**12}, "cancel_after_stalled_seconds"),
])
def test_bad_settings_are_refused_with_the_field_and_nothing_stored(
        owner: Any, api_client_for: Any, progress: dict[str, Any], field: str) -> None:
    answer = api_client_for(owner).post(LISTS, {"title": "t", "progress": progress},
                                        format="json")
    assert answer.status_code == 400
    assert field in str(answer.json())
    assert not LaunchList.objects.exists()


@pytest.mark.django_db
def test_the_refusal_is_in_chinese_for_a_chinese_client(owner: Any,
                                                        api_client_for: Any) -> None:
    client = api_client_for(owner)
    answer = client.post(LISTS, {"title": "t", "progress": {"pattern": r"(\d+)"}},
                         format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert answer.status_code == 400
    with translation.override("zh-hans"):
        assert "step" in str(answer.json()) and "命名" in str(answer.json())


@pytest.mark.django_db
def test_the_page_saves_the_three_settings_and_refuses_a_lookaround(team: Team,
                                                                    owner: Any) -> None:
    client = Client()
    client.force_login(owner)
    url = reverse("jobs:launch-list-create")
    refused = client.post(url, {"title": "t", "progress_pattern": r"(?<=x)(?P<step>\d+)"})
    assert refused.status_code == 200
    assert "linear time" in refused.content.decode()
    assert not LaunchList.objects.exists()
    saved = client.post(url, {"title": "t", "progress_pattern": r"it (?P<step>\d+)",
                              "stall_after_seconds": "900",
                              "cancel_after_stalled_seconds": ""})
    assert saved.status_code == 302
    assert LaunchList.objects.get().progress == {
        "pattern": r"it (?P<step>\d+)", "stall_after_seconds": 900,
        "cancel_after_stalled_seconds": None}


@pytest.mark.django_db
def test_a_change_of_the_settings_is_audited(owner: Any, api_client_for: Any) -> None:
    client = api_client_for(owner)
    created = client.post(LISTS, {"title": "t"}, format="json").json()
    client.patch(f"{LISTS}{created['id']}/", {"progress": {"stall_after_seconds": 600}},
                 format="json")
    events = LaunchList.pgh_event_model.objects.filter(pgh_obj_id=created["id"]).order_by(
        "pgh_id")
    assert [e.progress.get("stall_after_seconds") for e in events] == [None, 600]
    assert events.last().pgh_context.metadata["user"] == owner.pk


@pytest.mark.django_db
def test_the_run_record_freezes_the_settings(team: Team, owner: Any) -> None:
    launch_list = LaunchList.objects.create(
        team=team, title="t", created_by=owner,
        progress={"pattern": "", "stall_after_seconds": 120,
                  "cancel_after_stalled_seconds": None})
    assert launch_list_snapshot(launch_list)["progress"] == {
        **DEFAULTS, "stall_after_seconds": 120}
