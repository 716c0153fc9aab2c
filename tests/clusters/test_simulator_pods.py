"""The simulator's pods, container logs and events, read through the gateway (the real
`kubernetes` client); the bounded `follow` stream with plain HTTP."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest

from clusters import k8s
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    ControlError,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

NS = "rl-gpu-a"
HEAD = {"rlinf.io/pool": "a100-head"}
POOL = {"rlinf.io/pool": "a100-a"}
RUN_SCRIPT = (
    "args:\n"
    "cat > \"${RLARK_SCRIPT_DIR}/run.sh\" <<'RLARK_RUN_0123456789abcdef'\n"
    "cd /workspace\n"
    "echo 'step 1 reward=0.5'\n"
    "RLARK_RUN_0123456789abcdef\n"
    "ray start --head --port=6379\n"
)


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET_PATH) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield module_sim
    module_sim.reset()


@pytest.fixture
def gpu_a(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials("gpu-a")


def _create(credentials: k8s.Credentials, name: str = "ppo") -> dict[str, Any]:
    head = task_body("actor", replicas=1, selector=HEAD, gpus=8, head=True)
    head["template"]["spec"]["containers"][0]["args"] = [RUN_SCRIPT]
    head["template"]["metadata"] = {"labels": {"rlinf.io/job": name, "rlinf.io/task": "actor"}}
    body = job_body(name, tasks=[head, task_body("rollout", replicas=2, selector=POOL, gpus=8)])
    body["metadata"]["labels"] = {"rlinf.io/team": "vision-rl"}
    return k8s.create_job(credentials=credentials, namespace=NS, body=body)


def _pods(credentials: k8s.Credentials, selector: str = "rlinf.io/job=ppo") -> dict[str, Any]:
    pods = k8s.list_pods(credentials=credentials, namespace=NS, label_selector=selector)
    return {pod.name: pod for pod in pods}


def test_a_pending_job_has_unscheduled_pods_for_each_replica(gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    pods = _pods(gpu_a)
    assert sorted(pods) == ["ppo-actor-0", "ppo-rollout-0", "ppo-rollout-1"]
    actor = pods["ppo-actor-0"]
    assert (actor.phase, actor.node, actor.current.reason) == ("Pending", "", "ContainerCreating")
    assert actor.labels == {"rlinf.io/team": "vision-rl", "rlinf.io/job": "ppo",
                            "rlinf.io/task": "actor", "rlinf.io/task-index": "0"}


def test_running_pods_sit_on_distinct_matching_nodes(sim: InProcessSimulator,
                                                     gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    pods = _pods(gpu_a)
    assert {name: (pod.phase, pod.node) for name, pod in pods.items()} == {
        "ppo-actor-0": ("Running", "a-head-01"),
        "ppo-rollout-0": ("Running", "a-node-01"),
        "ppo-rollout-1": ("Running", "a-node-02"),
    }
    assert pods["ppo-actor-0"].current.state == "running"


def test_pods_follow_the_jobs_end_and_vanish_with_it(sim: InProcessSimulator,
                                                     gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    sim.set_job_phase("gpu-a", NS, "ppo", "Failed")
    pod = _pods(gpu_a)["ppo-rollout-1"]
    assert (pod.phase, pod.current.state, pod.current.reason, pod.current.exit_code) == (
        "Failed", "terminated", "Error", 1)
    k8s.delete_job(credentials=gpu_a, namespace=NS, name="ppo")
    assert _pods(gpu_a) == {}


def test_label_selectors_narrow_and_pages_follow_continue(sim: InProcessSimulator,
                                                         gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    _create(gpu_a, "other")
    assert sorted(_pods(gpu_a, "rlinf.io/task=rollout,rlinf.io/job!=other")) == [
        "ppo-rollout-0", "ppo-rollout-1"]
    paged = k8s.list_pods(credentials=gpu_a, namespace=NS, page_size=2)
    assert len(paged) == 6
    assert len(k8s.list_pods(credentials=gpu_a, namespace=NS, max_items=4)) == 4
    with pytest.raises(k8s.BadRequest):
        k8s.list_pods(credentials=gpu_a, namespace=NS, label_selector="a in (b)")


def test_the_log_is_the_start_scripts_output_then_appended_lines(sim: InProcessSimulator,
                                                                 gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    with pytest.raises(k8s.BadRequest):
        k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-actor-0")
    sim.tick()
    sim.append_pod_log("gpu-a", NS, "ppo-actor-0", ["step 2 reward=0.7"])
    text = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-actor-0").text
    assert text.splitlines() == [
        "rlark: task actor replica 0 on node a-head-01",
        text.splitlines()[1],
        "Ray runtime started.",
        "rlark: cluster check passed",
        "+ cd /workspace",
        "+ echo 'step 1 reward=0.5'",
        "step 1 reward=0.5",
        "step 2 reward=0.7",
    ]
    assert text.splitlines()[1].startswith("Local node IP: 10.")


def test_log_options_tail_since_timestamps_and_bytes(sim: InProcessSimulator,
                                                     gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    sim.append_pod_log("gpu-a", NS, "ppo-rollout-0", ["one", "two", "three"])

    def read(**options: Any) -> str:
        return k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-rollout-0",
                                **options).text

    assert read(tail_lines=2) == "two\nthree\n"
    stamped = read(tail_lines=1, timestamps=True)
    moment = datetime.strptime(stamped.split()[0][:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    assert stamped.endswith(" three\n")
    # to the second, as the API server passes sinceTime on: the lines of that whole second
    assert read(since_time=moment).endswith("one\ntwo\nthree\n")
    assert read(since_time=moment + timedelta(seconds=1)) == ""
    bounded = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-rollout-0",
                               tail_lines=3, max_bytes=5)
    assert bounded == k8s.PodLog(text="one\nt", truncated=True)


def test_since_seconds_drops_older_lines(sim: InProcessSimulator,
                                         gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    sim.append_pod_log("gpu-a", NS, "ppo-rollout-0", ["fresh"])
    text = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-rollout-0",
                            since_seconds=3600).text
    assert text.endswith("fresh\n")


def test_a_restart_moves_the_log_to_the_previous_container(sim: InProcessSimulator,
                                                           gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    with pytest.raises(k8s.BadRequest):
        k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-rollout-0", previous=True)
    sim.append_pod_log("gpu-a", NS, "ppo-rollout-0", ["torch.cuda.OutOfMemoryError: CUDA out "
                                                       "of memory"])
    sim.patch_pod("gpu-a", NS, "ppo-rollout-0", restarts=1,
                  lastTerminated={"reason": "Error", "exitCode": 1},
                  waiting={"reason": "CrashLoopBackOff", "message": "back-off 10s"})
    previous = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-rollout-0",
                                previous=True, tail_lines=1).text
    current = k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-rollout-0").text
    assert previous == "torch.cuda.OutOfMemoryError: CUDA out of memory\n"
    assert "CUDA" not in current
    pod = _pods(gpu_a)["ppo-rollout-0"]
    assert (pod.restarts, pod.current.reason, pod.previous.reason, pod.previous.exit_code) == (
        1, "CrashLoopBackOff", "Error", 1)


def test_events_of_a_pod_and_of_the_job(sim: InProcessSimulator,
                                        gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    sim.patch_pod("gpu-a", NS, "ppo-actor-0", phase="Failed",
                  terminated={"reason": "OOMKilled", "exitCode": 137})
    events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="ppo-actor-0")
    assert [(e.type, e.reason) for e in events] == [
        ("Normal", "Scheduled"), ("Normal", "Pulled"), ("Normal", "Created"),
        ("Normal", "Started"), ("Warning", "Failed")]
    assert events[-1].message == "Container main terminated: OOMKilled (exit code 137)"
    job_events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="ppo",
                                 involved_kind="Job")
    assert [e.message for e in job_events] == [
        "Created pod: ppo-actor-0", "Created pod: ppo-rollout-0", "Created pod: ppo-rollout-1"]


def test_unschedulable_pods_get_failed_scheduling_events_that_outlive_the_job(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.remove_node("gpu-a", "a-head-01")
    _create(gpu_a)
    sim.tick()
    k8s.delete_job(credentials=gpu_a, namespace=NS, name="ppo")
    events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="ppo-actor-0")
    assert [(e.type, e.reason) for e in events] == [("Warning", "FailedScheduling")]
    # kube-scheduler's FitError: a-head-01 is gone, a-node-12 NotReady, 15 others elsewhere.
    assert events[0].message == (
        "0/16 nodes are available: 1 node(s) had untolerated taint(s), 15 node(s) didn't "
        "match Pod's node affinity/selector. preemption: 0/16 nodes are available: "
        "16 Preemption is not helpful for scheduling.")


def test_the_kubelet_evicts_a_running_pod_as_a_real_one_does(sim: InProcessSimulator,
                                                              gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    sim.evict_pod("gpu-a", NS, "ppo-rollout-0", resource="memory", threshold="100Mi",
                  available="12Mi", usage="61Gi")
    pod = _pods(gpu_a)["ppo-rollout-0"]
    message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: "
               "12Mi. Container main was using 61Gi, request is 0, has larger consumption of "
               "memory. ")
    assert (pod.phase, pod.reason, pod.message) == ("Failed", "Evicted", message)
    assert pod.disruption is not None
    assert (pod.disruption.reason, pod.disruption.message) == ("TerminationByKubelet", message)
    assert (pod.current.state, pod.current.exit_code) == ("terminated", 137)
    events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="ppo-rollout-0")
    assert [(e.type, e.reason, e.message) for e in events][-2:] == [
        ("Warning", "Evicted", message), ("Normal", "Killing", "Stopping container main")]
    assert _pods(gpu_a)["ppo-actor-0"].phase == "Running"  # only that pod
    # A pod that holds no node cannot be evicted (nor preempted) again.
    with pytest.raises(ControlError) as again:
        sim.evict_pod("gpu-a", NS, "ppo-rollout-0")
    with pytest.raises(ControlError) as bad:
        sim.evict_pod("gpu-a", NS, "ppo-rollout-1", resource="gpu")
    with pytest.raises(ControlError) as missing:
        sim.preempt_pod("gpu-a", NS, "ppo-rollout-9")
    assert (again.value.code, bad.value.code, missing.value.code) == (409, 422, 404)


def test_the_scheduler_preempts_a_running_pod_as_a_real_one_does(
        sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    node = _pods(gpu_a)["ppo-rollout-1"].node
    sim.preempt_pod("gpu-a", NS, "ppo-rollout-1", preemptor="urgent-eval-0")
    pod = _pods(gpu_a)["ppo-rollout-1"]
    assert pod.phase == "Failed" and pod.reason == ""  # no `Evicted`: the scheduler's doing
    assert pod.disruption is not None
    assert (pod.disruption.reason, pod.disruption.message) == (
        "PreemptionByScheduler",
        "default-scheduler: preempting to accommodate a higher priority pod")
    assert (pod.current.state, pod.current.exit_code) == ("terminated", 143)
    events = k8s.list_events(credentials=gpu_a, namespace=NS, involved_name="ppo-rollout-1")
    preempted = [e for e in events if e.reason == "Preempted"]
    assert len(preempted) == 1 and preempted[0].type == "Normal"
    assert preempted[0].message.startswith("Preempted by pod ")
    assert preempted[0].message.endswith(f" on node {node}")
    # A pod still waiting for a node holds nothing to preempt: a-head-01 is ppo's actor's.
    _create(gpu_a, "other")
    sim.tick()
    assert _pods(gpu_a, "rlinf.io/job=other")["other-actor-0"].phase == "Pending"
    with pytest.raises(ControlError) as pending:
        sim.preempt_pod("gpu-a", NS, "other-actor-0")
    assert pending.value.code == 409


def test_reads_in_an_unknown_namespace_are_not_found(gpu_a: k8s.Credentials) -> None:
    with pytest.raises(k8s.NotFound):
        k8s.list_events(credentials=gpu_a, namespace="nope")
    with pytest.raises(k8s.NotFound):
        k8s.read_pod_log(credentials=gpu_a, namespace=NS, name="ppo-actor-0")


def test_the_control_endpoint_checks_pod_changes(sim: InProcessSimulator,
                                                 gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    with pytest.raises(ControlError) as missing:
        sim.patch_pod("gpu-a", NS, "ppo-actor-9", phase="Failed")
    with pytest.raises(ControlError) as invalid:
        sim.patch_pod("gpu-a", NS, "ppo-actor-0", restarts=-1)
    assert (missing.value.code, invalid.value.code) == (404, 422)


def test_follow_streams_new_lines_for_a_bounded_time(sim: InProcessSimulator,
                                                     gpu_a: k8s.Credentials) -> None:
    _create(gpu_a)
    sim.tick()
    parts = urlsplit(sim.cluster_url("gpu-a"))
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    connection.request("GET", f"{parts.path}/api/v1/namespaces/{NS}/pods/ppo-rollout-1/log"
                              "?follow=true&tailLines=0",
                       headers={"Authorization": "Bearer demo-token-gpu-a"})
    response = connection.getresponse()
    sim.append_pod_log("gpu-a", NS, "ppo-rollout-1", ["later"])
    body = response.read()  # ends when the simulator closes the stream (before the timeout)
    connection.close()
    assert body == b"later\n"


def test_listings_answer_each_change_though_objects_are_kept_rendered_and_encoded(
        sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    first = _create(gpu_a)
    uids = {name: pod.uid for name, pod in _pods(gpu_a).items()}
    assert {pod.phase for pod in _pods(gpu_a).values()} == {"Pending"}  # rendered, encoded
    sim.tick()
    assert {pod.phase for pod in _pods(gpu_a).values()} == {"Running"}  # a new Job object
    sim.patch_pod("gpu-a", NS, "ppo-rollout-1", phase="Failed",
                  terminated={"reason": "OOMKilled", "exitCode": 137})
    pods = _pods(gpu_a)
    assert (pods["ppo-rollout-1"].phase, pods["ppo-rollout-1"].current.reason) == (
        "Failed", "OOMKilled")  # the override changed
    assert pods["ppo-rollout-0"].phase == "Running"
    sim.set_job_phase("gpu-a", NS, "ppo", "Succeeded")
    listed = k8s.list_jobs(credentials=gpu_a, namespace=NS)
    assert [job["status"]["phase"] for job in listed] == ["Succeeded"]
    k8s.delete_job(credentials=gpu_a, namespace=NS, name="ppo")
    second = _create(gpu_a)
    pods = _pods(gpu_a)
    assert {pod.phase for pod in pods.values()} == {"Pending"}
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    assert not {pod.uid for pod in pods.values()} & set(uids.values())
    assert [job["metadata"]["uid"] for job in k8s.list_jobs(credentials=gpu_a, namespace=NS)] \
        == [second["metadata"]["uid"]]
