"""Reads of the cluster registry and the global node inventory.

Clusters and nodes are not tenant-owned: every signed-in user reads them all (SPEC 12);
only platform admins change them (enforced by the views and the API).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from operator import itemgetter
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.utils.translation import gettext as _

from clusters.capacity import NodeCapacity, node_capacity, quantities
from clusters.kueue import (
    ADMISSION_KUEUE,
    ADMISSION_NONE,
    ClusterQueueView,
    KueueView,
    amount_of,
    format_amount,
)
from clusters.labels import parse_selector_text, selector_problems, unparseable_problem
from clusters.matching import DeviceParser, assembled_match
from clusters.models import Cluster, ClusterJob, ClusterState, KueueQueues, Node
from clusters.podrequests import format_units
from clusters.preflight import ClusterOccupancy, role_preflight
from clusters.types import DEVICE_PREFIX, GPU_RESOURCE, MatchedNode, SelectorMatch, selector_key
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.rawsql import jsonb
from rlark_site.foundation.tenancy.access import AnyUser, is_platform_admin, visible_teams

# Each named cluster's namespace, storage classes (by name) and the distinct rlinf.io/*
# resources its present nodes report (sorted), its admission with the team -> LocalQueue map
# and, for a Kueue cluster, the queues its last poll read; in one query.
_CLUSTER_INVENTORY_SQL = """
SELECT c.name, c.namespace, c.admission, c.kueue_queues,
    (SELECT jsonb_build_array(k.cluster_queues, k.local_queues, k.read_at, k.error)
     FROM clusters_kueuequeues k WHERE k.cluster_id = c.id AND c.admission = 'kueue'),
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
    admission: str = ADMISSION_NONE
    kueue_queues: tuple[tuple[str, str], ...] = ()  # (team slug, LocalQueue), sorted
    kueue: KueueView | None = None  # a Kueue cluster's queues as last read (None: never)


def _kueue_view(row: Any) -> KueueView | None:
    """The stored queues (`_CLUSTER_INVENTORY_SQL`'s jsonb array) as a view."""
    stored = jsonb(row)
    if not isinstance(stored, list) or len(stored) != 4:
        return None
    cluster_queues, local_queues, read_at, error = stored
    return KueueView.from_stored(cluster_queues, local_queues, as_of=str(read_at or ""),
                                 error=str(error or ""))


def _queue_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    queues = jsonb(value)
    if not isinstance(queues, dict):
        return ()
    return tuple(sorted((str(t), str(q)) for t, q in queues.items()))


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
            admission=str(admission), kueue_queues=_queue_pairs(queues),
            kueue=_kueue_view(kueue),
        )
        for name, namespace, admission, queues, kueue, storage, devices in rows
    }


# The allocatable and occupancy of every present node matching any of the selectors (one
# query for a whole job, however many roles and nodes: the GIN index answers each `@>`), with
# its cluster's occupancy state.
_MATCHED_CAPACITY_SQL = """
SELECT c.name, n.name, n.gpu, n.devices::text, n.cpu_milli, n.memory_bytes, n.pods,
    o.requested::text, c.state, c.occupancy_as_of
FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id
LEFT JOIN clusters_nodeoccupancy o ON o.node_id = n.id
WHERE NOT n.gone AND n.labels @> ANY(%s::jsonb[])
"""


@dataclass(frozen=True)
class MatchedCapacity:
    """What the pre-flight reads of the matched nodes: each one's capacity by (cluster, node),
    and each of their clusters' occupancy state."""

    nodes: Mapping[tuple[str, str], NodeCapacity]
    occupancy: Mapping[str, ClusterOccupancy]


def _allocatable_devices(text: str | None, cache: dict[str, dict[str, int | None]]
                         ) -> dict[str, int | None]:
    key = text or "{}"
    if key not in cache:
        value = json.loads(key)
        cache[key] = ({str(k): v if isinstance(v, int) else None for k, v in value.items()}
                      if isinstance(value, dict) else {})
    return cache[key]


