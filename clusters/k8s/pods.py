"""Pods, their container logs and events: read-only verbs, bounded in size and time.

`list_pods` and `list_events` follow pagination (transient failures retried per page) up to
`max_items`; `iter_bound_pod_pages` streams the cluster-wide list of pods bound to nodes and
still running, page by page, within bounds on items, pages and bytes, each page read by a
typed decoder that keeps only what the request rule needs (below); `iter_pod_usage_pages`
is the same list reduced to what occupancy counts (`PodUsage`);
`read_pod_log` reads at most `max_bytes` of text (the rest of the answer is discarded and the
connection closed) and is not retried: a log read is cheap to repeat by the caller and a
retried follow would duplicate lines; `PodLogReader` makes the same reads of many pods of one
cluster without the generated client's per-call work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

import msgspec
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from clusters.k8s.client import (
    DEFAULT_TIMEOUT,
    Credentials,
    api_client_for,
    collector_paused,
    decode_json,
    invoke,
    request_timeout,
)
from clusters.k8s.errors import KubeError, ListTooLarge
from clusters.k8s.retry import DEFAULT_BASE_DELAY, DEFAULT_READ_ATTEMPTS, call_with_retries
from clusters.podrequests import (
    PodSpecError,
    effective_requests,
    pod_requests,
    pod_resources_from_spec,
)

DEFAULT_LOG_BYTES = 1024 * 1024
"""The most log text one `read_pod_log` returns unless told otherwise."""
DEFAULT_MAX_ITEMS = 2000
"""The most pods or events one list returns (further pages are not fetched)."""
LIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
"""The field selector of pods that still hold their node's capacity."""
DEFAULT_MAX_PODS = 200_000
"""The most pods one occupancy listing reads (more than Kubernetes supports in a cluster)."""
DEFAULT_MAX_PAGES = 2_000
DEFAULT_MAX_PAGE_BYTES = 64 * 1024 * 1024
"""The largest page body read: a page of 500 real pods is a few megabytes."""


@dataclass(frozen=True)
class ContainerState:
    """A container state: `state` is `waiting`, `running`, `terminated` or "" (none)."""

    state: str = ""
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    started_at: str = ""
    finished_at: str = ""


@dataclass(frozen=True)
class PodInfo:
    """A pod reduced to what RLark shows and keeps (its main container only)."""

    name: str
    uid: str
    labels: dict[str, str]
    node: str
    phase: str
    created_at: str
    started_at: str
    container: str
    restarts: int
    current: ContainerState
    previous: ContainerState
    reason: str = ""  # the pod's `status.reason` (`Evicted`, ...)
    message: str = ""  # the pod's `status.message`
    disruption: PodCondition | None = None  # its `DisruptionTarget` condition, when True
    # The `PodScheduled` condition while it is False (kube-scheduler's `Unschedulable` and its
    # FailedScheduling message, Kueue's `SchedulingGated`); "" once scheduled or before.
    scheduling_reason: str = ""
    scheduling_message: str = ""
    # What the pod asks of a node: its effective request (`clusters.podrequests`, scheduler
    # units) and its `nodeSelector`; empty when the spec says nothing or is malformed.
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PodCondition:
    """One condition of a pod: why, what it says, when it last changed."""

    reason: str = ""
    message: str = ""
    at: str = ""


class BoundPod(NamedTuple):
    """A pod bound to a node and not ended, reduced to what occupancy needs: where it is,
    who it is, its labels (for those who group pods by Job) and its effective request
    (`clusters.podrequests.pod_requests`: scheduler units, zero amounts left out). The
    request mapping is read-only: pods of one shape share it. (A named tuple: a listing
    makes one per pod, and a tuple is built several times faster than a frozen dataclass.)"""

    node: str
    namespace: str
    name: str
    uid: str
    phase: str
    labels: dict[str, str]
    requests: Mapping[str, int]

    @property
    def usage(self) -> PodUsage:
        """The pod as occupancy counts it."""
        return PodUsage(self.uid or f"{self.namespace}/{self.name}", self.node, self.requests)


