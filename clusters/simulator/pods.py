"""Pods, their logs and events, derived from a Job as a Job controller would make them.

Every Task of a Job has `replicas` pods named `<job>-<task>-<index>`. A pod starts when it is
bound, as a real kubelet starts it once the scheduler put it on its node (the image is always
present): from then on it has a `startTime` and a running container, and is `Running` even
while the Job is still Pending because others of its gang wait for nodes. Otherwise its phase
follows the Job's (Pending while unbound, Succeeded or Failed when the Job ended) unless the
control endpoint set it (`PodOverride`). Its log is deterministic: lines the start script
would print (identity, `ray start`, the run script traced as `bash -x` would, `echo` output)
timed one second apart from the pod's start, then the lines the control endpoint appended.

Pure functions: the state (`clusters/simulator/state.py`) keeps the overrides, appended
lines, node placements and events, and calls these to build the objects it serves.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from clusters.simulator.fleet import FOREIGN_IMAGE, ForeignPodSpec
from clusters.simulator.objects import stable_uid

MAIN_CONTAINER = "main"
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
LABEL_JOB = "rlinf.io/job"
LABEL_TASK = "rlinf.io/task"
LABEL_TASK_INDEX = "rlinf.io/task-index"
_RUN_HEREDOC = re.compile(r"<<'(RLARK_RUN_[0-9a-f]+)'\n(.*?)\n\1$", re.DOTALL | re.MULTILINE)
_ECHO = re.compile(r"^echo\s+(.*)$")

Object = dict[str, Any]


@dataclass(frozen=True)
class ContainerEnd:
    """A container's end: `terminated` state fields."""

    reason: str
    exit_code: int
    message: str = ""
    finished_at: str = ""

    def to_state(self, started_at: str) -> Object:
        state: Object = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": started_at,
            "finishedAt": self.finished_at or started_at,
        }
        if self.message:
            state["message"] = self.message
        return {"terminated": state}


@dataclass
class PodOverride:
    """What the control endpoint set on one pod; unset fields follow the Job."""

    phase: str | None = None
    restarts: int = 0
    waiting_reason: str | None = None
    waiting_message: str = ""
    terminated: ContainerEnd | None = None
    last_terminated: ContainerEnd | None = None
    current_lines: list[tuple[datetime, str]] = field(default_factory=list)
    previous_lines: list[tuple[datetime, str]] = field(default_factory=list)
    scheduler_message: str | None = None  # replaces kube-scheduler's message while unbound
    disruption: Disruption | None = None  # evicted or preempted (the control endpoint)
    version: int = 0


@dataclass(frozen=True)
class Disruption:
    """How the pod was made to go, as the cluster writes it: its `DisruptionTarget` condition
    (`condition_reason`, `message`, since `at`) and, for a kubelet eviction, the pod's own
    `status.reason` / `status.message` (`pod_reason`: `Evicted`; empty for a preemption)."""

    condition_reason: str
    message: str
    at: str
    pod_reason: str = ""


@dataclass(frozen=True)
class PodRef:
    """One replica of one Task of a Job."""

    job: str
    task: str
    index: int
    template: Object

    @property
    def name(self) -> str:
        return f"{self.job}-{self.task}-{self.index}"


def pod_refs(job: Object) -> list[PodRef]:
    """The pods a Job has, in task order then replica index."""
    name = job["metadata"]["name"]
    refs: list[PodRef] = []
    for task in (job.get("spec") or {}).get("tasks") or []:
        if not isinstance(task, dict) or not isinstance(task.get("replicas"), int):
            continue
        template = task.get("template") if isinstance(task.get("template"), dict) else {}
        for index in range(task["replicas"]):
            refs.append(PodRef(job=name, task=str(task.get("name")), index=index,
                               template=template or {}))
    return refs


@functools.lru_cache(maxsize=4096)
def parse_time(text: str) -> datetime:
    """A stored RFC 3339 time to the second (a Job's startTime, read by every log request:
    parsed once)."""
    return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)


def format_time(moment: datetime, *, nano: bool = False) -> str:
    if nano:  # every log line's stamp (moments are UTC): the C isoformat, not strftime
        return moment.isoformat(timespec="microseconds")[:26] + "000Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def main_container(template: Object) -> Object:
    containers = [c for c in (template.get("spec") or {}).get("containers") or []
                  if isinstance(c, dict)]
    named = [c for c in containers if c.get("name") == MAIN_CONTAINER]
    return (named or containers or [{"name": MAIN_CONTAINER}])[0]


def _labels(job: Object, ref: PodRef) -> dict[str, str]:
    template_labels = (ref.template.get("metadata") or {}).get("labels") or {}
    return {
        **(job["metadata"].get("labels") or {}),
        **{str(k): str(v) for k, v in template_labels.items()},
        LABEL_JOB: ref.job,
        LABEL_TASK: ref.task,
        LABEL_TASK_INDEX: str(ref.index),
    }


