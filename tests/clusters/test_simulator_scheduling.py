"""The simulator's scheduler: capacity reserved by bound pods, kube-scheduler's FitError
messages, foreign workload pods, and the cluster-wide pods list with field selectors.

Jobs are created through the gateway (the real `kubernetes` client); pod objects and
events are read over plain HTTP, as an API client sees them.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from clusters import k8s
from clusters.simulator.fleet import FleetError, load_yaml, parse_fleet
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    ControlError,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

NS = "rl-gpu-a"
HEAD = {"kubernetes.io/hostname": "a-head-01"}
POOL = {"rlinf.io/pool": "a100-a"}
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET_PATH) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    module_sim.reset()
    yield module_sim
    module_sim.reset()


@pytest.fixture
def gpu_a(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials("gpu-a")


def _create(credentials: k8s.Credentials, name: str, *tasks: dict[str, Any]) -> None:
    k8s.create_job(credentials=credentials, namespace=NS, body=job_body(name, tasks=[*tasks]))


def _raw(sim: InProcessSimulator, cluster: str, path: str, **query: str) -> tuple[int, bytes]:
    parts = urlsplit(sim.base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    token = sim.fleet.cluster(cluster).token
    target = f"/{cluster}{path}" + (f"?{urlencode(query)}" if query else "")
    try:
        connection.request("GET", target, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _get(sim: InProcessSimulator, cluster: str, path: str, **query: str) -> tuple[int, Any]:
    status, body = _raw(sim, cluster, path, **query)
    return status, json.loads(body)


def _pod(sim: InProcessSimulator, name: str, namespace: str = NS) -> dict[str, Any]:
    status, pod = _get(sim, "gpu-a", f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert status == 200, pod
    return dict(pod)


def _scheduled(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def _phase(credentials: k8s.Credentials, name: str) -> str:
    return str(k8s.get_job(credentials=credentials, namespace=NS, name=name)["status"]["phase"])


def _pod_names(sim: InProcessSimulator, cluster: str = "gpu-a", **query: str) -> list[str]:
    status, answer = _get(sim, cluster, "/api/v1/pods", **query)
    assert status == 200, answer
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in answer["items"]]


# gpu-a: a-head-01 (8 GPUs), a-node-01..12 (8 GPUs; a-node-12 NotReady), a-cpu-01..04.
HEAD_BUSY = (
    "0/17 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated "
    "taint(s), 15 node(s) didn't match Pod's node affinity/selector. preemption: 0/17 nodes "
    "are available: 1 No preemption victims found for incoming pod, 16 Preemption is not "
    "helpful for scheduling."
)


def test_the_second_of_two_jobs_for_one_8_gpu_node_waits_until_the_first_ends(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "first", task_body("actor", replicas=1, selector=HEAD, gpus=8, head=True))
    _create(gpu_a, "second", task_body("actor", replicas=1, selector=HEAD, gpus=8, head=True))

    sim.tick()
    sim.tick()

    assert (_phase(gpu_a, "first"), _phase(gpu_a, "second")) == ("Running", "Pending")
    assert _pod(sim, "first-actor-0")["spec"]["nodeName"] == "a-head-01"
    waiting = _pod(sim, "second-actor-0")
    assert "nodeName" not in waiting["spec"]
    assert waiting["status"]["phase"] == "Pending"
    condition = _scheduled(waiting)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "Unschedulable", HEAD_BUSY)
    events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="second-actor-0")
    assert [(e.type, e.reason, e.message, e.count) for e in events] == [
        ("Warning", "FailedScheduling", HEAD_BUSY, 1)]

    sim.set_job_phase("gpu-a", NS, "first", "Succeeded")
    sim.tick()

    assert _phase(gpu_a, "second") == "Running"
    assert _pod(sim, "second-actor-0")["spec"]["nodeName"] == "a-head-01"
    assert _scheduled(_pod(sim, "second-actor-0"))["status"] == "True"


def test_replicas_bind_one_per_node_and_a_partly_placed_job_holds_its_nodes(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "wide", task_body("actor", replicas=12, selector=POOL, gpus=8))

    sim.tick()

    nodes = [_pod(sim, f"wide-actor-{i}")["spec"].get("nodeName") for i in range(12)]
    assert nodes[:11] == [f"a-node-{i:02d}" for i in range(1, 12)]
    assert nodes[11] is None
    assert _scheduled(_pod(sim, "wide-actor-11"))["message"] == (
        "0/17 nodes are available: 1 node(s) had untolerated taint(s), 11 Insufficient "
        "nvidia.com/gpu, 5 node(s) didn't match Pod's node affinity/selector. preemption: "
        "0/17 nodes are available: 11 No preemption victims found for incoming pod, "
        "6 Preemption is not helpful for scheduling.")
    status = k8s.get_job(credentials=gpu_a, namespace=NS, name="wide")["status"]
    assert (status["phase"], status["message"]) == ("Pending", (
        "task actor needs 12 ready node(s) with rlinf.io/pool=a100-a, nvidia.com/gpu>=8; "
        "11 available (12 match the selector, 11 ready)"))

    _create(gpu_a, "later", task_body("actor", replicas=1, selector=POOL, gpus=1))
    sim.tick()

    assert _phase(gpu_a, "later") == "Pending"


def test_bound_pods_of_an_incomplete_gang_start_while_the_job_is_pending(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    """The kubelet starts a pod once it is bound (startTime, a running container, Running),
    whether or not the rest of its gang has nodes: 11 of 12 start, the 12th waits."""
    _create(gpu_a, "wide", task_body("actor", replicas=12, selector=POOL, gpus=8))

    sim.tick()

    assert _phase(gpu_a, "wide") == "Pending"
    started = _pod(sim, "wide-actor-0")
    assert started["status"]["phase"] == "Running"
    assert started["status"]["startTime"]
    (container,) = started["status"]["containerStatuses"]
    assert container["state"] == {"running": {"startedAt": started["status"]["startTime"]}}
    assert container["ready"] is True
    waiting = _pod(sim, "wide-actor-11")
    assert waiting["status"]["phase"] == "Pending"
    assert "startTime" not in waiting["status"]
    assert waiting["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "ContainerCreating"}}
    events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="wide-actor-0")
    assert [e.reason for e in events] == ["Scheduled", "Pulled", "Created", "Started"]
    assert [e.reason for e in k8s.list_events(credentials=gpu_a, namespace=NS,
                                              involved_name="wide-actor-11")] == [
        "FailedScheduling"]
    log = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="wide-actor-0")
    assert log.text.startswith("rlark: task actor replica 0 on node a-node-01")
    # The listed pods say the same (the cluster-wide list RLark's status pass reads).
    status, listed = _get(sim, "gpu-a", f"/api/v1/namespaces/{NS}/pods")
    assert status == 200
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in listed["items"]}
    assert sorted(phases.values()).count("Running") == 11
    assert phases["wide-actor-11"] == "Pending"

    sim.patch_node("gpu-a", "a-node-12", ready=True)
    sim.tick()

    assert _phase(gpu_a, "wide") == "Running"
    job_start = k8s.get_job(credentials=gpu_a, namespace=NS, name="wide")["status"]["startTime"]
    assert _pod(sim, "wide-actor-0")["status"]["startTime"] <= job_start
    assert _pod(sim, "wide-actor-11")["status"]["startTime"] == job_start


def test_a_second_replica_never_shares_its_tasks_node(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "pair", task_body("actor", replicas=2, selector=HEAD, gpus=1))

    sim.tick()

    assert _pod(sim, "pair-actor-0")["spec"]["nodeName"] == "a-head-01"
    assert _scheduled(_pod(sim, "pair-actor-1"))["message"] == (
        "0/17 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 1 node(s) "
        "had untolerated taint(s), 15 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/17 nodes are available: 1 No preemption victims found for incoming "
        "pod, 16 Preemption is not helpful for scheduling.")
    spec = _pod(sim, "pair-actor-0")["spec"]
    term = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == [{"labelSelector": {"matchLabels": {"rlinf.io/job": "pair",
                                                       "rlinf.io/task": "actor"}},
                     "topologyKey": "kubernetes.io/hostname"}]


def test_a_request_above_a_nodes_allocatable_is_not_helped_by_preemption(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "huge", task_body("actor", replicas=1, selector=HEAD, gpus=16))

    sim.tick()

    assert _scheduled(_pod(sim, "huge-actor-0"))["message"] == (
        "0/17 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated "
        "taint(s), 15 node(s) didn't match Pod's node affinity/selector. preemption: 0/17 "
        "nodes are available: 17 Preemption is not helpful for scheduling.")


def test_cpu_memory_and_pod_count_are_reserved_too(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    big = task_body("actor", replicas=1, selector=HEAD)
    big["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "60", "memory": "500Gi"}}
    _create(gpu_a, "big", big)
    more = task_body("actor", replicas=1, selector=HEAD)
    more["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "8", "memory": "16Gi"}}
    _create(gpu_a, "more", more)
    sim.patch_node("gpu-a", "a-head-01", allocatable={"cpu": "64", "memory": "512Gi", "pods": "1"})

    sim.tick()

    message = _scheduled(_pod(sim, "more-actor-0"))["message"]
    assert message.startswith(
        "0/17 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods, "
        "1 node(s) had untolerated taint(s), 15 node(s) didn't match Pod's node")


def test_pod_level_requests_init_containers_and_overhead_count(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.patch_node("gpu-a", "a-head-01", allocatable={"cpu": "64"})
    task = task_body("actor", replicas=1, selector=HEAD)
    task["template"]["spec"].update({
        "initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "63"}}}],
        "overhead": {"cpu": "500m"},
    })
    _create(gpu_a, "setup", task)
    sim.tick()
    assert _phase(gpu_a, "setup") == "Running"

    _create(gpu_a, "tiny", task_body("actor", replicas=1, selector=HEAD))
    tiny = job_body("cpu", tasks=[task_body("actor", replicas=1, selector=HEAD)])
    tiny["spec"]["tasks"][0]["template"]["spec"]["resources"] = {"requests": {"cpu": "1"}}
    k8s.create_job(credentials=gpu_a, namespace=NS, body=tiny)
    sim.tick()

    assert _phase(gpu_a, "tiny") == "Running"  # no request: fits beside the 63.5 cpus
    assert "1 Insufficient cpu" in _scheduled(_pod(sim, "cpu-actor-0"))["message"]


def test_a_pod_that_may_not_preempt_says_so(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "first", task_body("actor", replicas=1, selector=HEAD, gpus=8))
    polite = task_body("actor", replicas=1, selector=HEAD, gpus=8)
    polite["template"]["spec"]["preemptionPolicy"] = "Never"
    _create(gpu_a, "polite", polite)

    sim.tick()

    assert _scheduled(_pod(sim, "polite-actor-0"))["message"].endswith(
        "didn't match Pod's node affinity/selector. preemption: not eligible due to "
        "preemptionPolicy=Never.")


def test_a_pod_that_ended_frees_its_capacity(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    _create(gpu_a, "first", task_body("actor", replicas=1, selector=HEAD, gpus=8))
    sim.tick()
    _create(gpu_a, "second", task_body("actor", replicas=1, selector=HEAD, gpus=8))
    sim.tick()
    assert _phase(gpu_a, "second") == "Pending"

    sim.patch_pod("gpu-a", NS, "first-actor-0", phase="Failed",
                  terminated={"reason": "OOMKilled", "exitCode": 137})
    sim.tick()

    assert _phase(gpu_a, "second") == "Running"


def test_a_deleted_job_frees_its_capacity(sim: InProcessSimulator,
                                          gpu_a: k8s.Credentials) -> None:
    _create(gpu_a, "first", task_body("actor", replicas=1, selector=HEAD, gpus=8))
    _create(gpu_a, "second", task_body("actor", replicas=1, selector=HEAD, gpus=8))
    sim.tick()

    k8s.delete_job(credentials=gpu_a, namespace=NS, name="first")
    sim.tick()

    assert _phase(gpu_a, "second") == "Running"


# Foreign workload


def test_a_foreign_pod_takes_its_nodes_capacity_until_it_is_deleted(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    pod = sim.add_pod("gpu-a", "inference-0", node="a-head-01", namespace="serving",
                      requests={GPU: 6, "cpu": "4"}, init_requests={"memory": "2Gi"},
                      overhead={"cpu": "100m"}, labels={"app": "inference"})
    assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == ("a-head-01", "Running")
    _create(gpu_a, "ppo", task_body("actor", replicas=1, selector=HEAD, gpus=4))

    sim.tick()

    assert _phase(gpu_a, "ppo") == "Pending"
    assert _scheduled(_pod(sim, "ppo-actor-0"))["message"].startswith(
        "0/17 nodes are available: 1 Insufficient nvidia.com/gpu,")
    assert _pod(sim, "inference-0", namespace="serving")["metadata"]["labels"] == {
        "app": "inference"}

    sim.remove_pod("gpu-a", "inference-0")
    sim.tick()

    assert _phase(gpu_a, "ppo") == "Running"
    assert "serving/inference-0" not in _pod_names(sim)


@pytest.mark.parametrize(("body", "message"), [
    ({"node": "a-head-01", "requests": {}}, "'name' is a required property"),
    ({"name": "x", "requests": {}}, "'node' is a required property"),
    ({"name": "x", "node": "a-head-01"}, "'requests' is a required property"),
    ({"name": "x", "node": "a-head-01", "requests": {GPU: "eight"}},
     "requests[\"nvidia.com/gpu\"]: 'eight' is not a non-negative quantity"),
    ({"name": "x", "node": "a-head-01", "requests": {GPU: -1}}, "-1 is not a non-negative"),
    ({"name": "x", "node": "a-head-01", "requests": {GPU: 1.5}}, "is not of type"),
    ({"name": "x", "node": "a-head-01", "requests": {}, "extra": 1},
     "Additional properties are not allowed"),
    ({"name": "Not_DNS", "node": "a-head-01", "requests": {}}, "name: must be a DNS subdomain"),
    ({"name": "x", "namespace": "Bad NS", "node": "a-head-01", "requests": {}},
     "namespace: must be a DNS label"),
    ({"name": "x", "node": "a-node-99", "requests": {}},
     "node: a-node-99 is not a node of this cluster"),
    ({"name": "x", "node": "a-head-01", "requests": {GPU: 9}},
     "pod x does not fit on node a-head-01: Insufficient nvidia.com/gpu"),
    ({"name": "x", "node": "a-head-01", "requests": {}, "labels": {"bad key!": "v"}},
     "not a valid label key"),
    ([1, 2], "is not of type 'object'"),
])
def test_foreign_pods_are_validated_with_clear_400s(
    sim: InProcessSimulator, body: Any, message: str
) -> None:
    with pytest.raises(ControlError) as refused:
        sim.control("POST", "clusters/gpu-a/pods", body)

    assert refused.value.code == 400
    assert message in refused.value.status["message"]
    assert _pod_names(sim) == []


def test_foreign_pod_conflicts_and_unknowns(sim: InProcessSimulator) -> None:
    sim.add_pod("gpu-a", "web", node="a-cpu-01", requests={"cpu": "1"})
    with pytest.raises(ControlError) as duplicate:
        sim.add_pod("gpu-a", "web", node="a-cpu-02", requests={"cpu": "1"})
    with pytest.raises(ControlError) as unknown_pod:
        sim.remove_pod("gpu-a", "nope")
    with pytest.raises(ControlError) as unknown_cluster:
        sim.control("POST", "clusters/nowhere/pods", {"name": "x", "node": "n", "requests": {}})

    assert (duplicate.value.code, unknown_pod.value.code, unknown_cluster.value.code) == (
        409, 404, 404)
    assert _pod_names(sim) == ["default/web"]


def test_a_foreign_pod_fills_a_node_one_request_at_a_time(sim: InProcessSimulator) -> None:
    sim.add_pod("gpu-a", "one", node="a-head-01", requests={GPU: 5})
    with pytest.raises(ControlError, match="does not fit on node a-head-01"):
        sim.add_pod("gpu-a", "two", node="a-head-01", requests={GPU: 4})
    sim.add_pod("gpu-a", "three", node="a-head-01", requests={GPU: 3})


def test_fleet_file_pods_are_served_and_checked() -> None:
    document = load_yaml(DEMO_FLEET_PATH.read_text())
    pods = document["clusters"][0].setdefault("pods", [])
    pods.append({"name": "batch-0", "node": "a-node-01", "requests": {GPU: 8}})
    with run_simulator(document) as handle:
        assert "default/batch-0" in _pod_names(handle)
        handle.add_pod("gpu-a", "extra", node="a-node-02", requests={GPU: 1})
        handle.reset()
        assert "default/batch-0" in _pod_names(handle)
        assert "default/extra" not in _pod_names(handle)

    pods.extend([
        {"name": "batch-0", "node": "a-node-02", "requests": {}},
        {"name": "batch-1", "node": "a-node-01", "requests": {GPU: 1}},
        {"name": "batch-2", "node": "a-node-77", "requests": {}},
    ])
    with pytest.raises(FleetError) as caught:
        parse_fleet(document)
    assert caught.value.problems == [
        "clusters[0] (gpu-a).pods[1] (batch-0).name: duplicate pod name in this cluster",
        "clusters[0] (gpu-a).pods[2] (batch-1): does not fit on node a-node-01: "
        "Insufficient nvidia.com/gpu",
        "clusters[0] (gpu-a).pods[3] (batch-2).node: a-node-77 is not a node of this cluster",
    ]


# The pods list


def test_the_cluster_wide_pods_list_takes_field_and_label_selectors(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.add_pod("gpu-a", "web", node="a-cpu-01", requests={"cpu": "1"}, labels={"app": "web"})
    _create(gpu_a, "done", task_body("actor", replicas=1, selector=HEAD, gpus=8))
    _create(gpu_a, "live", task_body("actor", replicas=2, selector=POOL, gpus=8))
    sim.tick()
    sim.set_job_phase("gpu-a", NS, "done", "Succeeded")

    everything = _pod_names(sim)
    live = _pod_names(sim, fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
    on_node = _pod_names(sim, fieldSelector="spec.nodeName=a-node-02")
    on_node_too = _pod_names(sim, fieldSelector="spec.nodeName==a-node-02,status.phase=Running")
    labelled = _pod_names(sim, labelSelector="app=web")
    unbound = _pod_names(sim, fieldSelector="spec.nodeName=")

    assert everything == ["default/web", f"{NS}/done-actor-0", f"{NS}/live-actor-0",
                          f"{NS}/live-actor-1"]
    assert live == ["default/web", f"{NS}/live-actor-0", f"{NS}/live-actor-1"]
    assert on_node == on_node_too == [f"{NS}/live-actor-1"]
    assert labelled == ["default/web"]
    assert unbound == []
    status, namespaced = _get(sim, "gpu-a", "/api/v1/namespaces/default/pods")
    assert (status, [p["metadata"]["name"] for p in namespaced["items"]]) == (200, ["web"])


def test_the_pods_list_pages_from_one_snapshot(sim: InProcessSimulator) -> None:
    for index in range(5):
        sim.add_pod("gpu-a", f"w-{index}", node="a-cpu-01", requests={"cpu": "1"})
    status, first = _get(sim, "gpu-a", "/api/v1/pods", limit="2")
    sim.add_pod("gpu-a", "w-9", node="a-cpu-01", requests={"cpu": "1"})
    names = [p["metadata"]["name"] for p in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        status, page = _get(sim, "gpu-a", "/api/v1/pods", limit="2", **{"continue": token})
        assert status == 200
        names += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")

    assert first["metadata"]["remainingItemCount"] == 3
    assert names == [f"w-{index}" for index in range(5)]


def test_pages_cut_from_a_lists_joined_text_are_its_pods_encoded_one_by_one(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    """A page of a long pod list is a slice of the list's text, joined once: every page's
    bytes are those of its pods' objects encoded one by one, in a Job's pods and foreign
    pods alike, and a changed list is joined anew."""
    from clusters.simulator.objects import encode_object

    for index in range(7):
        sim.add_pod("gpu-a", f"w-{index}", node="a-cpu-01", requests={"cpu": "100m"},
                    labels={"i": str(index)})
    _create(gpu_a, "live", task_body("actor", replicas=2, selector=POOL, gpus=8))
    sim.tick()

    def pages(limit: str) -> list[tuple[bytes, list[dict[str, Any]]]]:
        found, token = [], ""
        while True:
            query = {"limit": limit} | ({"continue": token} if token else {})
            status, raw = _raw(sim, "gpu-a", "/api/v1/pods", **query)
            assert status == 200
            document = json.loads(raw)
            items = document["items"]
            found.append((raw, items))
            token = document["metadata"].get("continue", "")
            if not token:
                return found

    before = pages("3")
    sim.add_pod("gpu-a", "w-late", node="a-cpu-01", requests={"cpu": "100m"})
    after = pages("4")

    for raw, items in before + after:
        assert b", ".join(encode_object(item) for item in items) in raw
    assert [len(items) for _raw_page, items in before] == [3, 3, 3]
    assert [len(items) for _raw_page, items in after] == [4, 4, 2]
    assert "w-late" in [item["metadata"]["name"] for _raw_page, items in after for item in items]


def test_a_foreign_pods_request_is_the_rule_over_its_spec_computed_once_per_shape() -> None:
    from clusters.podrequests import pod_requests
    from clusters.simulator.fleet import ForeignPodSpec

    shapes = [ForeignPodSpec(name=f"p-{i}", node=f"n-{i}", requests={"cpu": "1", GPU: "2"},
                             init_requests={"cpu": "3"} if i % 2 else {},
                             overhead={"memory": "1Gi"}) for i in range(4)]

    answers = [pod.request() for pod in shapes]
    answers[0]["cpu"] = 0  # a caller's own copy

    assert [pod.request() for pod in shapes] == [pod_requests(pod.pod_spec()) for pod in shapes]
    assert answers[1] == {"cpu": 3000, GPU: 2, "memory": 1024**3}


@pytest.mark.parametrize(("query", "message"), [
    ({"fieldSelector": "spec.hostIP=1.2.3.4"}, "field label not supported: spec.hostIP"),
    ({"fieldSelector": "status.phase"}, "an operator is required"),
    ({"labelSelector": "app in (web)"}, "unable to parse requirement"),
    ({"watch": "true"}, "does not support watch"),
])
def test_unsupported_pod_list_queries_answer_400(sim: InProcessSimulator, query: dict[str, str],
                                                 message: str) -> None:
    status, answer = _get(sim, "gpu-a", "/api/v1/pods", **query)

    assert status == 400
    assert message in answer["message"]