class PodUsage(NamedTuple):
    """A bound, running pod as occupancy counts it: `key`, who it is (its uid, else
    `namespace/name`: a pod listed twice is counted once), the `node` it is bound to and its
    effective request (`BoundPod.requests`, shared by the pods of one shape)."""

    key: str
    node: str
    requests: Mapping[str, int]


@dataclass(frozen=True)
class EventInfo:
    """One Kubernetes event about an object."""

    kind: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    count: int
    first_at: str
    last_at: str


@dataclass(frozen=True)
class PodLog:
    """Log text (at most the requested bytes) and whether more was cut off."""

    text: str
    truncated: bool


def _container_state(document: Any) -> ContainerState:
    if not isinstance(document, dict) or not document:
        return ContainerState()
    state, fields = next(iter(document.items()))
    fields = fields if isinstance(fields, dict) else {}
    exit_code = fields.get("exitCode")
    return ContainerState(
        state=str(state),
        reason=str(fields.get("reason") or ""),
        message=str(fields.get("message") or ""),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        started_at=str(fields.get("startedAt") or ""),
        finished_at=str(fields.get("finishedAt") or ""),
    )


def _disruption(status: dict[str, Any]) -> PodCondition | None:
    """The pod's `DisruptionTarget` condition when it is True (the pod is about to go, and
    why: preemption, eviction, the taint manager, the kubelet)."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "DisruptionTarget" and \
                condition.get("status") == "True":
            return PodCondition(reason=str(condition.get("reason") or ""),
                                message=str(condition.get("message") or ""),
                                at=str(condition.get("lastTransitionTime") or ""))
    return None


def _main_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = [s for s in (pod.get("status") or {}).get("containerStatuses") or []
                if isinstance(s, dict)]
    named = [s for s in statuses if s.get("name") == "main"]
    return (named or statuses or [{}])[0]


_SCHEDULING_TEXT_MAX = 64 * 1024  # a message kept in memory (cut again when stored)


def _scheduling(status: Any) -> tuple[str, str]:
    """The reason and message of a False `PodScheduled` condition ("" when none)."""
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if (isinstance(condition, dict) and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"):
            return (str(condition.get("reason") or "")[:255],
                    str(condition.get("message") or "")[:_SCHEDULING_TEXT_MAX])
    return "", ""


def _asks(spec: Any) -> tuple[Mapping[str, int], Mapping[str, str]]:
    """A pod's effective request and node selector; nothing of a spec not shaped as one."""
    if not isinstance(spec, dict):
        return {}, {}
    try:
        requests = dict(pod_requests(spec))
    except (PodSpecError, TypeError, ValueError):
        requests = {}
    return requests, _text_map(spec.get("nodeSelector"))


