"""Kueue's objects, read-only (SPEC 15): ClusterQueues and LocalQueues (`kueue.x-k8s.io/v1beta1`),
the Workloads of a namespace, and a LocalQueue's pending Workloads from the visibility API
(`visibility.kueue.x-k8s.io/v1beta1`).

Lists follow pagination (each page retried on transient failures) up to `max_items`; answers
are returned as the API server sent them (JSON objects). Reading them into views is the pure
`clusters.kueue`'s work. A cluster without Kueue answers 404 (`NotFound`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from clusters.k8s.client import (
    DEFAULT_TIMEOUT,
    Credentials,
    api_client_for,
    decode_json,
    invoke,
    request_timeout,
)
from clusters.k8s.retry import DEFAULT_BASE_DELAY, DEFAULT_READ_ATTEMPTS, call_with_retries
from clusters.kueue import KUEUE_GROUP, KUEUE_VERSION, VISIBILITY_GROUP, VISIBILITY_VERSION

DEFAULT_MAX_ITEMS = 5000
"""The most objects one list returns (further pages are not fetched)."""
PENDING_LIMIT = 1000
"""The most pending Workloads one visibility read asks for (Kueue's own default)."""


def _invoked(fetch: Callable[[str | None], Any], continue_token: str | None) -> Any:
    return invoke(lambda: fetch(continue_token))


def _list(fetch: Callable[[str | None], Any], *, max_items: int, attempts: int,
          base_delay: float) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    continue_token: str | None = None
    while len(items) < max_items:
        response = call_with_retries(partial(_invoked, fetch, continue_token),
                                     attempts=attempts, base_delay=base_delay)
        page = decode_json(response.data, status=response.status)
        items.extend(item for item in page.get("items") or [] if isinstance(item, dict))
        continue_token = (page.get("metadata") or {}).get("continue") or None
        if continue_token is None:
            break
    return items[:max_items]


def _custom_list(credentials: Credentials, plural: str, *, namespace: str | None,
                 page_size: int, max_items: int, timeout: float, attempts: int,
                 base_delay: float) -> list[dict[str, Any]]:
    api = k8s.CustomObjectsApi(api_client_for(credentials))

    def fetch(continue_token: str | None) -> Any:
        options: dict[str, Any] = {
            "limit": page_size, "_continue": continue_token, "_preload_content": False,
            "_request_timeout": request_timeout(timeout),
        }
        if namespace is None:
            return api.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, **options)
        return api.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, plural,
                                                 **options)

    return _list(fetch, max_items=max_items, attempts=attempts, base_delay=base_delay)


def list_cluster_queues(
    *, credentials: Credentials, page_size: int = 500, max_items: int = DEFAULT_MAX_ITEMS,
    timeout: float = DEFAULT_TIMEOUT, attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> list[dict[str, Any]]:
    """Every ClusterQueue (cluster-scoped), at most `max_items`."""
    return _custom_list(credentials, "clusterqueues", namespace=None, page_size=page_size,
                        max_items=max_items, timeout=timeout, attempts=attempts,
                        base_delay=base_delay)


def list_local_queues(
    *, credentials: Credentials, namespace: str | None = None, page_size: int = 500,
    max_items: int = DEFAULT_MAX_ITEMS, timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS, base_delay: float = DEFAULT_BASE_DELAY,
) -> list[dict[str, Any]]:
    """The LocalQueues of `namespace` (every namespace when None), at most `max_items`."""
    return _custom_list(credentials, "localqueues", namespace=namespace, page_size=page_size,
                        max_items=max_items, timeout=timeout, attempts=attempts,
                        base_delay=base_delay)


def list_workloads(
    *, credentials: Credentials, namespace: str, page_size: int = 500,
    max_items: int = DEFAULT_MAX_ITEMS, timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS, base_delay: float = DEFAULT_BASE_DELAY,
) -> list[dict[str, Any]]:
    """The Workloads of `namespace`, at most `max_items`."""
    return _custom_list(credentials, "workloads", namespace=namespace, page_size=page_size,
                        max_items=max_items, timeout=timeout, attempts=attempts,
                        base_delay=base_delay)


def pending_workloads(
    *, credentials: Credentials, namespace: str, local_queue: str, limit: int = PENDING_LIMIT,
    timeout: float = DEFAULT_TIMEOUT, attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> dict[str, Any]:
    """The visibility API's `PendingWorkloadsSummary` of one LocalQueue: its pending Workloads
    in admission order, each with `positionInClusterQueue` and `positionInLocalQueue`."""
    api_client = api_client_for(credentials)
    method, url, headers, body, post = api_client.param_serialize(
        method="GET",
        resource_path=(f"/apis/{VISIBILITY_GROUP}/{VISIBILITY_VERSION}/namespaces/{{namespace}}"
                       "/localqueues/{name}/pendingworkloads"),
        path_params={"namespace": namespace, "name": local_queue},
        query_params=[("limit", limit)], header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )

    def fetch() -> dict[str, Any]:
        def call() -> Any:
            response = api_client.call_api(method, url, headers, body, post,
                                           _request_timeout=request_timeout(timeout))
            response.read()
            if response.status >= 400:
                raise ApiException(status=response.status, reason=response.reason,
                                   body=response.data)
            return response

        response = invoke(call)
        return decode_json(response.data, status=response.status)

    return call_with_retries(fetch, attempts=attempts, base_delay=base_delay)