def _capacity_rows(rows: Iterable[Sequence[Any]]) -> MatchedCapacity:
    """`MatchedCapacity` of `_MATCHED_CAPACITY_SQL`'s rows (or rows ending with the same
    columns)."""
    devices_seen: dict[str, dict[str, int | None]] = {}
    requested_seen: dict[str, dict[str, Any]] = {}
    nodes: dict[tuple[str, str], NodeCapacity] = {}
    occupancy: dict[str, ClusterOccupancy] = {}
    for cluster, name, gpu, devices, cpu, memory, pods, requested, state, as_of in rows:
        if (cluster, name) in nodes:
            continue
        if cluster not in occupancy:
            occupancy[cluster] = ClusterOccupancy(
                as_of=as_of.isoformat() if as_of else "",
                stale=state in (ClusterState.STALE, ClusterState.DISABLED))
        stored = None
        if requested is not None:
            stored = requested_seen.get(requested)
            if stored is None:
                loaded = json.loads(requested)
                stored = requested_seen[requested] = loaded if isinstance(loaded, dict) else {}
        nodes[(cluster, name)] = node_capacity(
            gpu=gpu, devices=_allocatable_devices(devices, devices_seen), cpu_milli=cpu,
            memory_bytes=memory, pods=pods, requested=stored)
    return MatchedCapacity(nodes=nodes, occupancy=occupancy)


def matched_capacity(selectors: Iterable[Mapping[str, str]]) -> MatchedCapacity:
    """The capacity of every node matching one of `selectors` (empty ones match nothing),
    in one query."""
    conditions = sorted({json.dumps(dict(sorted(s.items()))) for s in selectors if s})
    if not conditions:
        return MatchedCapacity(nodes={}, occupancy={})
    with connection.cursor() as cursor:
        cursor.execute(_MATCHED_CAPACITY_SQL, [conditions])
        rows = cursor.fetchall()
    return _capacity_rows(rows)


# What a job's check reads of the inventory, in one statement whatever its roles and nodes:
# for each of its selectors (1-based `position`) every present node carrying all its
# conditions, with the columns the matches and the pre-flight need (allocatable, what the
# occupancy row says is requested, the cluster's occupancy state); and, as rows of position 0,
# the clusters each single condition of a selector with two or more reaches (`ClusterLabel`:
# `node` is the condition's key, `namespace` its value). Unordered: Python sorts, in
# code-point order as `COLLATE "C"` does. The time is text (`_as_of`), not a timestamptz the
# driver would decode in Python on every row.
_MATCHES_CAPACITY_SQL = """
SELECT s.position, c.name AS cluster, n.name AS node, n.namespace, n.gpu, n.devices::text,
    n.ready, n.cpu_milli, n.memory_bytes, n.pods, o.requested::text, c.state,
    to_char(c.occupancy_as_of AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS as_of
FROM unnest(%(selectors)s::jsonb[]) WITH ORDINALITY AS s(selector, position)
JOIN clusters_node n ON n.labels @> s.selector AND NOT n.gone
JOIN clusters_cluster c ON c.id = n.cluster_id
LEFT JOIN clusters_nodeoccupancy o ON o.node_id = n.id
UNION ALL
SELECT 0, c.name, l.key, l.value, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest(%(keys)s::text[], %(values)s::text[]) AS cond(k, v)
JOIN clusters_clusterlabel l ON l.key = cond.k AND l.value = cond.v
JOIN clusters_cluster c ON c.id = l.cluster_id
"""


# (position, cluster, node): `clusters.matching`'s order of each selector's matches.
_POSITION_CLUSTER_NODE = itemgetter(0, 1, 2)


@dataclass(frozen=True)
class MatchesCapacity:
    """A job's matches (`CheckContext.matches`: by sorted selector pairs, each selector once)
    and the capacity of every node they hold (`CheckContext.capacity` / `.occupancy`)."""

    matches: Mapping[tuple[tuple[str, str], ...], SelectorMatch]
    capacity: MatchedCapacity


class _CapacityDecoder:
    """`NodeCapacity` of a node's columns, as `_capacity_rows` builds it; nodes with the same
    allocatable and requested (a fleet repeats a few shapes) share one, which the pre-flight
    (`clusters.preflight.role_preflight`) then judges once."""

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, ...], NodeCapacity] = {}
        self._devices: dict[str, dict[str, int | None]] = {}

    def __call__(self, gpu: int | None, devices: str | None, cpu: int | None,
                 memory: int | None, pods: int | None, requested: str | None) -> NodeCapacity:
        key = (gpu, devices, cpu, memory, pods, requested)
        found = self._seen.get(key)
        if found is None:
            stored = None
            if requested is not None:
                loaded = json.loads(requested)
                stored = loaded if isinstance(loaded, dict) else {}
            found = self._seen[key] = node_capacity(
                gpu=gpu, devices=_allocatable_devices(devices, self._devices), cpu_milli=cpu,
                memory_bytes=memory, pods=pods, requested=stored)
        return found


