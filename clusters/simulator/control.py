"""The `/_control/` endpoint: how tests and demos steer the simulated fleet.

JSON in, JSON out; errors are Kubernetes `Status` objects like the API's own.
Documented in docs/simulator.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from clusters.simulator.controller import PHASES, phase_status
from clusters.simulator.core import Simulator
from clusters.simulator.faults import FaultSpec, fault_problems, fault_spec_from_dict
from clusters.simulator.fleet import (
    NODE_SCHEMA,
    POD_SCHEMA,
    allocatable_problems,
    foreign_pod_problems,
    foreign_pod_spec_from_dict,
    label_problems,
    node_spec_from_dict,
)
from clusters.simulator.gpumetrics import GPU_SCHEMA
from clusters.simulator.kueue import DEACTIVATION_CAUSES
from clusters.simulator.kueuespec import KUEUE_SCHEMA, kueue_problems, kueue_spec_from_dict
from clusters.simulator.objects import (
    ApiError,
    clock_offset,
    now_timestamp,
    set_clock_offset,
    stable_uid,
)
from clusters.simulator.pods import POD_PHASES, ContainerEnd, Disruption, PodOverride
from clusters.simulator.routing import Request, Response, Router
from clusters.simulator.scheduler import fit_refusal, node_allocatable
from clusters.simulator.state import ClusterState

_CLUSTER = r"/clusters/(?P<cluster>[^/]+)"
_NODE = _CLUSTER + r"/nodes/(?P<node>[^/]+)"
_JOB = _CLUSTER + r"/namespaces/(?P<namespace>[^/]+)/jobs/(?P<name>[^/]+)"
_POD = _CLUSTER + r"/namespaces/(?P<namespace>[^/]+)/pods/(?P<pod>[^/]+)"
_FOREIGN_POD = _CLUSTER + r"/pods/(?P<pod>[^/]+)"
_WORKLOAD = _CLUSTER + r"/namespaces/(?P<namespace>[^/]+)/workloads/(?P<name>[^/]+)"
_EVICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"cause": {"enum": ["", *DEACTIVATION_CAUSES]}},
}
_END_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["reason", "exitCode"],
    "properties": {
        "reason": {"type": "string", "minLength": 1},
        "exitCode": {"type": "integer"},
        "message": {"type": "string"},
    },
}
_POD_PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "phase": {"enum": [*POD_PHASES, None]},
        "restarts": {"type": "integer", "minimum": 0},
        "waiting": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["reason"],
            "properties": {"reason": {"type": "string", "minLength": 1},
                           "message": {"type": "string"}},
        },
        "terminated": _END_SCHEMA,
        "lastTerminated": _END_SCHEMA,
        "scheduler_message": {"type": ["string", "null"]},
    },
}
_LOG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["lines"],
    "properties": {
        "lines": {"type": "array", "items": {"type": "string"}, "maxItems": 100000},
        "previous": {"type": "boolean"},
    },
}
_POD_EVICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "resource": {"enum": ["memory", "ephemeral-storage", "pid"]},
        "threshold": {"type": "string", "minLength": 1, "maxLength": 64},
        "available": {"type": "string", "minLength": 1, "maxLength": 64},
        "usage": {"type": ["string", "null"], "minLength": 1, "maxLength": 64},
    },
}
_PREEMPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "preemptor": {"type": "string", "minLength": 1, "maxLength": 253},
        "scheduler": {"type": "string", "minLength": 1, "maxLength": 253},
    },
}
# The kubelet's eviction (pkg/kubelet/eviction/helpers.go): `status.reason`, and its message
# fragments, each ending in ". " (the pod's message keeps the trailing space).
EVICTED_REASON = "Evicted"
_NODE_LOW = "The node was low on resource: {resource}. "
_THRESHOLD_MET = "Threshold quantity: {threshold}, available: {available}. "
_CONTAINER_USAGE = "Container {container} was using {usage}, request is {request}, " \
    "has larger consumption of {resource}. "
# The DisruptionTarget reasons (v1.PodReasonTerminationByKubelet, PodReasonPreemptionByScheduler)
# and kube-scheduler's preemption condition message and victim event
# (pkg/scheduler/framework/preemption).
_BY_KUBELET = "TerminationByKubelet"
_BY_SCHEDULER = "PreemptionByScheduler"
_PREEMPTING = "{scheduler}: preempting to accommodate a higher priority pod"
_PREEMPTED_EVENT = "Preempted by pod {uid} on node {node}"
_WAITING_EVENTS = {
    "CrashLoopBackOff": ("BackOff", "Back-off restarting failed container main in pod {pod}"),
    "ImagePullBackOff": ("BackOff", 'Back-off pulling image "{image}"'),
    "ErrImagePull": ("Failed", 'Failed to pull image "{image}": rpc error: not found'),
}

_NODE_PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        "allocatable": {
            "type": "object",
            "additionalProperties": {"type": ["integer", "string", "null"]},
        },
        "ready": {"type": "boolean"},
    },
}

_PROGRESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "state": {"enum": ["advancing", "frozen"]},
        "step_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
        "total": {"type": "integer", "minimum": 1, "maximum": 10**9},
    },
}

_PHASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["phase"],
    "properties": {
        "phase": {"enum": list(PHASES)},
        "reason": {"type": "string"},
        "message": {"type": "string"},
    },
}


def _require(schema: dict[str, Any], document: Any) -> None:
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(document))
    _reject([f"{'.'.join(map(str, e.absolute_path)) or 'body'}: {e.message}" for e in errors])


def _reject(problems: list[str]) -> None:
    if problems:
        raise ApiError(422, "; ".join(problems), reason="Invalid")


def _cluster(simulator: Simulator, name: str) -> ClusterState:
    if name not in simulator.clusters:
        raise ApiError(404, f'cluster "{name}" is not in the fleet')
    return simulator.clusters[name]


def health(simulator: Simulator, request: Request) -> Response:
    return Response(200, {"ok": True, "clusters": sorted(simulator.clusters)})


def list_clusters(simulator: Simulator, request: Request) -> Response:
    return Response(200, [cluster.summary() for cluster in simulator.clusters.values()])


def get_faults(simulator: Simulator, request: Request, cluster: str) -> Response:
    return Response(200, _cluster(simulator, cluster).faults.describe())


def put_faults(simulator: Simulator, request: Request, cluster: str) -> Response:
    state = _cluster(simulator, cluster)
    document = request.json()
    _reject(fault_problems(document))
    state.set_faults(fault_spec_from_dict(document))
    return Response(200, state.faults.describe())


def clear_faults(simulator: Simulator, request: Request, cluster: str) -> Response:
    state = _cluster(simulator, cluster)
    state.set_faults(FaultSpec())
    return Response(200, state.faults.describe())


def add_node(simulator: Simulator, request: Request, cluster: str) -> Response:
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(NODE_SCHEMA, document)
    _reject(label_problems(document.get("labels", {})))
    _reject(allocatable_problems(document.get("allocatable", {})))
    return Response(201, state.add_node(node_spec_from_dict(document)))


def patch_node(simulator: Simulator, request: Request, cluster: str, node: str) -> Response:
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_NODE_PATCH_SCHEMA, document)
    labels = document.get("labels") or {}
    _reject(label_problems({k: v for k, v in labels.items() if v is not None}))
    allocatable = {
        key: None if value is None else str(value)
        for key, value in (document.get("allocatable") or {}).items()
    }
    _reject(allocatable_problems({k: v for k, v in allocatable.items() if v is not None}))
    updated = state.patch_node(
        node, labels=labels, allocatable=allocatable, ready=document.get("ready")
    )
    return Response(200, updated)


def remove_node(simulator: Simulator, request: Request, cluster: str, node: str) -> Response:
    _cluster(simulator, cluster).remove_node(node)
    return Response(200, {"removed": node})


def _refuse(problems: list[str]) -> None:
    if problems:
        raise ApiError(400, "; ".join(problems))


def add_foreign_pod(simulator: Simulator, request: Request, cluster: str) -> Response:
    """Bind a foreign workload's pod to a node: it takes capacity there (while it exists)
    and shows in the cluster's pods lists. 400 when the body is wrong or the pod does not
    fit the node's free capacity, 409 when a pod of that name exists."""
    state = _cluster(simulator, cluster)
    document = request.json()
    errors = list(jsonschema.Draft202012Validator(POD_SCHEMA).iter_errors(document))
    _refuse([f"{'.'.join(map(str, e.absolute_path)) or 'body'}: {e.message}" for e in errors])
    nodes = {node.name: node for node in state.node_specs()}
    _refuse(foreign_pod_problems(document, frozenset(nodes)))
    spec = foreign_pod_spec_from_dict(document)
    with simulator.scheduling:
        request_units = spec.request()
        used: Mapping[str, int] = simulator.usage().get((cluster, spec.node), {})
        refused = fit_refusal(request_units, node_allocatable(nodes[spec.node]), used)
        if refused is not None:
            raise ApiError(400, f"pod {spec.name} does not fit on node {spec.node}: "
                                + ", ".join(refused.reasons))
        return Response(201, state.add_foreign_pod(spec))


