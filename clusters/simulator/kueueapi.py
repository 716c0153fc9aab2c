"""The Kueue APIs a simulated cluster serves when its fleet entry has `kueue:` (SPEC 15):
`kueue.x-k8s.io/v1beta1` ClusterQueues, ResourceFlavors, WorkloadPriorityClasses, LocalQueues
and Workloads (list and
get; lists paginated like every list here), and the visibility API's pending Workloads of a
LocalQueue or a ClusterQueue (`visibility.kueue.x-k8s.io/v1beta1`, `limit` and `offset`).

A cluster without Kueue answers 404 on all of them, as an API server without Kueue's CRDs and
APIService does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusters.simulator.kueue import KUEUE_API_VERSION, KueueModel
from clusters.simulator.objects import ApiError, list_object
from clusters.simulator.routing import Request, Response, Router

_KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
_VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta1"
_NAME = r"(?P<name>[^/]+)"
_NAMESPACE = r"(?P<namespace>[^/]+)"
_NOT_FOUND = "the server could not find the requested resource"
_MAX_PENDING = 100_000
_DEFAULT_PENDING = 1000


def _kueue(context: Any) -> KueueModel:
    model: KueueModel = context.cluster.kueue
    if not model.enabled:
        raise ApiError(404, _NOT_FOUND)
    return model


def _int_query(request: Request, key: str, default: int) -> int:
    text = request.query.get(key)
    if not text:
        return default
    try:
        return int(text)
    except ValueError as exc:
        raise ApiError(400, f"{key} must be an integer, not {text!r}") from exc


def _listed(context: Any, request: Request, *, kind: str, list_kind: str,
            items: Callable[[], list[Any]]) -> Response:
    for key in ("labelSelector", "fieldSelector", "watch"):
        if request.query.get(key):
            raise ApiError(400, f"the fleet simulator does not support {key}")
    cluster = context.cluster
    page = cluster.page(kind=kind, items=items, limit=_int_query(request, "limit", 0) or None,
                        continue_token=request.query.get("continue"))
    return Response(200, list_object(
        api_version=KUEUE_API_VERSION, kind=list_kind, items=page.items,
        resource_version=page.resource_version, continue_token=page.continue_token,
        remaining=page.remaining))


def _one(items: list[dict[str, Any]], name: str, resource: str) -> Response:
    found = next((o for o in items if o["metadata"]["name"] == name), None)
    if found is None:
        raise ApiError(404, f'{resource}.kueue.x-k8s.io "{name}" not found',
                       details={"name": name, "group": "kueue.x-k8s.io", "kind": resource})
    return Response(200, found)


def list_cluster_queues(context: Any, request: Request) -> Response:
    model = _kueue(context)
    with context.cluster.lock:
        return _listed(context, request, kind="clusterqueues", list_kind="ClusterQueueList",
                       items=model.cluster_queue_objects)


def get_cluster_queue(context: Any, request: Request, name: str) -> Response:
    model = _kueue(context)
    with context.cluster.lock:
        return _one(model.cluster_queue_objects(), name, "clusterqueues")


def list_resource_flavors(context: Any, request: Request) -> Response:
    model = _kueue(context)
    with context.cluster.lock:
        return _listed(context, request, kind="resourceflavors", list_kind="ResourceFlavorList",
                       items=model.resource_flavor_objects)


def list_priority_classes(context: Any, request: Request) -> Response:
    model = _kueue(context)
    with context.cluster.lock:
        return _listed(context, request, kind="workloadpriorityclasses",
                       list_kind="WorkloadPriorityClassList", items=model.priority_class_objects)


def list_local_queues(context: Any, request: Request, namespace: str | None = None) -> Response:
    model = _kueue(context)
    with context.cluster.lock:
        return _listed(context, request, kind=f"localqueues/{namespace or ''}",
                       list_kind="LocalQueueList",
                       items=lambda: model.local_queue_objects(namespace))


def get_local_queue(context: Any, request: Request, namespace: str, name: str) -> Response:
    model = _kueue(context)
    with context.cluster.lock:
        return _one(model.local_queue_objects(namespace), name, "localqueues")


def list_workloads(context: Any, request: Request, namespace: str | None = None) -> Response:
    model = _kueue(context)
    cluster = context.cluster
    with cluster.lock:
        return _listed(context, request, kind=f"workloads/{namespace or ''}",
                       list_kind="WorkloadList",
                       items=lambda: model.workload_items(namespace, cluster=cluster.spec.name))


def get_workload(context: Any, request: Request, namespace: str, name: str) -> Response:
    model = _kueue(context)
    cluster = context.cluster
    with cluster.lock:
        found = model.get_workload(namespace, name, cluster=cluster.spec.name)
    if found is None:
        raise ApiError(404, f'workloads.kueue.x-k8s.io "{name}" not found',
                       details={"name": name, "group": "kueue.x-k8s.io", "kind": "workloads"})
    return Response(200, found)


def _window(request: Request) -> tuple[int, int]:
    """Kueue's visibility options: `limit` (default 1000, at most 100,000) and `offset`."""
    limit = min(max(_int_query(request, "limit", _DEFAULT_PENDING), 0), _MAX_PENDING)
    return limit, max(_int_query(request, "offset", 0), 0)