def pod_info_from_object(pod: dict[str, Any]) -> PodInfo:
    """Reduce a Pod object (as JSON) to a `PodInfo`."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    main = _main_status(pod)
    reason, message = _scheduling(status)
    requests, selector = _asks(pod.get("spec"))
    return PodInfo(
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        phase=str(status.get("phase") or ""),
        created_at=str(metadata.get("creationTimestamp") or ""),
        started_at=str(status.get("startTime") or ""),
        container=str(main.get("name") or ""),
        restarts=int(main.get("restartCount") or 0),
        current=_container_state(main.get("state")),
        previous=_container_state(main.get("lastState")),
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
        disruption=_disruption(status),
        scheduling_reason=reason,
        scheduling_message=message,
        requests=requests,
        node_selector=selector,
    )


_ENDED = frozenset({"Succeeded", "Failed"})


def _text_map(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def bound_pod_from_object(pod: object) -> BoundPod | None:
    """Reduce a Pod object (as JSON) to a `BoundPod`; None when it is not bound to a node or
    has ended (a server that ignored the field selector). A pod not shaped as the API serves
    one raises `KubeError` (reason `BadResponse`) naming it."""
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata") or {}, dict):
        raise KubeError("a pod of the list is not an object", reason="BadResponse")
    metadata = pod.get("metadata") or {}

    def where() -> str:  # only when there is something to say (a listing holds 1000s of pods)
        return f"pod {metadata.get('namespace')!s:.63}/{metadata.get('name')!s:.253}"

    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if not isinstance(spec, dict) or not isinstance(status, dict):
        raise KubeError(f"{where()}: spec or status is not an object", reason="BadResponse")
    node = spec.get("nodeName") or ""
    if not isinstance(node, str):
        raise KubeError(f"{where()}: spec.nodeName is not a string", reason="BadResponse")
    phase = str(status.get("phase") or "")
    if not node or phase in _ENDED:
        return None
    try:
        requests = effective_requests(pod_resources_from_spec(spec))
    except PodSpecError as error:
        raise KubeError(f"{where()}: {error}", reason="BadResponse") from error
    return BoundPod(
        node=node,
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        phase=phase,
        labels=_text_map(metadata.get("labels")),
        requests=MappingProxyType(requests),
    )


# The typed decoder of a pod-list page (occupancy). `msgspec` decodes the page straight into
# these structs, skipping every other field in C: metadata's name, namespace and uid (and
# labels, for `BoundPod`s), the spec's `nodeName`, `status.phase`, and what decides the pod's
# request (`containers`, `initContainers`, pod-level `resources`, `overhead`) as raw JSON
# text, not parsed. Pods of one shape (the most of a cluster: a Job's or a ReplicaSet's pods
# are written from one template) carry the same text there, so the text is the key of a
# bounded cache of answers and only a new shape is parsed (into `_Container` and friends) and
# given to the request rule (`clusters.podrequests`, the one place of it). The same text is
# the same JSON value, so a cached answer is the rule's answer. A page the structs do not
# describe (not JSON, a wrong type anywhere they read, a quantity that is neither text nor a
# number) is read again by `json.loads` and `bound_pod_from_object`, the reference
# reduction, which names the pod and field at fault or, for a page that is merely unusual,
# answers what the typed path would have.

_Quantity = str | int | float
_ABSENT = msgspec.Raw()


class _Resources(msgspec.Struct, gc=False):
    requests: dict[str, _Quantity] | None = None


class _Container(msgspec.Struct, gc=False):
    resources: _Resources | None = None
    restartPolicy: str | None = None


class _Spec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    containers: msgspec.Raw = _ABSENT
    initContainers: msgspec.Raw = _ABSENT
    resources: msgspec.Raw = _ABSENT
    overhead: msgspec.Raw = _ABSENT


class _Metadata(msgspec.Struct, gc=False):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, Any] | None = None


class _UsageMetadata(msgspec.Struct, gc=False):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None


class _Status(msgspec.Struct, gc=False):
    phase: str | None = None


class _Pod(msgspec.Struct, gc=False):
    metadata: _Metadata | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _UsagePod(msgspec.Struct, gc=False):
    metadata: _UsageMetadata | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _ListMeta(msgspec.Struct, gc=False):
    continue_: Any = msgspec.field(default=None, name="continue")


class _PodPage(msgspec.Struct, gc=False):
    items: list[_Pod] | None = None
    metadata: _ListMeta | None = None


class _UsagePage(msgspec.Struct, gc=False):
    items: list[_UsagePod] | None = None
    metadata: _ListMeta | None = None


_PAGE_DECODER = msgspec.json.Decoder(_PodPage)
_USAGE_PAGE_DECODER = msgspec.json.Decoder(_UsagePage)
_CONTAINERS_DECODER = msgspec.json.Decoder(list[_Container] | None)
_RESOURCES_DECODER = msgspec.json.Decoder(_Resources | None)
_QUANTITIES_DECODER = msgspec.json.Decoder(dict[str, _Quantity] | None)
_NO_METADATA = _Metadata()
_NO_STATUS = _Status()


class _RequestsCache:
    """Effective requests by the raw JSON text of what decides them. Bounded in entries and
    in the bytes of its keys: cleared when either is full, whatever the listing holds; a key
    longer than `max_key_bytes` is computed without being kept."""

    def __init__(self, *, max_entries: int, max_bytes: int, max_key_bytes: int) -> None:
        self.max_entries, self.max_bytes, self.max_key_bytes = max_entries, max_bytes, max_key_bytes
        self.entries: dict[bytes | tuple[bytes, ...], Mapping[str, int]] = {}
        self.bytes = 0

    def put(self, key: bytes | tuple[bytes, ...], size: int, requests: Mapping[str, int]) -> None:
        if size > self.max_key_bytes:
            return
        if len(self.entries) >= self.max_entries or self.bytes + size > self.max_bytes:
            self.clear()
        self.entries[key] = requests
        self.bytes += size

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.entries)


_REQUESTS_CACHE = _RequestsCache(max_entries=4096, max_bytes=8 * 1024 * 1024,
                                 max_key_bytes=16 * 1024)


def _spec_document(spec: _Spec) -> dict[str, Any]:
    """The request-deciding part of a typed spec, as the JSON the request rule reads (its raw
    parts parsed here: `msgspec.ValidationError` for one the structs do not describe)."""
    document: dict[str, Any] = {}
    for key, raw in (("containers", spec.containers), ("initContainers", spec.initContainers)):
        containers = _CONTAINERS_DECODER.decode(raw) if raw else None
        if containers is not None:
            document[key] = [_container_spec(container) for container in containers]
    pod_level = _RESOURCES_DECODER.decode(spec.resources) if spec.resources else None
    if pod_level is not None:
        document["resources"] = {"requests": pod_level.requests}
    overhead = _QUANTITIES_DECODER.decode(spec.overhead) if spec.overhead else None
    if overhead is not None:
        document["overhead"] = overhead
    return document


def _container_spec(container: _Container) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if container.resources is not None:
        document["resources"] = {"requests": container.resources.requests}
    if container.restartPolicy is not None:
        document["restartPolicy"] = container.restartPolicy
    return document


def _typed_requests(spec: _Spec, namespace: str | None, name: str | None) -> Mapping[str, int]:
    """The pod's effective request, from the cache when its shape was seen."""
    inits, pod_level, overhead = spec.initContainers, spec.resources, spec.overhead
    key: bytes | tuple[bytes, ...]
    if inits or pod_level or overhead:
        key = (bytes(spec.containers), bytes(inits), bytes(pod_level), bytes(overhead))
        size = sum(map(len, key))
    else:  # the common pod: its containers alone (a bytes key never equals a tuple key)
        key = bytes(spec.containers)
        size = len(key)
    known = _REQUESTS_CACHE.entries.get(key)
    if known is not None:
        return known
    try:
        requests: Mapping[str, int] = MappingProxyType(pod_requests(_spec_document(spec)))
    except PodSpecError as error:
        raise KubeError(f"pod {namespace!s:.63}/{name!s:.253}: {error}",
                        reason="BadResponse") from error
    _REQUESTS_CACHE.put(key, size, requests)
    return requests


