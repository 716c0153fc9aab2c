"""The simulator's Job controller and scheduler pass.

Each pass takes the Pending Jobs in the order they were created and, like kube-scheduler
taking their pods one at a time, binds every unbound pod to the first node (by name) that
passes `clusters.simulator.scheduler`'s filters: Ready, matching the Task's `nodeSelector`,
with free capacity for the pod's effective request (what bound pods that have not ended
already request counts against the node's allocatable: capacity is reserved while a pod
lives) and not holding another replica of the same Task. The candidates are the nodes of
the Job's own cluster, or of every cluster of the fleet network domain its
`spec.networkDomain` names.

A pod that fits nowhere stays Pending with `PodScheduled=False`, `reason: Unschedulable`
and kube-scheduler's message, and gets a `FailedScheduling` event (again only when the
message changes). Pods bind one by one, without gang scheduling: a Job whose pods only
partly fit holds the nodes its bound pods got, and those pods start (the kubelet's
`startTime`, a running container, phase Running, its Pulled / Created / Started events) at
once. A Job becomes Running once all its pods are bound; until then its status says, per
Task short of nodes, how many it needs and how many it has. Succeeded and Failed are set
from outside (the control endpoint).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from clusters.quantities import parse_count
from clusters.simulator.objects import now_timestamp
from clusters.simulator.pods import PodRef, main_container, pod_refs
from clusters.simulator.scheduler import Candidate, Usage, place
from clusters.simulator.state import ClusterState
from clusters.types import DEVICE_PREFIX, GPU_RESOURCE

PHASES = ("Pending", "Running", "Succeeded", "Failed")
_SCHEDULED = "PodScheduled"


def _main_container(task: dict[str, Any]) -> dict[str, Any]:
    spec = (task.get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    named = [c for c in containers if c.get("name") == "main"]
    return (named or containers or [{}])[0]


def task_requirements(task: dict[str, Any]) -> dict[str, str]:
    """The `nvidia.com/gpu` and `rlinf.io/*` amounts a task's main container asks for."""
    resources = _main_container(task).get("resources") or {}
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return {
        str(key): str(value)
        for key, value in amounts.items()
        if key == GPU_RESOURCE or str(key).startswith(DEVICE_PREFIX)
    }


def _describe(selector: dict[str, str], needs: dict[str, int]) -> str:
    parts = [f"{key}={value}" for key, value in sorted(selector.items())]
    parts += [f"{key}>={amount}" for key, amount in sorted(needs.items()) if amount > 0]
    return ", ".join(parts) or "no constraints"


