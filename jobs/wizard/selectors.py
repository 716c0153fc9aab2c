"""Reads the wizard needs besides the draft itself: what a cluster offers, the team's records.

Every function answers in a fixed number of queries, however many nodes or records exist:
label pairs come counted from `ClusterLabel`, device names are aggregated in PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from clusters.inventory.selectors import ClusterInventory, cluster_inventory
from clusters.models import Cluster, ClusterLabel, NetworkDomain
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


def _label_keys(pairs: Iterable[tuple[str, str, int]]) -> tuple[LabelKey, ...]:
    """(key, value, nodes) rows ordered by key and value, grouped by key."""
    grouped: dict[str, list[LabelValue]] = {}
    for key, value, count in pairs:
        grouped.setdefault(key, []).append(LabelValue(value, count))
    return tuple(LabelKey(key, tuple(values)) for key, values in grouped.items())


def _labels(cluster: str) -> tuple[LabelKey, ...]:
    # The distinct key=value pairs of the cluster's present nodes, with how many carry each.
    pairs = ClusterLabel.objects.filter(cluster__name=cluster).order_by("key", "value")
    return _label_keys(pairs.values_list("key", "value", "nodes"))


# The enabled clusters by name, each once, and the label pairs of one of them (the role's).
_CHOICES_SQL = """
SELECT c.name, l.key, l.value, l.nodes
FROM clusters_cluster c
LEFT JOIN clusters_clusterlabel l ON l.cluster_id = c.id AND c.name = %s
WHERE c.enabled
ORDER BY c.name, l.key, l.value
"""


@dataclass(frozen=True)
class ClusterChoices:
    names: list[str]  # the clusters a role can be placed in (enabled ones), by name
    labels: tuple[LabelKey, ...] | None  # the chosen cluster's labels; None: not enabled


def cluster_choices(cluster: str) -> ClusterChoices:
    """The clusters a role can be placed in (enabled ones), by name, and, when `cluster` is one
    of them, the labels its nodes carry (as `cluster_offer` reads them): one query."""
    with connection.cursor() as cursor:
        cursor.execute(_CHOICES_SQL, [cluster])
        rows = cursor.fetchall()
    names = list(dict.fromkeys(name for name, *_pair in rows))  # ordered by name, each once
    labels = _label_keys((key, value, count) for _name, key, value, count in rows
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