def _typed_bound_pods(items: list[_Pod]) -> list[BoundPod]:
    """`bound_pod_from_object` of each typed pod (the same answer for the same pod)."""
    reduced = []
    for pod in items:
        spec = pod.spec
        if spec is None or not spec.nodeName:
            continue
        phase = (pod.status or _NO_STATUS).phase or ""
        if phase in _ENDED:
            continue
        metadata = pod.metadata or _NO_METADATA
        reduced.append(BoundPod(
            spec.nodeName, metadata.namespace or "", metadata.name or "", metadata.uid or "",
            phase, _text_map(metadata.labels),
            _typed_requests(spec, metadata.namespace, metadata.name)))
    return reduced


def _typed_usages(items: list[_UsagePod]) -> list[PodUsage]:
    """`BoundPod.usage` of each typed bound, running pod, with no `BoundPod` made. (The
    common pod, its containers alone deciding its request and that shape seen, is answered
    here without a call: this loop runs once per pod of the cluster.)"""
    reduced: list[PodUsage] = []
    append, known = reduced.append, _REQUESTS_CACHE.entries
    for pod in items:
        spec = pod.spec
        if spec is None:
            continue
        node = spec.nodeName
        if not node or (pod.status or _NO_STATUS).phase in _ENDED:
            continue
        metadata = pod.metadata or _NO_USAGE_METADATA
        requests = None
        if not (spec.initContainers or spec.resources or spec.overhead):
            requests = known.get(bytes(spec.containers))
        if requests is None:
            requests = _typed_requests(spec, metadata.namespace, metadata.name)
        key = metadata.uid or f"{metadata.namespace or ''}/{metadata.name or ''}"
        append(_new_tuple(PodUsage, (key, node, requests)))
    return reduced


