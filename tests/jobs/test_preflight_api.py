"""The whole-job pre-flight (SPEC 15) through the API on the fleet simulator: the job detail's
`capacity` block and the `capacity.*` findings for every verdict, over real HTTP with the real
`kubernetes` client (inventory and occupancy polls) and real PostgreSQL.

fits_now on idle nodes; will_queue once a foreign pod holds a node's GPUs (the simulator's
control endpoint); never_fits for cpu, memory and pods (`capacity.never_fits`), and for GPUs
through `gpu.exceeds_capacity` alone; unknown when the cluster is stale or never counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from clusters.inventory.services import poll_cluster
from clusters.models import Cluster, ClusterState, NodeOccupancy
from clusters.simulator.testing import InProcessSimulator, run_simulator
from jobs.drafts.services import job_create
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import IMAGE

pytestmark = pytest.mark.django_db

CLUSTER, NS, GPU = "gpu-p", "rl-gpu-p", "nvidia.com/gpu"
ZONE = {"topology.rlinf.io/cluster": CLUSTER}
WORKERS = {"rlinf.io/pool": "w"}


def _node(name: str, pool: str, **allocatable: Any) -> dict[str, Any]:
    return {"name": name,
            "labels": {"kubernetes.io/hostname": name, "rlinf.io/pool": pool, **ZONE},
            "allocatable": {GPU: 8, "cpu": 64, "memory": "512Gi", "pods": 110, **allocatable}}


FLEET = {"clusters": [{
    "name": CLUSTER, "namespace": NS,
    "nodes": [_node("p-head-01", "head"), _node("p-node-01", "w"), _node("p-node-02", "w"),
              _node("p-full-01", "full", pods=0)],
}]}


@pytest.fixture
def sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def cluster(sim: InProcessSimulator) -> Cluster:
    (cluster,) = load_fleet_rows(FLEET, api_url_base=sim.base_url)
    assert poll_cluster(cluster_id=cluster.pk).ok
    return cluster


def _draft(team: Team, owner: Any, name: str, *, workers: dict[str, str] | None = None,
           **worker: Any) -> None:
    roles = [{"name": "Actor", "cluster": CLUSTER, "gpus": 8, "image": IMAGE,
              "selector": {"kubernetes.io/hostname": "p-head-01", **ZONE}},
             {"name": "Rollout", "cluster": CLUSTER, "gpus": 8, "image": IMAGE,
              "selector": {**(workers or WORKERS), **ZONE}, **worker}]
    job_create(team=team, user=owner, data={
        "name": name, "task_type": "custom", "header_role": "Actor", "roles": roles,
        "run_script": "python -m rlinf.train"})


def _detail(api: Any, name: str, **headers: str) -> dict[str, Any]:
    response = api.get(f"/api/v1/jobs/{name}/", **headers)
    assert response.status_code == 200, response.json()
    return dict(response.json())


def _codes(body: dict[str, Any], prefix: str) -> list[tuple[str, str, str | None]]:
    return [(f["code"], f["severity"], f["field"]) for f in body["findings"]
            if f["code"].startswith(prefix)]


def test_fits_now_then_will_queue_when_a_foreign_pod_takes_a_node(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any,
        api_client_for: Any) -> None:
    api = api_client_for(owner)
    _draft(team, owner, "fits")
    body = _detail(api, "fits")
    cluster.refresh_from_db()
    assert body["capacity"]["verdict"] == "fits_now"
    assert body["capacity"]["as_of"] == cluster.occupancy_as_of.isoformat()
    assert [(r["role"], r["verdict"], r["replicas"], r["fits_now"], r["fits_ever"], r["short"])
            for r in body["capacity"]["roles"]] == [
        ("Actor", "fits_now", 1, 1, 1, []), ("Rollout", "fits_now", 2, 2, 2, [])]
    assert _codes(body, "capacity.") == []

    sim.add_pod(CLUSTER, "someone-else", node="p-node-02", requests={GPU: 4, "cpu": 2})
    assert poll_cluster(cluster_id=cluster.pk).ok
    body = _detail(api, "fits")
    assert body["capacity"]["verdict"] == "will_queue"
    rollout = body["capacity"]["roles"][1]
    assert (rollout["verdict"], rollout["fits_now"], rollout["fits_ever"]) == ("will_queue", 1, 2)
    assert rollout["short"] == [{"cluster": CLUSTER, "node": "p-node-02", "resource": GPU,
                                 "free": "4", "allocatable": "8", "needed": "8"}]
    assert "p-node-02 has 4 of 8 nvidia.com/gpu free, 8 needed" in rollout["message"]
    (finding,) = [f for f in body["findings"] if f["code"] == "capacity.will_queue"]
    assert (finding["severity"], finding["role"], finding["field"]) == (
        "warning", "Rollout", "roles[1].selector")
    assert finding["detail"]["short"] == rollout["short"]
    assert not body["has_errors"] or all(
        f["code"] != "capacity.will_queue" for f in body["findings"] if f["severity"] == "error")

    with translation.override("zh-hans"):
        zh = _detail(api, "fits", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert zh["capacity"]["roles"][1]["message"] != rollout["message"]

    sim.remove_pod(CLUSTER, "someone-else")
    assert poll_cluster(cluster_id=cluster.pk).ok
    assert _detail(api, "fits")["capacity"]["verdict"] == "fits_now"


@pytest.mark.parametrize(("worker", "selector", "resource", "field"), [
    ({"cpu": {"request": "100"}}, None, "cpu", "roles[1].cpu.request"),
    ({"memory": {"request": "1Ti"}}, None, "memory", "roles[1].memory.request"),
    ({}, {"rlinf.io/pool": "full"}, "pods", "roles[1].selector"),
])
def test_never_fits_for_cpu_memory_and_pods(
        cluster: Cluster, team: Team, owner: Any, api_client_for: Any,
        worker: dict[str, Any], selector: dict[str, str] | None, resource: str,
        field: str) -> None:
    api = api_client_for(owner)
    _draft(team, owner, "never", workers=selector, **worker)
    body = _detail(api, "never")
    assert body["capacity"]["verdict"] == "never_fits"
    rollout = body["capacity"]["roles"][1]
    assert (rollout["verdict"], rollout["fits_ever"]) == ("never_fits", 0)
    assert {s["resource"] for s in rollout["short"]} == {resource}
    assert _codes(body, "capacity.") == [("capacity.never_fits", "error", field)]
    (finding,) = [f for f in body["findings"] if f["code"] == "capacity.never_fits"]
    assert finding["detail"]["resource"] == resource
    assert body["has_errors"]


def test_gpus_above_allocatable_keep_gpu_exceeds_capacity_and_are_not_reported_twice(
        cluster: Cluster, team: Team, owner: Any, api_client_for: Any) -> None:
    api = api_client_for(owner)
    _draft(team, owner, "greedy", gpus=16)
    body = _detail(api, "greedy")
    assert body["capacity"]["roles"][1]["verdict"] == "never_fits"
    assert body["capacity"]["roles"][1]["short"][0] == {
        "cluster": CLUSTER, "node": "p-node-01", "resource": GPU, "free": "8",
        "allocatable": "8", "needed": "16"}
    assert _codes(body, "gpu.") == [("gpu.exceeds_capacity", "error", "roles[1].gpus")]
    assert _codes(body, "capacity.") == []


def test_unknown_when_the_cluster_is_stale_or_never_counted(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any,
        api_client_for: Any) -> None:
    api = api_client_for(owner)
    _draft(team, owner, "blind")
    sim.set_faults(CLUSTER, error_rate=1.0)
    assert not poll_cluster(cluster_id=cluster.pk).ok
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.STALE
    body = _detail(api, "blind")
    assert body["capacity"]["verdict"] == "unknown"
    assert [r["verdict"] for r in body["capacity"]["roles"]] == ["unknown", "unknown"]
    assert CLUSTER in body["capacity"]["roles"][0]["message"]
    assert _codes(body, "capacity.") == []

    sim.clear_faults(CLUSTER)
    assert poll_cluster(cluster_id=cluster.pk).ok
    NodeOccupancy.objects.all().delete()
    Cluster.objects.filter(pk=cluster.pk).update(occupancy_as_of=None)
    body = _detail(api, "blind")
    assert (body["capacity"]["verdict"], body["capacity"]["as_of"]) == ("unknown", None)


def test_the_pre_flight_reads_the_matched_nodes_in_one_query(
        cluster: Cluster, team: Team, owner: Any, api_client_for: Any) -> None:
    api = api_client_for(owner)
    _draft(team, owner, "cheap")
    with CaptureQueriesContext(connection) as queries:
        _detail(api, "cheap")
    occupancy = [q["sql"] for q in queries.captured_queries if "clusters_nodeoccupancy" in q["sql"]]
    assert len(occupancy) == 1


MATCHES = "/api/v1/selector-matches/"


def test_selector_matches_answers_fits_now_and_fits_ever_for_needs(
        cluster: Cluster, sim: InProcessSimulator, owner: Any, api_client_for: Any) -> None:
    api = api_client_for(owner)
    body = {"cluster": CLUSTER, "selector": {**WORKERS, **ZONE}}
    plain = api.post(MATCHES, body, format="json").json()
    assert plain["count"] == 2 and "fits_now" not in plain
    needs = {"nvidia.com/gpu": 8, "cpu": "32", "memory": "256Gi"}
    answer = api.post(MATCHES, {**body, "needs": needs}, format="json").json()
    assert (answer["fits_now"], answer["fits_ever"], answer["verdict"]) == (2, 2, "fits_now")
    assert answer["needs"] == {GPU: "8", "cpu": "32", "memory": "256Gi", "pods": "1"}

    sim.add_pod(CLUSTER, "someone-else", node="p-node-01", requests={"cpu": "40"})
    assert poll_cluster(cluster_id=cluster.pk).ok
    answer = api.post(MATCHES, {**body, "needs": needs}, format="json").json()
    assert (answer["fits_now"], answer["fits_ever"], answer["verdict"]) == (1, 2, "will_queue")
    answer = api.post(MATCHES, {**body, "needs": {"cpu": "65"}}, format="json").json()
    assert (answer["fits_now"], answer["fits_ever"], answer["verdict"]) == (0, 0, "never_fits")


@pytest.mark.parametrize("needs", [
    {f"rlinf.io/dev-{i}": "1" for i in range(1000)},   # huge map
    {"cpu": "eight"},                                   # bad quantity
    {"cpu": "-1"},
    {"cpu": True},
    {"memory": "1Gi\x00"},                              # NUL in a value
    {"cpu\x00": "1"},                                   # NUL in a name
    {"ephemeral-storage": "1Gi"},                       # not a resource RLark counts
    {"x" * 10_000: "1"},
    {"cpu": "9" * 100},
    ["cpu", "1"],
    "cpu=1",
])
def test_selector_matches_refuses_bad_needs_with_a_clear_400(
        cluster: Cluster, owner: Any, api_client_for: Any, needs: Any) -> None:
    response = api_client_for(owner).post(
        MATCHES, {"cluster": CLUSTER, "selector": {**WORKERS, **ZONE}, "needs": needs},
        format="json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    error = response.json()
    if "\\x00" in repr(needs):  # the JSON parser refuses a NUL anywhere, naming where
        assert "needs." in error["detail"] and "NUL" in error["detail"], error
    else:
        assert error["field"] == "needs" and error["detail"], error
