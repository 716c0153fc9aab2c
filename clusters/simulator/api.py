"""The part of the Kubernetes API one simulated cluster serves."""

from __future__ import annotations

import copy
import secrets
import string
from dataclasses import dataclass
from typing import Any

from clusters.labels import is_dns_subdomain
from clusters.simulator.kueueapi import add_kueue_routes
from clusters.simulator.objects import (
    JOB_API_VERSION,
    JOB_GROUP,
    JOB_KIND,
    ApiError,
    clock_now,
    encoded_list,
    job_details,
    list_object,
    success_status,
)
from clusters.simulator.podquery import (
    LogOptions,
    parse_event_field_selector,
    parse_label_selector,
    parse_pod_field_selector,
)
from clusters.simulator.routing import Request, Response, Router
from clusters.simulator.schema import Admission, Cause, JobSchema
from clusters.simulator.state import ClusterState, Page

_NAME = r"(?P<name>[^/]+)"
_NAMESPACE = r"(?P<namespace>[^/]+)"
_JOBS = f"/apis/{JOB_GROUP}/v1alpha1"
_UNSUPPORTED_QUERY = ("labelSelector", "fieldSelector", "watch")
_LOG_FOLLOW_SECONDS = 2.0
"""How long a `follow=true` log request keeps streaming new lines before it ends."""
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class ClusterContext:
    cluster: ClusterState
    schema: JobSchema


def _limit(request: Request, *, supported: tuple[str, ...] = ()) -> int | None:
    for key in _UNSUPPORTED_QUERY:
        if key not in supported and request.query.get(key):
            raise ApiError(400, f"the fleet simulator does not support {key}")
    text = request.query.get("limit")
    if not text:
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise ApiError(400, f"limit must be an integer, not {text!r}") from exc


def _page(cluster: ClusterState, request: Request, *, kind: str, items: Any,
          supported: tuple[str, ...] = ()) -> Page:
    return cluster.page(
        kind=kind,
        items=items,
        limit=_limit(request, supported=supported),
        continue_token=request.query.get("continue"),
    )


def _list_response(page: Page, *, api_version: str, kind: str) -> Response:
    document = list_object(
        api_version=api_version,
        kind=kind,
        items=page.items,
        resource_version=page.resource_version,
        continue_token=page.continue_token,
        remaining=page.remaining,
    )
    return Response(200, document)


def version(context: ClusterContext, request: Request) -> Response:
    return Response(
        200,
        {"major": "1", "minor": "31", "gitVersion": "v1.31.0-rlark-sim", "platform": "linux/amd64"},
    )


def list_nodes(context: ClusterContext, request: Request) -> Response:
    """A page of nodes, assembled from the cluster's encoded node objects."""
    cluster = context.cluster
    page = _page(cluster, request, kind="nodes", items=cluster.node_items)
    return _encoded_response(page, cluster.encoded_nodes(page.items), api_version="v1",
                             kind="NodeList")


def get_node(context: ClusterContext, request: Request, name: str) -> Response:
    return Response(200, context.cluster.get_node(name))


def list_storage_classes(context: ClusterContext, request: Request) -> Response:
    cluster = context.cluster
    page = _page(cluster, request, kind="storageclasses", items=cluster.storage_class_items)
    return _list_response(page, api_version="storage.k8s.io/v1", kind="StorageClassList")


def _encoded_response(page: Page, items: list[bytes], *, api_version: str,
                      kind: str) -> Response:
    """A list page from items encoded beforehand (the cluster's cache of encoded objects)."""
    return Response(200, encoded_list(
        api_version=api_version,
        kind=kind,
        items=items,
        resource_version=page.resource_version,
        continue_token=page.continue_token,
        remaining=page.remaining,
    ))


def list_all_jobs(context: ClusterContext, request: Request) -> Response:
    cluster = context.cluster
    page = _page(cluster, request, kind="jobs/", items=lambda: cluster.job_items(None))
    return _encoded_response(page, cluster.encoded_jobs(page.items),
                             api_version=JOB_API_VERSION, kind="JobList")


def list_namespaced_jobs(context: ClusterContext, request: Request, namespace: str) -> Response:
    cluster = context.cluster
    page = _page(
        cluster, request, kind=f"jobs/{namespace}", items=lambda: cluster.job_items(namespace)
    )
    return _encoded_response(page, cluster.encoded_jobs(page.items),
                             api_version=JOB_API_VERSION, kind="JobList")


