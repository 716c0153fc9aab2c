"""The fleet simulator: fleet files, controller, control endpoint, admission, faults, processes.

The cluster API is exercised through the gateway (the real `kubernetes` client);
a few protocol details the gateway cannot produce (bad JSON, forged continue
tokens, response headers) are checked with plain HTTP requests.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from clusters import k8s
from clusters.simulator.fleet import FleetError, generate_fleet, load_fleet, parse_fleet
from clusters.simulator.objects import clock_offset, encode_object, encoded_list, list_object
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    TEST_JOB_CRD,
    ControlError,
    InProcessSimulator,
    SimulatorHandle,
    job_body,
    run_simulator,
    start_simulator_process,
    task_body,
)

NS = "rl-gpu-a"
POOL = {"rlinf.io/pool": "a100-a"}


@pytest.fixture(scope="module")
def crd_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crds") / "rlinf.io_jobs.yaml"
    path.write_text(yaml.safe_dump(TEST_JOB_CRD))
    return path


@pytest.fixture(scope="module")
def module_sim(crd_path: Path) -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET_PATH, crd_path=crd_path) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield module_sim
    module_sim.reset()


@pytest.fixture
def gpu_a(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials("gpu-a")


def _create(credentials: k8s.Credentials, name: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    return k8s.create_job(
        credentials=credentials, namespace=NS, body=job_body(name, tasks=[*tasks])
    )


def _status(credentials: k8s.Credentials, name: str) -> dict[str, Any]:
    return dict(k8s.get_job(credentials=credentials, namespace=NS, name=name)["status"])


def _nodes(credentials: k8s.Credentials, **options: Any) -> dict[str, k8s.NodeInfo]:
    pages = k8s.iter_node_pages(credentials=credentials, **options)
    return {node.name: node for page in pages for node in page}


def _raw(
    handle: SimulatorHandle,
    method: str,
    path: str,
    body: bytes | None = None,
    token: str | None = "demo-token-gpu-a",
) -> tuple[int, dict[str, Any], http.client.HTTPMessage]:
    parts = urlsplit(handle.base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read()), response.headers
    finally:
        connection.close()


# Fleet files


def test_demo_fleet_loads() -> None:
    fleet = load_fleet(DEMO_FLEET_PATH)

    assert [c.name for c in fleet.clusters] == ["gpu-a", "gpu-b", "cpu-c"]
    assert fleet.node_count == 47


def test_network_domains_in_the_fleet_file_are_accepted_and_not_served() -> None:
    document = yaml.safe_load(DEMO_FLEET_PATH.read_text())
    assert document["network_domains"] == [
        {"name": "rl-mesh", "clusters": ["gpu-a", "gpu-b", "cpu-c"]}
    ]
    assert parse_fleet(document).node_count == 47


def _demo_document() -> dict[str, Any]:
    return dict(yaml.safe_load(DEMO_FLEET_PATH.read_text()))


def test_fleet_errors_name_the_bad_entry() -> None:
    document = _demo_document()
    document["clusters"][1]["nodes"][3]["allocatable"]["nvidia.com/gpu"] = "eight"

    with pytest.raises(FleetError) as caught:
        parse_fleet(document)

    assert caught.value.problems == [
        'clusters[1] (gpu-b).nodes[3] (b-node-04).allocatable["nvidia.com/gpu"]: '
        "'eight' is not a non-negative quantity"
    ]


def test_fleet_schema_errors_name_the_bad_entry() -> None:
    document = _demo_document()
    document["clusters"][2]["nodes"][0]["labels"]["rlinf.io/zone"] = 3

    with pytest.raises(FleetError) as caught:
        parse_fleet(document)

    assert caught.value.problems == [
        'clusters[2] (cpu-c).nodes[0] (c-env-01).labels["rlinf.io/zone"]: '
        "3 is not of type 'string'"
    ]


def test_fleet_rejects_duplicate_names_and_the_control_segment() -> None:
    document = _demo_document()
    document["clusters"][1]["name"] = "gpu-a"
    document["clusters"][2]["name"] = "_control"
    document["clusters"][0]["nodes"][2]["name"] = "a-node-01"

    with pytest.raises(FleetError) as caught:
        parse_fleet(document)

    assert caught.value.problems == [
        "clusters: the name gpu-a is used by more than one cluster",
        "clusters[0] (gpu-a).nodes[2] (a-node-01).name: duplicate node name in this cluster",
        "clusters[2] (_control).name: must be a DNS label (a-z, 0-9, '-'), used in URLs",
    ]


def test_fleet_faults_are_validated() -> None:
    document = _demo_document()
    document["clusters"][0]["faults"] = {"error_rate": 0.7, "drop_rate": 0.6}

    with pytest.raises(FleetError, match=r"clusters\[0\] \(gpu-a\)\.faults: .* must not exceed 1"):
        parse_fleet(document)


def test_generated_fleet_is_valid_deterministic_and_overlapping() -> None:
    document = generate_fleet(clusters=3, nodes_per_cluster=200, seed=5)
    fleet = parse_fleet(document)

    zones = [{n.labels["rlinf.io/zone"] for n in cluster.nodes} for cluster in fleet.clusters]
    gpus = {n.allocatable.get("nvidia.com/gpu") for c in fleet.clusters for n in c.nodes}
    assert document == generate_fleet(clusters=3, nodes_per_cluster=200, seed=5)
    assert fleet.node_count == 600
    assert zones[0] & zones[1] & zones[2]
    assert {"4", "8", None} <= gpus


# Controller


def test_job_becomes_running_when_its_tasks_fit(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "ppo", task_body("actor", replicas=2, selector=POOL, gpus=8, head=True))
    assert _status(gpu_a, "ppo")["phase"] == "Pending"

    assert sim.tick() == 1

    status = _status(gpu_a, "ppo")
    assert status["phase"] == "Running"
    assert status["conditions"][0]["type"] == "PodScheduled"
    assert status["conditions"][0]["status"] == "True"
    assert "reason" not in status


def test_a_job_in_a_network_domain_is_placed_across_the_domains_clusters() -> None:
    head = task_body("actor", replicas=1, selector={"kubernetes.io/hostname": "a-head-01"},
                     gpus=8, head=True)
    env = task_body("environment", replicas=10, selector={"rlinf.io/pool": "env-c"}, gpus=0)
    with run_simulator(DEMO_FLEET_PATH) as handle:
        gpu_a = handle.credentials("gpu-a")
        meshed = job_body("meshed", tasks=[head, env])
        meshed["spec"]["networkDomain"] = "rl-mesh"
        k8s.create_job(credentials=gpu_a, namespace=NS, body=meshed)
        k8s.create_job(credentials=gpu_a, namespace=NS, body=job_body("local", tasks=[head, env]))

        handle.tick()

        assert _status(gpu_a, "meshed")["phase"] == "Running"
        local = _status(gpu_a, "local")
        assert local["phase"] == "Pending"
        assert "task environment needs 10 ready node(s)" in local["message"]


def test_job_stays_pending_as_unschedulable_when_gpus_are_short(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "big", task_body("actor", replicas=2, selector=POOL, gpus=16, head=True))

    sim.tick()

    status = _status(gpu_a, "big")
    expected = (
        "task actor needs 2 ready node(s) with rlinf.io/pool=a100-a, nvidia.com/gpu>=16; "
        "0 available (12 match the selector, 11 ready)"
    )
    assert (status["phase"], status["reason"], status["message"]) == (
        "Pending",
        "Unschedulable",
        expected,
    )
    condition = status["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == expected
    assert status["lastTransitionTime"]


def test_device_limits_are_checked_against_allocatable(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(
        gpu_a, "rdma", task_body("actor", replicas=1, selector=POOL, devices={"rlinf.io/rdma": 8})
    )

    sim.tick()

    assert "rlinf.io/rdma>=8" in _status(gpu_a, "rdma")["message"]


def test_only_nodes_of_the_jobs_own_cluster_count(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    """rlinf.io/gpu-model=a100 matches nodes in gpu-a and gpu-b; only gpu-a's 13 count."""
    _create(gpu_a, "wide", task_body("actor", replicas=14, selector={"rlinf.io/gpu-model": "a100"}))

    sim.tick()

    assert _status(gpu_a, "wide")["phase"] == "Pending"


