"""Kueue preempts and evicts a run end to end (SPEC 15 and 16): RLark on a Kueue cluster of
the fleet simulator, over real HTTP with the real `kubernetes` client, real PostgreSQL and the
status pass.

A running RLark job is preempted by another team's higher-priority job in its ClusterQueue
(`withinClusterQueue: LowerPriority`): after the status pass the job is Pending again, its
`admission.state` is `preempted` with Kueue's reason and message verbatim, it waits in its
queue with a position, `pending` says so with source `kueue`, and its `cause` is `preempted`
with the Workload's message as the evidence line; the job page shows all of it. An
administrator's deactivation evicts a running job the same way (`evicted`, Kueue's
`Deactivated` words); reactivated, it is admitted and runs again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from clusters import k8s
from clusters.inventory.services import poll_cluster
from clusters.models import Cluster
from clusters.simulator.testing import InProcessSimulator, job_body, run_simulator, task_body
from jobs.models import JobState, RunRecord
from jobs.records.status import sync_cluster
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.test_kueue_admission import _detail, _job, _node, _submit

pytestmark = pytest.mark.django_db

CLUSTER, NS, GPU = "gpu-k", "rl-gpu-k", "nvidia.com/gpu"
KUEUE_API = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads"

FLEET = {"clusters": [{
    "name": CLUSTER, "namespace": NS,
    "nodes": [_node("k-head-01", "head"), _node("k-head-02", "head"),
              _node("k-node-01", "k"), _node("k-node-02", "k")],
    "kueue": {
        "cluster_queues": [{"name": "vision-cq",
                            "preemption": {"within_cluster_queue": "LowerPriority"},
                            "flavors": [{"name": "a100", "resources": {
                                GPU: {"nominal_quota": 8}, "cpu": {"nominal_quota": 256}}}]}],
        "local_queues": [{"namespace": NS, "name": "vision-q", "cluster_queue": "vision-cq"},
                         {"namespace": NS, "name": "deadline-q", "cluster_queue": "vision-cq"}],
        "workload_priority_classes": [{"name": "deadline", "value": 1000}],
    },
}]}


@pytest.fixture
def sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def cluster(sim: InProcessSimulator, team: Team) -> Cluster:
    (cluster,) = load_fleet_rows(FLEET, api_url_base=sim.base_url)
    Cluster.objects.filter(pk=cluster.pk).update(admission="kueue",
                                                 kueue_queues={team.slug: "vision-q"})
    assert poll_cluster(cluster_id=cluster.pk).ok
    return cluster


def _running_job(api: APIClient, sim: InProcessSimulator, capture: Any, *, team: Team,
                 owner: Any, admin: Any) -> RunRecord:
    _job("first", team=team, owner=owner, admin=admin, head="k-head-01")
    record = _submit(api, "first", capture)
    sim.tick()  # Kueue admits it
    sim.tick()  # its pods are scheduled
    sync_cluster(cluster=CLUSTER)
    detail = _detail(api, "first")
    assert (detail["state"], detail["admission"]["state"]) == (JobState.RUNNING, "admitted")
    assert detail["cause"] is None
    return record


def _deadline_job(sim: InProcessSimulator) -> None:
    """Another team's job, submitted straight to the cluster, in a WorkloadPriorityClass
    above RLark's (which names none: priority 0)."""
    task = task_body("trainer", replicas=1, selector={"kubernetes.io/hostname": "k-head-02"},
                     gpus=8, head=True)
    task["template"]["metadata"] = {
        "labels": {"kueue.x-k8s.io/queue-name": "deadline-q",
                   "kueue.x-k8s.io/pod-group-name": "deadline",
                   "kueue.x-k8s.io/priority-class": "deadline"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "1"}}
    k8s.create_job(credentials=sim.credentials(CLUSTER), namespace=NS,
                   body=job_body("deadline", tasks=[task]))


def _workload_uid(sim: InProcessSimulator, name: str) -> str:
    (workload,) = [w for w in sim.control("GET", f"clusters/{CLUSTER}/kueue")["workloads"]
                   if w["metadata"]["name"] == name]
    return str(workload["metadata"]["uid"])