def pod_phase(job: Object, override: PodOverride | None, started: str | None = None) -> str:
    """The pod's phase: the control endpoint's, else Running once the pod started (`started`:
    its start, see `pod_start`) while the Job is still Pending, else the Job's."""
    if override is not None and override.phase is not None:
        return override.phase
    phase = str((job.get("status") or {}).get("phase") or "Pending")
    if phase == "Pending" and started:
        return "Running"
    return phase if phase in POD_PHASES else "Pending"


def started_at(job: Object) -> str | None:
    """When the Job's whole gang was running: its `startTime` (None while it never was)."""
    return (job.get("status") or {}).get("startTime")


def pod_start(job: Object, bound_at: str | None) -> str | None:
    """When the pod started: when it was bound (the kubelet accepted it and started its
    container), else, for a pod of a Job that runs without having been scheduled here (forced
    Running, or restored from a state file), the Job's `startTime`; None while neither."""
    return bound_at or started_at(job)


def _container_state(job: Object, phase: str, override: PodOverride | None,
                     start: str | None) -> Object:
    if override is not None and override.waiting_reason:
        return {"waiting": {"reason": override.waiting_reason,
                            "message": override.waiting_message}}
    if override is not None and override.terminated is not None and start:
        return override.terminated.to_state(start)
    if start is None or phase == "Pending":
        return {"waiting": {"reason": "ContainerCreating"}}
    finished = str((job.get("status") or {}).get("completionTime") or start)
    if phase == "Succeeded":
        return ContainerEnd("Completed", 0, finished_at=finished).to_state(start)
    if phase == "Failed":
        return ContainerEnd("Error", 1, finished_at=finished).to_state(start)
    return {"running": {"startedAt": start}}


def _container_status(job: Object, ref: PodRef, phase: str,
                      override: PodOverride | None, start: str | None) -> Object:
    container = main_container(ref.template)
    state = _container_state(job, phase, override, start)
    restarts = override.restarts if override is not None else 0
    last: Object = {}
    if override is not None and restarts > 0:
        end = override.last_terminated or ContainerEnd("Error", 1)
        last = end.to_state(start or "")
    return {
        "name": str(container.get("name") or MAIN_CONTAINER),
        "image": str(container.get("image") or ""),
        "imageID": "",
        "ready": "running" in state,
        "started": "running" in state,
        "restartCount": restarts,
        "state": state,
        "lastState": last,
    }


KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
# kube-scheduler's word for a pod with scheduling gates (v1.PodReasonSchedulingGated).
_GATED_CONDITION: Object = {
    "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}


@dataclass(frozen=True)
class Unschedulable:
    """Why the scheduler left a pod unbound (kube-scheduler's message), and since when."""

    message: str
    since: str


def _scheduled_condition(node: str, unschedulable: Unschedulable | None) -> Object:
    if node or unschedulable is None:
        return {"type": "PodScheduled", "status": "True" if node else "False"}
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": unschedulable.message, "lastProbeTime": None,
            "lastTransitionTime": unschedulable.since}