def test_every_task_must_fit(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    fits = task_body("actor", replicas=1, selector=POOL, gpus=8, head=True)
    missing = task_body("env", replicas=1, selector={"rlinf.io/pool": "nowhere"})
    _create(gpu_a, "two", fits, missing)

    sim.tick()

    status = _status(gpu_a, "two")
    assert status["phase"] == "Pending"
    assert status["message"].startswith("task env needs 1 ready node(s)")


def test_readiness_change_lets_a_pending_job_run(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    host = {"kubernetes.io/hostname": "a-node-12"}
    _create(gpu_a, "solo", task_body("actor", replicas=1, selector=host, head=True))
    sim.tick()
    assert "0 available (1 match the selector, 0 ready)" in _status(gpu_a, "solo")["message"]

    sim.patch_node("gpu-a", "a-node-12", ready=True)
    sim.tick()

    assert _status(gpu_a, "solo")["phase"] == "Running"


def test_a_tick_without_changes_keeps_the_resource_version(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "big", task_body("actor", replicas=2, selector=POOL, gpus=16))
    sim.tick()
    before = k8s.get_job(credentials=gpu_a, namespace=NS, name="big")

    assert sim.tick() == 0
    assert k8s.get_job(credentials=gpu_a, namespace=NS, name="big") == before


def test_the_clock_offset_moves_every_time_the_simulator_writes(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    """Behind by an hour: the Job's start, its pods' and their log lines' stamps are an hour
    back; set to 0, time has moved on at once (a completion an hour after the start); a reset
    is the real time again; an offset that is not a number is refused."""
    assert sim.control("GET", "clock")["offset_seconds"] == 0
    behind = sim.set_clock_offset(-3600)
    real = datetime.now(UTC)
    moment = datetime.strptime(behind, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(seconds=3598) <= real - moment <= timedelta(seconds=3602)
    _create(gpu_a, "ppo", task_body("actor", replicas=1, selector=POOL, head=True))
    sim.tick()
    started = datetime.strptime(_status(gpu_a, "ppo")["startTime"], "%Y-%m-%dT%H:%M:%SZ")
    assert real - started.replace(tzinfo=UTC) >= timedelta(seconds=3598)
    (pod,) = k8s.list_pods(credentials=gpu_a, namespace=NS)
    line = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name=pod.name,
                            timestamps=True).text.splitlines()[0]
    stamp = datetime.strptime(line[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    assert real - stamp >= timedelta(seconds=3590)
    sim.set_clock_offset(0)
    sim.set_job_phase("gpu-a", NS, "ppo", "Succeeded", reason="Done")
    ended = datetime.strptime(_status(gpu_a, "ppo")["completionTime"], "%Y-%m-%dT%H:%M:%SZ")
    assert ended - started >= timedelta(seconds=3598)
    sim.set_clock_offset(120)
    sim.reset()
    assert sim.control("GET", "clock")["offset_seconds"] == 0
    with pytest.raises(ControlError) as refused:
        sim.control("PUT", "clock", {"offset_seconds": "soon"})
    assert refused.value.code == 422


def test_a_stopped_simulator_leaves_the_clock_on_the_real_time(crd_path: Path) -> None:
    with run_simulator(DEMO_FLEET_PATH, crd_path=crd_path) as handle:
        handle.set_clock_offset(50)
        assert clock_offset() == 50
    assert clock_offset() == 0


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_control_sets_terminal_phases(
    sim: InProcessSimulator, gpu_a: k8s.Credentials, phase: str
) -> None:
    _create(gpu_a, "ppo", task_body("actor", replicas=1, selector=POOL, head=True))
    sim.tick()

    sim.set_job_phase("gpu-a", NS, "ppo", phase, reason="Simulated", message="set by the test")

    status = _status(gpu_a, "ppo")
    assert (status["phase"], status["reason"], status["message"]) == (
        phase,
        "Simulated",
        "set by the test",
    )
    assert status["completionTime"]


def test_controller_leaves_terminal_jobs_alone(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "ppo", task_body("actor", replicas=1, selector=POOL, head=True))
    sim.set_job_phase("gpu-a", NS, "ppo", "Failed")

    assert sim.tick() == 0
    assert _status(gpu_a, "ppo")["phase"] == "Failed"


def test_control_rejects_unknown_phases(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    _create(gpu_a, "ppo", task_body("actor", replicas=1, selector=POOL))

    with pytest.raises(ControlError) as caught:
        sim.set_job_phase("gpu-a", NS, "ppo", "Exploded")

    assert caught.value.code == 422


def test_background_controller_moves_jobs_without_ticks(crd_path: Path) -> None:
    with run_simulator(DEMO_FLEET_PATH, crd_path=crd_path, tick_interval=0.05) as handle:
        credentials = handle.credentials("gpu-a")
        _create(credentials, "ppo", task_body("actor", replicas=1, selector=POOL, head=True))
        deadline = time.monotonic() + 10
        while _status(credentials, "ppo")["phase"] == "Pending" and time.monotonic() < deadline:
            time.sleep(0.02)

        assert _status(credentials, "ppo")["phase"] == "Running"


# Nodes through the control endpoint


def test_label_changes_are_visible_on_the_next_list(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.patch_node("gpu-a", "a-node-01", labels={"rlinf.io/pool": "moved", "rlinf.io/zone": None})

    labels = _nodes(gpu_a)["a-node-01"].labels

    assert labels["rlinf.io/pool"] == "moved"
    assert "rlinf.io/zone" not in labels


def test_nodes_can_be_added_and_removed(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    sim.add_node(
        "gpu-a", "a-node-99", labels={"rlinf.io/pool": "new"}, allocatable={"nvidia.com/gpu": 4}
    )
    sim.remove_node("gpu-a", "a-node-01")

    nodes = _nodes(gpu_a)

    assert nodes["a-node-99"].allocatable == {"nvidia.com/gpu": "4", "cpu": "64",
                                              "memory": "512Gi", "pods": "110"}
    assert "a-node-01" not in nodes


def test_control_validates_node_labels(sim: InProcessSimulator) -> None:
    with pytest.raises(ControlError) as caught:
        sim.patch_node("gpu-a", "a-node-01", labels={"bad key!": "x"})

    assert caught.value.code == 422


def test_reset_restores_the_fleet_file(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    sim.remove_node("gpu-a", "a-node-01")
    _create(gpu_a, "ppo", task_body("actor", replicas=1, selector=POOL))

    sim.reset()

    assert "a-node-01" in _nodes(gpu_a)
    assert k8s.list_jobs(credentials=gpu_a) == []


# Pagination


def test_pages_of_one_list_come_from_one_snapshot(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    pages = k8s.iter_node_pages(credentials=gpu_a, page_size=5)
    first = next(pages)
    sim.add_node("gpu-a", "zz-late-node")
    sim.patch_node("gpu-a", "a-node-10", labels={"rlinf.io/pool": "changed"})

    during = {n.name: n for page in [first, *pages] for n in page}
    after = _nodes(gpu_a)

    assert "zz-late-node" not in during
    assert during["a-node-10"].labels["rlinf.io/pool"] == "a100-a"
    assert after["a-node-10"].labels["rlinf.io/pool"] == "changed"


def test_continue_tokens_are_opaque_and_checked(sim: InProcessSimulator) -> None:
    code, first, _ = _raw(sim, "GET", "/gpu-a/api/v1/nodes?limit=5")
    token = first["metadata"]["continue"]

    forged, forged_body, _ = _raw(sim, "GET", "/gpu-a/api/v1/nodes?limit=5&continue=garbage")
    other, other_body, _ = _raw(
        sim, "GET", f"/gpu-a/apis/storage.k8s.io/v1/storageclasses?continue={token}"
    )

    assert (code, first["metadata"]["remainingItemCount"]) == (200, 12)
    assert (forged, forged_body["reason"]) == (400, "BadRequest")
    assert (other, other_body["reason"]) == (400, "BadRequest")


def test_an_expired_continue_token_answers_410(sim: InProcessSimulator) -> None:
    _, first, _ = _raw(sim, "GET", "/gpu-a/api/v1/nodes?limit=5")
    sim.reset()

    code, body, _ = _raw(
        sim, "GET", f"/gpu-a/api/v1/nodes?limit=5&continue={first['metadata']['continue']}"
    )

    assert (code, body["kind"], body["reason"]) == (410, "Status", "Expired")


# Node lists from encoded objects


def _raw_body(handle: SimulatorHandle, path: str) -> bytes:
    parts = urlsplit(handle.base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        connection.request("GET", path, headers={"Authorization": "Bearer demo-token-gpu-a"})
        return connection.getresponse().read()
    finally:
        connection.close()


@pytest.mark.parametrize(("query", "count"), [("", 17), ("?limit=5", 5)])
def test_node_lists_are_the_bytes_the_server_encodes_for_any_document(
    sim: InProcessSimulator, query: str, count: int
) -> None:
    body = _raw_body(sim, f"/gpu-a/api/v1/nodes{query}")

    document = json.loads(body)

    assert json.dumps(document).encode() == body
    assert (document["kind"], len(document["items"])) == ("NodeList", count)


_LISTED_OBJECTS: list[dict[str, Any]] = [
    {"metadata": {"name": "n1", "labels": {"a": "1"}}},
    {"metadata": {"name": "n2"}},
]


@pytest.mark.parametrize("items", [_LISTED_OBJECTS, []])
@pytest.mark.parametrize(("token", "remaining"), [(None, 0), ("next", 3)])
def test_encoded_lists_match_lists_encoded_whole(
    items: list[dict[str, Any]], token: str | None, remaining: int
) -> None:
    envelope: dict[str, Any] = {
        "api_version": "v1", "kind": "NodeList", "resource_version": 42,
        "continue_token": token, "remaining": remaining,
    }

    assembled = encoded_list(items=[encode_object(item) for item in items], **envelope)

    assert assembled.body == encode_object(list_object(items=items, **envelope))


def _listed_nodes(handle: SimulatorHandle) -> dict[str, dict[str, Any]]:
    items = json.loads(_raw_body(handle, "/gpu-a/api/v1/nodes"))["items"]
    return {item["metadata"]["name"]: item for item in items}


def test_a_node_changed_after_a_list_is_served_anew(sim: InProcessSimulator) -> None:
    before = _listed_nodes(sim)["a-node-01"]
    sim.patch_node("gpu-a", "a-node-01", labels={"rlinf.io/pool": "moved"})

    after = _listed_nodes(sim)["a-node-01"]
    _, fetched, _ = _raw(sim, "GET", "/gpu-a/api/v1/nodes/a-node-01")

    assert before["metadata"]["labels"]["rlinf.io/pool"] == "a100-a"
    assert after == fetched
    assert fetched["metadata"]["labels"]["rlinf.io/pool"] == "moved"
    assert fetched["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]


def test_a_restarted_simulator_never_serves_an_earlier_runs_versions() -> None:
    def versions() -> dict[str, str]:
        with run_simulator(DEMO_FLEET_PATH) as handle:
            nodes = _nodes(handle.credentials("gpu-a"))
        return {name: node.resource_version for name, node in nodes.items()}

    first, second = versions(), versions()

    assert first.keys() == second.keys()
    assert min(map(int, second.values())) > max(map(int, first.values()))


def test_a_node_removed_and_added_back_is_listed_as_added(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _nodes(gpu_a)
    sim.remove_node("gpu-a", "a-node-02")
    sim.add_node("gpu-a", "a-node-02", labels={"rlinf.io/pool": "back"})

    node = _nodes(gpu_a)["a-node-02"]

    assert (node.labels, node.allocatable) == (
        {"rlinf.io/pool": "back"}, {"cpu": "64", "memory": "512Gi", "pods": "110"})


# Admission of created Jobs


def test_unknown_fields_are_pruned_with_a_warning(sim: InProcessSimulator) -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL)])
    body["spec"]["surprise"] = True
    del body["spec"]["tasks"][0]["head"]

    code, created, headers = _raw(
        sim,
        "POST",
        f"/gpu-a/apis/rlinf.io/v1alpha1/namespaces/{NS}/jobs",
        json.dumps(body).encode(),
    )

    assert code == 201
    assert "surprise" not in created["spec"]
    assert created["spec"]["tasks"][0]["head"] is False
    assert headers.get_all("Warning") == ['299 - "unknown field \\"spec.surprise\\""']
    assert sim.created_bodies("gpu-a") == [
        {"namespace": NS, "body": body, "pruned_fields": ["spec.surprise"], "code": 201}
    ]


def test_nulls_are_kept_only_where_the_schema_allows_them(gpu_a: k8s.Credentials) -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL)])
    body["spec"]["networkDomain"] = None
    body["spec"]["tasks"][0]["head"] = None

    created = k8s.create_job(credentials=gpu_a, namespace=NS, body=body)

    assert created["spec"]["networkDomain"] is None
    assert created["spec"]["tasks"][0]["head"] is False


def test_strict_field_validation_rejects_unknown_fields(sim: InProcessSimulator) -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL)])
    body["spec"]["surprise"] = True
    path = f"/gpu-a/apis/rlinf.io/v1alpha1/namespaces/{NS}/jobs?fieldValidation=Strict"

    code, status, _ = _raw(sim, "POST", path, json.dumps(body).encode())

    assert (code, status["message"]) == (
        400,
        'strict decoding error: unknown field "spec.surprise"',
    )


def test_invalid_answers_carry_one_cause_per_problem(sim: InProcessSimulator) -> None:
    body = job_body("ppo", tasks=[{"name": "Actor", "replicas": 0}])

    code, status, _ = _raw(
        sim,
        "POST",
        f"/gpu-a/apis/rlinf.io/v1alpha1/namespaces/{NS}/jobs",
        json.dumps(body).encode(),
    )

    assert (code, status["reason"]) == (422, "Invalid")
    assert status["details"]["name"] == "ppo"
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("spec.tasks[0].name", "FieldValueInvalid"),
        ("spec.tasks[0].replicas", "FieldValueInvalid"),
        ("spec.tasks[0].template", "FieldValueRequired"),
    ]


def test_duplicate_task_names_are_invalid(gpu_a: k8s.Credentials) -> None:
    task = task_body("actor", replicas=1, selector=POOL)

    with pytest.raises(
        k8s.Invalid, match=r'spec\.tasks\[1\]: Duplicate value: \{"name": "actor"\}'
    ):
        _create(gpu_a, "twice", task, task)


def test_helper_bodies_are_admitted_by_the_shipped_crd() -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL, gpus=8)])
    with run_simulator(DEMO_FLEET_PATH) as handle:
        k8s.create_job(credentials=handle.credentials("gpu-a"), namespace=NS, body=body)

        assert handle.created_bodies("gpu-a")[0]["pruned_fields"] == []