def _as_of(text: str | None) -> str:
    """`Cluster.occupancy_as_of` as `_capacity_rows` gives it (the aware time's isoformat, in
    UTC like the connection), from `_MATCHES_CAPACITY_SQL`'s UTC text; "" when never counted."""
    if not text:
        return ""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).isoformat()


def matches_capacity(selectors: Iterable[Mapping[str, str]]) -> MatchesCapacity:
    """`clusters.matching.match_many(selectors)` and `matched_capacity(selectors)`, the same
    answers, in one query (`_MATCHES_CAPACITY_SQL`): what a job's check reads of the
    inventory for its matches and its pre-flight. An empty selector matches nothing."""
    keys = list({selector_key(dict(s)): None for s in selectors})
    wanted = [k for k in keys if k]
    matches = {k: SelectorMatch(nodes=()) for k in keys if not k}
    if not wanted:
        return MatchesCapacity(matches=matches, capacity=MatchedCapacity(nodes={}, occupancy={}))
    labelled = sorted({cond for k in wanted if len(k) > 1 for cond in k})
    with connection.cursor() as cursor:
        cursor.execute(_MATCHES_CAPACITY_SQL, {
            "selectors": [json.dumps(dict(k)) for k in wanted],
            "keys": [k for k, _v in labelled], "values": [v for _k, v in labelled]})
        rows = sorted(cursor.fetchall(), key=_POSITION_CLUSTER_NODE)
    reached: dict[tuple[str, str], set[str]] = {}
    found: list[list[MatchedNode]] = [[] for _k in wanted]
    capacity: dict[tuple[str, str], NodeCapacity] = {}
    occupancy: dict[str, ClusterOccupancy] = {}
    matched_devices, decoded_capacity = DeviceParser(), _CapacityDecoder()
    for (position, cluster, node, namespace, gpu, devices, ready, cpu, memory, pods,
         requested, state, as_of) in rows:
        if position == 0:  # a condition (key `node`, value `namespace`) reaching `cluster`
            reached.setdefault((node, namespace), set()).add(cluster)
            continue
        found[position - 1].append(MatchedNode(cluster, node, namespace, gpu,
                                               matched_devices(devices), ready))
        if (cluster, node) not in capacity:
            capacity[(cluster, node)] = decoded_capacity(gpu, devices, cpu, memory, pods,
                                                         requested)
        if cluster not in occupancy:
            occupancy[cluster] = ClusterOccupancy(
                as_of=_as_of(as_of), stale=state in (ClusterState.STALE, ClusterState.DISABLED))
    conditions = tuple((cond, frozenset(clusters)) for cond, clusters in reached.items())
    for key, nodes in zip(wanted, found, strict=True):
        matches[key] = assembled_match(key, tuple(nodes), conditions)
    return MatchesCapacity(matches={k: matches[k] for k in keys},
                           capacity=MatchedCapacity(nodes=capacity, occupancy=occupancy))


