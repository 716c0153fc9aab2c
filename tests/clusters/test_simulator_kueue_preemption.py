"""The simulator's Kueue preempts and evicts as Kueue does (SPEC 15): a higher-priority
Workload (its pods' `kueue.x-k8s.io/priority-class`, a WorkloadPriorityClass of the fleet
file) preempts lower ones within its ClusterQueue when `withinClusterQueue: LowerPriority`
lets it, with Kueue's conditions, reasons and messages; the preempted group's pods are
stopped and come back gated, its quota is released and it waits in its queue again. An
administrator's deactivation (`POST /_control/.../workloads/{name}/evict`) evicts with
Kueue's `Deactivated` words; reactivation queues it again.

Jobs are created through the gateway (the real `kubernetes` client); Kueue's objects are read
over plain HTTP.
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
from clusters.simulator.testing import (
    ControlError,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

NS = "rl-gpu-p"
GPU = "nvidia.com/gpu"
CLUSTER = "gpu-p"


def _node(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {"kubernetes.io/hostname": name, "rlinf.io/pool": "p"},
            "allocatable": {GPU: 8, "cpu": 64, "memory": "512Gi", "pods": 110}}


def _queues(*, gpus: int = 8, policy: str | None = "LowerPriority") -> dict[str, Any]:
    queue: dict[str, Any] = {"name": "vision-cq", "flavors": [
        {"name": "a100", "resources": {GPU: {"nominal_quota": gpus}}}]}
    if policy is not None:
        queue["preemption"] = {"within_cluster_queue": policy}
    return {
        "cluster_queues": [queue],
        "local_queues": [{"namespace": NS, "name": "vision-q", "cluster_queue": "vision-cq"},
                         {"namespace": NS, "name": "urgent-q", "cluster_queue": "vision-cq"}],
        "workload_priority_classes": [{"name": "low", "value": 100},
                                      {"name": "high", "value": 1000,
                                       "description": "deadline runs"}],
    }


FLEET = {"clusters": [{"name": CLUSTER, "namespace": NS,
                       "nodes": [_node(f"p-node-{i:02d}") for i in range(1, 5)],
                       "kueue": _queues()}]}


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
def creds(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials(CLUSTER)


def _submit(credentials: k8s.Credentials, name: str, *, gpus: int = 8, replicas: int = 1,
            priority: str | None = None, queue: str = "vision-q") -> None:
    task = task_body("actor", replicas=replicas, selector={"rlinf.io/pool": "p"}, gpus=gpus,
                     head=True)
    labels = {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/pod-group-name": name}
    if priority is not None:
        labels["kueue.x-k8s.io/priority-class"] = priority
    task["template"]["metadata"] = {
        "labels": labels, "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(replicas)}}
    k8s.create_job(credentials=credentials, namespace=NS, body=job_body(name, tasks=[task]))


def _get(sim: InProcessSimulator, path: str, **query: Any) -> tuple[int, Any]:
    parts = urlsplit(sim.base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    target = f"/{CLUSTER}{path}" + (f"?{urlencode(query)}" if query else "")
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


def _condition(workload: dict[str, Any], kind: str) -> tuple[str, str, str]:
    found = next(c for c in workload["status"]["conditions"] if c["type"] == kind)
    return found["status"], found["reason"], found["message"]


def _job(credentials: k8s.Credentials, name: str) -> dict[str, Any]:
    return dict(k8s.get_job(credentials=credentials, namespace=NS, name=name))


def _pod(sim: InProcessSimulator, name: str) -> dict[str, Any]:
    status, pod = _get(sim, f"/api/v1/namespaces/{NS}/pods/{name}")
    assert status == 200, pod
    return dict(pod)


def _pending(sim: InProcessSimulator) -> list[tuple[str, int, int]]:
    _status, summary = _get(sim, "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/"
                                 "vision-cq/pendingworkloads")
    return [(i["metadata"]["name"], i["priority"], i["positionInClusterQueue"])
            for i in summary["items"]]


def _running(sim: InProcessSimulator, creds: k8s.Credentials, *names: str) -> None:
    sim.tick()  # admitted
    sim.tick()  # scheduled
    assert [_job(creds, n)["status"]["phase"] for n in names] == ["Running"] * len(names)


def _preemption(preemptor: dict[str, Any]) -> str:
    return (f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, "
            "JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: "
            "/vision-cq; preemptee path: /vision-cq")


def test_a_higher_priority_workload_preempts_a_lower_one_with_kueues_words(
        sim: InProcessSimulator, creds: k8s.Credentials) -> None:
    _submit(creds, "low", priority="low")
    _running(sim, creds, "low")
    running_pod = _pod(sim, "low-actor-0")
    assert running_pod["spec"]["nodeName"]
    _submit(creds, "high", priority="high", queue="urgent-q")
    sim.tick()  # Kueue preempts "low"; its Job is stopped and its quota released

    high = _workload(sim, "high")
    assert (high["spec"]["priority"], high["spec"]["priorityClassName"],
            high["spec"]["priorityClassSource"]) == (
        1000, "high", "kueue.x-k8s.io/workloadpriorityclass")
    status, reason, message = _condition(high, "QuotaReserved")
    assert (status, reason) == ("False", "Pending")
    assert message.endswith("insufficient unused quota for nvidia.com/gpu in flavor a100, "
                            "8 more needed")
    low = _workload(sim, "low")
    words = _preemption(high)
    assert _condition(low, "Evicted") == ("True", "Preempted", words)
    assert _condition(low, "Preempted") == ("True", "InClusterQueue", words)
    assert _condition(low, "QuotaReserved") == ("False", "Pending", words)
    assert _condition(low, "Admitted") == ("False", "NoReservation",
                                           "The workload has no reservation")
    assert _condition(low, "Requeued") == ("True", "Preempted", words)
    assert "admission" not in low["status"] and low["spec"]["priority"] == 100

    # Kueue deleted the group's pods; the operator made them again, behind the gate.
    job = _job(creds, "low")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Pending", "SchedulingGated")
    assert "startTime" not in job["status"]
    again = _pod(sim, "low-actor-0")
    assert again["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert "nodeName" not in again["spec"]
    assert again["metadata"]["uid"] != running_pod["metadata"]["uid"]
    _status, events = _get(sim, f"/api/v1/namespaces/{NS}/events")
    assert [(e["involvedObject"]["name"], e["message"]) for e in events["items"]
            if e["reason"] == "Stopped"] == [("low-actor-0", words)]

    sim.tick()  # the preemptor takes the freed quota; "low" waits in line again
    assert _condition(_workload(sim, "high"), "Admitted")[0] == "True"
    assert _job(creds, "high")["status"]["phase"] == "Running"
    assert _pending(sim) == [("low", 100, 0)]
    sim.tick()
    assert _job(creds, "low")["status"]["phase"] == "Pending"

    sim.set_job_phase(CLUSTER, NS, "high", "Succeeded")
    sim.tick()  # "low" is admitted again: Evicted and Preempted turn False
    low = _workload(sim, "low")
    assert _condition(low, "Admitted")[0] == "True"
    assert _condition(low, "Evicted") == ("False", "QuotaReserved", f"Previously: {words}")
    assert _condition(low, "Preempted") == ("False", "QuotaReserved", f"Previously: {words}")
    assert _job(creds, "low")["status"]["phase"] == "Running"


def test_the_fewest_lowest_newest_workloads_are_preempted(
        sim: InProcessSimulator, creds: k8s.Credentials) -> None:
    sim.control("PUT", f"clusters/{CLUSTER}/kueue", _queues(gpus=16))
    _submit(creds, "a", gpus=8)  # priority 0, admitted first
    _submit(creds, "b", gpus=4, priority="low")
    _submit(creds, "c", gpus=4)  # priority 0, admitted last
    _running(sim, creds, "a", "b", "c")
    _submit(creds, "urgent", gpus=8, priority="high")
    sim.tick()
    # Candidates: c (0, newest), a (0), b (100). Taking c leaves 4 free, then a: 12, enough;
    # c goes back (8 free still fits), so only a is preempted.
    assert _condition(_workload(sim, "a"), "Preempted")[0] == "True"
    for kept in ("b", "c"):
        workload = _workload(sim, kept)
        assert _condition(workload, "Admitted")[0] == "True"
        assert "Preempted" not in {c["type"] for c in workload["status"]["conditions"]}
    assert [_job(creds, n)["status"]["phase"] for n in ("a", "b", "c")] == [
        "Pending", "Running", "Running"]


@pytest.mark.parametrize(("policy", "priority"), [
    (None, "high"),  # no preemption: Kueue's default withinClusterQueue is Never
    ("Never", "high"),
    ("LowerPriority", "low"),  # the same priority is not lower
])
def test_no_preemption_without_the_policy_or_a_higher_priority(
        sim: InProcessSimulator, creds: k8s.Credentials, policy: str | None,
        priority: str) -> None:
    sim.control("PUT", f"clusters/{CLUSTER}/kueue", _queues(policy=policy))
    _submit(creds, "first", priority="low")
    _running(sim, creds, "first")
    _submit(creds, "second", priority=priority)
    sim.tick()
    sim.tick()
    assert _condition(_workload(sim, "first"), "Admitted")[0] == "True"
    assert "Evicted" not in {c["type"] for c in _workload(sim, "first")["status"]["conditions"]}
    assert _job(creds, "first")["status"]["phase"] == "Running"
    assert _pending(sim) == [("second", 100 if priority == "low" else 1000, 0)]
    _status, queue = _get(sim, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/vision-cq")
    assert queue["spec"]["preemption"]["withinClusterQueue"] == (policy or "Never")


@pytest.mark.parametrize(("policy", "preempted"), [
    ("LowerOrNewerEqualPriority", True), ("LowerPriority", False)])
def test_a_newer_workload_of_equal_priority_is_preempted_only_when_the_policy_says(
        sim: InProcessSimulator, creds: k8s.Credentials, policy: str, preempted: bool) -> None:
    _submit(creds, "big", gpus=8, replicas=2, priority="low")  # 16: more than the queue's 8
    _submit(creds, "small", gpus=8, priority="low")  # newer, admitted while "big" is skipped
    _running(sim, creds, "small")
    sim.control("PUT", f"clusters/{CLUSTER}/kueue", _queues(gpus=16, policy=policy))
    sim.tick()
    small = _workload(sim, "small")
    if preempted:
        assert _condition(small, "Preempted") == (
            "True", "InClusterQueue", _preemption(_workload(sim, "big")))
        assert _job(creds, "small")["status"]["phase"] == "Pending"
    else:
        assert _condition(small, "Admitted")[0] == "True"
        assert _job(creds, "small")["status"]["phase"] == "Running"


def test_an_administrator_evicts_and_reactivates_a_workload(
        sim: InProcessSimulator, creds: k8s.Credentials) -> None:
    _submit(creds, "run")
    _submit(creds, "next")
    _running(sim, creds, "run")
    answer = sim.evict_workload(CLUSTER, NS, "run")
    assert answer["spec"]["active"] is False
    workload = _workload(sim, "run")
    words = "The workload is deactivated"
    assert _condition(workload, "Evicted") == ("True", "Deactivated", words)
    assert _condition(workload, "QuotaReserved") == ("False", "Pending", words)
    assert _condition(workload, "Requeued") == ("False", "Deactivated", words)
    assert "Preempted" not in {c["type"] for c in workload["status"]["conditions"]}
    job = _job(creds, "run")
    assert job["status"]["phase"] == "Pending"
    assert _pod(sim, "run-actor-0")["spec"]["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/admission"}]
    sim.tick()  # an inactive Workload is not queued: "next" takes the quota
    assert _condition(_workload(sim, "next"), "Admitted")[0] == "True"
    assert _pending(sim) == []
    assert _job(creds, "run")["status"]["reason"] == "SchedulingGated"

    sim.activate_workload(CLUSTER, NS, "run")
    workload = _workload(sim, "run")
    assert workload["spec"]["active"] is True
    assert _condition(workload, "Requeued") == ("True", "Reactivated",
                                                "The workload was reactivated")
    assert _condition(workload, "Evicted") == ("True", "Deactivated", words)  # until admitted
    assert _pending(sim) == [("run", 0, 0)]
    sim.set_job_phase(CLUSTER, NS, "next", "Succeeded")
    sim.tick()
    workload = _workload(sim, "run")
    assert _condition(workload, "Admitted")[0] == "True"
    assert _condition(workload, "Evicted") == ("False", "QuotaReserved", f"Previously: {words}")


def test_kueues_own_deactivation_causes_and_bad_requests(
        sim: InProcessSimulator, creds: k8s.Credentials) -> None:
    _submit(creds, "run")
    _running(sim, creds, "run")
    sim.evict_workload(CLUSTER, NS, "run", cause="RequeuingLimitExceeded")
    assert _condition(_workload(sim, "run"), "Evicted") == (
        "True", "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries")
    with pytest.raises(ControlError) as bad:
        sim.evict_workload(CLUSTER, NS, "run", cause="Boredom")
    assert bad.value.code == 422 and "Boredom" in str(bad.value)
    with pytest.raises(ControlError) as missing:
        sim.evict_workload(CLUSTER, NS, "ghost")
    assert missing.value.code == 404
    sim.set_job_phase(CLUSTER, NS, "run", "Succeeded")
    sim.tick()
    with pytest.raises(ControlError) as finished:
        sim.evict_workload(CLUSTER, NS, "run")
    assert finished.value.code == 409


def test_a_priority_class_the_cluster_lacks_makes_no_workload(
        sim: InProcessSimulator, creds: k8s.Credentials) -> None:
    _submit(creds, "vip", priority="platinum")
    sim.tick()
    assert _get(sim, f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads/vip")[0] == 404
    _status, events = _get(sim, f"/api/v1/namespaces/{NS}/events")
    assert [(e["type"], e["message"]) for e in events["items"]
            if e["reason"] == "WorkloadPriorityClassNotFound"] == [
        ("Warning", 'WorkloadPriorityClass "platinum" not found')]
    assert _pod(sim, "vip-actor-0")["spec"]["schedulingGates"]
    _status, classes = _get(sim, "/apis/kueue.x-k8s.io/v1beta1/workloadpriorityclasses")
    assert [(c["metadata"]["name"], c["value"]) for c in classes["items"]] == [
        ("high", 1000), ("low", 100)]
    assert classes["items"][0]["description"] == "deadline runs"
    control = sim.control("GET", f"clusters/{CLUSTER}/kueue")
    assert control["workload_priority_classes"] == classes["items"]


@pytest.mark.parametrize(("change", "words"), [
    ({"cluster_queues": [{"name": "q", "preemption": {"within_cluster_queue": "Always"},
                          "flavors": [{"name": "f", "resources": {GPU: {"nominal_quota": 8}}}]}]},
     "'Always' is not one of ['Never', 'LowerPriority', 'LowerOrNewerEqualPriority']"),
    ({"cluster_queues": [{"name": "q", "preemption": {"reclaim_within_cohort": "Any"},
                          "flavors": [{"name": "f", "resources": {GPU: {"nominal_quota": 8}}}]}]},
     "Additional properties are not allowed ('reclaim_within_cohort'"),
    ({"workload_priority_classes": [{"name": "high", "value": 2**31}]},
     "workload_priority_classes[0] (high).value: 2147483648 is not a 32-bit integer"),
    ({"workload_priority_classes": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]},
     "workload_priority_classes[1] (a).name: duplicate WorkloadPriorityClass name"),
    ({"workload_priority_classes": [{"name": "High_Priority", "value": 1}]},
     "workload_priority_classes[0] (High_Priority).name: must be a DNS label"),
    ({"workload_priority_classes": [{"name": "high", "value": "1000"}]},
     "'1000' is not of type 'integer'"),
])
def test_bad_preemption_and_priority_classes_are_refused_with_the_path_at_fault(
        sim: InProcessSimulator, change: dict[str, Any], words: str) -> None:
    with pytest.raises(ControlError) as refused:
        sim.control("PUT", f"clusters/{CLUSTER}/kueue", change)
    assert refused.value.code == 422
    assert words in str(refused.value)
    with pytest.raises(FleetError) as invalid:
        parse_fleet({"clusters": [{"name": "c", "namespace": "n", "kueue": change}]})
    assert any(words in problem and problem.startswith("clusters[0] (c).kueue")
               for problem in invalid.value.problems), invalid.value.problems