_new_tuple = tuple.__new__  # a named tuple made without its Python-level __new__


_NO_USAGE_METADATA = _UsageMetadata()


class _ReducedPage(NamedTuple):
    """A page reduced: what occupancy keeps of its pods, how many items it listed, and its
    continue token (as sent)."""

    pods: list[Any]
    items: int
    continue_token: object


def _reduced_page(
    body: bytes, *, status: int, decoder: msgspec.json.Decoder[Any],
    typed: Callable[[Any], list[Any]], reference: Callable[[Any], Any],
) -> _ReducedPage:
    """A page of the pod list reduced by the typed path when the structs describe it, else
    by `reference` over the plain JSON (`KubeError`, `BadResponse`, for a body that is not a
    pod list)."""
    try:
        page = decoder.decode(body)
        items = page.items or []
        return _ReducedPage(typed(items), len(items),
                            page.metadata.continue_ if page.metadata else None)
    except msgspec.MsgspecError:
        pass
    document = decode_json(body, status=status)
    found = document.get("items") or []
    if not isinstance(found, list):
        raise KubeError("the pod list's items are not a list", reason="BadResponse")
    metadata = document.get("metadata") or {}
    reduced = [pod for pod in map(reference, found) if pod is not None]
    return _ReducedPage(reduced, len(found), metadata.get("continue")
                        if isinstance(metadata, dict) else None)


def _usage_from_object(pod: object) -> PodUsage | None:
    bound = bound_pod_from_object(pod)
    return None if bound is None else bound.usage


def _bound_page(body: bytes, *, status: int) -> _ReducedPage:
    return _reduced_page(body, status=status, decoder=_PAGE_DECODER, typed=_typed_bound_pods,
                         reference=bound_pod_from_object)


def _usage_page(body: bytes, *, status: int) -> _ReducedPage:
    return _reduced_page(body, status=status, decoder=_USAGE_PAGE_DECODER, typed=_typed_usages,
                         reference=_usage_from_object)


def bound_pods_of_page(body: bytes, *, status: int = 200) -> tuple[list[BoundPod], object]:
    """The bound, running pods of one pod-list page body and its continue token (as sent).
    Raises `KubeError` (`BadResponse`) for a body that is not a pod list."""
    page = _bound_page(body, status=status)
    return page.pods, page.continue_token


def pod_usages_of_page(body: bytes, *, status: int = 200) -> tuple[list[PodUsage], object]:
    """`bound_pods_of_page` as occupancy counts the pods (`BoundPod.usage`), with no
    `BoundPod` and no labels made on the way."""
    page = _usage_page(body, status=status)
    return page.pods, page.continue_token


def event_info_from_object(event: dict[str, Any]) -> EventInfo:
    involved = event.get("involvedObject") or {}
    first = event.get("firstTimestamp") or event.get("eventTime") or ""
    return EventInfo(
        kind=str(involved.get("kind") or ""),
        name=str(involved.get("name") or ""),
        uid=str(involved.get("uid") or ""),
        type=str(event.get("type") or ""),
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or ""),
        count=int(event.get("count") or 1),
        first_at=str(first),
        last_at=str(event.get("lastTimestamp") or first),
    )