def test_a_running_job_preempted_by_kueue_is_pending_preempted_with_kueues_words_and_cause(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any, client: Any) -> None:
    api = api_client_for(owner)
    record = _running_job(api, sim, django_capture_on_commit_callbacks, team=team, owner=owner,
                          admin=admin_user)
    _deadline_job(sim)
    sim.tick()  # Kueue preempts "first" for "deadline": its pods are stopped, made again gated
    sync_cluster(cluster=CLUSTER)

    words = (f"Preempted to accommodate a workload (UID: {_workload_uid(sim, 'deadline')}, "
             "JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: "
             "/vision-cq; preemptee path: /vision-cq")
    detail = _detail(api, "first")
    assert detail["state"] == JobState.PENDING
    assert detail["admission"] == {
        "queue": "vision-q", "cluster_queue": "vision-cq", "state": "preempted",
        "reason": "InClusterQueue", "message": words, "position": 2,
        "position_in_local_queue": 1}
    pending = detail["pending"]
    assert pending["source"] == "kueue"
    assert pending["summary"] == ("Preempted by Kueue, waiting to be admitted again: "
                                  "position 2 in ClusterQueue vision-cq.")
    assert [(r["role"], r["workers"], r["waiting"], r["message"]) for r in pending["roles"]] == [
        ("Actor", 1, 1, words)]
    cause = detail["cause"]
    assert (cause["tag"], cause["evidence"], cause["pod"]) == ("preempted", words, "")
    evicted_at = next(c for c in sim.control("GET", f"clusters/{CLUSTER}/kueue")["workloads"]
                      if c["metadata"]["name"] == "first")["status"]["conditions"]
    stamp = next(c["lastTransitionTime"] for c in evicted_at if c["type"] == "Evicted")
    assert cause["at"].startswith(stamp.rstrip("Z"))
    # Each pod Kueue stopped was replaced: a second attempt, Pending behind the gate.
    assert record.pod_attempts.count() == 2

    client.force_login(owner)
    page = client.get("/jobs/job/first/").content.decode()
    assert 'data-admission-state="preempted"' in page
    assert "Preempted by Kueue to make room for other work." in page
    assert "Position 2 in its ClusterQueue." in page
    assert words in page and "InClusterQueue" in page
    assert re.search(r'id="run-cause" data-tag="preempted"', page)
    assert "earliest evidence, from the job's Kueue Workload at" in page

    sim.tick()  # the preemptor is admitted into the quota released; "first" waits behind it
    sync_cluster(cluster=CLUSTER)
    detail = _detail(api, "first")
    assert (detail["state"], detail["admission"]["state"], detail["admission"]["position"]) == (
        JobState.PENDING, "preempted", 1)
    assert detail["pending"]["summary"] == ("Preempted by Kueue, waiting to be admitted again: "
                                            "position 1 in ClusterQueue vision-cq.")
    assert detail["cause"] == cause  # the earliest evidence stays

    sim.set_job_phase(CLUSTER, NS, "deadline", "Succeeded")
    sim.tick()  # "first" is admitted again and runs
    sync_cluster(cluster=CLUSTER)
    detail = _detail(api, "first")
    assert (detail["state"], detail["admission"]["state"], detail["pending"]) == (
        JobState.RUNNING, "admitted", None)
    assert detail["cause"] == cause


def test_an_administrators_eviction_is_evicted_with_kueues_words_until_reactivated(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any, client: Any) -> None:
    api = api_client_for(owner)
    _running_job(api, sim, django_capture_on_commit_callbacks, team=team, owner=owner,
                 admin=admin_user)
    sim.evict_workload(CLUSTER, NS, "first")
    sync_cluster(cluster=CLUSTER)

    detail = _detail(api, "first")
    assert detail["state"] == JobState.PENDING
    assert detail["admission"] == {
        "queue": "vision-q", "cluster_queue": "vision-cq", "state": "evicted",
        "reason": "Deactivated", "message": "The workload is deactivated", "position": None,
        "position_in_local_queue": None}
    assert detail["pending"]["source"] == "kueue"
    assert detail["pending"]["summary"] == (
        "Evicted by Kueue, out of LocalQueue vision-q until it is requeued.")
    assert detail["pending"]["roles"][0]["message"] == "The workload is deactivated"
    cause = detail["cause"]
    assert (cause["tag"], cause["evidence"], cause["pod"]) == (
        "evicted", "The workload is deactivated", "")
    client.force_login(owner)
    page = client.get("/jobs/job/first/").content.decode()
    assert 'data-admission-state="evicted"' in page
    assert "Evicted by Kueue: its pods were stopped and it waits to be admitted again." in page
    assert 'data-tag="evicted"' in page

    sim.activate_workload(CLUSTER, NS, "first")
    sync_cluster(cluster=CLUSTER)  # queued again, still Evicted until admitted: a position
    detail = _detail(api, "first")
    assert (detail["admission"]["state"], detail["admission"]["position"]) == ("evicted", 1)
    assert detail["pending"]["summary"] == ("Evicted by Kueue, waiting to be admitted again: "
                                            "position 1 in ClusterQueue vision-cq.")
    sim.tick()
    sync_cluster(cluster=CLUSTER)
    detail = _detail(api, "first")
    assert (detail["state"], detail["admission"]["state"]) == (JobState.RUNNING, "admitted")
