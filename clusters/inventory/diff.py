"""What the inventory keeps of a node, and how a polled node compares with its row (pure).

The poll compares in Python so that a node whose labels, allocatable and readiness did
not change is never written (its audit history records real changes only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from clusters.k8s import NodeInfo, parse_count

GPU_RESOURCE = "nvidia.com/gpu"
DEVICE_PREFIX = "rlinf.io/"

# Fleets repeat a handful of quantities ("8", "4", ...): parse each text once.
_count = lru_cache(maxsize=4096)(parse_count)


@dataclass(frozen=True)
class NodeValues:
    """The tracked fields of one node row (everything but ids and timestamps)."""

    name: str
    namespace: str
    labels: dict[str, str]
    gpu: int | None
    devices: dict[str, int | None]
    ready: bool
    gone: bool = False


@dataclass(frozen=True)
class StoredNode:
    """A node row as read back for comparison."""

    id: int
    values: NodeValues


@dataclass
class PageDiff:
    """How one page of polled nodes differs from the stored rows."""

    created: list[NodeValues] = field(default_factory=list)
    changed: list[tuple[int, NodeValues]] = field(default_factory=list)
    unchanged_ids: list[int] = field(default_factory=list)
    labels_changed: int = 0
    returned: int = 0


def node_values(info: NodeInfo, *, namespace: str) -> NodeValues:
    """The row values for a polled node: GPUs None when not reported, rlinf.io/* as counts."""
    gpu_quantity = info.allocatable.get(GPU_RESOURCE)
    return NodeValues(
        name=info.name,
        namespace=namespace,
        labels=dict(info.labels),
        gpu=_count(gpu_quantity) if gpu_quantity is not None else None,
        devices={
            key: _count(value)
            for key, value in sorted(info.allocatable.items())
            if key.startswith(DEVICE_PREFIX)
        },
        ready=info.ready,
    )


def stored_node(row: tuple[Any, ...]) -> StoredNode:
    """Build a `StoredNode` from `(id, name, namespace, labels, gpu, devices, ready, gone)`."""
    node_id, name, namespace, labels, gpu, devices, ready, gone = row
    return StoredNode(
        id=int(node_id),
        values=NodeValues(
            name=str(name),
            namespace=str(namespace),
            labels=dict(labels or {}),
            gpu=gpu,
            devices=dict(devices or {}),
            ready=bool(ready),
            gone=bool(gone),
        ),
    )


def diff_page(polled: Iterable[NodeValues], stored: Mapping[str, StoredNode]) -> PageDiff:
    """Split a page into new rows, rows to rewrite and rows only to mark as seen."""
    diff = PageDiff()
    for values in polled:
        existing = stored.get(values.name)
        if existing is None:
            diff.created.append(values)
        elif existing.values == values:
            diff.unchanged_ids.append(existing.id)
        else:
            diff.changed.append((existing.id, values))
            diff.labels_changed += existing.values.labels != values.labels
            diff.returned += existing.values.gone
    return diff
