"""The clusters and nodes API: everyone reads, admins write, credentials never come back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from clusters.credentials import decrypt
from clusters.models import Cluster, ClusterState, Node
from clusters.simulator.testing import DEMO_FLEET_PATH, run_simulator
from rlark_site.celery import app as celery_app
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

Client = Callable[[Any], APIClient]
TOKEN = "sekret-bearer-token-7d1f0c"
CA = "-----BEGIN CERTIFICATE-----\nMIIBsekretCAbody9f2e\n-----END CERTIFICATE-----\n"
NEW_CLUSTER = {
    "name": "gpu-z", "namespace": "rl-gpu-z", "api_url": "https://k8s.example.com:6443",
    "token": TOKEN, "ca_cert": CA,
}


@pytest.fixture
def admin_api(admin_user: Any, api_client_for: Client) -> APIClient:
    return api_client_for(admin_user)


@pytest.fixture
def member_api(member: Any, api_client_for: Client) -> APIClient:
    return api_client_for(member)


@pytest.fixture
def eager_celery() -> Iterator[None]:
    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = saved


def test_an_admin_registers_a_cluster_and_gets_no_credentials_back(admin_api: APIClient) -> None:
    response = admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["has_token"], body["has_ca_cert"]) == ("gpu-z", True, True)
    assert (body["state"], body["node_count"], body["generation"]) == ("never_polled", 0, 0)
    assert "token" not in body and "ca_cert" not in body
    stored = Cluster.objects.get(name="gpu-z")
    assert decrypt(stored.token_encrypted) == TOKEN
    assert decrypt(stored.ca_cert_encrypted) == CA


def test_cluster_responses_carry_the_poll_fields(member_api: APIClient) -> None:
    load_fleet_rows()
    body = member_api.get("/api/v1/clusters/gpu-a/").json()
    for field in (
        "state", "last_polled_at", "last_success_at", "last_error", "node_count", "generation",
        "enabled", "has_token", "has_ca_cert",
    ):
        assert field in body
    assert (body["state"], body["node_count"], body["generation"]) == ("ok", 17, 1)


def test_the_list_is_paginated_and_counts_nodes(member_api: APIClient) -> None:
    load_fleet_rows()
    Node.objects.filter(name="a-node-01").update(gone=True)
    body = member_api.get("/api/v1/clusters/?limit=2").json()
    assert body["count"] == 3
    assert [c["name"] for c in body["results"]] == ["cpu-c", "gpu-a"]
    gpu_a = body["results"][1]
    assert (gpu_a["node_count"], gpu_a["ready_count"], gpu_a["gone_count"]) == (16, 15, 1)


def test_a_secret_sent_to_the_api_appears_in_no_api_response(admin_api: APIClient) -> None:
    bodies = [admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json").content]
    bodies.append(admin_api.patch(
        "/api/v1/clusters/gpu-z/", {"token": TOKEN, "ca_cert": CA, "namespace": "rl-z2"},
        format="json",
    ).content)
    bodies.append(admin_api.patch(
        "/api/v1/clusters/gpu-z/", {"token": "rotated-" + TOKEN}, format="json"
    ).content)
    for path in (
        "/api/v1/clusters/", "/api/v1/clusters/gpu-z/", "/api/v1/nodes/",
        "/api/v1/nodes/?cluster=gpu-z", "/api/schema/", "/api/v1/audit-events/",
        "/api/v1/audit-events/?model=cluster",
    ):
        response = admin_api.get(path)
        assert response.status_code == 200, path
        bodies.append(response.content)
    for body in bodies:
        assert TOKEN.encode() not in body
        assert b"MIIBsekretCAbody9f2e" not in body
        assert Cluster.objects.get(name="gpu-z").token_encrypted.encode() not in body
    audit = admin_api.get("/api/v1/audit-events/?model=cluster").json()["results"]
    changed = [e for e in audit if e["label"] == "update" and "token_encrypted" in e["diff"]]
    assert changed and changed[0]["diff"]["token_encrypted"] == ["<redacted>", "<redacted>"]


def test_a_member_cannot_create_change_delete_or_poll_clusters(member_api: APIClient) -> None:
    load_fleet_rows()
    assert member_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json").status_code == 403
    assert member_api.patch(
        "/api/v1/clusters/gpu-a/", {"enabled": False}, format="json"
    ).status_code == 403
    assert member_api.delete("/api/v1/clusters/gpu-a/").status_code == 403
    assert member_api.post("/api/v1/clusters/gpu-a/poll/").status_code == 403
    assert not Cluster.objects.filter(name="gpu-z").exists()
    assert Cluster.objects.get(name="gpu-a").enabled is True


def test_an_outsider_reads_clusters_and_nodes_too(
    outsider: Any, api_client_for: Client,
) -> None:
    load_fleet_rows()
    client = api_client_for(outsider)
    assert client.get("/api/v1/clusters/").json()["count"] == 3
    assert client.get("/api/v1/nodes/").json()["count"] == 47


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/clusters/"), ("post", "/api/v1/clusters/"),
        ("get", "/api/v1/clusters/gpu-a/"), ("post", "/api/v1/clusters/gpu-a/poll/"),
        ("get", "/api/v1/nodes/"),
    ],
)
def test_the_api_without_a_token_is_refused(method: str, path: str) -> None:
    load_fleet_rows()
    response = getattr(APIClient(), method)(path)
    assert response.status_code in (401, 403)


def test_an_unknown_cluster_answers_404(member_api: APIClient) -> None:
    assert member_api.get("/api/v1/clusters/nowhere/").status_code == 404


def test_an_invalid_cluster_is_refused_with_field_errors(admin_api: APIClient) -> None:
    response = admin_api.post(
        "/api/v1/clusters/", {**NEW_CLUSTER, "namespace": "Not_A_Label"}, format="json"
    )
    assert response.status_code == 400
    assert "namespace" in response.json()["errors"]


def test_a_duplicate_name_is_refused(admin_api: APIClient) -> None:
    admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json")
    response = admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json")
    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_an_admin_changes_and_clears_credentials(admin_api: APIClient) -> None:
    admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json")
    body = admin_api.patch("/api/v1/clusters/gpu-z/", {"token": ""}, format="json").json()
    assert (body["has_token"], body["has_ca_cert"]) == (False, True)


def test_a_cluster_name_cannot_change(admin_api: APIClient) -> None:
    admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json")
    response = admin_api.patch("/api/v1/clusters/gpu-z/", {"name": "other"}, format="json")
    assert response.status_code == 400


def test_disabling_a_cluster_shows_it_disabled(admin_api: APIClient) -> None:
    load_fleet_rows()
    body = admin_api.patch("/api/v1/clusters/gpu-a/", {"enabled": False}, format="json").json()
    assert (body["enabled"], body["state"]) == (False, ClusterState.DISABLED)


def test_an_admin_deletes_a_cluster(admin_api: APIClient) -> None:
    admin_api.post("/api/v1/clusters/", NEW_CLUSTER, format="json")
    assert admin_api.delete("/api/v1/clusters/gpu-z/").status_code == 204
    assert not Cluster.objects.filter(name="gpu-z").exists()


def test_a_poll_request_is_queued_on_commit(
    admin_api: APIClient, django_capture_on_commit_callbacks: Any,
) -> None:
    load_fleet_rows()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_api.post("/api/v1/clusters/gpu-a/poll/")
    assert response.status_code == 202
    assert response.json() == {"cluster": "gpu-a", "state": "queued"}
    assert len(callbacks) == 1


def test_a_queued_poll_polls_the_cluster(
    admin_api: APIClient, eager_celery: None, django_capture_on_commit_callbacks: Any,
) -> None:
    with run_simulator(DEMO_FLEET_PATH) as sim:
        admin_api.post("/api/v1/clusters/", {
            "name": "gpu-a", "namespace": "rl-gpu-a", "api_url": sim.cluster_url("gpu-a"),
            "token": sim.fleet.cluster("gpu-a").token, "verify_tls": False,
        }, format="json")
        with django_capture_on_commit_callbacks(execute=True):
            assert admin_api.post("/api/v1/clusters/gpu-a/poll/").status_code == 202
    assert Node.objects.filter(cluster__name="gpu-a").count() == 17


def test_a_disabled_cluster_is_not_polled_on_request(admin_api: APIClient) -> None:
    load_fleet_rows()
    Cluster.objects.filter(name="gpu-a").update(enabled=False)
    assert admin_api.post("/api/v1/clusters/gpu-a/poll/").status_code == 409


def test_nodes_are_filtered_by_cluster_and_labels(member_api: APIClient) -> None:
    load_fleet_rows()
    body = member_api.get(
        "/api/v1/nodes/", {"selector": "rlinf.io/gpu-model=a100, rlinf.io/zone=zone-1"}
    ).json()
    assert body["count"] > 0
    for node in body["results"]:
        assert node["labels"]["rlinf.io/gpu-model"] == "a100"
        assert node["labels"]["rlinf.io/zone"] == "zone-1"
    in_b = member_api.get(
        "/api/v1/nodes/", {"cluster": "gpu-b", "selector": "rlinf.io/gpu-model=a100"}
    ).json()
    assert {n["cluster"] for n in in_b["results"]} == {"gpu-b"}
    assert in_b["count"] == 4


def test_node_rows_carry_the_inventory_fields(member_api: APIClient) -> None:
    load_fleet_rows()
    body = member_api.get("/api/v1/nodes/", {"selector": "kubernetes.io/hostname=a-node-01"})
    (node,) = body.json()["results"]
    assert node["cluster"] == "gpu-a" and node["namespace"] == "rl-gpu-a"
    assert (node["gpu"], node["devices"], node["ready"], node["gone"]) == (
        8, {"rlinf.io/rdma": 4}, True, False,
    )


def test_gone_nodes_are_left_out_unless_asked_for(member_api: APIClient) -> None:
    load_fleet_rows()
    Node.objects.filter(name="a-node-01").update(gone=True)
    selector = {"selector": "kubernetes.io/hostname=a-node-01"}
    assert member_api.get("/api/v1/nodes/", selector).json()["count"] == 0
    body = member_api.get("/api/v1/nodes/", {**selector, "include_gone": "true"}).json()
    assert [n["gone"] for n in body["results"]] == [True]


def test_the_node_list_is_paginated(member_api: APIClient) -> None:
    load_fleet_rows()
    body = member_api.get("/api/v1/nodes/", {"limit": 10, "offset": 40}).json()
    assert (body["count"], len(body["results"])) == (47, 7)


@pytest.mark.parametrize(
    ("selector", "code"),
    [
        ("rlinf.io/zone", "selector.syntax"),
        ("bad key!=x", "selector.syntax"),
        ("zone=a, zone=b", "selector.duplicate_key"),
    ],
)
def test_a_bad_selector_answers_400_with_its_problems(
    member_api: APIClient, selector: str, code: str,
) -> None:
    response = member_api.get("/api/v1/nodes/", {"selector": selector})
    assert response.status_code == 400
    assert code in [problem["code"] for problem in response.json()["problems"]]


def test_an_unknown_cluster_filter_answers_400(member_api: APIClient) -> None:
    response = member_api.get("/api/v1/nodes/", {"cluster": "nowhere"})
    assert response.status_code == 400
    assert "nowhere" in response.json()["detail"]
