"""The `rlinf.io/v1alpha1` Job custom resource: create, get, list, delete.

Reads retry transient errors; `create_job` and `delete_job` do not, because
only the caller knows how to make a repeated create idempotent (a 409 for its
own object is success) — it can use `backoff_delays` for its own loop.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kubernetes import client as k8s

from clusters.k8s.client import (
    DEFAULT_TIMEOUT,
    Credentials,
    api_client_for,
    as_object,
    invoke,
    request_timeout,
)
from clusters.k8s.retry import DEFAULT_BASE_DELAY, DEFAULT_READ_ATTEMPTS, call_with_retries

JOB_GROUP = "rlinf.io"
JOB_VERSION = "v1alpha1"
JOB_PLURAL = "jobs"
JOB_API_VERSION = f"{JOB_GROUP}/{JOB_VERSION}"
JOB_KIND = "Job"


def _custom_objects(credentials: Credentials) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client_for(credentials))


def create_job(
    *,
    credentials: Credentials,
    namespace: str,
    body: dict[str, Any],
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Create the Job and return the object as the API server stored it (no retries)."""
    api = _custom_objects(credentials)
    created = invoke(
        lambda: api.create_namespaced_custom_object(
            JOB_GROUP,
            JOB_VERSION,
            namespace,
            JOB_PLURAL,
            body,
            _request_timeout=request_timeout(timeout),
        )
    )
    return as_object(created)


def get_job(
    *,
    credentials: Credentials,
    namespace: str,
    name: str,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> dict[str, Any]:
    """Return the Job; raises `NotFound` when it does not exist."""
    api = _custom_objects(credentials)

    def fetch() -> dict[str, Any]:
        return as_object(
            invoke(
                lambda: api.get_namespaced_custom_object(
                    JOB_GROUP,
                    JOB_VERSION,
                    namespace,
                    JOB_PLURAL,
                    name,
                    _request_timeout=request_timeout(timeout),
                )
            )
        )

    return call_with_retries(fetch, attempts=attempts, base_delay=base_delay)


def _fetch_job_page(
    *,
    credentials: Credentials,
    namespace: str | None,
    page_size: int,
    continue_token: str | None,
    timeout: float,
) -> dict[str, Any]:
    api = _custom_objects(credentials)
    options: dict[str, Any] = {
        "limit": page_size,
        "_continue": continue_token,
        "_request_timeout": request_timeout(timeout),
    }
    if namespace is None:
        return as_object(
            invoke(
                lambda: api.list_cluster_custom_object(
                    JOB_GROUP, JOB_VERSION, JOB_PLURAL, **options
                )
            )
        )
    return as_object(
        invoke(
            lambda: api.list_namespaced_custom_object(
                JOB_GROUP, JOB_VERSION, namespace, JOB_PLURAL, **options
            )
        )
    )


def list_jobs(
    *,
    credentials: Credentials,
    namespace: str | None = None,
    page_size: int = 500,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
) -> list[dict[str, Any]]:
    """Return every Job in `namespace` (all namespaces when None), following pagination."""
    jobs: list[dict[str, Any]] = []
    continue_token: str | None = None
    while True:
        page = call_with_retries(
            partial(
                _fetch_job_page,
                credentials=credentials,
                namespace=namespace,
                page_size=page_size,
                continue_token=continue_token,
                timeout=timeout,
            ),
            attempts=attempts,
            base_delay=base_delay,
        )
        jobs.extend(page.get("items") or [])
        continue_token = (page.get("metadata") or {}).get("continue") or None
        if continue_token is None:
            return jobs


def delete_job(
    *,
    credentials: Credentials,
    namespace: str,
    name: str,
    timeout: float = DEFAULT_TIMEOUT,
) -> None:
    """Delete the Job (no retries); raises `NotFound` when it is already gone."""
    api = _custom_objects(credentials)
    invoke(
        lambda: api.delete_namespaced_custom_object(
            JOB_GROUP,
            JOB_VERSION,
            namespace,
            JOB_PLURAL,
            name,
            _request_timeout=request_timeout(timeout),
        )
    )