def remove_foreign_pod(simulator: Simulator, request: Request, cluster: str,
                       pod: str) -> Response:
    """Delete a foreign pod: its capacity is free again."""
    removed = _cluster(simulator, cluster).remove_foreign_pod(pod)
    return Response(200, {"removed": pod, "namespace": removed["metadata"]["namespace"]})


def set_job_phase(
    simulator: Simulator, request: Request, cluster: str, namespace: str, name: str
) -> Response:
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_PHASE_SCHEMA, document)
    with state.lock:
        job = state.get_job(namespace, name)
        status = phase_status(
            job.get("status") or {},
            phase=document["phase"],
            reason=document.get("reason"),
            message=document.get("message"),
            now=now_timestamp(),
        )
        updated = state.replace_job_status(namespace, name, status)
        if document["phase"] in ("Succeeded", "Failed") and job["status"].get("phase") != \
                document["phase"]:
            state.record_event(
                updated, kind="Job", name=name, reason=document["phase"],
                message=document.get("message") or f"Job {document['phase'].lower()}",
                type="Normal" if document["phase"] == "Succeeded" else "Warning",
            )
        return Response(200, updated)


def set_progress(
    simulator: Simulator, request: Request, cluster: str, namespace: str, name: str
) -> Response:
    """Freeze or resume the Job's Head Task step lines, or change their pace or total."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_PROGRESS_SCHEMA, document)
    frozen = None if "state" not in document else document["state"] == "frozen"
    return Response(200, state.set_progress(
        namespace, name, frozen=frozen, seconds=document.get("step_seconds"),
        total=document.get("total")))


def set_pod_gpu(simulator: Simulator, request: Request, cluster: str, namespace: str,
                pod: str) -> Response:
    """Set the DCGM gauges of a pod's GPUs on its cluster's `/metrics`: `utilization`
    (percent, 0-100) and `tensor_active` (ratio, 0-1; null: the exporter exports no profiling
    metric for it, so readers fall back to utilization). 422 for a bad body, 404 for no such pod."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(GPU_SCHEMA, document)
    return Response(200, state.set_gpu(namespace, pod, document))