def selector_preflight(selector: Mapping[str, str], needs: Mapping[str, int]) -> dict[str, Any]:
    """`POST selector-matches/` with `needs` (one worker's, scheduler units): how many of the
    selector's matched nodes hold one worker now (`fits_now`) and ever (`fits_ever`), with the
    pre-flight's verdict and the occupancy it read (one query)."""
    capacity = matched_capacity([selector])
    result = role_preflight(None, sorted(capacity.nodes), capacity.nodes, needs,
                            capacity.occupancy)
    return {"needs": quantities(needs), "fits_now": result.fits_now,
            "fits_ever": result.fits_ever, "verdict": result.verdict,
            "as_of": result.as_of or None, "message": str(result.message())}


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
    Each node comes with its cluster and its occupancy row (`node_capacity_of`).
    An unknown cluster name is an `ApplicationError` (400), not an empty list.
    """
    nodes = Node.objects.select_related("cluster", "occupancy").order_by("cluster__name", "name")
    if cluster:
        if not Cluster.objects.filter(name=cluster).exists():
            raise ApplicationError(_("No cluster named %(name)s.") % {"name": cluster})
        nodes = nodes.filter(cluster__name=cluster)
    if selector:
        nodes = nodes.filter(labels__contains=dict(selector))
    if not include_gone:
        nodes = nodes.filter(gone=False)
    return _readable(user, nodes)


# -- Free capacity (SPEC 15) --------------------------------------------------------------------


def node_capacity_of(node: Node) -> NodeCapacity:
    """A node's allocatable, requested and free (`clusters.capacity`), from its row, its
    occupancy row and its cluster (select both with the node, as `node_list` does). A gone
    node, a node without an occupancy row and a node of a cluster never counted have an
    unknown occupancy."""
    occupancy = getattr(node, "occupancy", None)  # no row: RelatedObjectDoesNotExist
    counted = (occupancy is not None and not node.gone
               and node.cluster.occupancy_as_of is not None)
    requested = occupancy.requested if counted and occupancy is not None else None
    return node_capacity(
        gpu=node.gpu, devices=node.devices if isinstance(node.devices, dict) else {},
        cpu_milli=node.cpu_milli, memory_bytes=node.memory_bytes, pods=node.pods,
        requested=requested if isinstance(requested, dict) else None)


# `NodeCapacity.free` of a GPU or device count in SQL, for sums over many nodes: allocatable
# less the stored `requested` entry, never below 0. The entry is a whole count as RLark writes
# it (a plain integer); anything else counts as nothing requested, as
# `clusters.capacity.requested_units` leaves it out. Format with `allocatable` and `requested`
# (SQL expressions: a bigint, the entry's text).
FREE_COUNT_SQL = ("GREATEST(0, {allocatable} - CASE WHEN {requested} ~ '^[0-9]{{1,18}}$' "
                  "THEN ({requested})::bigint ELSE 0 END)")
# Per cluster and GPU / rlinf.io/* resource: the allocatable of its present nodes, and the free
# amount (`NodeCapacity.free`: allocatable - requested, never below 0) of its ready nodes that
# the last good occupancy pass counted. One scan of the clusters' nodes.
_CLUSTER_CAPACITY_SQL = f"""
SELECT n.cluster_id, a.resource, sum(a.amount)::text,
    coalesce(sum({FREE_COUNT_SQL.format(allocatable="a.amount",
                                        requested="(o.requested ->> a.resource)")})
             FILTER (WHERE n.ready AND o.node_id IS NOT NULL), 0)::text
