"""Listing nodes, page by page, reduced to what the inventory keeps."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from kubernetes import client as k8s

from clusters.k8s.client import (
    DEFAULT_TIMEOUT,
    Credentials,
    api_client_for,
    collector_paused,
    decode_json,
    invoke,
    request_timeout,
)
from clusters.k8s.retry import DEFAULT_BASE_DELAY, DEFAULT_READ_ATTEMPTS, call_with_retries
from clusters.types import DEVICE_PREFIX, GPU_RESOURCE


@dataclass(frozen=True)
class NodeInfo:
    """One node as the inventory sees it.

    `allocatable` keeps the raw quantity strings of `cpu`, `memory`, `pods`, `nvidia.com/gpu`
    and the `rlinf.io/*` resources only; `clusters.inventory.diff` reads them.
    `resource_version` is the node's `metadata.resourceVersion` ("" when not
    reported): the API server changes it with every change of the node.
    """

    name: str
    labels: dict[str, str]
    allocatable: dict[str, str]
    ready: bool
    resource_version: str = ""


def node_info_from_object(node: dict[str, Any]) -> NodeInfo:
    """Reduce a Node object (as JSON) to a `NodeInfo`.

    Runs for every node of every poll, so it avoids per-item Python work where it can:
    labels are copied whole unless some key or value is not a string.
    """
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    labels = metadata.get("labels") or {}
    allocatable = status.get("allocatable") or {}
    return NodeInfo(
        name=str(metadata.get("name", "")),
        labels=dict(labels) if _is_text(labels) else {str(k): str(v) for k, v in labels.items()},
        allocatable={
            str(k): str(v)
            for k, v in allocatable.items()
            if k in _KEPT or k.startswith(DEVICE_PREFIX)
        },
        ready=_is_ready(status.get("conditions") or ()),
        resource_version=str(metadata.get("resourceVersion") or ""),
    )


_KEPT = frozenset({GPU_RESOURCE, "cpu", "memory", "pods"})
_TEXT = frozenset({str})


def _is_text(mapping: dict[Any, Any]) -> bool:
    """Whether every key and value is a `str` (checked without a Python-level loop)."""
    return _TEXT.issuperset(map(type, mapping)) and _TEXT.issuperset(map(type, mapping.values()))


def _is_ready(conditions: Iterable[dict[str, Any]]) -> bool:
    for condition in conditions:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return True
    return False


def _fetch_node_page(
    *, credentials: Credentials, page_size: int, continue_token: str | None, timeout: float
) -> tuple[int, bytes]:
    """One page's HTTP status and body, read in full (so a body cut short is retried too)."""
    api = k8s.CoreV1Api(api_client_for(credentials))

    def call() -> tuple[int, bytes]:
        response: Any = api.list_node(  # the raw urllib3 response (`_preload_content=False`)
            limit=page_size,
            _continue=continue_token,
            _preload_content=False,
            _request_timeout=request_timeout(timeout),
        )
        return response.status, response.data

    return invoke(call)


def _read_page(
    *,
    credentials: Credentials,
    page_size: int,
    continue_token: str | None,
    timeout: float,
    attempts: int,
    base_delay: float,
) -> tuple[list[NodeInfo], str | None]:
    """One page of nodes (retried on transient errors) and the next continue token."""
    fetch = partial(
        _fetch_node_page,
        credentials=credentials,
        page_size=page_size,
        continue_token=continue_token,
        timeout=timeout,
    )
    status, body = call_with_retries(fetch, attempts=attempts, base_delay=base_delay)
    with collector_paused():
        page = decode_json(body, status=status)
        nodes = [node_info_from_object(item) for item in page.get("items") or []]
        next_token = (page.get("metadata") or {}).get("continue") or None
        del page
    return nodes, next_token


def iter_node_pages(
    *,
    credentials: Credentials,
    page_size: int = 500,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> Iterator[list[NodeInfo]]:
    """Yield the cluster's nodes one API page at a time.

    Each page is retried on transient errors (same continue token). An expired
    continue token surfaces as `BadRequest` with reason `Expired`: the caller
    restarts the listing.
    """
    continue_token: str | None = None
    while True:
        nodes, continue_token = _read_page(
            credentials=credentials,
            page_size=page_size,
            continue_token=continue_token,
            timeout=timeout,
            attempts=attempts,
            base_delay=base_delay,
        )
        yield nodes
        if continue_token is None:
            return
