"""Launch lists, deployment parameters and audit events through the API (SPEC 12)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from clusters.models import Cluster
from clusters.verifications.services import verification_request
from jobs.drafts.services import job_create
from jobs.models import DeploymentParameters, LaunchList
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import CPU_SELECTOR, HEAD_SELECTOR, approved, role

pytestmark = pytest.mark.django_db

LISTS = "/api/v1/launch-lists/"
PARAMS = "/api/v1/deployment-parameters/"
SIGNAL = {"signal": "reward mean logged", "where": "Head Task log", "within_minutes": 15}


@pytest.fixture
def api(api_client_for: Callable[[Any], APIClient], owner: Any) -> APIClient:
    return api_client_for(owner)


@pytest.fixture
def outsider_api(api_client_for: Callable[[Any], APIClient], outsider: Any) -> APIClient:
    return api_client_for(outsider)


def create_list(api: APIClient, **body: Any) -> dict[str, Any]:
    response = api.post(LISTS, {"title": "first run", **body}, format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


def create_params(api: APIClient, **body: Any) -> dict[str, Any]:
    response = api.post(PARAMS, {"title": "placement", **body}, format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


# --- launch lists -----------------------------------------------------------------------------


def test_a_launch_list_is_created_in_the_users_team_with_its_signals(
    api: APIClient, team: Team
) -> None:
    created = create_list(api, entry="python -m rlinf.train", expected_signals=[SIGNAL])
    assert created["team"] == team.slug
    assert created["expected_signals"] == [SIGNAL]
    assert created["created_by"] == "owner"
    assert LaunchList.objects.get(pk=created["id"]).team == team


def test_a_signal_without_what_to_look_for_is_refused(api: APIClient) -> None:
    response = api.post(
        LISTS, {"title": "t", "expected_signals": [{"where": "log"}]}, format="json"
    )
    assert response.status_code == 400
    assert "expected_signals" in response.json()["detail"]
    assert not LaunchList.objects.exists()


def test_patch_changes_only_the_given_fields(api: APIClient) -> None:
    created = create_list(api, notes="keep me")
    response = api.patch(f"{LISTS}{created['id']}/", {"title": "renamed"}, format="json")
    assert response.status_code == 200
    assert (response.json()["title"], response.json()["notes"]) == ("renamed", "keep me")


def test_launch_lists_of_another_team_are_invisible_and_404(
    api: APIClient, outsider_api: APIClient
) -> None:
    created = create_list(api)
    assert outsider_api.get(LISTS).json()["results"] == []
    assert outsider_api.get(f"{LISTS}{created['id']}/").status_code == 404
    assert (
        outsider_api.patch(f"{LISTS}{created['id']}/", {"title": "x"}, format="json").status_code
        == 404
    )
    assert LaunchList.objects.get().title == "first run"


def test_creating_in_a_team_the_user_is_not_in_answers_404(
    api: APIClient, other_team: Team
) -> None:
    response = api.post(LISTS, {"title": "t", "team": other_team.slug}, format="json")
    assert response.status_code == 404


# --- linking the two records ------------------------------------------------------------------


def test_the_two_records_reference_each_other(api: APIClient) -> None:
    launch_list = create_list(api)
    params = create_params(api, launch_list=launch_list["id"])
    assert params["launch_list"] == launch_list["id"]
    assert api.get(f"{LISTS}{launch_list['id']}/").json()["deployment_parameters"] == params["id"]
    unlinked = api.patch(
        f"{LISTS}{launch_list['id']}/", {"deployment_parameters": None}, format="json"
    )
    assert unlinked.json()["deployment_parameters"] is None
    assert api.get(f"{PARAMS}{params['id']}/").json()["launch_list"] is None
    relinked = api.patch(
        f"{LISTS}{launch_list['id']}/", {"deployment_parameters": params["id"]}, format="json"
    )
    assert relinked.json()["deployment_parameters"] == params["id"]


def test_a_launch_list_links_one_set_of_parameters_only(api: APIClient) -> None:
    launch_list = create_list(api)
    create_params(api, launch_list=launch_list["id"])
    response = api.post(
        PARAMS, {"title": "second", "launch_list": launch_list["id"]}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["field"] == "launch_list"
    assert DeploymentParameters.objects.count() == 1


def test_records_of_another_team_cannot_be_linked(api: APIClient, outsider_api: APIClient) -> None:
    theirs = create_list(outsider_api)
    response = api.post(PARAMS, {"title": "p", "launch_list": theirs["id"]}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "launch_list"
    their_params = create_params(outsider_api)
    mine = create_list(api)
    response = api.patch(
        f"{LISTS}{mine['id']}/", {"deployment_parameters": their_params["id"]}, format="json"
    )
    assert response.status_code == 400
    assert DeploymentParameters.objects.get(pk=their_params["id"]).launch_list is None


# --- deployment parameters --------------------------------------------------------------------


def test_parameters_keep_roles_and_the_teams_verifications(
    api: APIClient, team: Team, other_team: Team, owner: Any, outsider: Any
) -> None:
    load_fleet_rows()
    gpu_a = Cluster.objects.get(name="gpu-a")
    mine = verification_request(team=team, user=owner, cluster=gpu_a, selector=HEAD_SELECTOR)
    theirs = verification_request(
        team=other_team, user=outsider, cluster=gpu_a, selector=HEAD_SELECTOR
    )
    roles = [
        {
            "role": "Actor",
            "cluster": "gpu-a",
            "selector": HEAD_SELECTOR,
            "gpus": 8,
            "mounts": [{"kind": "host_path", "source": "/data", "target": "/mnt/data"}],
        }
    ]
    created = create_params(
        api, roles=roles, verifications=[mine.pk], storage_notes="/data exists on a-head-01"
    )
    assert created["verifications"] == [mine.pk]
    assert created["roles"][0]["selector"] == HEAD_SELECTOR
    assert created["roles"][0]["mounts"][0]["target"] == "/mnt/data"
    refused = api.patch(f"{PARAMS}{created['id']}/", {"verifications": [theirs.pk]}, format="json")
    assert refused.status_code == 400
    assert refused.json()["field"] == "verifications"


def test_a_malformed_role_is_refused_naming_the_place(api: APIClient) -> None:
    response = api.post(
        PARAMS, {"title": "p", "roles": [{"role": "Actor", "gpus": -1}]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Malformed request body: roles")


def test_fill_from_a_job_draft_copies_placement_and_confirming_verifications(
    api: APIClient, team: Team, owner: Any, admin_user: Any
) -> None:
    load_fleet_rows()
    head = approved(
        team=team,
        owner=owner,
        admin=admin_user,
        cluster="gpu-a",
        selector=HEAD_SELECTOR,
        header=True,
    )
    job_create(
        team=team,
        user=owner,
        data={
            "name": "draft-a",
            "task_type": "custom",
            "header_role": "Actor",
            "network_domain": "",
            "roles": [role("Actor", HEAD_SELECTOR, gpus=8), role("Rollout", CPU_SELECTOR)],
        },
    )
    params = create_params(api)
    response = api.post(f"{PARAMS}{params['id']}/fill-from-job/", {"job": "draft-a"}, format="json")
    assert response.status_code == 200
    filled = response.json()
    assert [(r["role"], r["cluster"], r["selector"], r["gpus"]) for r in filled["roles"]] == [
        ("Actor", "gpu-a", HEAD_SELECTOR, 8),
        ("Rollout", "gpu-a", CPU_SELECTOR, 0),
    ]
    assert filled["verifications"] == [head]  # the Rollout selector has no approval


def test_fill_from_another_teams_job_answers_404(
    api: APIClient, other_team: Team, outsider: Any
) -> None:
    job_create(team=other_team, user=outsider, data={"name": "theirs", "task_type": "rl"})
    params = create_params(api)
    response = api.post(f"{PARAMS}{params['id']}/fill-from-job/", {"job": "theirs"}, format="json")
    assert response.status_code == 404
    assert DeploymentParameters.objects.get().roles == []


def test_parameters_of_another_team_answer_404(api: APIClient, outsider_api: APIClient) -> None:
    params = create_params(api)
    assert outsider_api.get(f"{PARAMS}{params['id']}/").status_code == 404
    assert (
        outsider_api.patch(f"{PARAMS}{params['id']}/", {"title": "x"}, format="json").status_code
        == 404
    )
    assert (
        outsider_api.post(
            f"{PARAMS}{params['id']}/fill-from-job/", {"job": "x"}, format="json"
        ).status_code
        == 404
    )
    assert outsider_api.get(PARAMS).json()["results"] == []


# --- audit events -----------------------------------------------------------------------------


def test_changes_are_audited_with_the_actor_and_readable_by_the_team(
    api: APIClient, owner: Any
) -> None:
    created = create_list(api)
    api.patch(f"{LISTS}{created['id']}/", {"title": "renamed"}, format="json")
    events = api.get("/api/v1/audit-events/", {"model": "jobs.LaunchList"}).json()["results"]
    assert [e["label"] for e in events] == ["update", "insert"]
    assert {e["actor_username"] for e in events} == {"owner"}
    assert events[0]["diff"]["title"] == ["first run", "renamed"]
    by_actor = api.get("/api/v1/audit-events/", {"actor": "owner"}).json()["results"]
    assert {e["model"] for e in by_actor} == {"jobs.LaunchList"}


def test_another_teams_audit_events_are_not_shown(
    api: APIClient,
    outsider_api: APIClient,
    admin_user: Any,
    api_client_for: Callable[[Any], APIClient],
) -> None:
    create_list(api)
    theirs = outsider_api.get("/api/v1/audit-events/").json()["results"]
    assert theirs  # their own team's membership, for instance
    assert "jobs.LaunchList" not in {e["model"] for e in theirs}
    assert "vision-rl" not in {e["team"] for e in theirs}
    admin_events = api_client_for(admin_user).get("/api/v1/audit-events/").json()["results"]
    assert "jobs.LaunchList" in {e["model"] for e in admin_events}


def test_one_jobs_trail_is_404_for_another_team(
    api: APIClient, outsider_api: APIClient, team: Team, owner: Any
) -> None:
    job_create(team=team, user=owner, data={"name": "mine", "task_type": "rl"})
    trail = api.get("/api/v1/audit-events/", {"job": "mine"})
    assert trail.status_code == 200
    assert {e["model"] for e in trail.json()["results"]} == {"jobs.Job", "jobs.Role"}
    assert outsider_api.get("/api/v1/audit-events/", {"job": "mine"}).status_code == 404
