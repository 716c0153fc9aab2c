"""Writing one polled snapshot of a cluster into the database, in bulk.

Per poll: one SELECT of every stored row's name, id, resourceVersion and gone flag (no
JSON), one SELECT of the full rows of the nodes polled at another version (only when
there are such nodes, see `diff`), and one UPDATE marking vanished nodes gone (only when
some vanished; they are never deleted). Per batch of compared nodes (the poll's page
size): at most one INSERT for new nodes, one UPDATE for changed ones and one UPDATE of the
stored version of nodes whose values did not change (which the Node audit trigger
ignores). Unchanged nodes are not written at all: a present node was seen by its
cluster's last successful poll, so only a vanishing node has its `last_seen` stored. An
unchanged re-poll writes no node row and records no audit event. Runs inside the caller's
transaction.
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

from clusters.inventory.diff import (
    PageDiff,
    Polled,
    SeenRow,
    SeenVersions,
    StoredNode,
    diff_page,
    node_values,
    split_by_version,
)
from clusters.inventory.occupancy import StoredOccupancy, Tally, occupancy_changes
from clusters.k8s import NodeInfo
from clusters.models import Cluster, ClusterJob, Node, StorageClass

_STORED_FIELDS = (
    "id", "name", "namespace", "labels_text", "gpu", "devices_text", "ready", "gone",
    "resource_version", "cpu_milli", "memory_bytes", "pods",
)
_SEEN_SQL = "SELECT name, id, resource_version, gone FROM clusters_node WHERE cluster_id = %s"
# One statement for a whole batch of changed nodes. (Django's bulk_update builds a CASE
# per field and row, which costs more than the rest of a re-poll for a few hundred rows.)
_UPDATE_CHANGED_SQL = """
UPDATE clusters_node AS n
SET namespace = v.namespace, labels = v.labels, gpu = v.gpu, devices = v.devices,
    ready = v.ready, gone = false, last_seen = NULL, resource_version = v.resource_version,
    cpu_milli = v.cpu_milli, memory_bytes = v.memory_bytes, pods = v.pods
FROM jsonb_to_recordset(%s::jsonb) AS v(
    id bigint, namespace text, labels jsonb, gpu integer, devices jsonb, ready boolean,
    resource_version text, cpu_milli bigint, memory_bytes bigint, pods integer
)
WHERE n.id = v.id
"""
_UPDATE_VERSIONS_SQL = """
UPDATE clusters_node AS n
SET resource_version = v.resource_version
FROM jsonb_to_recordset(%s::jsonb) AS v(id bigint, resource_version text)
WHERE n.id = v.id
"""


_STORED_OCCUPANCY_SQL = """
SELECT n.name, n.id, o.requested::text FROM clusters_node n
LEFT JOIN clusters_nodeoccupancy o ON o.node_id = n.id
WHERE n.cluster_id = %s AND NOT n.gone
"""
# One statement per batch of changed rows: new rows inserted, existing ones replaced.
_WRITE_OCCUPANCY_SQL = """
INSERT INTO clusters_nodeoccupancy (node_id, cluster_id, requested, changed_at)
SELECT v.node_id, %s, v.requested, %s
FROM jsonb_to_recordset(%s::jsonb) AS v(node_id bigint, requested jsonb)
ON CONFLICT (node_id) DO UPDATE SET requested = EXCLUDED.requested,
    changed_at = EXCLUDED.changed_at
"""


@dataclass(frozen=True)
class RemoteJob:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Snapshot:
    """Everything one poll read from a cluster, before anything is written.

    `occupancy` is the pod listing added up per node, None when it could not be used
    (`occupancy_problem` says why; the stored occupancy is kept then).
    """

    nodes: list[NodeInfo]
    pages: int
    storage_classes: list[str]
    jobs: list[RemoteJob]
    occupancy: Tally | None = None
    occupancy_problem: str = ""
    pod_pages: int = 0


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
    pods: int = 0  # pods the occupancy counted (0 when the listing was not used)
    occupancy_written: int = 0  # node occupancy rows written

    @property
    def node_set_or_labels_changed(self) -> bool:
        """What moves the cluster's generation: nodes appearing, vanishing or relabelled."""
        return bool(self.created or self.gone or self.returned or self.labels_changed)

    @property
    def changed(self) -> bool:
        return bool(
            self.node_set_or_labels_changed or self.updated or self.storage_classes_changed
        )


