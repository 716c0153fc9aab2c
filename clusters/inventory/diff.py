"""What the inventory keeps of a node, and how a polled node compares with its row (pure).

The poll compares in Python so that a node whose labels, allocatable and readiness did
not change is never written (its audit history records real changes only).

Stored rows are read with their JSON columns as text and decoded here with `json.loads`:
for a 10,000-node cluster that is several times cheaper than Django's per-value JSON
field converters, and the comparison stays exact (data, not text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from clusters.k8s import NodeInfo, parse_count

GPU_RESOURCE = "nvidia.com/gpu"
DEVICE_PREFIX = "rlinf.io/"

# Fleets repeat a handful of quantities ("8", "4", ...): parse each text once.
_count = lru_cache(maxsize=4096)(parse_count)


class NodeValues(NamedTuple):
    """The tracked fields of one node row (everything but ids and timestamps)."""

    name: str
    namespace: str
    labels: dict[str, str]
    gpu: int | None
    devices: dict[str, int | None]
    ready: bool
    gone: bool = False


class StoredNode(NamedTuple):
    """A node row as read back for comparison, its JSON columns as text."""

    id: int
    name: str
    namespace: str
    labels_text: str
    gpu: int | None
    devices_text: str
    ready: bool
    gone: bool


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
    allocatable = info.allocatable
    gpu_quantity = allocatable.get(GPU_RESOURCE)
    return NodeValues(
        info.name,
        namespace,
        info.labels,
        None if gpu_quantity is None else _count(gpu_quantity),
        {k: _count(v) for k, v in allocatable.items() if k.startswith(DEVICE_PREFIX)},
        info.ready,
    )


def stored_values(row: StoredNode) -> NodeValues:
    """Decode a stored row into comparable values."""
    return NodeValues(
        row.name, row.namespace, json.loads(row.labels_text), row.gpu,
        json.loads(row.devices_text), row.ready, row.gone,
    )


def is_unchanged(values: NodeValues, row: StoredNode) -> bool:
    """Whether writing `values` over `row` would change nothing."""
    return stored_values(row) == values


def diff_page(polled: Iterable[NodeValues], stored: Mapping[str, StoredNode]) -> PageDiff:
    """Split a page into new rows, rows to rewrite and rows only to mark as seen."""
    diff = PageDiff()
    for values in polled:
        row = stored.get(values.name)
        if row is None:
            diff.created.append(values)
        elif is_unchanged(values, row):
            diff.unchanged_ids.append(row.id)
        else:
            diff.changed.append((row.id, values))
            diff.labels_changed += json.loads(row.labels_text) != values.labels
            diff.returned += row.gone
    return diff
