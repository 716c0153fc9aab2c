"""The Pending explanation's pure part (`jobs.records.pending`): sources, sentences, bounds."""

from __future__ import annotations

from typing import Any

from django.utils import translation

from clusters.capacity import NodeCapacity
from clusters.k8s import ContainerState, PodInfo
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
