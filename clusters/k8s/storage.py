"""Listing storage classes."""

from __future__ import annotations

from kubernetes import client as k8s

from clusters.k8s.client import (
    DEFAULT_TIMEOUT,
    Credentials,
    api_client_for,
    invoke,
    read_json,
    request_timeout,
)
from clusters.k8s.retry import DEFAULT_BASE_DELAY, DEFAULT_READ_ATTEMPTS, call_with_retries


def list_storage_classes(
    *,
    credentials: Credentials,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> list[str]:
    """Return the names of the cluster's storage classes, sorted."""
    api = k8s.StorageV1Api(api_client_for(credentials))

    def fetch() -> list[str]:
        document = invoke(
            lambda: read_json(
                api.list_storage_class(
                    _preload_content=False, _request_timeout=request_timeout(timeout)
                )
            )
        )
        items = document.get("items") or []
        return sorted(str((item.get("metadata") or {}).get("name", "")) for item in items)

    return call_with_retries(fetch, attempts=attempts, base_delay=base_delay)