def _defaulted_container(container: Any) -> Any:
    """A container as the API server stores it: requests default to the limits they lack."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
        return container
    requests = resources.get("requests")
    if requests is not None and not isinstance(requests, dict):
        return container
    merged = {**resources["limits"], **(requests or {})}
    return {**container, "resources": {**resources, "requests": merged}}


def _one_replica_per_node(spec: Object, ref: PodRef) -> Object:
    """The simulated operator's rule: a Task's replicas never share a node (required pod
    anti-affinity on the node, which the simulator's scheduler enforces)."""
    given = spec.get("affinity")
    affinity: Object = given if isinstance(given, dict) else {}
    term = {"labelSelector": {"matchLabels": {LABEL_JOB: ref.job, LABEL_TASK: ref.task}},
            "topologyKey": "kubernetes.io/hostname"}
    return {**affinity, "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def pod_spec(ref: PodRef) -> Object:
    """The pod's spec as the API server serves it (before binding): the Task template's,
    with requests defaulted from limits and the one-replica-per-node anti-affinity."""
    spec: Object = {**(ref.template.get("spec") or {})}
    for key in ("containers", "initContainers"):
        if isinstance(spec.get(key), list):
            spec[key] = [_defaulted_container(c) for c in spec[key]]
    spec["affinity"] = _one_replica_per_node(spec, ref)
    return spec


def pod_object(job: Object, ref: PodRef, *, cluster: str, node: str,
               override: PodOverride | None, resource_version: int,
               unschedulable: Unschedulable | None = None, gated: bool = False,
               bound_at: str | None = None) -> Object:
    """The Pod as `GET /api/v1/namespaces/{ns}/pods/{name}` returns it. `gated`: Kueue has not
    admitted its pod group yet (its scheduling gate is on, the scheduler leaves it alone).
    `bound_at`: when the scheduler bound it (its start, `pod_start`)."""
    metadata = job["metadata"]
    namespace = metadata["namespace"]
    start = pod_start(job, bound_at if node else None)
    phase = pod_phase(job, override, start)
    condition = _GATED_CONDITION if gated else _scheduled_condition(node, unschedulable)
    conditions = [condition]
    disruption = override.disruption if override is not None else None
    if disruption is not None:
        conditions.append({"type": "DisruptionTarget", "status": "True",
                           "reason": disruption.condition_reason, "message": disruption.message,
                           "lastProbeTime": None, "lastTransitionTime": disruption.at})
    status: Object = {
        "phase": phase,
        "conditions": conditions,
        "containerStatuses": [_container_status(job, ref, phase, override, start)],
    }
    if start:
        status["startTime"] = start
    if disruption is not None and disruption.pod_reason:
        status["reason"] = disruption.pod_reason
        status["message"] = disruption.message
    if node:
        status["podIP"] = _pod_ip(cluster, namespace, ref.name)
    spec = pod_spec(ref)
    if node:
        spec["nodeName"] = node
    labels = _labels(job, ref)
    if KUEUE_QUEUE_LABEL in labels:  # Kueue's pod webhook marks the pods it manages
        labels[KUEUE_MANAGED_LABEL] = "true"
        if gated:
            spec["schedulingGates"] = [{"name": KUEUE_ADMISSION_GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": ref.name,
            "namespace": namespace,
            "uid": pod_uid(cluster, job, ref),
            "resourceVersion": str(resource_version),
            "creationTimestamp": metadata["creationTimestamp"],
            "labels": labels,
            "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": job["kind"],
                                 "name": metadata["name"], "uid": metadata["uid"],
                                 "controller": True}],
        },
        "spec": spec,
        "status": status,
    }


def pod_uid(cluster: str, job: Object, ref: PodRef) -> str:
    return stable_uid(cluster, job["metadata"]["uid"], "pod", ref.name)


def _pod_ip(cluster: str, namespace: str, name: str) -> str:
    digest = int(stable_uid(cluster, namespace, name).replace("-", "")[:6], 16)
    return f"10.{digest >> 16 & 255}.{digest >> 8 & 255}.{digest & 255}"


def _run_script(script: str) -> list[str]:
    match = _RUN_HEREDOC.search(script)
    if match is None:
        return []
    lines: list[str] = []
    for line in match.group(2).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        lines.append(f"+ {stripped}")
        echoed = _ECHO.match(stripped)
        if echoed:
            try:
                lines.append(" ".join(shlex.split(echoed.group(1))))
            except ValueError:
                lines.append(echoed.group(1))
    return lines


def start_lines(job: Object, ref: PodRef, node: str) -> list[str]:
    """What the pod's start script prints, deterministically (without timestamps)."""
    container = main_container(ref.template)
    script = "\n".join(str(part) for part in [*(container.get("command") or []),
                                                *(container.get("args") or [])])
    lines = [f"rlark: task {ref.task} replica {ref.index} on node {node or '?'}"]
    if "ray start --head" in script:
        lines += [
            "Local node IP: " + _pod_ip("", ref.job, ref.name),
            "Ray runtime started.",
            "rlark: cluster check passed",
        ]
        lines += _run_script(script)
    elif "ray start --address" in script:
        lines += ["Local node IP: " + _pod_ip("", ref.job, ref.name), "Ray runtime started.",
                  "--block: this command will block until terminated"]
    return lines


def timed_start_lines(job: Object, ref: PodRef, node: str,
                      start: str | None) -> list[tuple[datetime, str]]:
    """The start lines, one second apart from the pod's `start`; none before it started."""
    if start is None:
        return []
    origin = parse_time(start)
    return [(origin + timedelta(seconds=i), line)
            for i, line in enumerate(start_lines(job, ref, node))]


def foreign_pod_object(spec: ForeignPodSpec, *, cluster: str, resource_version: int,
                       created: str) -> Object:
    """A foreign workload's pod (`ForeignPodSpec`): bound and Running since `created`."""
    metadata: Object = {
        "name": spec.name,
        "namespace": spec.namespace,
        "uid": stable_uid(cluster, "foreign-pod", spec.namespace, spec.name),
        "resourceVersion": str(resource_version),
        "creationTimestamp": created,
    }
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    running = {"name": MAIN_CONTAINER, "image": FOREIGN_IMAGE, "imageID": "", "ready": True,
               "started": True, "restartCount": 0, "state": {"running": {"startedAt": created}},
               "lastState": {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec.pod_spec(),
        "status": {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"},
                           {"type": "Ready", "status": "True"}],
            "startTime": created,
            "podIP": _pod_ip(cluster, spec.namespace, spec.name),
            "containerStatuses": [running],
        },
    }
