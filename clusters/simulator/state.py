"""The in-memory state of one simulated cluster.

Stored objects are never mutated in place: every change replaces the object
(with a new `resourceVersion`). A paginated list keeps a reference to the list
it started from, so all its pages come from the same snapshot, as the API
server promises, while later changes only show up in new lists.

Like a real API server's watch cache, node, Job and pod objects are kept encoded as JSON: a
page of a list joins the encoded fragments instead of encoding every object again. A Job's
pods are rendered and encoded when the Job is stored (created or changed), and again at a
list only when the pod's override or its node changed since.

Resource versions start from the wall clock (in microseconds), so a restarted simulator
never serves a version that an earlier run served for different content: clients such
as RLark's inventory poll remember versions and skip objects they have seen at one.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from clusters.podrequests import PodSpecError, Requests, pod_requests
from clusters.simulator.faults import FaultInjector, FaultSpec
from clusters.simulator.fleet import ClusterSpec, ForeignPodSpec, NodeSpec
from clusters.simulator.gpumetrics import GpuHolder, GpuSetting, setting_from
from clusters.simulator.kueue import KueueModel, Workload
from clusters.simulator.kueuespec import KueueSpec
from clusters.simulator.objects import (
    ApiError,
    clock_now,
    encode_object,
    job_details,
    node_object,
    now_timestamp,
    stable_uid,
    storage_class_object,
)
from clusters.simulator.pods import (
    PodOverride,
    PodRef,
    Unschedulable,
    foreign_pod_object,
    parse_time,
    pod_object,
    pod_phase,
    pod_refs,
    pod_spec,
    pod_start,
    start_lines,
    timed_start_lines,
)
from clusters.simulator.progress import DEFAULT_STEP_SECONDS, StepClock, timed_step_lines
from clusters.types import GPU_RESOURCE

_MAX_SNAPSHOTS = 128
_MAX_JOINED_LISTS = 4
"""Pod lists whose whole text a cluster keeps for their pages (the newest used)."""
_REQUEST_LOG_SIZE = 2000
_MAX_EVENTS = 5000

Object = dict[str, Any]


@dataclass(frozen=True)
class Page:
    items: list[Object]
    resource_version: int
    continue_token: str | None
    remaining: int
    snapshot: list[Object] = field(default_factory=list, repr=False)  # the list it is cut from
    offset: int = 0  # where in `snapshot` the page starts


def _encode_token(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise ApiError(400, f"continue key is not valid: {exc}") from exc
    if not isinstance(payload, dict):
        raise ApiError(400, "continue key is not valid")
    return payload


class ClusterState:
    """Nodes, storage classes, Jobs, faults and logs of one cluster, behind one lock."""

    def __init__(self, spec: ClusterSpec, *, step_seconds: float = DEFAULT_STEP_SECONDS) -> None:
        self.spec = spec
        self.step_seconds = step_seconds  # the Head Tasks' pace unless a Job's was set
        self.lock = threading.RLock()
        self.faults = FaultInjector(spec.faults)
        self.namespaces = frozenset({spec.namespace, "default"})
        self.epoch = 0
        self._resource_version = time.time_ns() // 1000
        self._created = now_timestamp()
        self._initial_nodes = {node.name: (node, self._render_node(node)) for node in spec.nodes}
        self._storage_classes = [
            storage_class_object(name, cluster=spec.name, resource_version=1, created=self._created)
            for name in sorted(spec.storage_classes)
        ]
        self._reset_unlocked()

    def _reset_unlocked(self) -> None:
        # The fleet file's node objects are rendered once: objects are never mutated.
        self._node_specs = {name: spec for name, (spec, _) in self._initial_nodes.items()}
        self._nodes = {name: node for name, (_, node) in self._initial_nodes.items()}
        self._sorted_nodes: list[Object] | None = None
        self._encoded_nodes = _EncodedObjects()
        self._jobs: dict[tuple[str, str], Object] = {}
        self._pod_overrides: dict[tuple[str, str], PodOverride] = {}
        # The scheduler's decisions per (namespace, pod) of a Job: where it is bound, or why
        # it is not, and the resourceVersion of the pod's last such change.
        self._bindings: dict[tuple[str, str], Binding] = {}
        self._unschedulable: dict[tuple[str, str], Unschedulable] = {}
        self._scheduled_versions: dict[tuple[str, str], int] = {}
        self._creation_order: dict[tuple[str, str], int] = {}
        self._requests: dict[tuple[str, str, str], tuple[Object, Requests | str]] = {}
        self._foreign: dict[str, _ForeignPod] = {}
        self._pod_list: _PodList | None = None
        self._rendered_pods: dict[tuple[str, str], _RenderedPod] = {}
        self._encoded_pods = _EncodedObjects()
        self._joined_pods: OrderedDict[int, tuple[list[Object], _JoinedItems]] = OrderedDict()
        self._encoded_jobs = _EncodedObjects()
        self._events: OrderedDict[tuple[str, str, str, str], Object] = OrderedDict()
        self._snapshots: OrderedDict[str, tuple[int, list[Object]]] = OrderedDict()
        self.create_log: list[dict[str, Any]] = []
        self.request_log: deque[dict[str, Any]] = deque(maxlen=_REQUEST_LOG_SIZE)
        self.faults.replace(self.spec.faults)
        # Kueue on this cluster (SPEC 15): the fleet file's queues, no Workloads yet.
        self.kueue = KueueModel(self.spec.kueue)
        # Jobs whose pods Kueue deleted (eviction) and their operator made again: how often,
        # and when the newest pods were created (their uid and creationTimestamp).
        self._incarnations: dict[tuple[str, str], tuple[int, str]] = {}
        self._clocks: dict[tuple[str, str], StepClock] = {}
        self._gpu_settings: dict[tuple[str, str], GpuSetting] = {}
        for pod in self.spec.pods:
            self._put_foreign(pod)

    def reset(self) -> None:
        """Back to the fleet file's nodes and faults, with no Jobs and empty logs.

        `resourceVersion` keeps increasing across resets, as it would on a real cluster.
        """
        with self.lock:
            self.epoch += 1
            self._reset_unlocked()

    def _bump(self) -> int:
        self._resource_version += 1
        return self._resource_version

    # Nodes

    def _render_node(self, spec: NodeSpec) -> Object:
        return node_object(
            spec, cluster=self.spec.name, resource_version=self._bump(), created=self._created
        )

    def _put_node(self, spec: NodeSpec) -> None:
        self._node_specs[spec.name] = spec
        self._nodes[spec.name] = self._render_node(spec)
        self._sorted_nodes = None
        self._encoded_nodes.forget(spec.name)

    def node_items(self) -> list[Object]:
        with self.lock:
            if self._sorted_nodes is None:
                self._sorted_nodes = [self._nodes[name] for name in sorted(self._nodes)]
            return self._sorted_nodes

    def encoded_nodes(self, nodes: list[Object]) -> list[bytes]:
        """The JSON text of each node object (of any snapshot), from the cache when it has it."""
        with self.lock:
            return [self._encoded_nodes.get(node["metadata"]["name"], node) for node in nodes]

    def node_specs(self) -> list[NodeSpec]:
        with self.lock:
            return list(self._node_specs.values())

    def get_node(self, name: str) -> Object:
        with self.lock:
            if name not in self._nodes:
                details = {"name": name, "kind": "nodes"}
                raise ApiError(404, f'nodes "{name}" not found', details=details)
            return self._nodes[name]

    def add_node(self, spec: NodeSpec) -> Object:
        with self.lock:
            if spec.name in self._nodes:
                raise ApiError(
                    409, f'nodes "{spec.name}" already exists', details={"name": spec.name}
                )
            self._put_node(spec)
            return self._nodes[spec.name]

    def remove_node(self, name: str) -> None:
        with self.lock:
            self.get_node(name)
            del self._nodes[name]
            del self._node_specs[name]
            self._sorted_nodes = None
            self._encoded_nodes.forget(name)
            self._bump()

    def patch_node(
        self,
        name: str,
        *,
        labels: dict[str, str | None] | None = None,
        allocatable: dict[str, str | None] | None = None,
        ready: bool | None = None,
    ) -> Object:
        """Merge label/allocatable changes (None removes a key) and readiness into a node."""
        with self.lock:
            self.get_node(name)
            spec = self._node_specs[name]
            spec = replace(
                spec,
                labels=_merged(spec.labels, labels),
                allocatable=_merged(spec.allocatable, allocatable),
                ready=spec.ready if ready is None else ready,
            )
            self._put_node(spec)
            return self._nodes[name]

    # Storage classes

    def storage_class_items(self) -> list[Object]:
        return self._storage_classes

    # Jobs

    def job_items(self, namespace: str | None) -> list[Object]:
        with self.lock:
            keys = sorted(k for k in self._jobs if namespace is None or k[0] == namespace)
            return [self._jobs[key] for key in keys]

    def get_job(self, namespace: str, name: str) -> Object:
        with self.lock:
            job = self._jobs.get((namespace, name))
            if job is None:
                raise ApiError(404, f'jobs.rlinf.io "{name}" not found', details=job_details(name))
            return job

    def require_namespace(self, namespace: str) -> None:
        if namespace not in self.namespaces:
            raise ApiError(
                404,
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )

    def create_job(self, namespace: str, document: Object) -> Object:
        """Store an admitted Job, adding the server-owned metadata and an initial status."""
        with self.lock:
            name = document["metadata"]["name"]
            self.require_namespace(namespace)
            if (namespace, name) in self._jobs:
                raise ApiError(
                    409, f'jobs.rlinf.io "{name}" already exists', details=job_details(name)
                )
            now = now_timestamp()
            job = {
                **document,
                "metadata": {
                    **document["metadata"],
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": str(self._bump()),
                    "creationTimestamp": now,
                    "generation": 1,
                },
                "status": {"phase": "Pending", "conditions": [], "lastTransitionTime": now},
            }
            self._creation_order[(namespace, name)] = len(self._creation_order)
            self._store_job(job)
            for ref in pod_refs(job):
                self.record_event(job, kind="Job", name=name, reason="SuccessfulCreate",
                                  message=f"Created pod: {ref.name}")
            return job

    def _store_job(self, job: Object) -> None:
        """Keep a new or changed Job, with its pods rendered and both encoded (as an API
        server's watch cache holds them), so that lists only splice what is kept."""
        metadata = job["metadata"]
        self._jobs[(metadata["namespace"], metadata["name"])] = job
        self._creation_order.setdefault(
            (metadata["namespace"], metadata["name"]), len(self._creation_order))
        self._pod_list = None
        self.encoded_jobs([job])
        self.encoded_pods([pod for _, pod in self._pods_of(job)])

    def delete_job(self, namespace: str, name: str) -> Object:
        """Remove the Job and its pods (their events stay, as on a real cluster)."""
        with self.lock:
            job = self.get_job(namespace, name)
            del self._jobs[(namespace, name)]
            for ref in pod_refs(job):
                for kept in (self._pod_overrides, self._rendered_pods, self._bindings,
                             self._unschedulable, self._scheduled_versions):
                    kept.pop((namespace, ref.name), None)
                self._encoded_pods.forget(f"{namespace}/{ref.name}")
            self._encoded_jobs.forget(f"{namespace}/{name}")
            self._clocks.pop((namespace, name), None)
            self._creation_order.pop((namespace, name), None)
            self._incarnations.pop((namespace, name), None)
            self.kueue.forget_job(namespace, name)
            self._pod_list = None
            self._bump()
            return job

    def replace_job_status(self, namespace: str, name: str, status: Object) -> Object:
        with self.lock:
            job = self.get_job(namespace, name)
            updated = {
                **job,
                "metadata": {**job["metadata"], "resourceVersion": str(self._bump())},
                "status": status,
            }
            self._store_job(updated)
            return updated

    def export_jobs(self) -> dict[str, Any]:
        """The Jobs and the resourceVersion counter, as `Simulator.saved_jobs` keeps them."""
        with self.lock:
            return {
                "resourceVersion": self._resource_version,
                "jobs": [self._jobs[key] for key in sorted(self._jobs)],
            }

    def import_jobs(self, saved: Mapping[str, Any]) -> int:
        """Restore what `export_jobs` gave; Jobs of a namespace this cluster lacks are dropped.

        Returns how many Jobs came back. Versions keep increasing past the saved counter.
        """
        with self.lock:
            self._resource_version = max(
                self._resource_version, int(saved.get("resourceVersion") or 0)
            )
            restored = 0
            for job in saved.get("jobs") or []:
                metadata = job.get("metadata") or {}
                namespace, name = metadata.get("namespace"), metadata.get("name")
                if namespace in self.namespaces and isinstance(name, str):
                    self._store_job(job)
                    restored += 1
            return restored

    def version(self) -> int:
        """The newest resourceVersion handed out: changes whenever anything changed."""
        with self.lock:
            return self._resource_version

    # Pods

    def pending_jobs(self) -> list[Object]:
        """Pending Jobs in the order they were created (the scheduler's queue order)."""
        with self.lock:
            pending = [key for key, job in self._jobs.items()
                       if (job.get("status") or {}).get("phase") == "Pending"]
            pending.sort(key=lambda key: (self._creation_order.get(key, 0), key))
            return [self._jobs[key] for key in pending]

    def binding(self, namespace: str, pod: str) -> Binding | None:
        with self.lock:
            return self._bindings.get((namespace, pod))

    def pod_request(self, job: Object, ref: PodRef) -> Requests | str:
        """The effective request of a Job's pod (scheduler units), or why its spec has none."""
        with self.lock:
            key = (job["metadata"]["namespace"], job["metadata"]["name"], ref.task)
            kept = self._requests.get(key)
            if kept is None or kept[0] is not job:
                try:
                    request: Requests | str = pod_requests(pod_spec(ref))
                except PodSpecError as error:
                    request = f"the pod's spec is invalid: {error}"
                kept = (job, request)
                self._requests[key] = kept
            return kept[1]

    def bind(self, job: Object, ref: PodRef, *, cluster: str, node: str,
             at: str | None = None) -> None:
        """Bind a Job's pod to a node (of `cluster`, for a Job spanning a network domain). The
        node's kubelet starts it at once (`at`, default now: its `startTime`)."""
        with self.lock:
            key = (job["metadata"]["namespace"], ref.name)
            self._bindings[key] = Binding(cluster, node, ref.job, ref.task,
                                          at or now_timestamp())
            self._unschedulable.pop(key, None)
            self._scheduled(key)

    def mark_unschedulable(self, job: Object, ref: PodRef, message: str) -> bool:
        """Record why a pod stays unbound; whether that is news (the pod changed)."""
        with self.lock:
            key = (job["metadata"]["namespace"], ref.name)
            known = self._unschedulable.get(key)
            if known is not None and known.message == message:
                return False
            self._unschedulable[key] = Unschedulable(message, now_timestamp())
            self._scheduled(key)
            return True

    def _scheduled(self, key: tuple[str, str]) -> None:
        self._scheduled_versions[key] = self._bump()
        self._pod_list = None

    def capacity_holders(self) -> list[tuple[tuple[str, str], Requests]]:
        """Every bound pod that has not ended, as ((cluster, node), request): a Job's pods
        until they succeed or fail, foreign pods while they exist."""
        with self.lock:
            holders = [((self.spec.name, p.spec.node), p.request) for p in self._foreign.values()]
            for (namespace, pod), bound in self._bindings.items():
                job = self._jobs.get((namespace, bound.job))
                if job is None:
                    continue
                if self._phase(job, (namespace, pod)) in _ENDED:
                    continue
                ref = PodRef(job=bound.job, task=bound.task, index=0, template=_template(
                    job, bound.task))
                request = self.pod_request(job, ref)
                if not isinstance(request, str):
                    holders.append(((bound.cluster, bound.node), request))
            return holders

    def gpu_holders(self) -> list[tuple[str, GpuHolder]]:
        """Every running pod that holds GPUs, as (the node's cluster, holder): a Job's pods
        bound to a node and Running, foreign pods while they exist."""
        with self.lock:
            holders = []
            for kept in self._foreign.values():
                gpus = kept.request.get(GPU_RESOURCE, 0)
                if gpus > 0:
                    key = (kept.spec.namespace, kept.spec.name)
                    holders.append((self.spec.name, GpuHolder(
                        node=kept.spec.node, namespace=key[0], pod=key[1], gpus=gpus,
                        setting=self._gpu_settings.get(key) or GpuSetting())))
            for (namespace, pod), bound in self._bindings.items():
                job = self._jobs.get((namespace, bound.job))
                if job is None or self._phase(job, (namespace, pod)) != "Running":
                    continue
                ref = PodRef(job=bound.job, task=bound.task, index=0, template=_template(
                    job, bound.task))
                request = self.pod_request(job, ref)
                gpus = 0 if isinstance(request, str) else request.get(GPU_RESOURCE, 0)
                if gpus > 0:
                    holders.append((bound.cluster, GpuHolder(
                        node=bound.node, namespace=namespace, pod=pod, gpus=gpus,
                        setting=self._gpu_settings.get((namespace, pod)) or GpuSetting())))
            return holders

    def set_gpu(self, namespace: str, pod: str, document: Mapping[str, Any]) -> dict[str, Any]:
        """Set a pod's GPU gauges (a validated `PUT .../gpu` body); 404 for no such pod."""
        with self.lock:
            self.get_pod(namespace, pod)
            key = (namespace, pod)
            self._gpu_settings[key] = setting_from(document, self._gpu_settings.get(key))
            return {"namespace": namespace, "pod": pod, **self._gpu_settings[key].as_dict()}

    def _phase(self, job: Object, key: tuple[str, str]) -> str:
        """The phase of a Job's pod (`pods.pod_phase`): Running once bound and started."""
        bound = self._bindings.get(key)
        return pod_phase(job, self._pod_overrides.get(key),
                         pod_start(job, bound.at if bound is not None else None))

    def _force_binding(self, job: Object, ref: PodRef) -> str:
        """The node of a pod whose Job runs without having been scheduled (forced Running
        through the control endpoint, or brought back from a state file): the first ready
        node, by name, matching its selector and free of its Task's other replicas."""
        namespace = job["metadata"]["namespace"]
        selector = (ref.template.get("spec") or {}).get("nodeSelector") or {}
        taken = {b.node for (ns, _), b in self._bindings.items()
                 if ns == namespace and (b.job, b.task) == (ref.job, ref.task)}
        for node in sorted(self._node_specs.values(), key=lambda n: n.name):
            if node.ready and node.name not in taken and all(
                    node.labels.get(k) == v for k, v in selector.items()):
                self.bind(job, ref, cluster=self.spec.name, node=node.name,
                          at=(job.get("status") or {}).get("startTime"))
                return node.name
        return ""

    def _pods_of(self, job: Object) -> list[tuple[PodRef, Object]]:
        namespace = job["metadata"]["namespace"]
        started = (job.get("status") or {}).get("startTime") is not None
        pods = []
        for ref in pod_refs(job):
            key = (namespace, ref.name)
            override = self._pod_overrides.get(key)
            bound = self._bindings.get(key)
            node = bound.node if bound is not None else ""
            if not node and started and pod_phase(job, override) not in _ENDED:
                node = self._force_binding(job, ref)
            version = self._pod_version(job, override, key)
            # Every change of an override or of the scheduling bumps its version; a changed
            # Job is a new object.
            kept = self._rendered_pods.get(key)
            if kept is None or kept.job is not job or (kept.version, kept.node) != (version, node):
                kept = _RenderedPod(job, version, node, self._incarnated(job, ref, pod_object(
                    job, ref, cluster=self.spec.name, node=node, override=override,
                    resource_version=version, unschedulable=_told(
                        self._unschedulable.get(key), override),
                    gated=not node and self.kueue.gated(job),
                    bound_at=bound.at if bound is not None else None)))
                self._rendered_pods[key] = kept
            pods.append((ref, kept.pod))
        return pods

    # Kueue

    def kueue_pass(self) -> list[Object]:
        """Kueue's part of a controller pass: Workloads for new pod groups, finished ones
        freed, then admission (and the preemptions it issues), then the evicted groups'
        Jobs stopped; the Jobs whose pods lost their scheduling gate now or were stopped."""
        with self.lock:
            if not self.kueue.enabled:
                return []
            for refused, message in self.kueue.observe(self._jobs.values()):
                self.record_event(refused, kind="Job", name=refused["metadata"]["name"],
                                  reason="WorkloadPriorityClassNotFound", message=message,
                                  type="Warning")
            released = []
            for workload in self.kueue.admit():
                owner = self._jobs.get((workload.namespace, workload.owner[0]))
                if owner is None:
                    continue
                for ref in pod_refs(owner):
                    self._scheduled((workload.namespace, ref.name))  # re-rendered ungated
                released.append(owner)
            return released + self._stop_evicted()

    def _stop_evicted(self) -> list[Object]:
        """Stop the Job of every Workload Kueue evicted, as Kueue's pod integration stops a
        pod group (`pkg/controller/jobs/pod`, `Stop`) and releases its quota once the group
        is no longer active: each pod gets the `Stopped` event with the Workload's message
        and is deleted; the Job's operator makes them again, with Kueue's gate on (the quota
        is released first, so they are made gated), and the Job is Pending."""
        stopped = []
        for workload in self.kueue.take_evictions():
            self.kueue.release(workload)  # first: the pods made again are gated
            job = self._jobs.get((workload.namespace, workload.owner[0]))
            if job is not None:
                stopped.append(self._stop_group(job, workload.conditions["Evicted"]["message"]))
        return stopped

    def _stop_group(self, job: Object, message: str) -> Object:
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        for ref in pod_refs(job):
            key = (namespace, ref.name)
            self.record_event(job, kind="Pod", name=ref.name, reason="Stopped", message=message)
            for kept in (self._pod_overrides, self._bindings, self._unschedulable,
                         self._gpu_settings):
                kept.pop(key, None)
            self._scheduled(key)
        self._clocks.pop((namespace, name), None)  # the new Head Task starts from step 0
        count = self._incarnations.get((namespace, name), (0, ""))[0]
        now = now_timestamp()
        self._incarnations[(namespace, name)] = (count + 1, now)
        status = {k: v for k, v in (job.get("status") or {}).items()
                  if k not in ("startTime", "reason", "message")}
        if status.get("phase") != "Pending":
            status["lastTransitionTime"] = now
        status["phase"] = "Pending"  # the controller's pass gives it the gate as its reason
        return self.replace_job_status(namespace, name, status)

    def _incarnated(self, job: Object, ref: PodRef, pod: Object) -> Object:
        """A pod made again after Kueue stopped its group: a new uid, its own creation time."""
        metadata = job["metadata"]
        again = self._incarnations.get((metadata["namespace"], metadata["name"]))
        if again is None:
            return pod
        count, created = again
        pod["metadata"]["uid"] = stable_uid(self.spec.name, metadata["uid"], "pod", ref.name,
                                            str(count))
        pod["metadata"]["creationTimestamp"] = created
        return pod

    def deactivate_workload(self, namespace: str, name: str, *, cause: str = "") -> Object:
        """An administrator sets the Workload's `spec.active` to false (or Kueue does, for
        `cause`): evicted at once, its Job stopped if it was admitted. 404 for no such
        Workload, 409 for a finished one."""
        with self.lock:
            workload = self._workload(namespace, name)
            if workload.finished:
                raise ApiError(409, f'workloads.kueue.x-k8s.io "{name}" is finished',
                               reason="Conflict", details={"name": name, "kind": "workloads"})
            self.kueue.deactivate(workload, cause=cause)
            self._stop_evicted()
            self._bump()
            return self.kueue.workload_object(workload, cluster=self.spec.name)

    def activate_workload(self, namespace: str, name: str) -> Object:
        """`spec.active` back to true: the Workload waits in its queue again."""
        with self.lock:
            workload = self._workload(namespace, name)
            self.kueue.activate(workload)
            self._bump()
            return self.kueue.workload_object(workload, cluster=self.spec.name)

    def _workload(self, namespace: str, name: str) -> Workload:
        if not self.kueue.enabled:
            raise ApiError(404, f'cluster {self.spec.name} does not run Kueue')
        workload = self.kueue.find(namespace, name)
        if workload is None:
            raise ApiError(404, f'workloads.kueue.x-k8s.io "{name}" not found',
                           details={"name": name, "group": "kueue.x-k8s.io",
                                    "kind": "workloads"})
        return workload

    def replace_kueue(self, spec: KueueSpec | None) -> None:
        """New queues from the control endpoint (the Workloads stay)."""
        with self.lock:
            self.kueue.replace(spec)
            self._bump()

    # Foreign pods

    def _put_foreign(self, spec: ForeignPodSpec) -> Object:
        pod = foreign_pod_object(spec, cluster=self.spec.name, resource_version=self._bump(),
                                 created=now_timestamp())
        self._foreign[spec.name] = _ForeignPod(spec, spec.request(), pod)
        self._pod_list = None
        # Encoded now, once: a list answers it from the cache (foreign pods never change).
        self._encoded_pods.get(f"{spec.namespace}/{spec.name}", pod)
        return pod

    def add_foreign_pod(self, spec: ForeignPodSpec) -> Object:
        """Bind a foreign workload's pod to its node (the caller checked that it fits)."""
        with self.lock:
            if spec.name in self._foreign:
                raise ApiError(409, f'pods "{spec.name}" already exists',
                               reason="AlreadyExists", details={"name": spec.name,
                                                                "kind": "pods"})
            if spec.node not in self._nodes:
                raise ApiError(400, f'node "{spec.node}" is not a node of cluster '
                                    f'{self.spec.name}')
            return self._put_foreign(spec)

    def remove_foreign_pod(self, name: str) -> Object:
        with self.lock:
            kept = self._foreign.pop(name, None)
            if kept is None:
                raise ApiError(404, f'pods "{name}" not found',
                               details={"name": name, "kind": "pods"})
            self._encoded_pods.forget(f"{kept.spec.namespace}/{name}")
            self._pod_list = None
            self._bump()
            return kept.pod

    def foreign_pods(self) -> list[ForeignPodSpec]:
        with self.lock:
            return [kept.spec for kept in self._foreign.values()]

    def require_pod_namespace(self, namespace: str) -> None:
        """Pods live in the Jobs' namespaces and in those of foreign pods."""
        with self.lock:
            if any(kept.spec.namespace == namespace for kept in self._foreign.values()):
                return
        self.require_namespace(namespace)

    # Pod lists

    def pod_list(self) -> _PodList:
        """Every pod (Jobs' and foreign), by namespace and name, with a by-node index."""
        with self.lock:
            if self._pod_list is None:
                pods = [pod for job in self._jobs.values() for _, pod in self._pods_of(job)]
                pods += [kept.pod for kept in self._foreign.values()]
                pods.sort(key=lambda pod: (pod["metadata"]["namespace"],
                                           pod["metadata"]["name"]))
                self._pod_list = _PodList(pods)
            return self._pod_list

    def encoded_pods(self, pods: list[Object]) -> list[bytes]:
        """The JSON text of each pod object (of any snapshot), from the cache when it has it."""
        with self.lock:
            return [self._encoded_pods.get(
                f"{pod['metadata']['namespace']}/{pod['metadata']['name']}", pod) for pod in pods]

    def joined_pods(self, page: Page) -> bytes:
        """The page's pods as the JSON text of a list's items (`b", "`-joined). A page of a
        list longer than the page is cut from the whole list's text, joined once per list
        (the pods of a list never change: a change makes a new list), like an API server
        answering pages from its watch cache without encoding each pod again."""
        if len(page.items) == len(page.snapshot):
            return b", ".join(self.encoded_pods(page.items))
        with self.lock:
            joined = self._joined_pods.get(id(page.snapshot))
            if joined is None or joined[0] is not page.snapshot:
                joined = (page.snapshot, _JoinedItems(self.encoded_pods(page.snapshot)))
                self._joined_pods[id(page.snapshot)] = joined
                while len(self._joined_pods) > _MAX_JOINED_LISTS:
                    self._joined_pods.popitem(last=False)
            self._joined_pods.move_to_end(id(page.snapshot))
        return joined[1].cut(page.offset, page.offset + len(page.items))

    def encoded_jobs(self, jobs: list[Object]) -> list[bytes]:
        """The JSON text of each Job object (of any snapshot), from the cache when it has it."""
        with self.lock:
            return [self._encoded_jobs.get(
                f"{job['metadata']['namespace']}/{job['metadata']['name']}", job) for job in jobs]

    def _pod_version(self, job: Object, override: PodOverride | None,
                     key: tuple[str, str]) -> int:
        version = max(int(job["metadata"]["resourceVersion"]),
                      self._scheduled_versions.get(key, 0))
        return max(version, override.version) if override is not None else version

    def _find_pod(self, namespace: str, name: str) -> tuple[Object, PodRef, Object]:
        # A pod is named `<job>-<task>-<index>`: look its Job up by each prefix ending at a
        # hyphen (a handful) instead of rendering every Job's pods of the namespace.
        for cut in (i for i, char in enumerate(name) if char == "-"):
            job = self._jobs.get((namespace, name[:cut]))
            if job is not None:
                found = [(ref, pod) for ref, pod in self._pods_of(job) if ref.name == name]
                if found:
                    return job, found[0][0], found[0][1]
        for job in self.job_items(namespace):
            for ref, pod in self._pods_of(job):
                if ref.name == name:
                    return job, ref, pod
        raise ApiError(404, f'pods "{name}" not found', details={"name": name, "kind": "pods"})

    def get_pod(self, namespace: str, name: str) -> Object:
        with self.lock:
            kept = self._foreign.get(name)
            if kept is not None and kept.spec.namespace == namespace:
                return kept.pod
            return self._find_pod(namespace, name)[2]

    def is_foreign_pod(self, namespace: str, name: str) -> bool:
        with self.lock:
            kept = self._foreign.get(name)
            return kept is not None and kept.spec.namespace == namespace

    def pod_log(self, namespace: str, name: str, *, previous: bool,
                since: datetime | None = None,
                tail_lines: int | None = None) -> list[tuple[Any, str]]:
        """The (time, line) pairs of the pod's current or previous container. A Running Head
        Task's current log has its step lines too (`clusters.simulator.progress`), rendered
        for the window a read asks for: from `since`, or enough for `tail_lines`."""
        with self.lock:
            if self.is_foreign_pod(namespace, name):
                if previous:
                    raise ApiError(400, f'previous terminated container "main" in pod '
                                        f'"{name}" not found')
                return []
            job, ref, pod = self._find_pod(namespace, name)
            override = self._pod_overrides.get((namespace, name))
            node = pod["spec"].get("nodeName", "")
            if previous:
                if override is None or override.restarts == 0:
                    raise ApiError(400, f'previous terminated container "main" in pod "{name}" '
                                        "not found")
                return [*timed_start_lines(job, ref, node, pod["status"].get("startTime")),
                        *override.previous_lines]
            if not pod["status"].get("startTime"):
                raise ApiError(400, f'container "main" in pod "{name}" is waiting to start: '
                                    "ContainerCreating")
            appended = override.current_lines if override is not None else []
            steps = self._step_lines(job, ref, node, since=since, tail_lines=tail_lines)
            merged = heapq.merge(appended, steps, key=lambda item: item[0]) if steps \
                else appended
            return [*timed_start_lines(job, ref, node, pod["status"]["startTime"]), *merged]

    # Training progress of Head Tasks

    def _is_head(self, job: Object, ref: PodRef) -> bool:
        tasks = (job.get("spec") or {}).get("tasks") or []
        return ref.index == 0 and any(isinstance(task, dict) and task.get("head")
                                      and str(task.get("name")) == ref.task for task in tasks)

    def _clock(self, job: Object, *, create: bool = True) -> StepClock | None:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        if key not in self._clocks and create:
            self._clocks[key] = StepClock(seconds=self.step_seconds)
        return self._clocks.get(key)

    def _step_lines(self, job: Object, ref: PodRef, node: str, *, since: datetime | None,
                    tail_lines: int | None) -> list[tuple[datetime, str]]:
        status = job.get("status") or {}
        if not self._is_head(job, ref) or not status.get("startTime") or \
                status.get("phase") not in ("Running", "Succeeded", "Failed"):
            return []
        clock = self._clock(job)
        assert clock is not None
        started = parse_time(status["startTime"])
        clock.start(started + timedelta(seconds=len(start_lines(job, ref, node))))
        ended = status.get("completionTime")
        until = parse_time(ended) if ended else clock_now()
        window = None if since is None else since - timedelta(milliseconds=1)
        return timed_step_lines(clock, since=window, until=until, tail_lines=tail_lines)

    def set_progress(self, namespace: str, name: str, *, frozen: bool | None = None,
                     seconds: float | None = None, total: int | None = None) -> dict[str, Any]:
        """Freeze or resume a Job's step lines, or change their pace or total, from now on."""
        with self.lock:
            job = self.get_job(namespace, name)
            clock = self._clock(job)
            assert clock is not None
            now = clock_now()
            clock.set(now, frozen=frozen, seconds=seconds, total=total)
            return {"state": "frozen" if clock.frozen else "advancing",
                    "step_seconds": clock.seconds, "step": clock.step_at(now),
                    "total": clock.total}

    def restart_progress(self, namespace: str, pod: str) -> None:
        """The pod's container restarted: a Head Task resumes from its last checkpoint."""
        job, ref, _pod = self._find_pod(namespace, pod)
        clock = self._clock(job, create=False)
        if clock is not None and self._is_head(job, ref):
            clock.restart(clock_now())

    def override_pod(self, namespace: str, name: str) -> tuple[Object, PodOverride]:
        """The pod's Job and its override (created on first use), under the lock."""
        job, _, _ = self._find_pod(namespace, name)
        override = self._pod_overrides.setdefault((namespace, name), PodOverride())
        override.version = self._bump()
        self._pod_list = None
        return job, override

    def append_log(self, namespace: str, name: str, lines: list[str], *, previous: bool) -> int:
        """Append lines, timed now but never before the lines already in the log."""
        with self.lock:
            job, ref, pod = self._find_pod(namespace, name)
            _, override = self.override_pod(namespace, name)
            target = override.previous_lines if previous else override.current_lines
            earlier = [*timed_start_lines(job, ref, pod["spec"].get("nodeName", ""),
                                          pod["status"].get("startTime")), *target]
            moment = clock_now()
            if earlier and earlier[-1][0] >= moment:
                moment = earlier[-1][0] + timedelta(microseconds=1)
            for offset, line in enumerate(lines):
                target.append((moment + timedelta(microseconds=offset), line))
            return len(target)

    # Events

    def record_event(self, job: Object, *, kind: str, name: str, reason: str, message: str,
                     type: str = "Normal", component: str | None = None) -> None:
        """Add an event about the Job or one of its pods; a repeat bumps `count` instead."""
        with self.lock:
            namespace = job["metadata"]["namespace"]
            uid = job["metadata"]["uid"] if kind == "Job" else stable_uid(
                self.spec.name, job["metadata"]["uid"], "pod", name)
            key = (namespace, uid, reason, message)
            now = now_timestamp()
            existing = self._events.pop(key, None)
            if existing is not None:
                event = {**existing, "count": existing["count"] + 1, "lastTimestamp": now,
                         "metadata": {**existing["metadata"],
                                      "resourceVersion": str(self._bump())}}
            else:
                event = _event(namespace, kind=kind, name=name, uid=uid, reason=reason,
                               message=message, type=type, now=now, version=self._bump(),
                               api_version=job["apiVersion"] if kind == "Job" else "v1",
                               component=component)
            self._events[key] = event
            while len(self._events) > _MAX_EVENTS:
                self._events.popitem(last=False)

    def event_items(self, namespace: str, match: Callable[[Object], bool]) -> list[Object]:
        with self.lock:
            return [e for (ns, *_), e in self._events.items() if ns == namespace and match(e)]

    # Pagination

    def page(
        self,
        *,
        kind: str,
        items: Callable[[], list[Object]],
        limit: int | None,
        continue_token: str | None,
    ) -> Page:
        """One page of a list: a fresh snapshot without a token, else the token's snapshot."""
        with self.lock:
            if continue_token:
                resource_version, snapshot, offset = self._resume(kind, continue_token)
            else:
                resource_version, snapshot, offset = self._resource_version, items(), 0
            end = len(snapshot) if not limit or limit <= 0 else offset + limit
            token = None
            if end < len(snapshot):
                token = self._continue_token(kind, resource_version, snapshot, end)
            return Page(
                items=snapshot[offset:end],
                resource_version=resource_version,
                continue_token=token,
                remaining=max(0, len(snapshot) - end),
                snapshot=snapshot,
                offset=offset,
            )

    def _continue_token(
        self, kind: str, resource_version: int, snapshot: list[Object], offset: int
    ) -> str:
        snapshot_id = next(
            (key for key, (_, kept) in self._snapshots.items() if kept is snapshot), None
        )
        if snapshot_id is None:
            snapshot_id = uuid.uuid4().hex
            self._snapshots[snapshot_id] = (resource_version, snapshot)
            while len(self._snapshots) > _MAX_SNAPSHOTS:
                self._snapshots.popitem(last=False)
        self._snapshots.move_to_end(snapshot_id)
        return _encode_token({"k": kind, "s": snapshot_id, "o": offset})

    def _resume(self, kind: str, token: str) -> tuple[int, list[Object], int]:
        payload = _decode_token(token)
        if payload.get("k") != kind or not isinstance(payload.get("o"), int):
            raise ApiError(400, "continue key is not valid: it belongs to another list")
        kept = self._snapshots.get(str(payload.get("s")))
        if kept is None:
            raise ApiError(
                410,
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        return kept[0], kept[1], payload["o"]

    # Faults and logs

    def set_faults(self, spec: FaultSpec) -> None:
        self.faults.replace(spec)

    def log_request(self, entry: dict[str, Any]) -> int:
        """Record an arriving request; returns the reset epoch it arrived in."""
        with self.lock:
            self.request_log.append(entry)
            return self.epoch

    def log_create(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.create_log.append(entry)

    def summary(self) -> dict[str, Any]:
        with self.lock:
            return {
                "name": self.spec.name,
                "namespace": self.spec.namespace,
                "nodes": len(self._nodes),
                "jobs": len(self._jobs),
                "foreign_pods": len(self._foreign),
                "storage_classes": [sc["metadata"]["name"] for sc in self._storage_classes],
                "auth": self.spec.token is not None,
                "faults": self.faults.describe(),
            }


@dataclass(frozen=True)
class _RenderedPod:
    """A pod object and what it was rendered from (the Job object itself, version, node)."""

    job: Object
    version: int
    node: str
    pod: Object


class _EncodedObjects:
    """Objects encoded as JSON once, by name.

    An entry holds the object it was encoded from and only answers for that very object:
    objects are never mutated, so an object replaced by a change (or still served from an
    older list's snapshot) is never answered with another's text. `forget` drops the
    entry of a changed or removed object.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Object, bytes]] = {}

    def get(self, name: str, document: Object) -> bytes:
        entry = self._entries.get(name)
        if entry is not None and entry[0] is document:
            return entry[1]
        encoded = encode_object(document)
        self._entries[name] = (document, encoded)
        return encoded

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)


class _JoinedItems:
    """Encoded items joined once (`b", "` between them), and where each starts: any run of
    them is one slice of the text."""

    def __init__(self, items: list[bytes]) -> None:
        self.text = b", ".join(items)
        self.starts = [0] * (len(items) + 1)
        position = 0
        for index, item in enumerate(items):
            self.starts[index] = position
            position += len(item) + 2
        self.starts[len(items)] = position

    def cut(self, start: int, end: int) -> bytes:
        """The text of items `start` to `end` (not included), joined."""
        if start >= end:
            return b""
        return self.text[self.starts[start]:self.starts[end] - 2]


_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Binding:
    """Where the scheduler bound a Job's pod: a node of `cluster` (the Job's own, or one of
    its network domain), and the Job and Task the pod belongs to."""

    cluster: str
    node: str
    job: str
    task: str
    at: str  # when it was bound: the pod's start (the kubelet starts it at once)


@dataclass(frozen=True)
class _ForeignPod:
    spec: ForeignPodSpec
    request: Requests
    pod: Object


class _PodList:
    """Pods in list order, and the same pods by node (the API server's `spec.nodeName`
    index: a list narrowed to one node reads only that node's pods)."""

    _MAX_SELECTED = 16

    def __init__(self, pods: list[Object]) -> None:
        self.pods = pods
        self.by_node: dict[str, list[Object]] = {}
        for pod in pods:
            self.by_node.setdefault(pod["spec"].get("nodeName") or "", []).append(pod)
        self._selected: dict[str, list[Object]] = {}

    def selected(self, key: str, select: Callable[[], list[Object]]) -> list[Object]:
        """The pods a cluster-wide selection (`key` names it) answers, selected once per
        list: the list is rebuilt whenever a pod changes, so the answer stays true (the API
        server's watch cache answers a repeated list without a scan of etcd, too)."""
        found = self._selected.get(key)
        if found is None:
            if len(self._selected) >= self._MAX_SELECTED:
                self._selected.clear()
            found = self._selected[key] = select()
        return found


def _template(job: Object, task: str) -> Object:
    for entry in (job.get("spec") or {}).get("tasks") or []:
        if isinstance(entry, dict) and str(entry.get("name")) == task:
            template = entry.get("template")
            return template if isinstance(template, dict) else {}
    return {}


def _event(namespace: str, *, kind: str, name: str, uid: str, reason: str, message: str,
           type: str, now: str, version: int, api_version: str,
           component: str | None = None) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{version:x}", "namespace": namespace,
                     "uid": str(uuid.uuid4()), "resourceVersion": str(version),
                     "creationTimestamp": now},
        "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name,
                           "namespace": namespace, "uid": uid},
        "reason": reason,
        "message": message,
        "type": type,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": component or (
            "rlark-sim-controller" if kind == "Job" else "kubelet")},
    }


def _merged(base: dict[str, str], changes: dict[str, str | None] | None) -> dict[str, str]:
    result = dict(base)
    for key, value in (changes or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def _told(unschedulable: Unschedulable | None, override: PodOverride | None
          ) -> Unschedulable | None:
    """The scheduler's word on an unbound pod, its message replaced when the control
    endpoint set one (`scheduler_message`: a hostile cluster's text, for tests)."""
    if unschedulable is None or override is None or override.scheduler_message is None:
        return unschedulable
    return Unschedulable(override.scheduler_message, unschedulable.since)