def get_job(context: ClusterContext, request: Request, namespace: str, name: str) -> Response:
    return Response(200, context.cluster.get_job(namespace, name))


def delete_job(context: ClusterContext, request: Request, namespace: str, name: str) -> Response:
    deleted = context.cluster.delete_job(namespace, name)
    details = job_details(name, uid=deleted["metadata"]["uid"])
    return Response(200, success_status(details=details))


def _pods_page(context: ClusterContext, request: Request, namespace: str | None) -> Response:
    cluster = context.cluster
    label_text = request.query.get("labelSelector", "")
    field_text = request.query.get("fieldSelector", "")
    labels = parse_label_selector(label_text)
    fields = parse_pod_field_selector(field_text)

    def items() -> list[Any]:
        listed = cluster.pod_list()
        pods = listed.pods if fields.node is None else listed.by_node.get(fields.node, [])

        def select() -> list[Any]:
            return [pod for pod in pods
                    if (namespace is None or pod["metadata"]["namespace"] == namespace)
                    and fields.matches(pod) and labels(pod["metadata"].get("labels") or {})]

        if fields.node is not None:  # a node's few pods: selected on each list
            return select()
        return listed.selected(f"{namespace or ''}/{label_text}/{field_text}", select)

    page = _page(cluster, request, kind=f"pods/{namespace or ''}/{label_text}/{field_text}",
                 supported=("labelSelector", "fieldSelector"), items=items)
    return Response(200, encoded_list(
        api_version="v1", kind="PodList", joined=cluster.joined_pods(page),
        resource_version=page.resource_version, continue_token=page.continue_token,
        remaining=page.remaining))


def list_pods(context: ClusterContext, request: Request, namespace: str) -> Response:
    """Pods of a namespace, filtered by `labelSelector` and `fieldSelector`, paginated."""
    context.cluster.require_pod_namespace(namespace)
    return _pods_page(context, request, namespace)


def list_all_pods(context: ClusterContext, request: Request) -> Response:
    """Pods of every namespace (Jobs' and foreign), filtered and paginated likewise."""
    return _pods_page(context, request, None)


def get_pod(context: ClusterContext, request: Request, namespace: str, name: str) -> Response:
    context.cluster.require_pod_namespace(namespace)
    return Response(200, context.cluster.get_pod(namespace, name))


def read_pod_log(context: ClusterContext, request: Request, namespace: str,
                 name: str) -> Response:
    """The container log as text: `tailLines`, `sinceSeconds`/`sinceTime`, `previous`,
    `timestamps`, `limitBytes`, and `follow` (streams new lines for a bounded time)."""
    cluster = context.cluster
    cluster.require_pod_namespace(namespace)
    options = LogOptions.from_query(request.query)
    container = options.container
    if container:  # without one, pod_log finds the pod (or answers 404) itself
        names = [c["name"] for c in cluster.get_pod(namespace, name)["status"]["containerStatuses"]]
        if container not in names:
            raise ApiError(400, f"container {container} is not valid for pod {name}")
    now = clock_now()
    lines = cluster.pod_log(namespace, name, previous=options.previous,
                            since=options.since(now), tail_lines=options.tail_lines)
    text = options.render(lines, now=now)
    if not options.follow:
        return Response(200, text)
    sent = lines[-1][0] if lines else now

    def more() -> str:
        nonlocal sent
        current = cluster.pod_log(namespace, name, previous=options.previous, since=sent)
        fresh = [(moment, line) for moment, line in current if moment > sent]
        if fresh:
            sent = fresh[-1][0]
        return options.render(fresh, now=clock_now(), tail=False)

    return Response(200, text, stream=(more, _LOG_FOLLOW_SECONDS))


def list_events(context: ClusterContext, request: Request, namespace: str) -> Response:
    """Events of a namespace; `fieldSelector` on `involvedObject.*`, `type` and `reason`."""
    cluster = context.cluster
    cluster.require_namespace(namespace)
    text = request.query.get("fieldSelector", "")
    match = parse_event_field_selector(text)
    page = _page(
        cluster, request, kind=f"events/{namespace}/{text}", supported=("fieldSelector",),
        items=lambda: cluster.event_items(namespace, match),
    )
    return _list_response(page, api_version="v1", kind="EventList")


