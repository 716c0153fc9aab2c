"""Reads the wizard needs besides the draft itself: what a cluster offers, the team's records.

Every function answers in a fixed number of queries, however many nodes or records exist:
label pairs come counted from `ClusterLabel` (their free GPUs summed over the cluster's GPU
nodes in the same query), device names are aggregated in PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from clusters.inventory.selectors import FREE_COUNT_SQL, ClusterInventory, cluster_inventory
from clusters.models import Cluster, NetworkDomain
from jobs.models import DeploymentParameters, LaunchList, SSHKey
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "ClusterOffer",
    "LabelKey",
    "LabelValue",
    "TeamKey",
    "TeamRecords",
    "cluster_by_name",
    "cluster_choices",
    "cluster_offer",
    "network_domain_names",
    "team_keys",
    "team_records",
]

@dataclass(frozen=True)
class LabelValue:
    value: str
    count: int  # nodes of the cluster carrying key=value
    # free GPUs of those nodes (ready ones, as the last occupancy pass counted them); None
    # when none of them has GPUs or the cluster's occupancy was never counted
    free_gpu: int | None = None


@dataclass(frozen=True)
class LabelKey:
    key: str
    values: tuple[LabelValue, ...]


@dataclass(frozen=True)
class ClusterOffer:
    """What the form offers for one cluster: labels, `rlinf.io/*` devices, storage classes."""

    name: str
    labels: tuple[LabelKey, ...]
    device_names: tuple[str, ...]
    storage_classes: tuple[str, ...]

    def offers_pair(self, key: str, value: str) -> bool:
        return any(k.key == key and any(v.value == value for v in k.values) for k in self.labels)


EMPTY_OFFER = ClusterOffer(name="", labels=(), device_names=(), storage_classes=())


def _label_keys(pairs: Iterable[tuple[str, str, int, int | None]]) -> tuple[LabelKey, ...]:
    """(key, value, nodes, free GPUs) rows ordered by key and value, grouped by key."""
    grouped: dict[str, list[LabelValue]] = {}
    for key, value, count, free_gpu in pairs:
        # the SQL sums a numeric column: a Decimal, which ngettext will refuse as a count
        free = None if free_gpu is None else int(free_gpu)
        grouped.setdefault(key, []).append(LabelValue(value, count, free))
    return tuple(LabelKey(key, tuple(values)) for key, values in grouped.items())


# Per key=value pair of one cluster's present GPU nodes: the free GPUs of its ready nodes
# (`clusters.capacity.NodeCapacity.free`), NULL while the cluster's occupancy was never counted.
_FREE_GPUS_SQL = f"""
SELECT kv.key, kv.value, CASE WHEN bool_or(c.occupancy_as_of IS NOT NULL) THEN coalesce(sum(
    {FREE_COUNT_SQL.format(allocatable="n.gpu", requested="(o.requested ->> 'nvidia.com/gpu')")})
    FILTER (WHERE n.ready AND o.node_id IS NOT NULL), 0) END AS free
