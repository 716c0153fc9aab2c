"""The simulator's Kueue (SPEC 15): a Workload per plain pod group, its pods gated until
admitted, admission in creation order while quota lasts (BestEffortFIFO, borrowing in a
cohort), Kueue's condition messages, the queues and the visibility API, quota freed when the
group ends; the fleet file's `kueue:` and `PUT /_control/clusters/{c}/kueue` validated.

Jobs are created through the gateway (the real `kubernetes` client); Kueue's objects are read
over plain HTTP and through the gateway's Kueue verbs.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from clusters import k8s
from clusters.simulator.fleet import FleetError, parse_fleet
from clusters.simulator.kueue import role_hash
from clusters.simulator.testing import (
    ControlError,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

NS = "rl-gpu-k"
GPU = "nvidia.com/gpu"


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"name": name, "labels": {"kubernetes.io/hostname": name, "rlinf.io/pool": "k"},
            "allocatable": {GPU: gpus, "cpu": 64, "memory": "512Gi", "pods": 110}}


def _queues(*, vision_gpus: Any = 8, nlp_gpus: Any = 8,
            vision_limit: Any = None) -> dict[str, Any]:
    vision: dict[str, Any] = {"nominal_quota": vision_gpus}
    if vision_limit is not None:
        vision["borrowing_limit"] = vision_limit
    return {
        "cluster_queues": [
            {"name": "vision-cq", "cohort": "research", "flavors": [
                {"name": "a100", "resources": {GPU: vision, "cpu": {"nominal_quota": 256}}}]},
            {"name": "nlp-cq", "cohort": "research", "flavors": [
                {"name": "a100", "resources": {GPU: {"nominal_quota": nlp_gpus},
                                               "cpu": {"nominal_quota": 256}}}]},
        ],
        "local_queues": [
            {"namespace": NS, "name": "vision-q", "cluster_queue": "vision-cq"},
            {"namespace": NS, "name": "nlp-q", "cluster_queue": "nlp-cq"},
        ],
    }


FLEET = {"clusters": [
    {"name": "gpu-k", "namespace": NS, "nodes": [_node(f"k-node-{i:02d}") for i in range(1, 7)],
     "kueue": _queues(nlp_gpus=0)},
    {"name": "plain", "namespace": "rl-plain", "nodes": [_node("p-node-01")]},
]}


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    module_sim.reset()
    yield module_sim
    module_sim.reset()


@pytest.fixture
def gpu_k(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials("gpu-k")


def _queued(task: dict[str, Any], *, queue: str, group: str, total: int) -> dict[str, Any]:
    """A task whose pods join a Kueue plain pod group, as RLark's manifest renders them."""
    template = task["template"]
    template["metadata"] = {
        "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/pod-group-name": group},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)},
    }
    return task


def _submit(credentials: k8s.Credentials, name: str, *, gpus: int = 8, replicas: int = 1,
            queue: str = "vision-q", node: str | None = None) -> None:
    selector = {"kubernetes.io/hostname": node} if node else {"rlinf.io/pool": "k"}
    task = task_body("actor", replicas=replicas, selector=selector, gpus=gpus, head=True)
    body = job_body(name, tasks=[_queued(task, queue=queue, group=name, total=replicas)])
    k8s.create_job(credentials=credentials, namespace=NS, body=body)


