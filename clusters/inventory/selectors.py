"""Reads of the cluster registry and the global node inventory.

Clusters and nodes are not tenant-owned: every signed-in user reads them all (SPEC 12);
only platform admins change them (enforced by the views and the API).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.utils.translation import gettext as _

from clusters.labels import parse_selector_text, selector_problems, unparseable_problem
from clusters.models import Cluster, ClusterJob, Node
from clusters.types import DEVICE_PREFIX
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.tenancy.access import AnyUser

# Each named cluster's namespace, storage classes (by name) and the distinct rlinf.io/*
# resources its present nodes report (sorted), in one query.
_CLUSTER_INVENTORY_SQL = """
SELECT c.name, c.namespace,
    ARRAY(SELECT s.name FROM clusters_storageclass s WHERE s.cluster_id = c.id ORDER BY s.name),
    ARRAY(
        SELECT DISTINCT d.key
        FROM clusters_node n
        CROSS JOIN LATERAL jsonb_object_keys(
            CASE WHEN jsonb_typeof(n.devices) = 'object' THEN n.devices ELSE '{}'::jsonb END
        ) AS d(key)
        WHERE n.cluster_id = c.id AND NOT n.gone AND d.key LIKE %s
        ORDER BY d.key
    )
FROM clusters_cluster c
WHERE c.name = ANY(%s)
ORDER BY c.name
"""


@dataclass(frozen=True)
class ClusterInventory:
    """What a job's rules and the wizard read of one cluster besides its nodes: its namespace,
    its storage classes and the rlinf.io/* resources its present nodes report (both sorted
    as the database sorts them)."""

    name: str
    namespace: str
    storage_classes: tuple[str, ...]
    device_names: tuple[str, ...]


def cluster_inventory(clusters: Sequence[str]) -> dict[str, ClusterInventory]:
    """`ClusterInventory` of each named cluster that exists, by name (one query)."""
    if not clusters:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_CLUSTER_INVENTORY_SQL, [f"{DEVICE_PREFIX}%", list(clusters)])
        rows = cursor.fetchall()
    return {
        str(name): ClusterInventory(
            name=str(name), namespace=str(namespace),
            storage_classes=tuple(str(s) for s in storage),
            device_names=tuple(str(d) for d in devices),
        )
        for name, namespace, storage, devices in rows
    }


@dataclass(frozen=True)
class LabelFilter:
    """`key=value` conditions typed by a user, parsed; `problems` says what is wrong."""

    selector: dict[str, str] = field(default_factory=dict)
    problems: list[Finding] = field(default_factory=list)


def label_filter_from_text(text: str) -> LabelFilter:
    """Parse `k=v,k2=v2` (commas or newlines). Blank text filters nothing."""
    pairs, unparseable = parse_selector_text(text or "")
    problems = [unparseable_problem(part) for part in unparseable]
    if pairs:
        problems += selector_problems(pairs)
    if problems:
        return LabelFilter(problems=problems)
    return LabelFilter(selector=dict(pairs))


def _readable(user: AnyUser, queryset: QuerySet[Any]) -> QuerySet[Any]:
    return queryset if user.is_authenticated else queryset.none()


def cluster_list(*, user: AnyUser) -> QuerySet[Cluster]:
    """Every cluster with its node counts: `node_count` (not gone), `ready_count`, `gone_count`."""
    clusters = Cluster.objects.annotate(
        node_count=Count("nodes", filter=Q(nodes__gone=False)),
        ready_count=Count("nodes", filter=Q(nodes__gone=False, nodes__ready=True)),
        gone_count=Count("nodes", filter=Q(nodes__gone=True)),
    ).order_by("name")
    return _readable(user, clusters)


def cluster_get(*, user: AnyUser, name: str) -> Cluster:
    """One cluster by name (with its node counts), or NotFoundError."""
    cluster = cluster_list(user=user).filter(name=name).first()
    if cluster is None:
        raise NotFoundError(_("No cluster named %(name)s.") % {"name": name})
    return cluster


def cluster_jobs(*, user: AnyUser, cluster: Cluster) -> QuerySet[ClusterJob]:
    """The Jobs the last poll saw on the cluster."""
    return _readable(user, ClusterJob.objects.filter(cluster=cluster).order_by("namespace", "name"))


def node_list(
    *,
    user: AnyUser,
    cluster: str | None = None,
    selector: Mapping[str, str] | None = None,
    include_gone: bool = False,
) -> QuerySet[Node]:
    """The global inventory, optionally narrowed to one cluster and to label conditions.

    Label conditions use JSONB containment (`labels @> {...}`), answered by the GIN index.
    An unknown cluster name is an `ApplicationError` (400), not an empty list.
    """
    nodes = Node.objects.select_related("cluster").order_by("cluster__name", "name")
    if cluster:
        if not Cluster.objects.filter(name=cluster).exists():
            raise ApplicationError(_("No cluster named %(name)s.") % {"name": cluster})
        nodes = nodes.filter(cluster__name=cluster)
    if selector:
        nodes = nodes.filter(labels__contains=dict(selector))
    if not include_gone:
        nodes = nodes.filter(gone=False)
    return _readable(user, nodes)