def local_queue_pending(context: Any, request: Request, namespace: str, name: str) -> Response:
    model = _kueue(context)
    limit, offset = _window(request)
    with context.cluster.lock:
        summary = model.pending_workloads_summary(namespace, name, limit=limit, offset=offset)
    if summary is None:
        raise ApiError(404, f'localqueue.visibility.kueue.x-k8s.io "{name}" not found',
                       details={"name": name, "group": "visibility.kueue.x-k8s.io",
                                "kind": "localqueue"})
    return Response(200, summary)


def cluster_queue_pending(context: Any, request: Request, name: str) -> Response:
    model = _kueue(context)
    limit, offset = _window(request)
    with context.cluster.lock:
        summary = model.cluster_queue_pending_summary(name, limit=limit, offset=offset)
    if summary is None:
        raise ApiError(404, f'clusterqueue.visibility.kueue.x-k8s.io "{name}" not found',
                       details={"name": name, "group": "visibility.kueue.x-k8s.io",
                                "kind": "clusterqueue"})
    return Response(200, summary)


def add_kueue_routes(router: Router) -> None:
    """Kueue's and its visibility API's routes (404 on a cluster without Kueue)."""
    router.add("GET", f"{_KUEUE}/clusterqueues", list_cluster_queues)
    router.add("GET", f"{_KUEUE}/clusterqueues/{_NAME}", get_cluster_queue)
    router.add("GET", f"{_KUEUE}/resourceflavors", list_resource_flavors)
    router.add("GET", f"{_KUEUE}/workloadpriorityclasses", list_priority_classes)
    router.add("GET", f"{_KUEUE}/localqueues", list_local_queues)
    router.add("GET", f"{_KUEUE}/namespaces/{_NAMESPACE}/localqueues", list_local_queues)
    router.add("GET", f"{_KUEUE}/namespaces/{_NAMESPACE}/localqueues/{_NAME}", get_local_queue)
    router.add("GET", f"{_KUEUE}/workloads", list_workloads)
    router.add("GET", f"{_KUEUE}/namespaces/{_NAMESPACE}/workloads", list_workloads)
    router.add("GET", f"{_KUEUE}/namespaces/{_NAMESPACE}/workloads/{_NAME}", get_workload)
    router.add("GET", f"{_VISIBILITY}/namespaces/{_NAMESPACE}/localqueues/{_NAME}"
                      "/pendingworkloads", local_queue_pending)
    router.add("GET", f"{_VISIBILITY}/clusterqueues/{_NAME}/pendingworkloads",
               cluster_queue_pending)