def _get(sim: InProcessSimulator, path: str, cluster: str = "gpu-k",
         **query: Any) -> tuple[int, Any]:
    parts = urlsplit(sim.base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    target = f"/{cluster}{path}" + (f"?{urlencode(query)}" if query else "")
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _workload(sim: InProcessSimulator, name: str) -> dict[str, Any]:
    status, workload = _get(sim, f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads/{name}")
    assert status == 200, workload
    return dict(workload)


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in workload["status"]["conditions"] if c["type"] == kind)


def _phase(credentials: k8s.Credentials, name: str) -> str:
    return str(k8s.get_job(credentials=credentials, namespace=NS, name=name)["status"]["phase"])


def _pod(sim: InProcessSimulator, name: str) -> dict[str, Any]:
    status, pod = _get(sim, f"/api/v1/namespaces/{NS}/pods/{name}")
    assert status == 200, pod
    return dict(pod)


def test_a_pod_group_gets_a_workload_and_its_pods_wait_behind_kueues_gate(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    _submit(gpu_k, "first")
    pod = _pod(sim, "first-actor-0")
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
        "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    sim.tick()
    workload = _workload(sim, "first")
    assert (workload["spec"]["queueName"], workload["metadata"]["ownerReferences"][0]["name"]) == (
        "vision-q", "first")
    (pod_set,) = workload["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == (role_hash(pod_set["template"]), 1)
    assert len(pod_set["name"]) == 8
    assert _condition(workload, "QuotaReserved")["message"] == (
        "Quota reserved in ClusterQueue vision-cq")
    assert (_condition(workload, "Admitted")["reason"],
            _condition(workload, "Admitted")["message"]) == ("Admitted",
                                                              "The workload is admitted")
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "vision-cq"
    assert admission["podSetAssignments"][0]["flavors"] == {GPU: "a100"}
    assert admission["podSetAssignments"][0]["resourceUsage"] == {GPU: "8"}
    sim.tick()
    assert _phase(gpu_k, "first") == "Running"
    ungated = _pod(sim, "first-actor-0")
    assert "schedulingGates" not in ungated["spec"] and ungated["spec"]["nodeName"]


def test_the_second_job_waits_for_quota_with_kueues_message_and_is_admitted_when_the_first_ends(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    _submit(gpu_k, "first")
    _submit(gpu_k, "second")
    sim.tick()
    sim.tick()
    assert (_phase(gpu_k, "first"), _phase(gpu_k, "second")) == ("Running", "Pending")
    waiting = _workload(sim, "second")
    pod_set = waiting["spec"]["podSets"][0]["name"]
    quota = _condition(waiting, "QuotaReserved")
    assert (quota["status"], quota["reason"]) == ("False", "Pending")
    assert quota["message"] == (
        f"couldn't assign flavors to pod set {pod_set}: insufficient unused quota for "
        "nvidia.com/gpu in flavor a100, 8 more needed")
    assert "admission" not in waiting["status"]
    job = k8s.get_job(credentials=gpu_k, namespace=NS, name="second")
    assert (job["status"]["reason"]) == "SchedulingGated"
    _status, events = _get(sim, f"/api/v1/namespaces/{NS}/events")
    assert not [e for e in events["items"] if e["reason"] == "FailedScheduling"]
    status, summary = _get(sim, "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/"
                                f"{NS}/localqueues/vision-q/pendingworkloads")
    assert status == 200
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"],
             i["localQueueName"]) for i in summary["items"]] == [("second", 0, 0, "vision-q")]
    sim.set_job_phase("gpu-k", NS, "first", "Succeeded")
    sim.tick()
    finished = _condition(_workload(sim, "first"), "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "Succeeded", "Pods succeeded: 1/1.")
    assert _condition(_workload(sim, "second"), "Admitted")["status"] == "True"
    sim.tick()
    assert _phase(gpu_k, "second") == "Running"


def test_best_effort_fifo_skips_a_workload_that_can_never_fit(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    _submit(gpu_k, "huge", replicas=3)  # 24 GPUs: vision-cq can hold 8 (nlp-cq lends 0)
    _submit(gpu_k, "small")
    sim.tick()
    huge = _workload(sim, "huge")
    assert _condition(huge, "QuotaReserved")["message"] == (
        f"couldn't assign flavors to pod set {huge['spec']['podSets'][0]['name']}: insufficient "
        "quota for nvidia.com/gpu in flavor a100, previously considered podsets requests (0) + "
        "current podset request (24) > maximum capacity (8)")
    assert _condition(_workload(sim, "small"), "Admitted")["status"] == "True"
    _status, summary = _get(sim, "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/"
                                 "vision-cq/pendingworkloads")
    assert [i["metadata"]["name"] for i in summary["items"]] == ["huge"]


def test_a_cluster_queue_borrows_what_its_cohort_leaves_unused_up_to_its_limit(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    sim.control("PUT", "clusters/gpu-k/kueue", _queues(vision_gpus=8, nlp_gpus=16,
                                                       vision_limit=8))
    _submit(gpu_k, "borrows", replicas=2)  # 16: 8 own + 8 borrowed
    _submit(gpu_k, "too-much")  # 8 more: beyond the borrowing limit
    sim.tick()
    assert _condition(_workload(sim, "borrows"), "Admitted")["status"] == "True"
    assert "8 more needed" in _condition(_workload(sim, "too-much"), "QuotaReserved")["message"]
    _status, queues = _get(sim, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues")
    vision = next(q for q in queues["items"] if q["metadata"]["name"] == "vision-cq")
    usage = vision["status"]["flavorsUsage"][0]["resources"]
    assert {r["name"]: (r["total"], r["borrowed"]) for r in usage} == {
        GPU: ("16", "8"), "cpu": ("0", "0")}
    assert (vision["status"]["admittedWorkloads"], vision["status"]["pendingWorkloads"]) == (1, 1)
    assert vision["spec"]["cohort"] == "research"
    assert vision["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": GPU, "nominalQuota": "8", "borrowingLimit": "8"}


def test_a_resource_the_cluster_queue_does_not_cover_is_never_admitted(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    task = task_body("actor", replicas=1, selector={"rlinf.io/pool": "k"}, gpus=8,
                     devices={"rlinf.io/rdma": 1})
    body = job_body("rdma", tasks=[_queued(task, queue="vision-q", group="rdma", total=1)])
    k8s.create_job(credentials=gpu_k, namespace=NS, body=body)
    sim.tick()
    workload = _workload(sim, "rdma")
    assert _condition(workload, "QuotaReserved")["message"] == (
        f"couldn't assign flavors to pod set {workload['spec']['podSets'][0]['name']}: resource "
        "rlinf.io/rdma unavailable in ClusterQueue")


def test_a_missing_local_queue_is_kueues_inadmissible(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    _submit(gpu_k, "lost", queue="no-such-queue")
    sim.tick()
    quota = _condition(_workload(sim, "lost"), "QuotaReserved")
    assert (quota["reason"], quota["message"]) == (
        "Inadmissible", "LocalQueue no-such-queue doesn't exist")
    assert _phase(gpu_k, "lost") == "Pending"


def test_a_deleted_job_takes_its_workload_and_frees_the_quota(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    _submit(gpu_k, "first")
    _submit(gpu_k, "second")
    sim.tick()
    k8s.delete_job(credentials=gpu_k, namespace=NS, name="first")
    assert _get(sim, f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads/first")[0] == 404
    sim.tick()
    assert _condition(_workload(sim, "second"), "Admitted")["status"] == "True"


def test_a_job_without_the_queue_label_is_not_kueues(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    task = task_body("actor", replicas=1, selector={"rlinf.io/pool": "k"}, gpus=8)
    k8s.create_job(credentials=gpu_k, namespace=NS, body=job_body("free", tasks=[task]))
    sim.tick()
    assert _phase(gpu_k, "free") == "Running"
    status, workloads = _get(sim, f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads")
    assert (status, workloads["items"]) == (200, [])


def test_the_gateway_reads_queues_workloads_and_positions(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    for name in ("first", "second", "third"):
        _submit(gpu_k, name)
    sim.tick()
    queues = k8s.list_cluster_queues(credentials=gpu_k, page_size=1)
    assert [q["metadata"]["name"] for q in queues] == ["nlp-cq", "vision-cq"]
    local = k8s.list_local_queues(credentials=gpu_k)
    assert {(q["metadata"]["namespace"], q["metadata"]["name"]) for q in local} == {
        (NS, "nlp-q"), (NS, "vision-q")}
    names = [w["metadata"]["name"] for w in
             k8s.list_workloads(credentials=gpu_k, namespace=NS, page_size=2)]
    assert names == ["first", "second", "third"]
    summary = k8s.pending_workloads(credentials=gpu_k, namespace=NS, local_queue="vision-q")
    assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in summary["items"]] == [
        ("second", 0), ("third", 1)]
    with pytest.raises(k8s.NotFound):
        k8s.pending_workloads(credentials=gpu_k, namespace=NS, local_queue="nope")


def test_a_cluster_without_kueue_has_no_kueue_api(sim: InProcessSimulator) -> None:
    plain = sim.credentials("plain")
    with pytest.raises(k8s.NotFound):
        k8s.list_cluster_queues(credentials=plain)
    with pytest.raises(k8s.NotFound):
        k8s.list_workloads(credentials=plain, namespace="rl-plain")


def test_put_kueue_replaces_the_queues_and_the_next_pass_admits_by_them(
        sim: InProcessSimulator, gpu_k: k8s.Credentials) -> None:
    _submit(gpu_k, "first")
    _submit(gpu_k, "second")
    sim.tick()
    assert _condition(_workload(sim, "second"), "QuotaReserved")["status"] == "False"
    answer = sim.control("PUT", "clusters/gpu-k/kueue", _queues(vision_gpus=16, nlp_gpus=0))
    assert [q["metadata"]["name"] for q in answer["cluster_queues"]] == ["nlp-cq", "vision-cq"]
    sim.tick()
    assert _condition(_workload(sim, "second"), "Admitted")["status"] == "True"
    sim.reset()
    assert sim.control("GET", "clusters/gpu-k/kueue")["workloads"] == []


@pytest.mark.parametrize(("body", "words"), [
    ({"cluster_queues": [{"name": "q", "flavors": [{"name": "f", "resources": {
        GPU: {"nominal_quota": "lots"}}}]}]}, "'lots' is not a non-negative quantity"),
    ({"cluster_queues": [{"name": "q", "flavors": [{"name": "f", "resources": {
        GPU: {"nominal_quota": 8, "borrowing_limit": 2}}}]}]}, "only a ClusterQueue in a cohort"),
    ({"cluster_queues": [], "local_queues": [
        {"namespace": NS, "name": "x", "cluster_queue": "ghost"}]}, "ghost is not a ClusterQueue"),
    ({"cluster_queues": [{"name": "q", "flavors": [
        {"name": "f", "resources": {GPU: {"nominal_quota": 8}}},
        {"name": "g", "resources": {"cpu": {"nominal_quota": 8}}}]}]}, "the same resources"),
    ({"cluster_queues": [{"name": "Q_Q", "flavors": [{"name": "f", "resources": {
        GPU: {"nominal_quota": 8}}}]}]}, "must be a DNS label"),
    ({"queues": []}, "Additional properties are not allowed"),
])
def test_bad_queues_are_refused_with_the_path_at_fault(sim: InProcessSimulator,
                                                      body: dict[str, Any], words: str) -> None:
    with pytest.raises(ControlError) as refused:
        sim.control("PUT", "clusters/gpu-k/kueue", body)
    assert refused.value.code == 422
    assert words in str(refused.value)
    with pytest.raises(FleetError) as invalid:
        parse_fleet({"clusters": [{"name": "c", "namespace": "n", "kueue": body}]})
    assert any(words in problem and problem.startswith("clusters[0] (c).kueue")
               for problem in invalid.value.problems)
