"""clusters.kueue's readers of Kueue's objects (pure): a Workload's conditions read as one
admission state, the visibility API's positions, ClusterQueues and LocalQueues as views, and
hostile objects read without raising."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kueue import (
    KueueView,
    cluster_queue_view,
    local_queue_view,
    pending_positions,
    workload_admission,
    workload_eviction,
)
from jobs.observe.classify import workload_eviction_evidence
from jobs.observe.models import FailureTag


def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-01T10:00:00Z"}


PENDING = condition("QuotaReserved", "False", "Pending",
                    "couldn't assign flavors to pod set 1a2b3c4d: insufficient unused quota for "
                    "nvidia.com/gpu in flavor a100, 8 more needed")
RESERVED = condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
ADMITTED = condition("Admitted", "True", "Admitted", "The workload is admitted")


def workload(*conditions: dict[str, str], admission: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if admission is not None:
        status["admission"] = admission
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "job-a", "namespace": "rl"},
            "spec": {"queueName": "team-q", "podSets": []}, "status": status}


@pytest.mark.parametrize(("conditions", "state", "reason"), [
    ((), "pending", ""),
    ((PENDING,), "pending", "Pending"),
    ((RESERVED,), "quota_reserved", "QuotaReserved"),
    ((RESERVED, ADMITTED), "admitted", "Admitted"),
    ((RESERVED, ADMITTED, condition("Evicted", "True", "Preempted", "Preempted to make room")),
     "evicted", "Preempted"),
    ((condition("Evicted", "True", "Preempted", "x"),
      condition("Preempted", "True", "InClusterQueue", "Preempted by cq")), "preempted",
     "InClusterQueue"),
    ((RESERVED, ADMITTED, condition("Finished", "True", "Succeeded", "Pods succeeded: 4/4.")),
     "finished", "Succeeded"),
    ((condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
      PENDING), "pending", "Pending"),
])
def test_the_first_true_condition_decides_the_state(
        conditions: tuple[dict[str, str], ...], state: str, reason: str) -> None:
    status = workload_admission(workload(*conditions))
    assert (status.state, status.reason, status.queue) == (state, reason, "team-q")


def test_a_pending_workload_keeps_kueues_message_verbatim() -> None:
    status = workload_admission(workload(PENDING))
    assert status.message == PENDING["message"]
    assert status.cluster_queue == ""


def test_an_admitted_workload_names_its_cluster_queue() -> None:
    status = workload_admission(workload(RESERVED, ADMITTED, admission={
        "clusterQueue": "vision-cq", "podSetAssignments": []}))
    assert (status.state, status.cluster_queue) == ("admitted", "vision-cq")
    assert status.as_dict() == {"queue": "team-q", "cluster_queue": "vision-cq",
                                "state": "admitted", "reason": "Admitted",
                                "message": "The workload is admitted", "position": None,
                                "position_in_local_queue": None}


def test_no_workload_yet_is_pending_in_the_queue_it_was_submitted_to() -> None:
    status = workload_admission(None, queue="vision-q")
    assert (status.state, status.queue, status.reason) == ("pending", "vision-q", "")


@pytest.mark.parametrize("hostile", [
    7, "x", [], {"status": []}, {"status": {"conditions": "nope"}},
    {"status": {"conditions": [None, 3, {"type": 5}, {"type": "Admitted", "status": "True",
                                                     "reason": ["x"], "message": "m" * 10**5}]}},
    {"spec": {"queueName": 5}, "status": {"admission": "cq"}},
    {"status": {"conditions": [{"type": "Evicted", "status": "True", "reason": None,
                                "message": ["m"], "lastTransitionTime": 7}]}},
])
def test_hostile_workloads_never_raise(hostile: Any) -> None:
    status = workload_admission(hostile, queue="q")
    assert status.state in ("pending", "admitted", "evicted")
    eviction = workload_eviction(hostile)
    assert eviction is None or (eviction.reason, eviction.at) == ("", "")
    assert len(status.message) <= 2000


def test_positions_count_from_one() -> None:
    summary = {"kind": "PendingWorkloadsSummary", "items": [
        {"metadata": {"name": "job-b", "namespace": "rl"}, "priority": 0,
         "localQueueName": "q", "positionInClusterQueue": 0, "positionInLocalQueue": 0},
        {"metadata": {"name": "job-c"}, "positionInClusterQueue": 3, "positionInLocalQueue": 1},
        {"metadata": {}}, "junk", {"metadata": {"name": "job-d"},
                                   "positionInClusterQueue": -4},
    ]}
    assert pending_positions(summary) == {"job-b": (1, 1), "job-c": (4, 2), "job-d": (1, 1)}
    assert pending_positions(None) == {} and pending_positions({"items": 3}) == {}


CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
    "metadata": {"name": "vision-cq"},
    "spec": {"cohort": "research", "resourceGroups": [
        {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
            {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 9},
                                           {"name": "nvidia.com/gpu", "nominalQuota": "8",
                                            "borrowingLimit": "4", "lendingLimit": "2"}]}]}]},
    "status": {"pendingWorkloads": 1, "admittedWorkloads": 2, "reservingWorkloads": 2,
               "flavorsUsage": [{"name": "a100", "resources": [
                   {"name": "nvidia.com/gpu", "total": "10", "borrowed": "2"}]}],
               "flavorsReservation": [{"name": "a100", "resources": [
                   {"name": "nvidia.com/gpu", "total": "12"}]}]},
}


def test_a_cluster_queue_reads_as_quota_per_flavor_and_resource() -> None:
    view = cluster_queue_view(CLUSTER_QUEUE)
    assert view is not None
    assert (view.name, view.cohort, view.pending_workloads, view.admitted_workloads) == (
        "vision-cq", "research", 1, 2)
    gpu = view.quota("a100", "nvidia.com/gpu")
    assert gpu is not None
    assert (gpu.nominal, gpu.borrowing_limit, gpu.lending_limit, gpu.used, gpu.reserved,
            gpu.borrowed) == ("8", "4", "2", "10", "12", "2")
    cpu = view.quota("a100", "cpu")
    assert cpu is not None and (cpu.nominal, cpu.borrowing_limit, cpu.used) == ("9", "", "0")


def test_a_local_queue_reads_with_its_usage() -> None:
    view = local_queue_view({
        "metadata": {"name": "vision-q", "namespace": "rl"},
        "spec": {"clusterQueue": "vision-cq"},
        "status": {"pendingWorkloads": 2, "admittedWorkloads": 1, "flavorUsage": [
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "8"}]}]}})
    assert view is not None
    assert (view.namespace, view.name, view.cluster_queue, view.pending_workloads) == (
        "rl", "vision-q", "vision-cq", 2)
    assert view.usage == (("a100", "nvidia.com/gpu", "8"),)


@pytest.mark.parametrize("hostile", [
    None, [], {"metadata": []}, {"metadata": {"name": ""}},
])
def test_objects_without_a_name_are_skipped(hostile: Any) -> None:
    assert cluster_queue_view(hostile) is None
    assert local_queue_view(hostile) is None


def test_garbage_inside_a_cluster_queue_is_dropped_not_raised() -> None:
    view = cluster_queue_view({"metadata": {"name": "cq"}, "spec": {"resourceGroups": [
        None, {"flavors": "x"}, {"flavors": [{"name": "f", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "lots"}, {"nominalQuota": 1}, 5]}]}]},
        "status": {"flavorsUsage": "x", "pendingWorkloads": -3}})
    assert view is not None
    assert [(q.flavor, q.resource, q.nominal) for q in view.quotas] == [
        ("f", "nvidia.com/gpu", "0")]
    assert view.pending_workloads == 0


def test_unused_quota_now_for_a_will_queue_verdict() -> None:
    view = cluster_queue_view(CLUSTER_QUEUE)
    assert view is not None
    alone = KueueView(cluster_queues=(view,))
    assert alone.unused(view, "a100", "nvidia.com/gpu") == 0  # 12 reserved of 8 + borrowed
    lender = cluster_queue_view({**CLUSTER_QUEUE, "metadata": {"name": "nlp-cq"},
                                 "status": {}})
    assert lender is not None
    both = KueueView(cluster_queues=(view, lender))
    # the cohort has 16 nominal, 12 reserved: 4 free, capped by 8 + 4 - 12 = 0 for vision-cq
    assert both.unused(view, "a100", "nvidia.com/gpu") == 0
    assert both.unused(lender, "a100", "nvidia.com/gpu") == 4
    assert both.potential(view, "a100", "nvidia.com/gpu") == 10  # 8 + min(4, lent 2)


def test_an_evicted_workload_reads_as_its_eviction_and_a_readmitted_one_as_none() -> None:
    words = "Preempted to accommodate a workload (UID: u, JobUID: UNKNOWN) due to x"
    evicted = workload(condition("Evicted", "True", "Preempted", words),
                       condition("Preempted", "True", "InClusterQueue", words))
    found = workload_eviction(evicted)
    assert found is not None
    assert (found.reason, found.message, found.at) == ("Preempted", words,
                                                       "2026-12-01T10:00:00Z")
    again = workload(RESERVED, ADMITTED, condition("Evicted", "False", "QuotaReserved",
                                                   f"Previously: {words}"))
    assert workload_eviction(again) is None
    assert workload_eviction(None) is None


@pytest.mark.parametrize(("reason", "tag"), [
    ("Preempted", FailureTag.PREEMPTED), ("Deactivated", FailureTag.EVICTED),
    ("DeactivatedDueToRequeuingLimitExceeded", FailureTag.EVICTED),
    ("PodsReadyTimeout", FailureTag.EVICTED), ("ClusterQueueStopped", FailureTag.EVICTED)])
def test_kueues_eviction_reason_decides_the_cause_and_its_message_is_the_evidence(
        reason: str, tag: FailureTag) -> None:
    evidence = workload_eviction_evidence(reason, "  Kueue's words  ", None)
    assert (evidence.tag, evidence.evidence) == (tag, "Kueue's words")
    assert workload_eviction_evidence(reason, "", None).evidence == reason