def _end(document: dict[str, Any] | None) -> ContainerEnd | None:
    if document is None:
        return None
    return ContainerEnd(reason=document["reason"], exit_code=document["exitCode"],
                        message=document.get("message", ""), finished_at=now_timestamp())


def patch_pod(simulator: Simulator, request: Request, cluster: str, namespace: str,
              pod: str) -> Response:
    """Set a pod's phase, restart count, waiting or terminated state; a restart moves the
    current log to the previous container's. Emits the kubelet's events for the change."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_POD_PATCH_SCHEMA, document)
    with state.lock:
        job, override = state.override_pod(namespace, pod)
        if "phase" in document:
            override.phase = document["phase"]
        restarts = document.get("restarts", override.restarts)
        restarted = restarts > override.restarts
        if restarted:
            override.previous_lines, override.current_lines = override.current_lines, []
        override.restarts = restarts
        if "waiting" in document:
            waiting = document["waiting"] or {}
            override.waiting_reason = waiting.get("reason")
            override.waiting_message = waiting.get("message", "")
        if "terminated" in document:
            override.terminated = _end(document["terminated"])
        if "lastTerminated" in document:
            override.last_terminated = _end(document["lastTerminated"])
        if "scheduler_message" in document:
            override.scheduler_message = document["scheduler_message"]
        if restarted:
            state.restart_progress(namespace, pod)
        _pod_events(state, job, pod, override)
        return Response(200, state.get_pod(namespace, pod))


def _pod_events(state: ClusterState, job: dict[str, Any], pod: str,
                override: PodOverride) -> None:
    if override.waiting_reason in _WAITING_EVENTS:
        reason, template = _WAITING_EVENTS[override.waiting_reason]
        image = state.get_pod(job["metadata"]["namespace"], pod)["status"][
            "containerStatuses"][0]["image"]
        state.record_event(job, kind="Pod", name=pod, reason=reason, type="Warning",
                           message=template.format(pod=pod, image=image))
    end = override.terminated
    if end is not None and end.exit_code != 0:
        state.record_event(job, kind="Pod", name=pod, reason="Failed", type="Warning",
                           message=f"Container main terminated: {end.reason} "
                                   f"(exit code {end.exit_code})")


def _running_pod(state: ClusterState, namespace: str, pod: str) -> dict[str, Any]:
    """The pod, which must be running on a node (a kubelet evicts, a scheduler preempts, only
    pods that hold a node); 409 otherwise, 404 for no such pod, 400 for a foreign pod."""
    if state.is_foreign_pod(namespace, pod):
        raise ApiError(400, f"pod {pod} is a foreign workload's: delete it instead")
    found = state.get_pod(namespace, pod)
    if found["status"]["phase"] != "Running" or not found["spec"].get("nodeName"):
        raise ApiError(409, f'pod "{pod}" is not running on a node (phase '
                            f'{found["status"]["phase"]})', reason="Conflict")
    return found


def _request_of(pod: dict[str, Any], resource: str) -> str:
    containers = pod["spec"].get("containers") or [{}]
    requests = ((containers[0].get("resources") or {}).get("requests") or {})
    return str(requests.get(resource, "0"))


def evict_pod(simulator: Simulator, request: Request, cluster: str, namespace: str,
              pod: str) -> Response:
    """The node's kubelet evicts the pod under resource pressure (a hard threshold: no grace
    period): phase Failed, `status.reason` Evicted with the kubelet's message, a
    `DisruptionTarget` condition (TerminationByKubelet), its container killed (exit 137), the
    kubelet's `Evicted` (Warning) and `Killing` events. Its capacity is free again."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_POD_EVICT_SCHEMA, document)
    resource = document.get("resource", "memory")
    with state.lock:
        found = _running_pod(state, namespace, pod)
        message = _NODE_LOW.format(resource=resource) + _THRESHOLD_MET.format(
            threshold=document.get("threshold", "100Mi"),
            available=document.get("available", "12Mi"))
        container = found["status"]["containerStatuses"][0]["name"]
        if document.get("usage"):
            message += _CONTAINER_USAGE.format(
                container=container, usage=document["usage"], resource=resource,
                request=_request_of(found, resource))
        job, override = state.override_pod(namespace, pod)
        now = now_timestamp()
        override.phase = "Failed"
        override.waiting_reason = None
        override.terminated = ContainerEnd("Error", 137, finished_at=now)
        override.disruption = Disruption(_BY_KUBELET, message, now, pod_reason=EVICTED_REASON)
        state.record_event(job, kind="Pod", name=pod, reason=EVICTED_REASON, type="Warning",
                           message=message)
        state.record_event(job, kind="Pod", name=pod, reason="Killing",
                           message=f"Stopping container {container}")
        return Response(200, state.get_pod(namespace, pod))


