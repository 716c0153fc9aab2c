"""The Pending explanation's pure part (`jobs.records.pending`): sources, sentences, bounds."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import translation

from clusters.capacity import NodeCapacity
from clusters.k8s import ContainerState, EventInfo, PodInfo
from jobs.records.pending import MESSAGE_MAX, NodeView, clean_message, explain, summary

GPU = "nvidia.com/gpu"


def _pod(name: str, task: str, *, node: str = "", reason: str = "", message: str = "",
         gpus: int = 8, selector: dict[str, str] | None = None) -> PodInfo:
    return PodInfo(name=name, uid=name, labels={"rlinf.io/job": "j", "rlinf.io/task": task},
                   node=node, phase="Running" if node else "Pending", created_at="",
                   started_at="", container="main", restarts=0, current=ContainerState(),
                   previous=ContainerState(), scheduling_reason=reason,
                   scheduling_message=message, requests={GPU: gpus},
                   node_selector=selector or {"pool": "r"})


def _node(name: str, *, free: int, pool: str = "r", ready: bool = True) -> NodeView:
    return NodeView(name, {"pool": pool}, ready,
                    NodeCapacity({GPU: 8, "pods": 110}, {GPU: 8 - free, "pods": 1}, counted=True))


NODES = [_node("n-01", free=8), _node("n-02", free=0), _node("n-03", free=4),
         _node("n-04", free=0, ready=False), _node("x-01", free=0, pool="other")]
SAID = "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)."


def _explain(pods: list[PodInfo], admission: dict[str, Any] | None = None,
             nodes: list[NodeView] | None = NODES) -> dict[str, Any]:
    return explain(pods=pods, admission=admission or {}, since=None, cluster="c", nodes=nodes,
                   role_names={"rollout": "Rollout", "actor": "Actor"})


def test_the_scheduler_source_names_the_first_node_short_that_a_freed_node_would_fix() -> None:
    pods = [_pod("r-0", "rollout", node="n-01"), _pod("r-1", "rollout", reason="Unschedulable",
                                                     message=SAID), _pod("r-2", "rollout")]
    facts = _explain(pods)
    assert facts["source"] == "scheduler"
    (role,) = facts["roles"]
    assert (role["role"], role["workers"], role["waiting"], role["message"]) == (
        "Rollout", 3, 2, SAID)
    # n-01 holds a worker already (one per node), n-04 is NotReady, x-01 does not match.
    assert [(s["node"], s["free"]) for s in role["short"]] == [("n-02", "0"), ("n-03", "4")]
    assert summary(facts) == ("Rollout: 2 of 3 workers wait for GPUs: n-02 has 0 of 8 free, "
                              "8 needed.")


def test_a_worker_that_can_never_fit_comes_after_those_that_wait_for_room() -> None:
    pods = [_pod("r-0", "rollout", gpus=16, reason="Unschedulable", message=SAID)]
    facts = _explain(pods, nodes=[_node("n-02", free=0), _node("n-01", free=8)])
    assert [(s["node"], s["needed"]) for s in facts["roles"][0]["short"]] == [
        ("n-01", "16"), ("n-02", "16")]


def test_without_the_schedulers_word_rlarks_occupancy_is_the_evidence() -> None:
    facts = _explain([_pod("a-0", "actor")], nodes=[_node("n-02", free=0)])
    assert facts["source"] == "rlark"
    assert facts["roles"][0]["message"] == ""
    assert summary(facts) == "Actor: 1 of 1 worker waits for GPUs: n-02 has 0 of 8 free, 8 needed."


def test_no_matching_node_and_no_pods_have_their_own_sentences() -> None:
    lonely = _explain([_pod("a-0", "actor", selector={"pool": "none"}, reason="Unschedulable")])
    assert summary(lonely) == ("Actor: 1 of 1 worker waits: no ready node matches its "
                               "labels.")
    assert summary(_explain([])) == "The cluster has not created the job's pods yet."
    roomy = _explain([_pod("a-0", "actor", reason="Unschedulable", message=SAID)],
                     nodes=[_node("n-01", free=8)])
    assert summary(roomy) == ("Actor: 1 of 1 worker cannot be scheduled (the scheduler says "
                              "why).")


def test_kueue_holds_the_pods_so_its_message_is_the_roles() -> None:
    admission = {"queue": "q", "cluster_queue": "cq", "state": "pending", "reason": "Pending",
                 "message": "couldn't assign flavors to pod set main: insufficient unused "
                            "quota for nvidia.com/gpu in flavor a100, 8 more needed",
                 "position": 2}
    facts = _explain([_pod("a-0", "actor", reason="SchedulingGated", message="gated")],
                     admission)
    assert facts["source"] == "kueue"
    assert facts["roles"][0]["message"] == admission["message"]
    assert facts["roles"][0]["short"] == []
    assert summary(facts) == ("Waiting for Kueue to admit the job: position 2 in ClusterQueue "
                              "cq.")
    with translation.override("zh-hans"):
        assert summary(facts) == "正在等待 Kueue 接纳该任务：在 ClusterQueue cq 中排第 2 位。"


@pytest.mark.parametrize(("state", "position", "english", "chinese"), [
    ("preempted", 3, "Preempted by Kueue, waiting to be admitted again: position 3 in "
     "ClusterQueue cq.", "已被 Kueue 抢占，正在等待再次准入：在 ClusterQueue cq 中排第 3 位。"),
    ("preempted", None, "Preempted by Kueue, waiting to be admitted again in LocalQueue q.",
     "已被 Kueue 抢占，正在 LocalQueue q 中等待再次准入。"),
    ("evicted", 1, "Evicted by Kueue, waiting to be admitted again: position 1 in "
     "ClusterQueue cq.", "已被 Kueue 驱逐，正在等待再次准入：在 ClusterQueue cq 中排第 1 位。"),
    ("evicted", None, "Evicted by Kueue, out of LocalQueue q until it is requeued.",
     "已被 Kueue 驱逐，在重新入队之前不在 LocalQueue q 中。"),
])
def test_a_preempted_or_evicted_workload_waits_for_kueue_in_its_own_words(
        state: str, position: int | None, english: str, chinese: str) -> None:
    words = "Preempted to accommodate a workload (UID: u, JobUID: UNKNOWN) due to x"
    admission = {"queue": "q", "cluster_queue": "cq", "state": state,
                 "reason": "InClusterQueue", "message": words, "position": position}
    facts = _explain([_pod("a-0", "actor", reason="SchedulingGated", message="gated")],
                     admission)
    assert facts["source"] == "kueue"
    assert (facts["roles"][0]["reason"], facts["roles"][0]["message"]) == (
        "InClusterQueue", words)
    assert summary(facts) == english
    with translation.override("zh-hans"):
        assert summary(facts) == chinese


def test_every_waiting_role_has_its_sentence() -> None:
    pods = [_pod("a-0", "actor", reason="Unschedulable", message=SAID),
            _pod("r-0", "rollout", reason="Unschedulable", message=SAID)]
    assert summary(_explain(pods, nodes=[_node("n-02", free=0)])) == (
        "Actor: 1 of 1 worker waits for GPUs: n-02 has 0 of 8 free, 8 needed. "
        "Rollout: 1 of 1 worker waits for GPUs: n-02 has 0 of 8 free, 8 needed.")


def test_a_hostile_message_loses_its_control_characters_and_its_length() -> None:
    assert clean_message("a\x00b\x1b[0m\tc\nd\x7f\x85e\ud800") == "ab[0m\tc\nde"
    long = clean_message("y" * 10_000_000)
    assert len(long) == MESSAGE_MAX and long.endswith("…")
    assert clean_message(None) == ""


def _failed(pod: str, message: str, *, count: int, last: str) -> EventInfo:
    return EventInfo(kind="Pod", name=pod, uid=pod, type="Warning", reason="FailedScheduling",
                     message=message, count=count, first_at="2026-12-01T10:00:00Z", last_at=last)


def test_the_schedulers_event_explains_a_pod_whose_condition_says_nothing_and_counts_tries(
        ) -> None:
    """A waiting pod without a `PodScheduled` message (not written yet, or cleared): the
    newest FailedScheduling event about the role's waiting pods is the cluster's message, and
    the most tries any of them had is `attempts`, with the last try."""
    older = "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."
    pods = [_pod("r-0", "rollout"), _pod("r-1", "rollout")]
    events = {"r-0": _failed("r-0", older, count=3, last="2026-12-01T10:05:00Z"),
              "r-1": _failed("r-1", SAID, count=7, last="2026-12-01T10:09:00Z")}
    facts = explain(pods=pods, admission={}, since=None, cluster="c", nodes=NODES,
                    role_names={"rollout": "Rollout"}, events=events)
    assert facts["source"] == "scheduler"
    (role,) = facts["roles"]
    assert (role["message"], role["attempts"], role["last_attempt_at"]) == (
        SAID, 7, "2026-12-01T10:09:00Z")
    # the pod's own condition, when it has the message, stays the message; the event counts
    pods = [_pod("r-0", "rollout", reason="Unschedulable", message=older)]
    facts = explain(pods=pods, admission={}, since=None, cluster="c", nodes=NODES,
                    role_names={"rollout": "Rollout"}, events={"r-0": events["r-1"]})
    assert (facts["roles"][0]["message"], facts["roles"][0]["attempts"]) == (older, 7)
    # without events: nothing counted, and no scheduler word means RLark's own view
    facts = _explain([_pod("r-0", "rollout")])
    assert facts["source"] == "rlark" and "attempts" not in facts["roles"][0]
