"""The simulator's Job controller: a deliberately small scheduler.

A Pending Job becomes Running when every task finds at least `replicas` ready
nodes of the Job's own cluster (or, for a Job naming a cross-cluster network domain
of the fleet in `spec.networkDomain`, of every cluster in that domain) that match its
`nodeSelector` and whose
allocatable covers the main container's `nvidia.com/gpu` and `rlinf.io/*`
limits. Capacity is not reserved: two Jobs may count the same node. Otherwise the
Job stays Pending with an `Unschedulable` reason saying which task lacks what.
Succeeded and Failed are set from outside (the control endpoint).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from clusters.quantities import parse_count
from clusters.simulator.fleet import NodeSpec
from clusters.simulator.objects import now_timestamp
from clusters.simulator.pods import main_container, pod_refs
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


def _fits(node: NodeSpec, needs: dict[str, int]) -> bool:
    for resource, amount in needs.items():
        available = parse_count(node.allocatable.get(resource, "0"))
        if amount > 0 and (available is None or available < amount):
            return False
    return True


def _describe(selector: dict[str, str], needs: dict[str, int]) -> str:
    parts = [f"{key}={value}" for key, value in sorted(selector.items())]
    parts += [f"{key}>={amount}" for key, amount in sorted(needs.items()) if amount > 0]
    return ", ".join(parts) or "no constraints"


def task_problem(task: dict[str, Any], nodes: Iterable[NodeSpec]) -> str | None:
    """Why the task cannot be placed on `nodes` now, or None when it can."""
    name = task.get("name", "?")
    replicas = task.get("replicas")
    if not isinstance(replicas, int):
        replicas = 0
    selector = ((task.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    needs: dict[str, int] = {}
    for resource, quantity in task_requirements(task).items():
        amount = parse_count(quantity)
        if amount is None:
            return f"task {name}: {resource} limit {quantity!r} is not a whole number"
        needs[resource] = amount
    matching = [n for n in nodes if all(n.labels.get(k) == v for k, v in selector.items())]
    ready = [n for n in matching if n.ready]
    fitting = [n for n in ready if _fits(n, needs)]
    if len(fitting) >= replicas:
        return None
    return (
        f"task {name} needs {replicas} ready node(s) with {_describe(selector, needs)}; "
        f"{len(fitting)} available ({len(matching)} match the selector, {len(ready)} ready)"
    )


def scheduling_problems(job: dict[str, Any], nodes: list[NodeSpec]) -> list[str]:
    tasks = (job.get("spec") or {}).get("tasks") or []
    problems = [task_problem(task, nodes) for task in tasks if isinstance(task, dict)]
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
    cluster: ClusterState, *, domain_nodes: Mapping[str, list[NodeSpec]] | None = None
) -> int:
    """One controller pass over a cluster's Pending Jobs; returns how many changed.

    `domain_nodes` maps the network domains this cluster belongs to onto the nodes of all
    their clusters.
    """
    changed = 0
    with cluster.lock:
        nodes = cluster.node_specs()
        for job in cluster.job_items(None):
            status = job.get("status") or {}
            if status.get("phase") != "Pending":
                continue
            domain = (job.get("spec") or {}).get("networkDomain")
            candidates = (domain_nodes or {}).get(domain, nodes) if domain else nodes
            problems = scheduling_problems(job, candidates)
            now = now_timestamp()
            new = pending_status(status, problems, now) if problems else running_status(status, now)
            if _comparable(new) != _comparable(status):
                metadata = job["metadata"]
                updated = cluster.replace_job_status(metadata["namespace"], metadata["name"], new)
                _pod_events(cluster, updated, problems, candidates)
                changed += 1
    return changed


def _pod_events(
    cluster: ClusterState, job: dict[str, Any], problems: list[str], nodes: list[NodeSpec]
) -> None:
    """The scheduler's and kubelet's events after a Job's pods were (not) placed."""
    if problems:
        message = "0/{} nodes are available: {}".format(len(nodes), "; ".join(problems))
        for ref in pod_refs(job):
            cluster.record_event(job, kind="Pod", name=ref.name, reason="FailedScheduling",
                                 message=message, type="Warning")
        return
    placement = cluster.place_pods(job, nodes)
    namespace = job["metadata"]["namespace"]
    for ref in pod_refs(job):
        image = main_container(ref.template).get("image") or ""
        for reason, message in (
            ("Scheduled", f"Successfully assigned {namespace}/{ref.name} to "
                          f"{placement.get(ref.name) or '?'}"),
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