def preempt_pod(simulator: Simulator, request: Request, cluster: str, namespace: str,
                pod: str) -> Response:
    """kube-scheduler preempts the pod for a higher-priority one (`preemptor`, a pod name):
    a `DisruptionTarget` condition (PreemptionByScheduler, "<scheduler>: preempting to
    accommodate a higher priority pod"), the scheduler's `Preempted` event ("Preempted by pod
    <uid> on node <node>"), then the graceful deletion: the kubelet's `Killing` event, its
    container ended by SIGTERM (exit 143), phase Failed. A real API server then removes the
    pod; here it stays, Failed, until its Job goes. Its capacity is free again."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_PREEMPT_SCHEMA, document)
    scheduler = document.get("scheduler", "default-scheduler")
    preemptor = document.get("preemptor", "high-priority")
    with state.lock:
        found = _running_pod(state, namespace, pod)
        node = found["spec"]["nodeName"]
        container = found["status"]["containerStatuses"][0]["name"]
        job, override = state.override_pod(namespace, pod)
        now = now_timestamp()
        override.disruption = Disruption(_BY_SCHEDULER, _PREEMPTING.format(scheduler=scheduler),
                                         now)
        override.phase = "Failed"
        override.waiting_reason = None
        override.terminated = ContainerEnd("Error", 143, finished_at=now)
        uid = stable_uid(cluster, "preemptor", namespace, preemptor)
        state.record_event(job, kind="Pod", name=pod, reason="Preempted",
                           message=_PREEMPTED_EVENT.format(uid=uid, node=node),
                           component=scheduler)
        state.record_event(job, kind="Pod", name=pod, reason="Killing",
                           message=f"Stopping container {container}")
        return Response(200, state.get_pod(namespace, pod))


def append_pod_log(simulator: Simulator, request: Request, cluster: str, namespace: str,
                   pod: str) -> Response:
    """Append lines to the pod's current (or, with `previous`, previous) container log."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(_LOG_SCHEMA, document)
    total = state.append_log(namespace, pod, document["lines"],
                             previous=bool(document.get("previous")))
    return Response(200, {"lines": total})


