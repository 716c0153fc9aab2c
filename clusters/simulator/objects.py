"""JSON shapes of the Kubernetes objects the simulator serves, and its `Status` errors."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clusters.simulator.fleet import NodeSpec
from clusters.simulator.scheduler import DEFAULT_NODE_RESOURCES

JOB_GROUP = "rlinf.io"
JOB_VERSION = "v1alpha1"
JOB_API_VERSION = f"{JOB_GROUP}/{JOB_VERSION}"
JOB_KIND = "Job"
JOB_PLURAL = "jobs"


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "AlreadyExists",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


class ApiError(Exception):
    """An API failure the server answers with a `Status` object."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def to_status(self) -> dict[str, Any]:
        return failure_status(
            code=self.code, reason=self.reason, message=self.message, details=self.details
        )


_clock_offset = [timedelta(0)]  # the simulator's clock against the real one (process-wide)


def clock_now() -> datetime:
    """The simulator's current time: the real time moved by the clock offset (0 unless a test
    set one through `/_control/clock`). Every time the simulator writes or compares (objects'
    timestamps, pod and Job start and end, log line stamps, step clocks) is read here."""
    return datetime.now(UTC) + _clock_offset[0]


def clock_offset() -> float:
    """The clock offset in seconds (negative: the simulator's clock is behind the real one)."""
    return _clock_offset[0].total_seconds()


def set_clock_offset(seconds: float) -> None:
    """Move the simulator's clock to the real time plus `seconds` from now on (every cluster
    of every simulator in this process). Moving it forward is time passing at once: what a
    test would otherwise sleep for."""
    _clock_offset[0] = timedelta(seconds=seconds)


def now_timestamp() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return clock_now().strftime("%Y-%m-%dT%H:%M:%SZ")


def stable_uid(*parts: str) -> str:
    """A UID that stays the same across simulator restarts for the same object."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "rlark-sim:" + "/".join(parts)))


def failure_status(
    *, code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        status["details"] = details
    return status


def success_status(*, details: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def job_details(name: str, *, uid: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "group": JOB_GROUP, "kind": JOB_PLURAL}
    if uid is not None:
        details["uid"] = uid
    return details


def node_object(
    spec: NodeSpec, *, cluster: str, resource_version: int, created: str
) -> dict[str, Any]:
    """A Node as `GET /api/v1/nodes` returns it."""
    resources = {**DEFAULT_NODE_RESOURCES, **spec.allocatable}
    ready = "True" if spec.ready else "False"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "uid": stable_uid(cluster, "node", spec.name),
            "resourceVersion": str(resource_version),
            "creationTimestamp": created,
            "labels": dict(spec.labels),
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady" if spec.ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status"
                    if spec.ready
                    else "simulated node is not ready",
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": created,
                }
            ],
        },
    }


def storage_class_object(
    name: str, *, cluster: str, resource_version: int, created: str
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": name,
            "uid": stable_uid(cluster, "storageclass", name),
            "resourceVersion": str(resource_version),
            "creationTimestamp": created,
        },
        "provisioner": "sim.rlinf.io/" + name,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


@dataclass(frozen=True)
class EncodedJSON:
    """A response document already encoded as JSON: the server sends `body` as it is."""

    body: bytes


def encode_object(document: dict[str, Any]) -> bytes:
    """An object's JSON text, exactly as the server writes a whole response (`json.dumps`)."""
    return json.dumps(document).encode()


def list_object(
    *,
    api_version: str,
    kind: str,
    items: list[dict[str, Any]],
    resource_version: int,
    continue_token: str | None,
    remaining: int,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": str(resource_version)}
    if continue_token is not None:
        metadata["continue"] = continue_token
        metadata["remainingItemCount"] = remaining
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "items": items}


def encoded_list(
    *,
    api_version: str,
    kind: str,
    items: list[bytes] | None = None,
    joined: bytes | None = None,
    resource_version: int,
    continue_token: str | None,
    remaining: int,
) -> EncodedJSON:
    """A list response assembled from items encoded beforehand by `encode_object` (`items`,
    or their text `joined` already, `b", "` between them).

    The bytes are those of `encode_object(list_object(...))` over the decoded items: the
    envelope is encoded without items (they come last) and the items are spliced in.
    """
    if joined is None:
        joined = b", ".join(items or ())
    envelope = list_object(
        api_version=api_version,
        kind=kind,
        items=[],
        resource_version=resource_version,
        continue_token=continue_token,
        remaining=remaining,
    )
    del envelope["items"]
    head = encode_object(envelope)[:-1]
    return EncodedJSON(b"".join((head, b', "items": [', joined, b"]}")))