def _job_name(metadata: dict[str, Any]) -> str:
    name = metadata.get("name")
    if not name and isinstance(metadata.get("generateName"), str):
        name = metadata["generateName"] + "".join(
            secrets.choice(_SUFFIX_ALPHABET) for _ in range(5)
        )
    if not name:
        message = "Required value: name or generateName is required"
        raise _invalid("", [Cause("FieldValueRequired", message, "metadata.name")])
    if not is_dns_subdomain(name):
        message = f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain is required"
        raise _invalid(str(name), [Cause("FieldValueInvalid", message, "metadata.name")])
    return name


def _invalid(name: str, causes: list[Cause]) -> ApiError:
    summaries = [f"{cause.field}: {cause.message}" for cause in causes]
    summary = summaries[0] if len(summaries) == 1 else "[" + ", ".join(summaries) + "]"
    details = {
        "name": name,
        "group": JOB_GROUP,
        "kind": JOB_KIND,
        "causes": [cause.to_dict() for cause in causes],
    }
    return ApiError(422, f'{JOB_KIND}.{JOB_GROUP} "{name}" is invalid: {summary}', details=details)


def _check_envelope(body: dict[str, Any], namespace: str) -> dict[str, Any]:
    if body.get("apiVersion") != JOB_API_VERSION or body.get("kind") != JOB_KIND:
        raise ApiError(
            400,
            f"the API version and kind in the data ({body.get('apiVersion')}, "
            f"{body.get('kind')}) do not match the expected ({JOB_API_VERSION}, {JOB_KIND})",
        )
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        raise _invalid("", [Cause("FieldValueRequired", "Required value", "metadata")])
    if metadata.get("namespace") not in (None, "", namespace):
        raise ApiError(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        )
    return metadata


def _admit(context: ClusterContext, request: Request, namespace: str, body: Any) -> Admission:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    metadata = _check_envelope(body, namespace)
    name = _job_name(metadata)
    context.cluster.require_namespace(namespace)
    admission = context.schema.admit({**body, "metadata": {**metadata, "name": name}})
    if admission.unknown_fields and request.query.get("fieldValidation") == "Strict":
        fields = ", ".join(f'unknown field "{path}"' for path in admission.unknown_fields)
        raise ApiError(400, f"strict decoding error: {fields}")
    if admission.causes:
        raise _invalid(name, admission.causes)
    return admission


def create_job(context: ClusterContext, request: Request, namespace: str) -> Response:
    """POST a Job: envelope checks, schema admission, then store (201) or a Status error."""
    body = request.json()
    entry: dict[str, Any] = {"namespace": namespace, "body": copy.deepcopy(body)}
    try:
        admission = _admit(context, request, namespace, body)
        entry["pruned_fields"] = admission.unknown_fields
        created = context.cluster.create_job(namespace, admission.document)
        entry["code"] = 201
    except ApiError as error:
        entry["code"] = error.code
        raise
    finally:
        context.cluster.log_create(entry)
    warnings = [
        ("Warning", f'299 - "unknown field \\"{path}\\""') for path in admission.unknown_fields
    ]
    return Response(201, created, warnings)


def build_router() -> Router:
    router = Router()
    router.add("GET", "/version", version)
    router.add("GET", "/api/v1/nodes", list_nodes)
    router.add("GET", "/api/v1/pods", list_all_pods)
    router.add("GET", f"/api/v1/namespaces/{_NAMESPACE}/pods", list_pods)
    router.add("GET", f"/api/v1/namespaces/{_NAMESPACE}/pods/{_NAME}", get_pod)
    router.add("GET", f"/api/v1/namespaces/{_NAMESPACE}/pods/{_NAME}/log", read_pod_log)
    router.add("GET", f"/api/v1/namespaces/{_NAMESPACE}/events", list_events)
    router.add("GET", f"/api/v1/nodes/{_NAME}", get_node)
    router.add("GET", "/apis/storage.k8s.io/v1/storageclasses", list_storage_classes)
    router.add("GET", f"{_JOBS}/jobs", list_all_jobs)
    router.add("GET", f"{_JOBS}/namespaces/{_NAMESPACE}/jobs", list_namespaced_jobs)
    router.add("POST", f"{_JOBS}/namespaces/{_NAMESPACE}/jobs", create_job)
    router.add("GET", f"{_JOBS}/namespaces/{_NAMESPACE}/jobs/{_NAME}", get_job)
    router.add("DELETE", f"{_JOBS}/namespaces/{_NAMESPACE}/jobs/{_NAME}", delete_job)
    add_kueue_routes(router)
    return router
