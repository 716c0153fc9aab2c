"""What the inventory keeps of a node, and how a polled node compares with its row (pure).

A poll looks at every node's `metadata.resourceVersion` first: the API server changes it
with every change of the node, so a node polled at the version stored on its row is
unchanged and needs no further look. (For a 10,000-node cluster, building and comparing
the values of every node cost more than everything else an unchanged re-poll does.)

The other nodes are compared value by value, so that a node whose version moved without
a change the inventory keeps (a status heartbeat, an annotation) is not written as
changed: its audit history records real changes only. Only its stored version moves.

Stored rows are read with their JSON columns as text and decoded here with `json.loads`:
that is several times cheaper than Django's per-value JSON field converters, and the
comparison stays exact (data, not text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from clusters.k8s import NodeInfo
from clusters.podrequests import CPU, MEMORY, PODS, scheduler_units
from clusters.quantities import QuantityError, nano_units, parse_count
from clusters.types import DEVICE_PREFIX, GPU_RESOURCE

# Fleets repeat a handful of quantities ("8", "4", ...): parse each text once.
_count = lru_cache(maxsize=4096)(parse_count)
_BIGINT = 2**63 - 1
_INTEGER = 2**31 - 1


def _column_count(quantity: str | None) -> int | None:
    """A count for an integer column: None when not reported, not a whole number, or beyond
    the column (a hostile node must not fail the poll's write)."""
    if quantity is None:
        return None
    count = _count(quantity)
    return count if count is not None and count <= _INTEGER else None


@lru_cache(maxsize=4096)
def _units(resource: str, quantity: str | None) -> int | None:
    """A reported cpu or memory quantity in scheduler units (millicores, bytes); None when not
    reported, not a quantity, or beyond what a column holds."""
    if quantity is None:
        return None
    try:
        amount = scheduler_units(resource, nano_units(quantity.strip()))
    except QuantityError:
        return None
    return amount if amount <= _BIGINT else None



class SeenRow(NamedTuple):
    """What tells an unchanged node of a stored row: its id, version and whether it is gone."""

    id: int
    resource_version: str
    gone: bool


SeenVersions = Mapping[str, SeenRow]
"""Every stored row of a cluster by node name: `(id, resource_version, gone)`.

Plain tuples, not named ones: a cluster has thousands of rows, and the garbage
collector stops tracking a plain tuple of atoms the first time it sees one, so holding
them adds no collection work.
"""


class NodeValues(NamedTuple):
    """The tracked fields of one node row (everything but ids and timestamps)."""

    name: str
    namespace: str
    labels: dict[str, str]
    gpu: int | None
    devices: dict[str, int | None]
    ready: bool
    gone: bool = False
    cpu_milli: int | None = None
    memory_bytes: int | None = None
    pods: int | None = None


class Polled(NamedTuple):
    """A polled node's row values and the resourceVersion they were read at."""

    values: NodeValues
    resource_version: str = ""


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
    resource_version: str = ""
    cpu_milli: int | None = None
    memory_bytes: int | None = None
    pods: int | None = None


@dataclass
class PageDiff:
    """How one page of polled nodes differs from the stored rows.

    `refreshed` holds `(id, resource_version)` of rows whose values are unchanged but whose
    node was polled at another version: only the stored version is to be written.
    """

    created: list[Polled] = field(default_factory=list)
    changed: list[tuple[int, Polled]] = field(default_factory=list)
    unchanged_ids: list[int] = field(default_factory=list)
    refreshed: list[tuple[int, str]] = field(default_factory=list)
    labels_changed: int = 0
    returned: int = 0


def node_values(info: NodeInfo, *, namespace: str) -> NodeValues:
    """The row values for a polled node: GPUs None when not reported, rlinf.io/* as counts,
    cpu in millicores, memory in bytes, pods as a count (None when not reported)."""
    allocatable = info.allocatable
    return NodeValues(
        name=info.name,
        namespace=namespace,
        labels=info.labels,
        gpu=_column_count(allocatable.get(GPU_RESOURCE)),
        devices={k: _count(v) for k, v in allocatable.items() if k.startswith(DEVICE_PREFIX)},
        ready=info.ready,
        cpu_milli=_units(CPU, allocatable.get(CPU)),
        memory_bytes=_units(MEMORY, allocatable.get(MEMORY)),
        pods=_column_count(allocatable.get(PODS)),
    )


def split_by_version(
    nodes: Iterable[NodeInfo], seen: SeenVersions
) -> tuple[list[int], list[NodeInfo]]:
    """Row ids of the nodes polled at their stored version, and the nodes to compare.

    A node counts as seen only when it reports a version, its row has that very version
    and the row is not marked gone (a returning node is always compared, and written).
    """
    unchanged: list[int] = []
    to_compare: list[NodeInfo] = []
    for node in nodes:
        row = seen.get(node.name)
        version = node.resource_version
        if row is not None and version and row.resource_version == version and not row.gone:
            unchanged.append(row.id)
        else:
            to_compare.append(node)
    return unchanged, to_compare


def stored_values(row: StoredNode) -> NodeValues:
    """Decode a stored row into comparable values."""
    return NodeValues(
        name=row.name,
        namespace=row.namespace,
        labels=json.loads(row.labels_text),
        gpu=row.gpu,
        devices=json.loads(row.devices_text),
        ready=row.ready,
        gone=row.gone,
        cpu_milli=row.cpu_milli,
        memory_bytes=row.memory_bytes,
        pods=row.pods,
    )


def is_unchanged(values: NodeValues, row: StoredNode) -> bool:
    """Whether writing `values` over `row` would change nothing."""
    return stored_values(row) == values


def diff_page(polled: Iterable[Polled], stored: Mapping[str, StoredNode]) -> PageDiff:
    """Split a page into new rows, rows to rewrite and rows only to mark as seen."""
    diff = PageDiff()
    for node in polled:
        values = node.values
        row = stored.get(values.name)
        if row is None:
            diff.created.append(node)
        elif is_unchanged(values, row):
            diff.unchanged_ids.append(row.id)
            if row.resource_version != node.resource_version:
                diff.refreshed.append((row.id, node.resource_version))
        else:
            diff.changed.append((row.id, node))
            diff.labels_changed += json.loads(row.labels_text) != values.labels
            diff.returned += row.gone
    return diff
