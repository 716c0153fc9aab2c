"""Writing one polled snapshot of a cluster into the database, in bulk.

Per poll: one SELECT of the cluster's stored rows (JSON as text, see `diff`), one UPDATE
marking vanished nodes gone (only when some vanished; they are never deleted), and one
UPDATE of `last_seen` for every unchanged node. Per batch of nodes (the poll's page size):
at most one INSERT for new nodes and one UPDATE for changed ones. Unchanged rows only get
`last_seen`, which the Node audit trigger ignores (`exclude=["last_seen"]`), so an
unchanged re-poll records no audit event. Runs inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from django.db import connection
from django.db.models import TextField
from django.db.models.functions import Cast

from clusters.inventory.diff import NodeValues, PageDiff, StoredNode, diff_page, node_values
from clusters.k8s import NodeInfo
from clusters.models import Cluster, ClusterJob, Node, StorageClass

_STORED_FIELDS = (
    "id", "name", "namespace", "labels_text", "gpu", "devices_text", "ready", "gone",
)
# One statement for a whole batch of changed nodes. (Django's bulk_update builds a CASE
# per field and row, which costs more than the rest of a re-poll for a few hundred rows.)
_UPDATE_CHANGED_SQL = """
UPDATE clusters_node AS n
SET namespace = v.namespace, labels = v.labels, gpu = v.gpu, devices = v.devices,
    ready = v.ready, gone = false, last_seen = %s
FROM jsonb_to_recordset(%s::jsonb) AS v(
    id bigint, namespace text, labels jsonb, gpu integer, devices jsonb, ready boolean
)
WHERE n.id = v.id
"""


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


def _stored_nodes(cluster: Cluster) -> dict[str, StoredNode]:
    rows = Node.objects.filter(cluster=cluster).annotate(
        labels_text=Cast("labels", TextField()), devices_text=Cast("devices", TextField())
    )
    return {row[1]: StoredNode(*row) for row in rows.order_by().values_list(*_STORED_FIELDS)}


def _apply_diff(cluster: Cluster, diff: PageDiff, now: datetime) -> None:
    if diff.created:
        Node.objects.bulk_create(
            [Node(cluster=cluster, last_seen=now, **v._asdict()) for v in diff.created]
        )
    if diff.changed:
        rows = [
            {"id": node_id, "namespace": v.namespace, "labels": v.labels, "gpu": v.gpu,
             "devices": v.devices, "ready": v.ready}
            for node_id, v in diff.changed
        ]
        with connection.cursor() as cursor:
            cursor.execute(_UPDATE_CHANGED_SQL, [now, json.dumps(rows)])


def _mark_gone(stored: dict[str, StoredNode], seen: set[str]) -> int:
    """Mark the stored nodes missing from this poll as gone; returns how many."""
    vanished = [row.id for name, row in stored.items() if not row.gone and name not in seen]
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
    stored = _stored_nodes(cluster)
    values = _unique_values(nodes, cluster.namespace)
    for batch in _batches(values, batch_size):
        diff = diff_page(batch, stored)
        _apply_diff(cluster, diff, now)
        stats.created += len(diff.created)
        stats.updated += len(diff.changed)
        stats.unchanged += len(diff.unchanged_ids)
        stats.labels_changed += diff.labels_changed
        stats.returned += diff.returned
    stats.nodes = len(values)
    stats.gone = _mark_gone(stored, {v.name for v in values})
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