def created_bodies(simulator: Simulator, request: Request, cluster: str) -> Response:
    state = _cluster(simulator, cluster)
    with state.lock:
        return Response(200, list(state.create_log))


def received_requests(simulator: Simulator, request: Request, cluster: str) -> Response:
    state = _cluster(simulator, cluster)
    with state.lock:
        return Response(200, list(state.request_log))


def get_kueue(simulator: Simulator, request: Request, cluster: str) -> Response:
    state = _cluster(simulator, cluster)
    with state.lock:
        return Response(200, {
            "enabled": state.kueue.enabled,
            "cluster_queues": state.kueue.cluster_queue_objects(),
            "local_queues": state.kueue.local_queue_objects(None),
            "workload_priority_classes": state.kueue.priority_class_objects(),
            "workloads": state.kueue.workload_items(None, cluster=cluster),
        })


def put_kueue(simulator: Simulator, request: Request, cluster: str) -> Response:
    """Replace the cluster's Kueue queues (`{cluster_queues, local_queues}` as in the fleet
    file; `{}` leaves none). Workloads stay; a cluster without Kueue gets it."""
    state = _cluster(simulator, cluster)
    document = request.json()
    _require(KUEUE_SCHEMA, document)
    _reject(kueue_problems(document))
    state.replace_kueue(kueue_spec_from_dict(document))
    return get_kueue(simulator, request, cluster)