def _list_all(
    fetch: Callable[[str | None], tuple[int, bytes]], *, max_items: int, attempts: int,
    base_delay: float,
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    continue_token: str | None = None
    while len(items) < max_items:
        status, body = call_with_retries(
            partial(fetch, continue_token), attempts=attempts, base_delay=base_delay
        )
        page = decode_json(body, status=status)
        items.extend(item for item in page.get("items") or [] if isinstance(item, dict))
        continue_token = (page.get("metadata") or {}).get("continue") or None
        if continue_token is None:
            break
    return items[:max_items]


def list_pods(
    *,
    credentials: Credentials,
    namespace: str,
    label_selector: str = "",
    page_size: int = 500,
    max_items: int = DEFAULT_MAX_ITEMS,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> list[PodInfo]:
    """The pods of `namespace` matching `label_selector` (at most `max_items`)."""
    api = k8s.CoreV1Api(api_client_for(credentials))

    def fetch(continue_token: str | None) -> tuple[int, bytes]:
        response: Any = invoke(lambda: api.list_namespaced_pod(
            namespace, label_selector=label_selector or None, limit=page_size,
            _continue=continue_token, _preload_content=False,
            _request_timeout=request_timeout(timeout),
        ))
        return response.status, response.data

    items = _list_all(fetch, max_items=max_items, attempts=attempts, base_delay=base_delay)
    return [pod_info_from_object(item) for item in items]


def _bounded_body(response: Any, *, max_bytes: int) -> tuple[int, bytes]:
    """Status and body of a raw response, reading at most `max_bytes` (then `ListTooLarge`,
    the connection dropped)."""
    try:
        body = response.read(max_bytes + 1)
    except BaseException:
        response.close()
        raise
    if len(body) > max_bytes:
        response.close()
        raise ListTooLarge(f"a page of the list is larger than {max_bytes} bytes",
                           status=response.status, reason="ListTooLarge")
    response.release_conn()
    return response.status, body


def _iter_pod_pages(
    reduce: Callable[..., _ReducedPage], *, credentials: Credentials, node_name: str | None,
    page_size: int, max_pods: int, max_pages: int, max_page_bytes: int, timeout: float,
    attempts: int, base_delay: float,
) -> Iterator[list[Any]]:
    api = k8s.CoreV1Api(api_client_for(credentials))
    selector = LIVE_PODS_SELECTOR + (f",spec.nodeName={node_name}" if node_name else "")

    def fetch(continue_token: str | None) -> tuple[int, bytes]:
        response: Any = invoke(lambda: api.list_pod_for_all_namespaces(
            field_selector=selector, limit=page_size, _continue=continue_token,
            _preload_content=False, _request_timeout=request_timeout(timeout),
        ))
        return invoke(lambda: _bounded_body(response, max_bytes=max_page_bytes))

    continue_token: str | None = None
    items = pages = 0
    while True:
        pages += 1
        if pages > max_pages:
            raise ListTooLarge(f"the pod list has more than {max_pages} pages",
                               reason="ListTooLarge")
        status, body = call_with_retries(
            partial(fetch, continue_token), attempts=attempts, base_delay=base_delay)
        with collector_paused():  # the page decoded and reduced: 4x faster in a Django process
            page = reduce(body, status=status)
            del body
        items += page.items
        if items > max_pods:
            raise ListTooLarge(f"the pod list has more than {max_pods} pods",
                               reason="ListTooLarge")
        continue_token = page.continue_token or None  # type: ignore[assignment]
        reduced = page.pods
        del page
        yield reduced
        del reduced
        if continue_token is None:
            return
        if not isinstance(continue_token, str):
            raise KubeError("the pod list's continue token is not a string",
                            reason="BadResponse")


def iter_bound_pod_pages(
    *,
    credentials: Credentials,
    node_name: str | None = None,
    page_size: int = 500,
    max_pods: int = DEFAULT_MAX_PODS,
    max_pages: int = DEFAULT_MAX_PAGES,
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> Iterator[list[BoundPod]]:
    """Yield the cluster's pods that are bound to a node and not ended, one page at a time.

    One cluster-wide list (`fieldSelector=status.phase!=Succeeded,status.phase!=Failed`,
    narrowed to one node with `node_name`), each page retried on transient errors. Only one
    page is held at a time. More than `max_pods` items, `max_pages` pages or a page body
    above `max_page_bytes` raise `ListTooLarge`; an item not shaped as a pod raises
    `KubeError` (`BadResponse`); an expired continue token `BadRequest` (`Expired`): the
    caller starts over.
    """
    return _iter_pod_pages(
        _bound_page, credentials=credentials, node_name=node_name, page_size=page_size,
        max_pods=max_pods, max_pages=max_pages, max_page_bytes=max_page_bytes,
        timeout=timeout, attempts=attempts, base_delay=base_delay)


def iter_pod_usage_pages(
    *,
    credentials: Credentials,
    node_name: str | None = None,
    page_size: int = 500,
    max_pods: int = DEFAULT_MAX_PODS,
    max_pages: int = DEFAULT_MAX_PAGES,
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> Iterator[list[PodUsage]]:
    """`iter_bound_pod_pages` as occupancy counts the pods: each page's bound, running pods
    as `PodUsage`s (who, where, what it asks), read straight from the typed page: no
    `BoundPod`, no labels. The same list, bounds and errors."""
    return _iter_pod_pages(
        _usage_page, credentials=credentials, node_name=node_name, page_size=page_size,
        max_pods=max_pods, max_pages=max_pages, max_page_bytes=max_page_bytes,
        timeout=timeout, attempts=attempts, base_delay=base_delay)


def list_events(
    *,
    credentials: Credentials,
    namespace: str,
    involved_name: str | None = None,
    involved_kind: str | None = None,
    reason: str | None = None,
    page_size: int = 500,
    max_items: int = DEFAULT_MAX_ITEMS,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> list[EventInfo]:
    """Events of `namespace`, narrowed to one involved object's name and/or kind and/or the
    event's reason (`FailedScheduling`: one list for every pod the scheduler turned down)."""
    api = k8s.CoreV1Api(api_client_for(credentials))
    terms = [f"involvedObject.name={involved_name}" if involved_name else "",
             f"involvedObject.kind={involved_kind}" if involved_kind else "",
             f"reason={reason}" if reason else ""]
    field_selector = ",".join(term for term in terms if term) or None

    def fetch(continue_token: str | None) -> tuple[int, bytes]:
        response: Any = invoke(lambda: api.list_namespaced_event(
            namespace, field_selector=field_selector, limit=page_size,
            _continue=continue_token, _preload_content=False,
            _request_timeout=request_timeout(timeout),
        ))
        return response.status, response.data

    items = _list_all(fetch, max_items=max_items, attempts=attempts, base_delay=base_delay)
    return [event_info_from_object(item) for item in items]


_LOG_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/log"


def _log_query(
    *, container: str | None, tail_lines: int | None, since_seconds: int | None,
    since_time: datetime | None, previous: bool, timestamps: bool, limit_bytes: int,
) -> list[tuple[str, Any]]:
    query: list[tuple[str, Any]] = [("limitBytes", limit_bytes)]
    if container:
        query.append(("container", container))
    if tail_lines is not None:
        query.append(("tailLines", tail_lines))
    if since_seconds is not None:
        query.append(("sinceSeconds", since_seconds))
    if since_time is not None:
        query.append(("sinceTime", since_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
    if previous:
        query.append(("previous", "true"))
    if timestamps:
        query.append(("timestamps", "true"))
    return query


class PodLogReader:
    """Bounded log reads of one cluster's pods, many of them (a progress pass makes one per
    Running run, thousands a pass; safe to share between threads).

    The request is what `CoreV1Api.read_namespaced_pod_log` sends, made once: the cluster's
    `ApiClient` (`api_client_for`) serialises the headers (its user agent, the bearer token of
    its configuration's auth settings) when the reader is built, and each read goes straight
    to that client's urllib3 connection pool for the API server (its TLS and client
    certificate, its keep-alive connections) with the path and query of that read, the
    timeout built once. What is skipped is the per-call work of the generated client
    (`param_serialize`, the pool manager parsing and re-encoding the URL, choosing the pool
    again); the answer is read as `read_pod_log` reads it (`max_bytes`, one byte more asked
    for to tell a cut) and failures are the gateway's `KubeError`s. A redirect is not
    followed: it is an error answer, as every status from 300 on. Behind a proxy (the
    configuration's, or one from the environment) each read goes through the client's proxy
    manager with the whole URL."""

    def __init__(self, credentials: Credentials, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        api_client = api_client_for(credentials)
        # the headers (and the URL) the client would send for this very call: the log path
        # as the gateway's one log endpoint, placeholders left in (the RBAC test reads it)
        _method, url, headers, _body, _post = api_client.param_serialize(
            method="GET", resource_path=_LOG_PATH, header_params={"Accept": "text/plain"},
            auth_settings=["BearerToken"])
        host = urllib3.util.parse_url(url.removesuffix(_LOG_PATH))  # the configuration's host
        self._origin = f"{host.scheme}://{host.netloc}"
        self._prefix = host.path or ""  # an API server behind a path (a proxy's, a gateway's)
        self._headers = dict(headers)
        self._safe = api_client.configuration.safe_chars_for_path_param
        connect, read = request_timeout(timeout)
        self._timeout = urllib3.Timeout(connect=connect, read=read)
        manager = api_client.rest_client.pool_manager
        self._manager = manager
        self._pool = manager.connection_from_url(self._origin) \
            if type(manager) is urllib3.PoolManager else None

    def read(
        self,
        *,
        namespace: str,
        name: str,
        container: str | None = None,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        since_time: datetime | None = None,
        previous: bool = False,
        timestamps: bool = False,
        max_bytes: int = DEFAULT_LOG_BYTES,
    ) -> PodLog:
        """One container's log, as `read_pod_log` answers it."""
        query = _log_query(container=container, tail_lines=tail_lines,
                           since_seconds=since_seconds, since_time=since_time,
                           previous=previous, timestamps=timestamps, limit_bytes=max_bytes + 1)
        path = _LOG_PATH.format(namespace=quote(namespace, safe=self._safe),
                                name=quote(name, safe=self._safe))
        # ":" as it is (RFC 3986 allows it in a query): a target without "%" is one urllib3
        # passes through as it is, not re-encoded byte by byte
        target = f"{self._prefix}{path}?{urlencode(query, safe=':', quote_via=quote)}"
        return invoke(lambda: _bounded_text(self._send(target), max_bytes=max_bytes,
                                            redirects=False))

    def _send(self, target: str) -> Any:
        if self._pool is not None:
            return self._pool.urlopen("GET", target, headers=self._headers, retries=False,
                                      redirect=False, timeout=self._timeout,
                                      preload_content=False, assert_same_host=False)
        return self._manager.urlopen("GET", self._origin + target, headers=self._headers,
                                     retries=False, redirect=False, timeout=self._timeout,
                                     preload_content=False)


def read_pod_log(
    *,
    credentials: Credentials,
    namespace: str,
    name: str,
    container: str | None = None,
    tail_lines: int | None = None,
    since_seconds: int | None = None,
    since_time: datetime | None = None,
    previous: bool = False,
    timestamps: bool = False,
    max_bytes: int = DEFAULT_LOG_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
) -> PodLog:
    """A container's log text: the last `tail_lines` lines, since a time, or the previous
    container's; at most `max_bytes` (the server is asked for one byte more, to tell a cut;
    enforced while reading). Raises `NotFound` for a missing pod and `BadRequest` for a
    container without a log (not started yet, or no previous container). Many reads of one
    cluster: `PodLogReader`."""
    api_client = api_client_for(credentials)
    query = _log_query(container=container, tail_lines=tail_lines, since_seconds=since_seconds,
                       since_time=since_time, previous=previous, timestamps=timestamps,
                       limit_bytes=max_bytes + 1)
    method, url, headers, body, post = api_client.param_serialize(
        method="GET", resource_path=_LOG_PATH,
        path_params={"namespace": namespace, "name": name}, query_params=query,
        header_params={"Accept": "text/plain"}, auth_settings=["BearerToken"],
    )

    def call() -> PodLog:
        response = api_client.call_api(method, url, headers, body, post,
                                       _request_timeout=request_timeout(timeout))
        return _bounded_text(response.response, max_bytes=max_bytes)

    return invoke(call)


def _bounded_text(raw: Any, *, max_bytes: int, redirects: bool = True) -> PodLog:
    """The answer's text, at most `max_bytes`; an error status raises `ApiException` (its
    body read to 64 KiB); `redirects=False`: a 3xx too (a redirect that was not followed)."""
    data = b""
    try:
        data = raw.read(max_bytes + 1)
        if raw.status >= (400 if redirects else 300):
            data += raw.read(64 * 1024)
            raise ApiException(status=raw.status, reason=raw.reason, body=data)
    finally:
        if len(data) > max_bytes:
            raw.close()  # the rest of a long answer is not read: drop the connection
        else:
            raw.release_conn()
    truncated = len(data) > max_bytes
    return PodLog(text=data[:max_bytes].decode("utf-8", errors="replace"), truncated=truncated)