def _selector(task: dict[str, Any]) -> dict[str, str]:
    selector = ((task.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return selector if isinstance(selector, dict) else {}


def _task_needs(task: dict[str, Any]) -> dict[str, int] | str:
    """What the Task's main container asks of GPUs and devices, or why it cannot be read."""
    needs: dict[str, int] = {}
    for resource, quantity in task_requirements(task).items():
        amount = parse_count(quantity)
        if amount is None:
            name = task.get("name", "?")
            return f"task {name}: {resource} limit {quantity!r} is not a whole number"
        needs[resource] = amount
    return needs


def _preempts(ref: PodRef) -> bool:
    return (ref.template.get("spec") or {}).get("preemptionPolicy") != "Never"


def _schedule_task(cluster: ClusterState, job: dict[str, Any], task: dict[str, Any],
                   candidates: list[Candidate], usage: Usage) -> tuple[int, str | None]:
    """Bind what fits of one Task's pods; (pods bound now, why the Task is short or None)."""
    name = str(task.get("name"))
    refs = [ref for ref in pod_refs(job) if ref.task == name]
    needs = _task_needs(task)
    namespace = job["metadata"]["namespace"]
    bound = {ref.name: cluster.binding(namespace, ref.name) for ref in refs}
    siblings = {(b.cluster, b.node) for b in bound.values() if b is not None}
    newly = 0
    for ref in refs:
        if bound[ref.name] is not None:
            continue
        request = cluster.pod_request(job, ref)
        if isinstance(needs, str) or isinstance(request, str):
            message = needs if isinstance(needs, str) else str(request)
            _unschedulable(cluster, job, ref, message)
            continue
        placement = place(request, candidates, usage, selector=_selector(task),
                          siblings=siblings, preemption=_preempts(ref))
        if placement.node is None:
            _unschedulable(cluster, job, ref, placement.message)
            continue
        node = placement.node
        cluster.bind(job, ref, cluster=node.cluster, node=node.node.name)
        siblings.add(node.key)
        newly += 1
        cluster.record_event(job, kind="Pod", name=ref.name, reason="Scheduled",
                             message=f"Successfully assigned {namespace}/{ref.name} to "
                                     f"{node.node.name}")
        _started_events(cluster, job, ref)
    placed = sum(1 for ref in refs if cluster.binding(namespace, ref.name) is not None)
    if placed >= len(refs):
        return newly, None
    if isinstance(needs, str):
        return newly, needs
    matching = [c for c in candidates
                if all(c.node.labels.get(k) == v for k, v in _selector(task).items())]
    ready = sum(1 for c in matching if c.node.ready)
    return newly, (
        f"task {name} needs {len(refs)} ready node(s) with {_describe(_selector(task), needs)}; "
        f"{placed} available ({len(matching)} match the selector, {ready} ready)"
    )


def _unschedulable(cluster: ClusterState, job: dict[str, Any], ref: PodRef,
                   message: str) -> None:
    if cluster.mark_unschedulable(job, ref, message):
        cluster.record_event(job, kind="Pod", name=ref.name, reason="FailedScheduling",
                             message=message, type="Warning")


def scheduling_problems(cluster: ClusterState, job: dict[str, Any],
                        candidates: list[Candidate], usage: Usage) -> list[str]:
    """Bind what fits of the Job's pods; what keeps each short Task from running."""
    tasks = [task for task in (job.get("spec") or {}).get("tasks") or [] if isinstance(task, dict)]
    problems = [_schedule_task(cluster, job, task, candidates, usage)[1] for task in tasks]
    return [problem for problem in problems if problem is not None]


def _condition(
    old: dict[str, Any], status: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    conditions = [c for c in old.get("conditions") or [] if c.get("type") == _SCHEDULED]
    previous = conditions[0] if conditions else {}
    changed = previous.get("status") != status
    return {
        "type": _SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now if changed else previous.get("lastTransitionTime", now),
    }


def pending_status(old: dict[str, Any], problems: list[str], now: str) -> dict[str, Any]:
    message = "; ".join(problems)
    others = [c for c in old.get("conditions") or [] if c.get("type") != _SCHEDULED]
    return {
        **old,
        "phase": "Pending",
        "reason": "Unschedulable",
        "message": message,
        "conditions": [*others, _condition(old, "False", "Unschedulable", message, now)],
        "lastTransitionTime": old.get("lastTransitionTime", now),
    }


GATED_REASON = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def gated_status(old: dict[str, Any], now: str) -> dict[str, Any]:
    """A Job whose pods wait for Kueue: Pending, its pods' scheduling gate as the reason."""
    others = [c for c in old.get("conditions") or [] if c.get("type") != _SCHEDULED]
    return {
        **old,
        "phase": "Pending",
        "reason": GATED_REASON,
        "message": GATED_MESSAGE,
        "conditions": [*others, _condition(old, "False", GATED_REASON, GATED_MESSAGE, now)],
        "lastTransitionTime": old.get("lastTransitionTime", now),
    }


def running_status(old: dict[str, Any], now: str) -> dict[str, Any]:
    others = [c for c in old.get("conditions") or [] if c.get("type") != _SCHEDULED]
    message = "every task has enough matching ready nodes"
    status = {key: value for key, value in old.items() if key not in ("reason", "message")}
    return {
        **status,
        "phase": "Running",
        "conditions": [*others, _condition(old, "True", "Scheduled", message, now)],
        "lastTransitionTime": now,
        "startTime": now,
    }


def phase_status(
    old: dict[str, Any], *, phase: str, reason: str | None, message: str | None, now: str
) -> dict[str, Any]:
    """The status after an operator sets the phase by hand (control endpoint)."""
    status = {key: value for key, value in old.items() if key not in ("reason", "message")}
    status["phase"] = phase
    if reason is not None:
        status["reason"] = reason
    if message is not None:
        status["message"] = message
    if old.get("phase") != phase:
        status["lastTransitionTime"] = now
    if phase in ("Succeeded", "Failed"):
        status["completionTime"] = now
    return status


def reconcile_cluster(
    cluster: ClusterState, *, candidates: list[Candidate],
    domain_candidates: Mapping[str, list[Candidate]] | None = None, usage: Usage,
) -> int:
    """One scheduler and controller pass over a cluster's Pending Jobs; how many changed.

    `candidates` are the cluster's nodes; `domain_candidates` maps the network domains this
    cluster belongs to onto the nodes of all their clusters; `usage` is what bound pods
    request on every node of the fleet, and grows with each pod bound here.
    """
    changed = 0
    with cluster.lock:
        changed += len(cluster.kueue_pass())
        for job in cluster.pending_jobs():
            status = job.get("status") or {}
            now = now_timestamp()
            if cluster.kueue.gated(job):  # Kueue has not admitted its pod group: not scheduled
                new = gated_status(status, now)
                if _comparable(new) != _comparable(status):
                    metadata = job["metadata"]
                    cluster.replace_job_status(metadata["namespace"], metadata["name"], new)
                    changed += 1
                continue
            domain = (job.get("spec") or {}).get("networkDomain")
            nodes = (domain_candidates or {}).get(domain, candidates) if domain else candidates
            problems = scheduling_problems(cluster, job, nodes, usage)
            new = pending_status(status, problems, now) if problems else running_status(status, now)
            if _comparable(new) != _comparable(status):
                metadata = job["metadata"]
                cluster.replace_job_status(metadata["namespace"], metadata["name"], new)
                changed += 1
    return changed


def _started_events(cluster: ClusterState, job: dict[str, Any], ref: PodRef) -> None:
    """The kubelet's events as it starts a pod just bound to its node (the image is present),
    whether or not the rest of the Job's gang has nodes yet."""
    image = main_container(ref.template).get("image") or ""
    for reason, message in (
        ("Pulled", f'Container image "{image}" already present on machine'),
        ("Created", "Created container main"),
        ("Started", "Started container main"),
    ):
        cluster.record_event(job, kind="Pod", name=ref.name, reason=reason, message=message)


def _comparable(status: dict[str, Any]) -> dict[str, Any]:
    """A status without timestamps, to tell a real change from a re-computation."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return {
        **{k: v for k, v in status.items() if k not in ("lastTransitionTime", "startTime")},
        "conditions": conditions,
    }


class ControllerThread:
    """Runs `tick` every `interval` seconds in a daemon thread until stopped."""

    def __init__(self, *, tick: Callable[[], Any], interval: float) -> None:
        self._tick = tick
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-controller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._tick()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
