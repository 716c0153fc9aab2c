"""SPEC 16's cause tags, each from a line shaped as the project in question prints it (the
fixed text of the message is the project's; pids, ids, ranks and sizes are made up here), the
pod-state facts from pod objects shaped as the API server serves them, and linear-time
matching on hostile lines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from clusters.k8s.pods import EventInfo, pod_info_from_object
from jobs.observe.capture import pod_state_facts
from jobs.observe.classify import (
    LINE_MAX,
    AttemptFacts,
    StateFact,
    classify,
    earliest_evidence,
    line_tag,
)
from jobs.observe.models import FailureTag

# PyTorch, torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: the watchdog's timeout message,
# printed through LOG(ERROR) with glog's prefix and the rank prefix torchrun adds.
NCCL_TIMEOUT = (
    "[rank3]:[E1202 01:12:44.118204331 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=4811, OpType=ALLREDUCE, NumelIn=2097152, "
    "NumelOut=2097152, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.")
# Same file: the heartbeat monitor's message when the watchdog thread itself hangs.
NCCL_WATCHDOG = (
    "[rank0]:[E1202 01:20:51.004417 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
    "monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., "
    "CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread "
    "holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other "
    "deadlock-prone behaviors.")
HEARTBEAT = ("[rank1]:[E1202 01:20:50.99 ProcessGroupNCCL.cpp:1423] [PG ID 0 PG GUID 0 Rank 1] "
             "Heartbeat monitor timed out! Process will be terminated after dumping debug "
             "info. workMetaList_.size()=2")
# PyTorch's caching allocator (torch.OutOfMemoryError since 2.5, torch.cuda.* before).
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 2 "
            "has a total capacity of 79.10 GiB of which 1.21 GiB is free.")
# Ray's memory monitor (src/ray/raylet/worker_killing_policy / python ray.exceptions).
HOST_OOM = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
            "memory. Memory on the node (IP: 10.0.3.17, ID: 5be1c0ffee) where the task "
            "(actor ID: 77aa01, name=MegatronActor.__init__, pid=3310, memory used=58.20GB) "
            "was running was 240.11GB / 251.50GB (0.954712), which exceeds the memory usage "
            "threshold of 0.95.")
HOST_OOM_WORKERS = ("(raylet) [2026-12-02 01:30:02,114 E 812 812] (raylet) node_manager.cc:3047:"
                    " 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
                    "crashed due to other reasons. 1 worker(s) were killed due to the node "
                    "running low on memory.")
# Ray's GCS when a raylet stops answering (gcs_node_manager.cc).
NODE_DEAD = ("2026-12-02 01:40:09,551\tWARNING worker.py:2059 -- The node with node id: "
             "a1b2c3d4e5 and address: 10.0.3.21 and node name: 10.0.3.21 has been marked dead "
             "because the detector has missed too many heartbeats from it. This can happen when "
             "a \t(1) raylet crashes unexpectedly (OOM, etc.)")
NODE_DIED_ACTOR = "The actor died because its node has died. Node Id: a1b2c3d4e5"
# vLLM v1 (vllm/v1/engine/exceptions.py): EngineDeadError's fixed message.
VLLM_DEAD = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
             "stack trace (above) for the root cause.")
# SGLang (python/sglang/srt/managers/scheduler.py): run_scheduler_process's except clause.
SGLANG_DEAD = ("[2026-12-02 01:50:13 TP0] Scheduler hit an exception: Traceback (most recent "
               "call last):")
# Ray (python/ray/exceptions.py): ActorDiedError, and the teardown RLinf's signal handler
# causes in the other workers (`ray.kill`).
ACTOR_DIED = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing "
              "this task.")
KILLED = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
          "task. The actor is dead because it was killed by `ray.kill`.")
# The kernel's OOM killer, as dmesg prints it.
KERNEL_OOM = ("[812345.118] Out of memory: Killed process 4242 (python) total-vm:91234567kB, "
              "anon-rss:81234567kB")


@pytest.mark.parametrize(("line", "tag"), [
    (NCCL_TIMEOUT, FailureTag.NCCL_TIMEOUT),
    (NCCL_WATCHDOG, FailureTag.NCCL_WATCHDOG),
    (HEARTBEAT, FailureTag.NCCL_WATCHDOG),
    (CUDA_OOM, FailureTag.CUDA_OOM),
    (HOST_OOM, FailureTag.HOST_OOM),
    (HOST_OOM_WORKERS, FailureTag.HOST_OOM),
    (NODE_DEAD, FailureTag.NODE_DEAD),
    (NODE_DIED_ACTOR, FailureTag.NODE_DEAD),
    (VLLM_DEAD, FailureTag.ROLLOUT_ENGINE),
    (SGLANG_DEAD, FailureTag.ROLLOUT_ENGINE),
    (ACTOR_DIED, FailureTag.RAY_ACTOR_DIED),
    (KILLED, FailureTag.RAY_ACTOR_DIED),
    (KERNEL_OOM, FailureTag.OOM),
    ("Global Step: 120/1000", None),
    ("INFO: the rollout finished in 12.3 s", None),
])
def test_each_tag_from_a_real_line(line: str, tag: FailureTag | None) -> None:
    assert line_tag(line) == tag


def _pod(*, status: dict, container_state: dict | None = None) -> dict:
    return {
        "metadata": {"name": "j-rollout-1", "uid": "u-1", "labels": {},
                     "creationTimestamp": "2026-12-02T01:00:00Z"},
        "spec": {"nodeName": "gpu-07"},
        "status": {"phase": "Failed", "startTime": "2026-12-02T01:00:05Z",
                   "containerStatuses": [{"name": "main", "restartCount": 0,
                                          "state": container_state or {}}], **status},
    }


def test_a_kubelet_eviction_is_evicted_at_its_condition_time() -> None:
    # The kubelet's eviction manager: status.reason Evicted, its message format
    # ("The node was low on resource: %v. " + threshold + container usage).
    message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: "
               "42Mi. Container main was using 61Gi, request is 48Gi, has larger consumption "
               "of memory. ")
    pod = pod_info_from_object(_pod(status={
        "reason": "Evicted", "message": message,
        "conditions": [{"type": "DisruptionTarget", "status": "True",
                        "reason": "TerminationByKubelet", "message": message,
                        "lastTransitionTime": "2026-12-02T01:33:00Z"}]}))
    facts = pod_state_facts(pod)
    assert {f.tag for f in facts} == {FailureTag.EVICTED}
    assert facts[0].at == datetime(2026, 12, 2, 1, 33, tzinfo=UTC)
    assert facts[0].evidence.startswith("The node was low on resource: memory.")


def test_a_scheduler_preemption_is_preempted() -> None:
    # kube-scheduler's DisruptionTarget (PreemptionByScheduler) and its Preempted event.
    pod = pod_info_from_object(_pod(status={"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
        "lastTransitionTime": "2026-12-02T01:10:00Z"}]}))
    event = EventInfo(kind="Pod", name="j-rollout-1", uid="u-1", type="Normal",
                      reason="Preempted", message="Preempted by pod 9f2c-77 on node gpu-07",
                      count=1, first_at="2026-12-02T01:10:01Z", last_at="2026-12-02T01:10:01Z")
    facts = pod_state_facts(pod, [event])
    assert [f.tag for f in facts] == [FailureTag.PREEMPTED, FailureTag.PREEMPTED]
    result = classify(AttemptFacts(phase="Failed", reasons=("", ""), exit_codes=(137, None),
                                   restarts=0, lines=[ACTOR_DIED], states=facts))
    assert result.tag == FailureTag.PREEMPTED
    assert result.evidence == "default-scheduler: preempting to accommodate a higher priority pod"


def test_oom_killed_and_image_pull_are_pod_state_facts() -> None:
    oom = pod_info_from_object(_pod(status={}, container_state={"terminated": {
        "reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-12-02T01:45:00Z"}}))
    assert pod_state_facts(oom) == [StateFact(FailureTag.OOM, "OOMKilled",
                                              datetime(2026, 12, 2, 1, 45, tzinfo=UTC))]
    pull = pod_info_from_object(_pod(status={"phase": "Pending"}, container_state={"waiting": {
        "reason": "ErrImagePull", "message": 'failed to pull image "reg/x:9": not found'}}))
    [fact] = pod_state_facts(pull)
    assert fact.tag == FailureTag.IMAGE_PULL and fact.evidence.startswith("ErrImagePull: ")


def test_the_earliest_evidence_of_an_attempt_is_by_time_not_by_rank() -> None:
    early = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    late = datetime(2026, 12, 2, 1, 5, tzinfo=UTC)
    facts = AttemptFacts(phase="Failed", reasons=("OOMKilled", ""), exit_codes=(137, None),
                         restarts=0, lines=["starting", NCCL_TIMEOUT, KILLED],
                         line_times=[early, early, late],
                         states=[StateFact(FailureTag.OOM, "OOMKilled", late)])
    assert classify(facts).tag == FailureTag.OOM  # the attempt's tag: an OOM kill outranks
    found = earliest_evidence(facts)
    assert found is not None and found.tag == FailureTag.NCCL_TIMEOUT and found.at == early


@pytest.mark.parametrize("line", [
    "NCCL" + " " * 1_000_000 + "timeout",
    "(" * 500_000 + "Watchdog caught" + ")" * 500_000,
    "ProcessGroupNCCL" * 200_000,
    "\x00\xff" * 300_000 + "EngineDeadError",
])
def test_a_hostile_line_is_cut_before_matching(line: str) -> None:
    """Only the first LINE_MAX characters are matched (RE2: linear in those), so a megabyte
    of parentheses or repeats costs what 4 KiB does, and what lies beyond is no evidence."""
    assert line_tag(line) == line_tag(line[:LINE_MAX]) is None