FROM clusters_node n
LEFT JOIN clusters_nodeoccupancy o ON o.node_id = n.id
CROSS JOIN LATERAL (
    SELECT %s::text, n.gpu::bigint WHERE n.gpu IS NOT NULL
    UNION ALL
    SELECT d.key, d.value::bigint FROM jsonb_each_text(
        CASE WHEN jsonb_typeof(n.devices) = 'object' THEN n.devices ELSE '{{}}'::jsonb END
    ) AS d(key, value)
    WHERE d.key LIKE %s AND d.value ~ '^[0-9]{{1,18}}$'
) AS a(resource, amount)
WHERE n.cluster_id = ANY(%s) AND NOT n.gone
GROUP BY n.cluster_id, a.resource
ORDER BY n.cluster_id, a.resource <> %s, a.resource
"""  # noqa: S608  (fixed fragments; values are parameters)


@dataclass(frozen=True)
class ResourceTotal:
    """One GPU or device resource of a cluster: the allocatable of its present nodes and the
    free amount of its ready ones, as quantity strings (`free` None: never counted)."""

    resource: str
    allocatable: str
    free: str | None

    def as_dict(self) -> dict[str, str | None]:
        return {"allocatable": self.allocatable, "free": self.free}


@dataclass(frozen=True)
class ClusterCapacity:
    """A cluster's GPU and device totals (GPUs first, then rlinf.io/* by name) and the time of
    the occupancy they use (`as_of` None: never counted, every `free` is None)."""

    as_of: datetime | None = None
    resources: tuple[ResourceTotal, ...] = ()

    @property
    def gpu(self) -> ResourceTotal | None:
        return next((r for r in self.resources if r.resource == GPU_RESOURCE), None)

    @property
    def devices(self) -> tuple[ResourceTotal, ...]:
        return tuple(r for r in self.resources if r.resource != GPU_RESOURCE)


def cluster_capacity(clusters: Sequence[Cluster]) -> dict[int, ClusterCapacity]:
    """`ClusterCapacity` of each of `clusters`, by id (one query, however many)."""
    if not clusters:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_CLUSTER_CAPACITY_SQL, [GPU_RESOURCE, f"{DEVICE_PREFIX}%",
                                               [c.id for c in clusters], GPU_RESOURCE])
        rows = cursor.fetchall()
    totals: dict[int, list[ResourceTotal]] = {}
    counted = {c.id for c in clusters if c.occupancy_as_of is not None}
    for cluster_id, resource, allocatable, free in rows:
        totals.setdefault(cluster_id, []).append(ResourceTotal(
            resource=str(resource), allocatable=format_units(str(resource), int(allocatable)),
            free=format_units(str(resource), int(free)) if cluster_id in counted else None))
    return {c.id: ClusterCapacity(as_of=c.occupancy_as_of, resources=tuple(totals.get(c.id, ())))
            for c in clusters}


# -- Kueue queues (SPEC 15) ----------------------------------------------------------------------


def _share_percent(used: Decimal | None, nominal: Decimal | None) -> float | None:
    if used is None or not nominal:
        return None
    return round(float(used / nominal * 100), 1)


def _resource_rows(view: KueueView, queue: ClusterQueueView) -> list[dict[str, Any]]:
    return [{**quota.as_dict(),
             "potential": format_amount(view.potential(queue, quota.flavor, quota.resource))}
            for quota in queue.quotas]


def _team_rows(view: KueueView, queues: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each team's LocalQueue(s) of that name, the ClusterQueue behind, and its share: what the
    team's admitted Workloads use of each (flavor, resource), against the nominal quota."""
    rows: list[dict[str, Any]] = []
    for team, name in sorted(queues.items()):
        found = [q for q in view.local_queues if q.name == name]
        if not found:
            rows.append({"team": team, "local_queue": name, "namespace": None,
                         "cluster_queue": None, "found": False, "pending_workloads": 0,
                         "admitted_workloads": 0, "usage": []})
        for local in found:
            cluster_queue = view.cluster_queue(local.cluster_queue)
            usage = []
            for flavor, resource, total in local.usage:
                quota = cluster_queue.quota(flavor, resource) if cluster_queue else None
                nominal = quota.amount("nominal") if quota else None
                usage.append({"flavor": flavor, "resource": resource, "used": total,
                              "nominal": quota.nominal if quota else None,
                              "share_percent": _share_percent(amount_of(total), nominal)})
            rows.append({"team": team, "local_queue": name, "namespace": local.namespace,
                         "cluster_queue": local.cluster_queue or None,
                         "found": cluster_queue is not None,
                         "pending_workloads": local.pending_workloads,
                         "admitted_workloads": local.admitted_workloads, "usage": usage})
    return rows


def cluster_queues_answer(*, user: AnyUser, cluster: Cluster,
                          team: str | None = None) -> dict[str, Any]:
    """A cluster's Kueue queues as its last poll read them: every ClusterQueue's quota per
    flavor and resource (nominal, borrowing limit, used, reserved, what it could ever hold),
    and the share of the teams the user may see (platform admins: every mapped team; others:
    their own teams; `team`: only that one, which must be one of them, else NotFoundError)."""
    queues = cluster.kueue_queues if isinstance(cluster.kueue_queues, dict) else {}
    if not is_platform_admin(user) or team is not None:
        visible = set(visible_teams(user).values_list("slug", flat=True))
        if team is not None and team not in visible:
            raise NotFoundError(_("Team not found."))
        wanted = {team} if team is not None else visible
        queues = {t: q for t, q in queues.items() if t in wanted}
    stored = KueueQueues.objects.filter(cluster=cluster).first()
    view = stored.view() if stored is not None else KueueView()
    kueue = cluster.admission == ADMISSION_KUEUE
    return {
        "cluster": cluster.name, "admission": cluster.admission,
        "as_of": view.as_of or None, "error": view.error,
        "cluster_queues": [{**q.as_dict(), "resources": _resource_rows(view, q)}
                           for q in view.cluster_queues] if kueue else [],
        "teams": _team_rows(view, queues) if kueue else [],
    }