def test_bad_json_answers_400(sim: InProcessSimulator) -> None:
    code, status, _ = _raw(
        sim, "POST", f"/gpu-a/apis/rlinf.io/v1alpha1/namespaces/{NS}/jobs", b"{nope"
    )

    assert (code, status["kind"], status["reason"]) == (400, "Status", "BadRequest")


def test_wrong_kind_answers_400(gpu_a: k8s.Credentials) -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL)])
    body["kind"] = "Deployment"

    with pytest.raises(k8s.BadRequest):
        k8s.create_job(credentials=gpu_a, namespace=NS, body=body)


def test_invalid_job_name_is_invalid(gpu_a: k8s.Credentials) -> None:
    with pytest.raises(k8s.Invalid, match=r"metadata\.name"):
        _create(gpu_a, "Not_A_Name", task_body("actor", replicas=1, selector=POOL))


def test_unknown_namespace_is_not_found(gpu_a: k8s.Credentials) -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL)])

    with pytest.raises(k8s.NotFound, match='namespaces "elsewhere" not found'):
        k8s.create_job(credentials=gpu_a, namespace="elsewhere", body=body)


def test_created_bodies_log_what_the_cluster_received(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    body = job_body("ppo", tasks=[task_body("actor", replicas=1, selector=POOL)], namespace=NS)
    k8s.create_job(credentials=gpu_a, namespace=NS, body=body)
    with pytest.raises(k8s.AlreadyExists):
        k8s.create_job(credentials=gpu_a, namespace=NS, body=body)

    log = sim.created_bodies("gpu-a")

    assert [entry["body"] for entry in log] == [body, body]
    assert [entry["code"] for entry in log] == [201, 409]
    assert sim.created_bodies("gpu-b") == []


def test_without_a_crd_file_a_minimal_shape_is_enforced(tmp_path: Path) -> None:
    with run_simulator(DEMO_FLEET_PATH, crd_path=tmp_path / "missing.yaml") as handle:
        credentials = handle.credentials("gpu-a")
        loose = job_body("loose", tasks=[{"name": "Any Name", "replicas": 0, "template": {}}])
        k8s.create_job(credentials=credentials, namespace=NS, body=loose)

        with pytest.raises(k8s.Invalid, match=r"spec\.tasks"):
            k8s.create_job(credentials=credentials, namespace=NS, body=job_body("bad", tasks=[]))


def test_a_crd_written_later_is_picked_up(tmp_path: Path) -> None:
    crd = tmp_path / "rlinf.io_jobs.yaml"
    body = job_body("ppo", tasks=[{"name": "Upper", "replicas": 1, "template": {}}])
    with run_simulator(DEMO_FLEET_PATH, crd_path=crd) as handle:
        credentials = handle.credentials("gpu-a")
        k8s.create_job(credentials=credentials, namespace=NS, body=body)
        crd.write_text(yaml.safe_dump(TEST_JOB_CRD))

        with pytest.raises(k8s.Invalid, match=r"spec\.tasks\[0\]\.name"):
            k8s.create_job(
                credentials=credentials, namespace=NS, body={**body, "metadata": {"name": "again"}}
            )


# Faults


def test_random_faults_repeat_for_the_same_seed(sim: InProcessSimulator) -> None:
    def outcomes() -> list[int | None]:
        sim.reset()
        sim.set_faults("gpu-b", error_rate=0.5, seed=11)
        credentials = sim.credentials("gpu-b")
        for _ in range(12):
            try:
                k8s.list_storage_classes(credentials=credentials, attempts=1)
            except k8s.ServerError:
                pass
        return [entry["code"] for entry in sim.requests("gpu-b")]

    first, second = outcomes(), outcomes()

    assert first == second
    assert {500, 200} <= set(first)


def test_faults_from_the_fleet_file_apply_from_the_start(crd_path: Path) -> None:
    document = _demo_document()
    document["clusters"][1]["faults"] = {"fail_next": 1}

    with run_simulator(document, crd_path=crd_path) as handle:
        with pytest.raises(k8s.ServerError):
            k8s.list_storage_classes(credentials=handle.credentials("gpu-b"), attempts=1)
        assert k8s.list_storage_classes(credentials=handle.credentials("gpu-b"), attempts=1)


def test_faults_of_one_cluster_leave_the_others_alone(sim: InProcessSimulator) -> None:
    sim.set_faults("gpu-a", error_rate=1.0)

    assert k8s.list_storage_classes(credentials=sim.credentials("gpu-b"), attempts=1)
    with pytest.raises(k8s.ServerError):
        k8s.list_storage_classes(credentials=sim.credentials("gpu-a"), attempts=1)


def test_clearing_faults_restores_service(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    sim.set_faults("gpu-a", drop_rate=1.0)
    sim.clear_faults("gpu-a")

    assert k8s.list_storage_classes(credentials=gpu_a, attempts=1)


def test_control_rejects_invalid_faults(sim: InProcessSimulator) -> None:
    with pytest.raises(ControlError) as caught:
        sim.set_faults("gpu-a", error_rate=2)

    assert caught.value.code == 422


def test_unknown_cluster_answers_404(sim: InProcessSimulator) -> None:
    code, status, _ = _raw(sim, "GET", "/nowhere/api/v1/nodes")

    assert (code, status["reason"]) == (404, "NotFound")


# Processes and the CLI


def test_simulator_process_serves_every_cluster_and_stops_cleanly() -> None:
    handle = start_simulator_process(DEMO_FLEET_PATH, 0)
    try:
        counts = {
            cluster.name: len(_nodes(handle.credentials(cluster.name)))
            for cluster in handle.fleet.clusters
        }
    finally:
        handle.stop()

    assert counts == {"gpu-a": 17, "gpu-b": 20, "cpu-c": 10}
    assert handle.process.returncode == 0


def test_cli_reports_an_invalid_fleet(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text(yaml.safe_dump({"clusters": [{"name": "x"}]}))

    result = subprocess.run(
        [sys.executable, "-m", "clusters.simulator", "--fleet", str(bad), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )

    assert result.returncode == 2
    assert "clusters[0] (x): 'namespace' is a required property" in result.stderr


def test_with_a_state_file_a_restarted_simulator_still_has_its_jobs(tmp_path: Path) -> None:
    state = tmp_path / "jobs.json"
    header = task_body("header", replicas=1, selector=POOL)
    first = start_simulator_process(DEMO_FLEET_PATH, 0, tick_interval=0.1, state=state)
    try:
        created = _create(first.credentials("gpu-a"), "kept", header)
        deadline = time.monotonic() + 10
        while _status(first.credentials("gpu-a"), "kept")["phase"] != "Running":
            assert time.monotonic() < deadline, "the controller never ran the Job"
            time.sleep(0.1)
    finally:
        first.stop()
    assert first.process.returncode == 0

    second = start_simulator_process(DEMO_FLEET_PATH, 0, state=state)
    try:
        kept = k8s.get_job(credentials=second.credentials("gpu-a"), namespace=NS, name="kept")
        listed = k8s.list_jobs(credentials=second.credentials("gpu-b"), namespace="rl-gpu-b")
        again = _create(second.credentials("gpu-a"), "after", header)
    finally:
        second.stop()
    assert kept["metadata"]["uid"] == created["metadata"]["uid"]
    assert kept["status"]["phase"] == "Running"
    assert listed == []
    assert int(again["metadata"]["resourceVersion"]) > int(kept["metadata"]["resourceVersion"])


def test_cli_reports_an_unreadable_state_file(tmp_path: Path) -> None:
    state = tmp_path / "jobs.json"
    state.write_text("[1, 2")

    result = subprocess.run(
        [sys.executable, "-m", "clusters.simulator", "--fleet", str(DEMO_FLEET_PATH),
         "--port", "0", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )

    assert result.returncode == 2
    assert f"cannot read the state file: {state}:" in result.stderr
    assert state.read_text() == "[1, 2"  # nothing lost
