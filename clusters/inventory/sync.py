"""Writing one polled snapshot of a cluster into the database, in bulk.

Per batch of nodes (the poll's page size): one SELECT of the stored rows, then at most
one INSERT for new nodes and one UPDATE for changed ones. Per poll: one SELECT of the
live rows to find vanished nodes (marked gone, never deleted) and one UPDATE of
`last_seen` for all unchanged rows. Unchanged rows only get `last_seen`, which the Node
audit trigger ignores (`exclude=["last_seen"]`), so an unchanged re-poll records no
audit event.
Runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from itertools import islice

from clusters.inventory.diff import NodeValues, PageDiff, diff_page, node_values, stored_node
from clusters.k8s import NodeInfo
from clusters.models import Cluster, ClusterJob, Node, StorageClass

_STORED_FIELDS = ("id", "name", "namespace", "labels", "gpu", "devices", "ready", "gone")
_UPDATED_FIELDS = ["namespace", "labels", "gpu", "devices", "ready", "gone", "last_seen"]


@dataclass(frozen=True)
class RemoteJob:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Snapshot:
    """Everything one poll read from a cluster, before anything is written."""

    nodes: list[NodeInfo]
    pages: int
    storage_classes: list[str]
    jobs: list[RemoteJob]


@dataclass
class SyncStats:
    nodes: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    gone: int = 0
    returned: int = 0
    labels_changed: int = 0
    storage_classes_changed: bool = False
    jobs: int = 0

    @property
    def node_set_or_labels_changed(self) -> bool:
        """What moves the cluster's generation: nodes appearing, vanishing or relabelled."""
        return bool(self.created or self.gone or self.returned or self.labels_changed)

    @property
    def changed(self) -> bool:
        return bool(
            self.node_set_or_labels_changed or self.updated or self.storage_classes_changed
        )


def _batches(items: Sequence[NodeValues], size: int) -> Iterator[list[NodeValues]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _unique_values(nodes: Sequence[NodeInfo], namespace: str) -> list[NodeValues]:
    """Row values of the polled nodes, dropping nameless and repeated entries."""
    seen: set[str] = set()
    values = []
    for info in nodes:
        if info.name and info.name not in seen:
            seen.add(info.name)
            values.append(node_values(info, namespace=namespace))
    return values


def _apply_diff(cluster: Cluster, diff: PageDiff, now: datetime) -> None:
    if diff.created:
        Node.objects.bulk_create(
            [Node(cluster=cluster, last_seen=now, **asdict(v)) for v in diff.created]
        )
    if diff.changed:
        Node.objects.bulk_update(
            [Node(id=node_id, last_seen=now, **asdict(v)) for node_id, v in diff.changed],
            _UPDATED_FIELDS,
        )


def _mark_gone(cluster: Cluster, seen: set[str], now: datetime) -> int:
    """Mark the cluster's nodes missing from this poll as gone; returns how many."""
    live = Node.objects.filter(cluster=cluster, gone=False).exclude(last_seen=now)
    vanished = [node_id for node_id, name in live.values_list("id", "name") if name not in seen]
    if not vanished:
        return 0
    return Node.objects.filter(id__in=vanished).update(gone=True)


def _stamp_seen(cluster: Cluster, now: datetime) -> None:
    """One UPDATE of `last_seen` for the unchanged nodes (new and changed ones have it).

    Only `last_seen` changes, which the Node audit trigger ignores: no audit event.
    """
    Node.objects.filter(cluster=cluster, gone=False).exclude(last_seen=now).update(last_seen=now)


def sync_nodes(
    *, cluster: Cluster, nodes: Sequence[NodeInfo], now: datetime, batch_size: int
) -> SyncStats:
    """Bring the cluster's node rows in line with `nodes`; the missing ones become gone."""
    stats = SyncStats()
    values = _unique_values(nodes, cluster.namespace)
    for batch in _batches(values, batch_size):
        rows = Node.objects.filter(cluster=cluster, name__in=[v.name for v in batch])
        stored = {
            row.values.name: row for row in map(stored_node, rows.values_list(*_STORED_FIELDS))
        }
        diff = diff_page(batch, stored)
        _apply_diff(cluster, diff, now)
        stats.created += len(diff.created)
        stats.updated += len(diff.changed)
        stats.unchanged += len(diff.unchanged_ids)
        stats.labels_changed += diff.labels_changed
        stats.returned += diff.returned
    stats.nodes = len(values)
    stats.gone = _mark_gone(cluster, {v.name for v in values}, now)
    _stamp_seen(cluster, now)
    return stats


def sync_storage_classes(*, cluster: Cluster, names: Sequence[str]) -> bool:
    """Create new and delete vanished storage classes; whether anything changed."""
    stored = set(StorageClass.objects.filter(cluster=cluster).values_list("name", flat=True))
    wanted = set(names)
    if wanted == stored:
        return False
    StorageClass.objects.bulk_create(
        [StorageClass(cluster=cluster, name=name) for name in sorted(wanted - stored)]
    )
    StorageClass.objects.filter(cluster=cluster, name__in=stored - wanted).delete()
    return True


def sync_jobs(*, cluster: Cluster, jobs: Sequence[RemoteJob]) -> int:
    """Record the Jobs present on the cluster and forget the ones that are gone."""
    if jobs:
        ClusterJob.objects.bulk_create(
            [
                ClusterJob(cluster=cluster, namespace=j.namespace, name=j.name, uid=j.uid)
                for j in jobs
            ],
            update_conflicts=True,
            unique_fields=["cluster", "namespace", "name"],
            update_fields=["uid", "seen_at"],
        )
    present = {(j.namespace, j.name) for j in jobs}
    stale = [
        row_id
        for row_id, namespace, name in ClusterJob.objects.filter(cluster=cluster).values_list(
            "id", "namespace", "name"
        )
        if (namespace, name) not in present
    ]
    if stale:
        ClusterJob.objects.filter(id__in=stale).delete()
    return len(present)


def apply_snapshot(*, cluster: Cluster, snapshot: Snapshot, now: datetime,
                   batch_size: int) -> SyncStats:
    """Write a whole snapshot (call inside a transaction holding the cluster's lease)."""
    stats = sync_nodes(cluster=cluster, nodes=snapshot.nodes, now=now, batch_size=batch_size)
    stats.storage_classes_changed = sync_storage_classes(
        cluster=cluster, names=snapshot.storage_classes
    )
    stats.jobs = sync_jobs(cluster=cluster, jobs=snapshot.jobs)
    return stats