def remove_kueue(simulator: Simulator, request: Request, cluster: str) -> Response:
    """Uninstall Kueue: its APIs answer 404 and no pod is gated any more."""
    state = _cluster(simulator, cluster)
    state.replace_kueue(None)
    return get_kueue(simulator, request, cluster)


def evict_workload(simulator: Simulator, request: Request, cluster: str, namespace: str,
                   name: str) -> Response:
    """Deactivate a Workload (`spec.active: false`, as `kubectl patch workload` would; with
    `cause`, as Kueue itself does): evicted, its Job's pods stopped, its quota released."""
    state = _cluster(simulator, cluster)
    document = request.json() if request.body else {}
    _require(_EVICT_SCHEMA, document)
    return Response(200, state.deactivate_workload(namespace, name,
                                                   cause=document.get("cause") or ""))


def activate_workload(simulator: Simulator, request: Request, cluster: str, namespace: str,
                      name: str) -> Response:
    """Reactivate a deactivated Workload (`spec.active: true`): queued again."""
    state = _cluster(simulator, cluster)
    return Response(200, state.activate_workload(namespace, name))


_CLOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["offset_seconds"],
    "properties": {"offset_seconds": {"type": "number", "minimum": -86400 * 366,
                                      "maximum": 86400 * 366}},
}


def get_clock(simulator: Simulator, request: Request) -> Response:
    return Response(200, {"offset_seconds": clock_offset(), "now": now_timestamp()})


def put_clock(simulator: Simulator, request: Request) -> Response:
    """The simulator's clock: the real time plus `offset_seconds` from now on (a test knob)."""
    _require(_CLOCK_SCHEMA, request.json())
    set_clock_offset(float(request.json()["offset_seconds"]))
    return get_clock(simulator, request)


def tick(simulator: Simulator, request: Request) -> Response:
    return Response(200, {"changed": simulator.tick()})


def reset(simulator: Simulator, request: Request) -> Response:
    simulator.reset()
    return Response(200, {"reset": sorted(simulator.clusters)})


def build_router() -> Router:
    router = Router()
    router.add("GET", "/health", health)
    router.add("GET", "/clusters", list_clusters)
    router.add("GET", _CLUSTER + "/faults", get_faults)
    router.add("PUT", _CLUSTER + "/faults", put_faults)
    router.add("DELETE", _CLUSTER + "/faults", clear_faults)
    router.add("POST", _CLUSTER + "/nodes", add_node)
    router.add("PATCH", _NODE, patch_node)
    router.add("DELETE", _NODE, remove_node)
    router.add("POST", _CLUSTER + "/pods", add_foreign_pod)
    router.add("DELETE", _FOREIGN_POD, remove_foreign_pod)
    router.add("POST", _JOB + "/phase", set_job_phase)
    router.add("POST", _JOB + "/progress", set_progress)
    router.add("PATCH", _POD, patch_pod)
    router.add("POST", _POD + "/log", append_pod_log)
    router.add("POST", _POD + "/evict", evict_pod)
    router.add("POST", _POD + "/preempt", preempt_pod)
    router.add("PUT", _POD + "/gpu", set_pod_gpu)
    router.add("GET", _CLUSTER + "/creates", created_bodies)
    router.add("GET", _CLUSTER + "/requests", received_requests)
    router.add("GET", _CLUSTER + "/kueue", get_kueue)
    router.add("PUT", _CLUSTER + "/kueue", put_kueue)
    router.add("DELETE", _CLUSTER + "/kueue", remove_kueue)
    router.add("POST", _WORKLOAD + "/evict", evict_workload)
    router.add("POST", _WORKLOAD + "/activate", activate_workload)
    router.add("GET", "/clock", get_clock)
    router.add("PUT", "/clock", put_clock)
    router.add("POST", "/tick", tick)
    router.add("POST", "/reset", reset)
    return router
