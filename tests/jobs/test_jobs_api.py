"""The jobs API (SPEC 12): drafts keep what was typed, findings report it, tenancy holds."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from clusters.models import Cluster
from clusters.verifications.services import verification_approve, verification_request
from jobs.models import DeploymentParameters, Job, JobState, LaunchList, Role
from rlark_site.foundation.tenancy.models import Team
from tests.factories import confirmed_parameters, load_fleet_rows
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
DIGEST = "sha256:" + "ab" * 32

BODY: dict[str, Any] = {
    "name": "ppo-math-7b",
    "task_type": "rl",
    "header_role": "Actor",
    "roles": [
        {
            "name": "Actor",
            "cluster": "gpu-a",
            "selector": {"kubernetes.io/hostname": "a-head-01",
                         "topology.rlinf.io/cluster": "gpu-a"},
            "gpus": 8,
            "devices": {"rlinf.io/rdma": 1},
            "cpu": {"request": "16", "limit": "32"},
            "memory": {"request": "64Gi", "limit": "128Gi"},
            "image": f"registry.example.com/rlinf/rlinf@{DIGEST}",
            "image_digest": None,
            "prepare_script": "source /opt/venv/bin/activate",
            "env": [{"name": "HF_HOME", "value": "/mnt/cache"}],
            "mounts": [
                {"kind": "host_path", "source": "/data/models", "target": "/mnt/models"},
                {"kind": "object_storage", "storage_class": "s3-fuse", "target": "/mnt/ckpt"},
            ],
        }
    ],
    "network_domain": None,
    "ssh_keys": [],
    "run_script": "cd /workspace/rlinf && python -m rlinf.train --config ppo.yaml",
    "tensorboard_log_dir": "/mnt/ckpt/tb",
    "image_compatibility_confirmed": False,
}


def body(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BODY)
    data.update(changes)
    return data


def codes(response: Any) -> set[str]:
    return {f["code"] for f in response.json()["findings"]}


@pytest.fixture
def api(api_client_for: Callable[[Any], APIClient], owner: Any) -> APIClient:
    load_fleet_rows()
    return api_client_for(owner)


@pytest.fixture
def outsider_api(api_client_for: Callable[[Any], APIClient], outsider: Any) -> APIClient:
    return api_client_for(outsider)


def test_create_returns_the_draft_with_findings_and_links(api: APIClient, team: Team) -> None:
    response = api.post(JOBS, body(), format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["name"] == "ppo-math-7b"
    assert data["team"] == "vision-rl"
    assert data["state"] == "draft"
    assert data["created_by"] == "owner"
    assert data["roles"][0]["selector"] == BODY["roles"][0]["selector"]
    assert data["roles"][0]["devices"] == {"rlinf.io/rdma": 1}
    assert data["roles"][0]["mounts"][1]["storage_class"] == "s3-fuse"
    assert data["has_errors"] is True  # no verification, launch list or deployment parameters
    assert {"selector.unverified", "launch_list.missing"} <= codes(response)
    assert data["links"]["self"].endswith("/api/v1/jobs/ppo-math-7b/")
    assert data["links"]["manifest"].endswith("/api/v1/jobs/ppo-math-7b/manifest/")
    assert data["links"]["launch_list"] is None


def test_a_draft_that_breaks_rules_is_saved_and_reported_not_refused(api: APIClient) -> None:
    role = {"name": "Bad Name!", "cluster": "nowhere", "gpus": "eight",
            "selector": [["rlinf.io/pool", "a100-a"], ["rlinf.io/pool", "h100-b"]],
            "devices": {"rlinf.io/rdma": -2}, "cpu": {"request": "lots"},
            "env": [{"name": "1BAD", "value": 3}],
            "mounts": [{"kind": "nfs", "target": "../etc"}]}
    response = api.post(JOBS, body(name="odd", task_type="warp", header_role="Ghost",
                                   roles=[role], run_script=""), format="json")
    assert response.status_code == 201, response.content
    expected = {"job.type.invalid", "header.unknown", "role.name.invalid",
                "role.cluster.unknown", "gpu.invalid", "selector.duplicate_key",
                "env.name.invalid", "mount.path.invalid", "resources.invalid", "run_script.empty"}
    assert expected <= codes(response)
    stored = Role.objects.get(job__name="odd")
    assert stored.gpus == "eight"
    assert stored.selector == [["rlinf.io/pool", "a100-a"], ["rlinf.io/pool", "h100-b"]]
    assert stored.env == [{"name": "1BAD", "value": "3"}]
    assert response.json()["roles"][0]["selector"] == role["selector"]  # a key repeats: pairs


def test_negative_gpus_are_kept_and_reported(api: APIClient) -> None:
    roles = [dict(BODY["roles"][0], gpus=-1)]
    response = api.post(JOBS, body(roles=roles), format="json")
    assert response.status_code == 201
    assert response.json()["roles"][0]["gpus"] == -1
    assert "gpu.invalid" in codes(response)


def test_hostile_text_is_stored_verbatim(api: APIClient) -> None:
    script = "'; DROP TABLE jobs_job; -- <script>alert(1)</script> $(rm -rf /) 中文"
    response = api.post(JOBS, body(run_script=script, header_role="<b>x</b>"), format="json")
    assert response.status_code == 201
    job = Job.objects.get(name="ppo-math-7b")
    assert job.run_script == script
    assert job.header_role == "<b>x</b>"


def test_omitted_roles_become_the_types_initial_roles(api: APIClient) -> None:
    response = api.post(JOBS, {"name": "collect", "task_type": "data_collection"}, format="json")
    assert response.status_code == 201
    assert [r["name"] for r in response.json()["roles"]] == ["Environment"]
    response = api.post(JOBS, {"name": "strange", "task_type": "strange"}, format="json")
    assert response.json()["roles"] == []
    assert "job.type.invalid" in codes(response)


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"name": "x", "roles": {"name": "Actor"}}, "roles"),
        ({"name": "x", "roles": ["Actor"]}, "roles.0"),
        ({"name": "x", "roles": [{"selector": "a=b"}]}, "roles.0.selector"),
        ({"name": "x", "roles": [{"selector": {"a": 1}}]}, "roles.0.selector"),
        ({"name": "x", "roles": [{"env": {"A": "b"}}]}, "roles.0.env"),
        ({"name": "x", "roles": [{"mounts": ["/data"]}]}, "roles.0.mounts.0"),
        ({"name": "x", "roles": [{"gpus": [8]}]}, "roles.0.gpus"),
        ({"name": "x", "roles": [{"cpu": {"requests": "1"}}]}, "roles.0.cpu"),
        ({"name": "x", "run_script": "a\x00b"}, "run_script"),
    ],
)
def test_wrong_shapes_answer_400_naming_the_place(
    api: APIClient, payload: dict[str, Any], where: str
) -> None:
    response = api.post(JOBS, payload, format="json")
    assert response.status_code == 400
    assert f"Malformed request body: {where}:" in response.json()["detail"]
    assert not Job.objects.exists()


def test_a_body_that_is_not_an_object_answers_400(api: APIClient) -> None:
    response = api.post(JOBS, [BODY], format="json")
    assert response.status_code == 400
    assert "Expected a dictionary" in response.json()["detail"]
    response = api.post(JOBS, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Malformed request body")


@pytest.mark.parametrize(
    "raw",
    [
        '{"name": "x", "roles": [{"gpus": 1e999}]}',
        '{"name": "x", "roles": [{"devices": {"rlinf.io/rdma": -1e999}}]}',
        '{"name": "x", "roles": ' + "[" * 50_000 + "]" * 50_000 + "}",
    ],
)
def test_numbers_and_nesting_json_cannot_store_answer_400(api: APIClient, raw: str) -> None:
    response = api.post(JOBS, raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Malformed request body")
    assert not Job.objects.exists()


def test_a_taken_name_answers_400_with_the_finding_and_creates_nothing(
    api: APIClient, outsider_api: APIClient, other_team: Team
) -> None:
    assert outsider_api.post(JOBS, {"name": "shared-name"}, format="json").status_code == 201
    response = api.post(JOBS, body(name="shared-name"), format="json")
    assert response.status_code == 400
    assert [f["code"] for f in response.json()["findings"]] == ["job.name.taken"]
    assert "nlp-rl" not in response.content.decode()
    assert Job.objects.filter(name="shared-name").count() == 1
    assert not Role.objects.filter(job__team__slug="vision-rl").exists()


def test_renaming_to_a_taken_name_answers_400(api: APIClient) -> None:
    api.post(JOBS, body(name="first"), format="json")
    api.post(JOBS, body(name="second"), format="json")
    response = api.patch(f"{JOBS}second/", {"name": "first"}, format="json")
    assert response.status_code == 400
    assert response.json()["findings"][0]["code"] == "job.name.taken"
    assert Job.objects.filter(name="second").exists()


def test_a_name_a_draft_cannot_be_found_by_answers_400(api: APIClient) -> None:
    for name in ("", "a/b"):
        response = api.post(JOBS, {"name": name}, format="json")
        assert response.status_code == 400
        assert response.json()["findings"][0]["code"] == "job.name.invalid"
    assert not Job.objects.exists()


def test_patch_changes_only_given_fields_and_replaces_roles(api: APIClient) -> None:
    api.post(JOBS, body(), format="json")
    response = api.patch(f"{JOBS}ppo-math-7b/", {"run_script": "cd /x && run"}, format="json")
    assert response.status_code == 200
    assert response.json()["tensorboard_log_dir"] == "/mnt/ckpt/tb"
    roles = [{"name": "Rollout"}, {"name": "Actor"}]
    response = api.patch(f"{JOBS}ppo-math-7b/", {"roles": roles}, format="json")
    assert [r["name"] for r in response.json()["roles"]] == ["Rollout", "Actor"]
    assert list(Role.objects.order_by("position").values_list("name", "position")) == [
        ("Rollout", 0), ("Actor", 1)]


def test_put_replaces_the_whole_draft(api: APIClient) -> None:
    api.post(JOBS, body(), format="json")
    response = api.put(f"{JOBS}ppo-math-7b/", {"task_type": "evaluation"}, format="json")
    assert response.status_code == 200
    data = response.json()
    assert data["name"] == "ppo-math-7b"
    assert data["run_script"] == ""
    assert [r["name"] for r in data["roles"]] == ["Rollout", "Environment"]


def test_list_shows_the_teams_jobs_only(
    api: APIClient, outsider_api: APIClient, other_team: Team
) -> None:
    api.post(JOBS, body(name="ours"), format="json")
    outsider_api.post(JOBS, {"name": "theirs"}, format="json")
    response = api.get(JOBS)
    assert response.status_code == 200
    assert [j["name"] for j in response.json()["results"]] == ["ours"]
    assert api.get(JOBS, {"team": "nlp-rl"}).status_code == 404


def test_each_listed_job_links_to_its_own_detail(api: APIClient) -> None:
    for name in ("ours-a", "ours-b", "ours-c"):
        api.post(JOBS, body(name=name), format="json")
    listed = api.get(JOBS).json()["results"]
    assert {j["url"] for j in listed} == {
        f"http://testserver{JOBS}{name}/" for name in ("ours-a", "ours-b", "ours-c")}
    for job in listed:
        assert api.get(job["url"]).json()["name"] == job["name"]


def test_another_teams_job_answers_404_everywhere(
    api: APIClient, outsider_api: APIClient, other_team: Team
) -> None:
    api.post(JOBS, body(), format="json")
    url = f"{JOBS}ppo-math-7b/"
    assert outsider_api.get(url).status_code == 404
    assert outsider_api.patch(url, {"run_script": "x"}, format="json").status_code == 404
    assert outsider_api.put(url, {}, format="json").status_code == 404
    assert outsider_api.delete(url).status_code == 404
    assert outsider_api.get(f"{url}manifest/").status_code == 404
    assert Job.objects.get(name="ppo-math-7b").run_script == BODY["run_script"]


def test_creating_in_a_team_the_user_is_not_in_answers_404(
    api: APIClient, other_team: Team
) -> None:
    response = api.post(JOBS, body(team="nlp-rl"), format="json")
    assert response.status_code == 404
    assert not Job.objects.exists()


def test_unauthenticated_requests_are_refused(db: None) -> None:
    client = APIClient()
    assert client.get(JOBS).status_code == 401
    assert client.post(JOBS, BODY, format="json").status_code == 401
    assert client.get(f"{JOBS}ppo-math-7b/manifest/").status_code == 401


def test_delete_removes_a_draft_but_not_a_submitted_job(api: APIClient) -> None:
    api.post(JOBS, body(name="gone"), format="json")
    assert api.delete(f"{JOBS}gone/").status_code == 204
    assert not Job.objects.filter(name="gone").exists()
    api.post(JOBS, body(name="kept"), format="json")
    run_record_for(Job.objects.get(name="kept"), state=JobState.RUNNING)
    assert api.delete(f"{JOBS}kept/").status_code == 409
    assert api.patch(f"{JOBS}kept/", {"run_script": "x"}, format="json").status_code == 409
    assert Job.objects.filter(name="kept").exists()


def test_manifest_answers_422_with_findings_while_errors_remain(api: APIClient) -> None:
    api.post(JOBS, body(), format="json")
    response = api.get(f"{JOBS}ppo-math-7b/manifest/")
    assert response.status_code == 422
    assert "selector.unverified" in codes(response)


def test_manifest_is_yaml_when_clean_and_json_on_request(
    api: APIClient, team: Team, owner: Any, admin_user: Any
) -> None:
    selector = {"kubernetes.io/hostname": "c-env-01", "topology.rlinf.io/cluster": "cpu-c"}
    verification = verification_request(
        team=team, user=owner, cluster=Cluster.objects.get(name="cpu-c"), selector=selector,
        for_header_role=True,
    )
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    launch_list = LaunchList.objects.create(team=team, title="l", created_by=owner)
    params = DeploymentParameters.objects.create(team=team, title="p", created_by=owner,
                                                 launch_list=launch_list)
    role = {"name": "Environment", "cluster": "cpu-c", "selector": selector,
            "image": f"registry.example.com/rlinf/env@{DIGEST}"}
    created = api.post(JOBS, {
        "name": "collect", "task_type": "data_collection", "header_role": "Environment",
        "roles": [role], "run_script": "cd /w && python collect.py",
        "launch_list": launch_list.pk, "deployment_parameters": params.pk,
    }, format="json")
    assert {f["code"] for f in created.json()["findings"]
            if f["code"].startswith("deployment_parameters.")} == {
        "deployment_parameters.role_missing", "deployment_parameters.unconfirmed",
        "deployment_parameters.verification_unreferenced"}
    confirmed_parameters(Job.objects.get(name="collect"), admin=admin_user)
    detail = api.get(f"{JOBS}collect/").json()
    assert detail["has_errors"] is False, detail["findings"]
    links = created.json()["links"]
    assert links["launch_list"].endswith(f"/api/v1/launch-lists/{launch_list.pk}/")
    assert links["deployment_parameters"].endswith(f"/api/v1/deployment-parameters/{params.pk}/")
    assert links["submit"].endswith("/api/v1/jobs/collect/submit/")
    response = api.get(f"{JOBS}collect/manifest/")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/yaml; charset=utf-8"
    assert response["X-Manifest-SHA256"] == hashlib.sha256(response.content).hexdigest()
    manifest = yaml.safe_load(response.content)
    assert manifest["metadata"]["name"] == "collect"
    assert manifest["spec"]["tasks"][0]["replicas"] == 1
    as_json = api.get(f"{JOBS}collect/manifest/", {"format": "json"})
    assert as_json["Content-Type"] == "application/json"
    assert as_json.json() == manifest


def test_the_launch_list_must_be_the_teams(
    api: APIClient, outsider: Any, other_team: Team
) -> None:
    theirs = LaunchList.objects.create(team=other_team, title="t", created_by=outsider)
    response = api.post(JOBS, body(launch_list=theirs.pk), format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "launch_list"
    assert not Job.objects.exists()


def test_the_schema_describes_the_job_endpoints(api: APIClient) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)
    assert "/api/v1/jobs/{name}/manifest/" in schema["paths"]
    assert "/api/v1/ssh-keys/{name}/" in schema["paths"]