def _batches(items: Sequence[Polled], size: int) -> Iterator[list[Polled]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _unique_nodes(nodes: Sequence[NodeInfo]) -> dict[str, NodeInfo]:
    """The polled nodes by name, dropping nameless entries and repeats (the first stays)."""
    unique: dict[str, NodeInfo] = {}
    for node in nodes:
        if node.name:
            unique.setdefault(node.name, node)
    return unique


def _seen_versions(cluster: Cluster) -> SeenVersions:
    """Every stored row of the cluster, reduced to what tells an unchanged node."""
    with connection.cursor() as cursor:
        cursor.execute(_SEEN_SQL, [cluster.id])
        rows = cursor.fetchall()  # at once: iterating the cursor costs a call per row
    return {
        name: SeenRow(id=row_id, resource_version=version, gone=gone)
        for name, row_id, version, gone in rows
    }


def _stored_nodes(ids: list[int]) -> dict[str, StoredNode]:
    """The full rows with these ids, by node name."""
    if not ids:
        return {}
    rows = Node.objects.filter(id__in=ids).annotate(
        labels_text=Cast("labels", TextField()), devices_text=Cast("devices", TextField())
    )
    stored = (StoredNode(**row) for row in rows.order_by().values(*_STORED_FIELDS))
    return {node.name: node for node in stored}


def _apply_diff(cluster: Cluster, diff: PageDiff) -> None:
    if diff.created:
        Node.objects.bulk_create(
            [
                Node(cluster=cluster, resource_version=version, **v._asdict())
                for v, version in diff.created
            ]
        )
    if diff.changed:
        rows = [
            {"id": node_id, "namespace": v.namespace, "labels": v.labels, "gpu": v.gpu,
             "devices": v.devices, "ready": v.ready, "resource_version": version,
             "cpu_milli": v.cpu_milli, "memory_bytes": v.memory_bytes, "pods": v.pods}
            for node_id, (v, version) in diff.changed
        ]
        with connection.cursor() as cursor:
            cursor.execute(_UPDATE_CHANGED_SQL, [json.dumps(rows)])
    if diff.refreshed:
        versions = [{"id": node_id, "resource_version": v} for node_id, v in diff.refreshed]
        with connection.cursor() as cursor:
            cursor.execute(_UPDATE_VERSIONS_SQL, [json.dumps(versions)])


def _mark_gone(cluster: Cluster, seen: SeenVersions, polled: dict[str, NodeInfo]) -> int:
    """Mark the stored nodes missing from this poll as gone; returns how many.

    Each keeps as `last_seen` the cluster's last success before this poll: the last time a
    poll listed it.
    """
    vanished = [row.id for name, row in seen.items() if not row.gone and name not in polled]
    if not vanished:
        return 0
    return Node.objects.filter(id__in=vanished).update(
        gone=True, last_seen=cluster.last_success_at
    )


def sync_nodes(*, cluster: Cluster, nodes: Sequence[NodeInfo], batch_size: int) -> SyncStats:
    """Bring the cluster's node rows in line with `nodes`; the missing ones become gone.

    Call before the cluster's `last_success_at` moves to this poll.
    """
    stats = SyncStats()
    seen = _seen_versions(cluster)
    polled = _unique_nodes(nodes)
    unchanged_ids, to_compare = split_by_version(polled.values(), seen)
    stored = _stored_nodes([seen[n.name].id for n in to_compare if n.name in seen])
    compared = [
        Polled(
            values=node_values(n, namespace=cluster.namespace),
            resource_version=n.resource_version,
        )
        for n in to_compare
    ]
    for batch in _batches(compared, batch_size):
        diff = diff_page(batch, stored)
        _apply_diff(cluster, diff)
        stats.created += len(diff.created)
        stats.updated += len(diff.changed)
        stats.unchanged += len(diff.unchanged_ids)
        stats.labels_changed += diff.labels_changed
        stats.returned += diff.returned
    stats.unchanged += len(unchanged_ids)
    stats.nodes = len(polled)
    stats.gone = _mark_gone(cluster, seen, polled)
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


def write_occupancy(*, cluster: Cluster, counted: Tally, now: datetime, batch_size: int) -> int:
    """Write the occupancy rows of the cluster's present nodes that differ from `counted`
    (one SELECT, then one statement per batch of changed rows); how many were written. An
    unchanged pass writes nothing. Call after the nodes are synced (new nodes have ids)."""
    with connection.cursor() as cursor:
        cursor.execute(_STORED_OCCUPANCY_SQL, [cluster.id])
        rows = cursor.fetchall()
    stored = {name: StoredOccupancy(node_id, text) for name, node_id, text in rows}
    changes = occupancy_changes(counted, stored)
    for start in range(0, len(changes), batch_size):
        batch = [{"node_id": node_id, "requested": requested}
                 for node_id, requested in changes[start:start + batch_size]]
        with connection.cursor() as cursor:
            cursor.execute(_WRITE_OCCUPANCY_SQL, [cluster.id, now, json.dumps(batch)])
    return len(changes)


def apply_snapshot(*, cluster: Cluster, snapshot: Snapshot, batch_size: int) -> SyncStats:
    """Write a whole snapshot (call inside a transaction holding the cluster's lease, before
    its `last_success_at` moves to this poll)."""
    stats = sync_nodes(cluster=cluster, nodes=snapshot.nodes, batch_size=batch_size)
    stats.storage_classes_changed = sync_storage_classes(
        cluster=cluster, names=snapshot.storage_classes
    )
    stats.jobs = sync_jobs(cluster=cluster, jobs=snapshot.jobs)
    return stats