FROM clusters_cluster c
JOIN clusters_node n ON n.cluster_id = c.id AND NOT n.gone AND n.gpu > 0
LEFT JOIN clusters_nodeoccupancy o ON o.node_id = n.id
CROSS JOIN LATERAL jsonb_each_text(
    CASE WHEN jsonb_typeof(n.labels) = 'object' THEN n.labels ELSE '{{}}'::jsonb END
) AS kv(key, value)
WHERE c.name = %s
GROUP BY kv.key, kv.value
"""  # noqa: S608  (fixed fragments; values are parameters)
# The distinct key=value pairs of the cluster's present nodes, with how many carry each and
# their free GPUs.
_LABELS_SQL = f"""
WITH gpus AS ({_FREE_GPUS_SQL})
SELECT l.key, l.value, l.nodes, g.free
FROM clusters_clusterlabel l
JOIN clusters_cluster c ON c.id = l.cluster_id AND c.name = %s
LEFT JOIN gpus g ON g.key = l.key AND g.value = l.value
ORDER BY l.key, l.value
"""  # noqa: S608  (fixed fragments; values are parameters)


def _labels(cluster: str) -> tuple[LabelKey, ...]:
    with connection.cursor() as cursor:
        cursor.execute(_LABELS_SQL, [cluster, cluster])
        return _label_keys(cursor.fetchall())


# The enabled clusters by name, each once, and the label pairs of one of them (the role's).
_CHOICES_SQL = f"""
WITH gpus AS ({_FREE_GPUS_SQL})
SELECT c.name, l.key, l.value, l.nodes, g.free
FROM clusters_cluster c
LEFT JOIN clusters_clusterlabel l ON l.cluster_id = c.id AND c.name = %s
LEFT JOIN gpus g ON g.key = l.key AND g.value = l.value
WHERE c.enabled
ORDER BY c.name, l.key, l.value
"""  # noqa: S608  (fixed fragments; values are parameters)


@dataclass(frozen=True)
class ClusterChoices:
    names: list[str]  # the clusters a role can be placed in (enabled ones), by name
    labels: tuple[LabelKey, ...] | None  # the chosen cluster's labels; None: not enabled


def cluster_choices(cluster: str) -> ClusterChoices:
    """The clusters a role can be placed in (enabled ones), by name, and, when `cluster` is one
    of them, the labels its nodes carry (as `cluster_offer` reads them): one query."""
    with connection.cursor() as cursor:
        cursor.execute(_CHOICES_SQL, [cluster, cluster])
        rows = cursor.fetchall()
    names = list(dict.fromkeys(name for name, *_pair in rows))  # ordered by name, each once
    labels = _label_keys((key, value, count, free) for _name, key, value, count, free in rows
                         if key is not None)
    return ClusterChoices(names=names, labels=labels if cluster in names else None)


def cluster_offer(cluster: str, *, inventory: ClusterInventory | None = None,
                  labels: tuple[LabelKey, ...] | None = None) -> ClusterOffer:
    """The labels, devices and storage classes of `cluster`'s present nodes (empty if unknown).

    `inventory`: the cluster's devices and storage classes if the caller already read them
    (the evaluation of the draft did); `labels`: its labels if the caller read them
    (`cluster_choices`). What is not given is read here.
    """
    if not cluster:
        return EMPTY_OFFER
    if inventory is None or inventory.name != cluster:
        inventory = cluster_inventory([cluster]).get(cluster)
    return ClusterOffer(
        name=cluster,
        labels=_labels(cluster) if labels is None else labels,
        device_names=inventory.device_names if inventory else (),
        storage_classes=inventory.storage_classes if inventory else (),
    )


def cluster_by_name(name: str) -> Cluster | None:
    """A cluster (global, not tenant data) by name, for requests that need the row."""
    return Cluster.objects.filter(name=name).first() if name else None


def network_domain_names() -> list[str]:
    return list(NetworkDomain.objects.order_by("name").values_list("name", flat=True))


@dataclass(frozen=True)
class TeamRecords:
    """The team's SSH keys, launch lists and deployment parameters, for step 3's choices."""

    ssh_keys: tuple[tuple[str, str], ...]  # (name, fingerprint)
    launch_lists: tuple[tuple[int, str], ...]  # (id, title)
    deployment_parameters: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class TeamKey:
    name: str
    fingerprint: str
    public_key: str


def team_keys(team: Team) -> tuple[TeamKey, ...]:
    """The team's SSH keys by name, with what step 3 lists and what the engine resolves
    (one query: the step reads them once for both)."""
    rows = SSHKey.objects.filter(team=team).order_by("name").values_list(
        "name", "fingerprint", "public_key")
    return tuple(TeamKey(name, fingerprint, key) for name, fingerprint, key in rows)


def team_records(team: Team, *, keys: tuple[TeamKey, ...] | None = None) -> TeamRecords:
    """`keys`: the team's `team_keys` if the caller read them (else one more query)."""
    lists = LaunchList.objects.filter(team=team).order_by("-updated_at", "-id")
    params = DeploymentParameters.objects.filter(team=team).order_by("-updated_at", "-id")
    return TeamRecords(
        ssh_keys=tuple((k.name, k.fingerprint) for k in (team_keys(team) if keys is None
                                                          else keys)),
        launch_lists=tuple(lists.values_list("id", "title")),
        deployment_parameters=tuple(params.values_list("id", "title")),
    )
