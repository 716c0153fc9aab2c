"""Reads of verifications: lists scoped to the reader, the automated result, and the views the
findings engine consumes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import Q, QuerySet

from clusters.matching import (
    FIRST_PAGE,
    NODES_PAGE_DEFAULT,
    NodeWindow,
    condition_clusters,
    match_selector,
)
from clusters.models import Cluster, Verification, VerificationState
from clusters.placement import MatchFacts, request_placement_findings
from clusters.types import (
    ConditionClusters,
    MatchedNode,
    MatchSummary,
    VerificationView,
    node_ref,
)
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.rawsql import jsonb
from rlark_site.foundation.tenancy.access import (
    access_team_object,
    require_platform_admin,
    scope_to_member_teams,
)
from rlark_site.foundation.tenancy.models import Team

SelectorKey = tuple[tuple[str, str], ...]
VerificationKey = tuple[str, SelectorKey]
AnyUser = AbstractBaseUser | AnonymousUser

# `state` filter values beyond the model's states: the queue's default shows what needs an
# admin's eye (pending requests and approvals made stale by drift); "all" shows everything.
OPEN = "open"
ALL = "all"
STATE_FILTERS = (OPEN, *VerificationState.values, ALL)


def selector_key_text(selector: Mapping[str, str]) -> str:
    """The canonical `Verification.selector_key`: sorted ``k=v`` joined by commas (label keys
    and values cannot contain ``,`` or ``=``, so this is unambiguous)."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _key_tuple(selector: Mapping[str, str] | SelectorKey) -> SelectorKey:
    items = selector.items() if isinstance(selector, Mapping) else selector
    return tuple(sorted((str(k), str(v)) for k, v in items))


def _with_relations(queryset: QuerySet[Verification]) -> QuerySet[Verification]:
    """With what pages show; without the snapshot's node lists (read a page at a time)."""
    return queryset.select_related("team", "cluster", "requested_by", "decided_by").defer(
        "matches", "match_signature"
    )


def _filtered(queryset: QuerySet[Verification], *, state: str | None, cluster: str | None,
              team: str | None) -> QuerySet[Verification]:
    if state == OPEN:
        queryset = queryset.filter(
            state__in=[VerificationState.PENDING, VerificationState.STALE]
        )
    elif state and state != ALL:
        queryset = queryset.filter(state=state)
    if cluster:
        queryset = queryset.filter(cluster__name=cluster)
    if team:
        queryset = queryset.filter(team__slug=team)
    return queryset


def verification_list(*, user: AnyUser, state: str | None = None, cluster: str | None = None,
                      team: str | None = None) -> QuerySet[Verification]:
    """Verifications the user may see (their teams'; every team's for platform admins), oldest
    first, filtered by state (a model state, "open" or "all"), cluster name and team slug."""
    visible = scope_to_member_teams(Verification.objects.all(), user, admins_see_all=True)
    return _with_relations(_filtered(visible, state=state, cluster=cluster, team=team)).order_by(
        "created_at", "id"
    )


# What the queue shows of a request's team, cluster and users: their names.
_QUEUE_NAMES = ("team__name", "cluster__name", "requested_by__username", "decided_by__username")


def verification_queue(*, user: AnyUser, state: str | None = OPEN, cluster: str | None = None,
                       team: str | None = None) -> QuerySet[Verification]:
    """The admin queue (oldest first); AdminOnlyError (403) for anyone but platform admins.
    Of a request's team, cluster and users only their names are read (a page is 25 rows of
    some 30 columns, not 75: a cluster's row holds its credentials, a user's row more)."""
    require_platform_admin(user)
    own = [f.name for f in Verification._meta.concrete_fields
           if f.name not in ("matches", "match_signature")]
    return verification_list(user=user, state=state, cluster=cluster, team=team).only(
        *own, *_QUEUE_NAMES)


def verification_list_for_team(*, team: Team) -> QuerySet[Verification]:
    """One team's requests, newest first (the team's own page)."""
    return _with_relations(Verification.objects.filter(team=team)).order_by("-created_at", "-id")


def verification_get(*, user: AnyUser, verification_id: int) -> Verification:
    """One verification; NotFoundError when missing or another team's (admins see all)."""
    return access_team_object(
        _with_relations(Verification.objects.all()), user, admins_see_all=True,
        id=verification_id,
    )


def _view(verification: Verification) -> VerificationView:
    return VerificationView(
        id=verification.pk,
        state=verification.state,
        node_signature=tuple((str(c), str(n)) for c, n in verification.match_signature),
        confirmed_gpu=verification.confirmed_gpu,
        confirmed_devices=tuple(sorted(
            (str(k), int(v)) for k, v in verification.confirmed_devices.items()
        )),
        confirmed_host_paths=tuple(str(p) for p in verification.confirmed_host_paths),
    )


def verification_views(
    team: Team, pairs: Iterable[tuple[str, Mapping[str, str] | SelectorKey]],
) -> dict[VerificationKey, VerificationView]:
    """For each (cluster name, selector) pair: the team's relevant verification, in one query.

    Relevant: the newest approved one if there is one (an approval stands until drift makes
    it stale), else the newest in any state. Keys are (cluster, sorted selector items).
    """
    return verification_views_by_team({team.pk: pairs}).get(team.pk, {})


def verification_views_by_team(
    wanted: Mapping[int, Iterable[tuple[str, Mapping[str, str] | SelectorKey]]],
) -> dict[int, dict[VerificationKey, VerificationView]]:
    """`verification_views` of several teams (by team id) in one query: a list of records of
    many teams (the admin queue's deployment parameters) costs one query, not one per team."""
    by_text: dict[tuple[int, str, str], VerificationKey] = {}
    for team_id, pairs in wanted.items():
        for cluster, selector in pairs:
            key = (cluster, _key_tuple(selector))
            by_text[(team_id, cluster, selector_key_text(dict(key[1])))] = key
    if not by_text:
        return {}
    condition = Q()
    for team_id, cluster, text in by_text:
        condition |= Q(team_id=team_id, cluster__name=cluster, selector_key=text)
    rows = (
        Verification.objects.filter(condition).select_related("cluster")
        .only("id", "team_id", "state", "selector_key", "match_signature", "confirmed_gpu",
              "confirmed_devices", "confirmed_host_paths", "cluster__name")
        .order_by("-created_at", "-id")
    )
    best: dict[tuple[int, VerificationKey], Verification] = {}
    for verification in rows:
        found = by_text.get((verification.team_id, verification.cluster.name,
                             verification.selector_key))
        if found is None:
            continue
        team_key = (verification.team_id, found)
        current = best.get(team_key)
        if current is None or (
            current.state != VerificationState.APPROVED
            and verification.state == VerificationState.APPROVED
        ):
            best[team_key] = verification
    views: dict[int, dict[VerificationKey, VerificationView]] = {}
    for (team_id, key), verification in best.items():
        views.setdefault(team_id, {})[key] = _view(verification)
    return views


def verification_view_for(team: Team, cluster: str,
                          selector: Mapping[str, str]) -> VerificationView | None:
    """`verification_views` for one combination."""
    return verification_views(team, [(cluster, selector)]).get((cluster, _key_tuple(selector)))


_PAGE_SQL = (
    "SELECT jsonb_path_query_array(matches, %s::jsonpath) FROM clusters_verification "
    "WHERE id = %s"
)
# The first stored matches outside a cluster, and the first NotReady ones.
_OUTSIDE_SQL = """
SELECT coalesce(jsonb_agg(e.node), '[]'::jsonb) FROM (
    SELECT node FROM clusters_verification v, jsonb_array_elements(v.matches) AS node
    WHERE v.id = %s AND node->>'cluster' <> %s LIMIT %s
) AS e
"""
_NOT_READY_SQL = """
SELECT coalesce(jsonb_agg(e.node), '[]'::jsonb) FROM (
    SELECT node FROM clusters_verification v, jsonb_array_elements(v.matches) AS node
    WHERE v.id = %s AND node->'ready' = 'false'::jsonb LIMIT %s
) AS e
"""


def snapshot_nodes(verification: Verification, window: NodeWindow = FIRST_PAGE
                   ) -> tuple[list[dict[str, Any]], int | None]:
    """One page of a verification's stored matches (read in the database: the snapshot may
    hold a whole fleet), and the offset of the next page (None on the last)."""
    end = window.offset + window.limit
    count = match_summary(verification).count
    first = _preview(verification, "first_nodes")
    if first is not None and (end <= len(first) or len(first) >= count):
        return first[window.offset:end], end if end < count else None
    last = end - 1
    with connection.cursor() as cursor:
        cursor.execute(_PAGE_SQL, [f"$[{window.offset} to {last}]", verification.pk])
        row = cursor.fetchone()
    nodes = _json(row[0]) if row else []
    return nodes, end if end < count else None


def _preview(verification: Verification, name: str) -> list[dict[str, Any]] | None:
    """The first nodes of a kind kept with the snapshot's summary (None for snapshots taken
    before previews were kept: those are read from the node list)."""
    value = verification.match_summary.get(name)
    return list(value) if isinstance(value, list) else None


def snapshot_nodes_outside(verification: Verification, *, limit: int) -> list[dict[str, Any]]:
    """The first `limit` stored matches outside the verification's own cluster."""
    first = _preview(verification, "first_outside")
    if first is not None and limit <= NODES_PAGE_DEFAULT:
        return [node_ref(_snapshot_node(n)) for n in first[:limit]]
    with connection.cursor() as cursor:
        cursor.execute(_OUTSIDE_SQL, [verification.pk, verification.cluster.name, limit])
        row = cursor.fetchone()
    return [node_ref(_snapshot_node(n)) for n in _json(row[0] if row else None)]


def snapshot_nodes_not_ready(verification: Verification, *, limit: int) -> list[dict[str, Any]]:
    """The first `limit` stored matches that were NotReady."""
    first = _preview(verification, "first_not_ready")
    if first is not None and limit <= NODES_PAGE_DEFAULT:
        return [node_ref(_snapshot_node(n)) for n in first[:limit]]
    with connection.cursor() as cursor:
        cursor.execute(_NOT_READY_SQL, [verification.pk, limit])
        row = cursor.fetchone()
    return [node_ref(_snapshot_node(n)) for n in _json(row[0] if row else None)]


def _json(value: Any) -> list[dict[str, Any]]:
    return list(jsonb(value) or [])


def match_summary(verification: Verification,
                  reached: ConditionClusters = ()) -> MatchSummary:
    """The stored summary of the verification's snapshot (with today's condition clusters)."""
    return MatchSummary.from_dict(verification.match_summary, condition_clusters=reached)


@dataclass(frozen=True)
class VerificationResult:
    """The automated result of a verification: the stored snapshot's summary judged against
    its cluster, plus which single conditions confine the matches today. It never holds the
    snapshot's node list: `foreign_nodes` are the first of those outside the cluster."""

    match: MatchSummary
    cluster: str
    foreign_nodes: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Finding] = field(default_factory=list)
    current_signature_differs: bool = False

    @property
    def foreign_count(self) -> int:
        return self.match.foreign_count(self.cluster)

    @property
    def confining_conditions(self) -> list[dict[str, str]]:
        return [{"key": k, "value": v} for k, v in self.match.confining_conditions(self.cluster)]

    @property
    def confined(self) -> bool:
        return self.match.count > 0 and not self.foreign_count

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.match.count,
            "per_cluster": [asdict(c) for c in self.match.per_cluster],
            "clusters": sorted(self.match.clusters),
            "confined": self.confined,
            "foreign_count": self.foreign_count,
            "foreign_nodes": self.foreign_nodes,
            "confining_conditions": self.confining_conditions,
            "gpu_max": self.match.gpu_max(),
            "devices_max": self.match.devices_max(),
            "current_inventory_differs": self.current_signature_differs,
            "checks": [check.as_dict() for check in self.checks],
        }


def _snapshot_node(row: Mapping[str, Any]) -> MatchedNode:
    devices = row.get("devices") or {}
    return MatchedNode(
        cluster=str(row["cluster"]), name=str(row["name"]), namespace=str(row["namespace"]),
        gpu=row.get("gpu"), ready=bool(row.get("ready", True)),
        devices=tuple(sorted((str(k), int(v)) for k, v in devices.items() if v is not None)),
    )


class SnapshotMatch:
    """A verification's stored snapshot as the placement rules read it (`MatchFacts`): counts
    and minima from its summary, node lists a page at a time from the database."""

    def __init__(self, verification: Verification, summary: MatchSummary,
                 foreign: list[dict[str, Any]]) -> None:
        self.verification = verification
        self.summary = summary
        self.foreign = foreign  # the first matches outside the verification's cluster

    @property
    def count(self) -> int:
        return self.summary.count

    def foreign_count(self, cluster: str) -> int:
        return self.summary.foreign_count(cluster)

    def confining_conditions(self, cluster: str) -> tuple[tuple[str, str], ...]:
        return self.summary.confining_conditions(cluster)

    def gpu_max(self) -> int | None:
        return self.summary.gpu_max()

    def devices_max(self) -> dict[str, int]:
        return self.summary.devices_max()

    def listed_nodes(self, limit: int) -> list[dict[str, Any]]:
        nodes, _next = snapshot_nodes(self.verification, NodeWindow(offset=0, limit=limit))
        return [node_ref(_snapshot_node(n)) for n in nodes]

    def listed_foreign_nodes(self, cluster: str, limit: int) -> list[dict[str, Any]]:
        return self.foreign[:limit]


def verification_checks(verification: Verification, match: MatchFacts) -> list[Finding]:
    """The placement rules (`clusters.placement`, the same code the job's findings engine runs)
    on a request's matches, with the asks and confirmations recorded on the request."""
    v = verification
    return request_placement_findings(
        match, cluster=v.cluster.name, for_header_role=v.for_header_role,
        gpu=v.requested_gpu or 0, devices=v.requested_devices,
        host_paths=v.requested_host_paths, confirmed_gpu=v.confirmed_gpu,
        confirmed_devices=v.confirmed_devices, confirmed_host_paths=v.confirmed_host_paths,
    )


def _snapshot_differs(verification: Verification, reached: ConditionClusters,
                      generations: Mapping[str, int] | None = None) -> bool:
    """Whether today's inventory matches other nodes than the snapshot. Cheap when no
    involved cluster's generation moved (a generation moves whenever a node appears,
    vanishes or is relabelled); otherwise the selector is matched again. `generations`:
    today's generation of every cluster, when the caller read them already."""
    stored = verification.inventory_generations
    candidates = frozenset.intersection(*(c for _, c in reached)) if reached else frozenset()
    if generations is None:
        today = dict(Cluster.objects.filter(name__in=stored).values_list("name", "generation"))
    else:
        today = {name: generations[name] for name in stored if name in generations}
    if candidates <= stored.keys() and today == stored:
        return False
    signature = match_selector(verification.selector).signature()
    return [list(p) for p in signature] != verification.match_signature


def verification_result(verification: Verification, *,
                        reached: ConditionClusters | None = None,
                        generations: Mapping[str, int] | None = None) -> VerificationResult:
    """The automated checks of a verification's snapshot, from its stored summary; reads no
    node list (at most `NODES_PAGE_DEFAULT` foreign nodes to show). `reached` (the
    selector's condition clusters) and `generations` (every cluster's) are read unless given
    (`verification_results` reads them once for a page of requests)."""
    if reached is None:
        reached = condition_clusters(verification.selector)
    summary = match_summary(verification, reached)
    cluster = verification.cluster.name
    foreign = (
        snapshot_nodes_outside(verification, limit=NODES_PAGE_DEFAULT)
        if summary.foreign_count(cluster) else []
    )
    checks = verification_checks(verification, SnapshotMatch(verification, summary, foreign))
    return VerificationResult(
        match=summary, cluster=cluster, foreign_nodes=foreign, checks=checks,
        current_signature_differs=_snapshot_differs(verification, reached, generations),
    )


@dataclass(frozen=True)
class ResultInputs:
    """What the automated results of some requests are computed from besides their rows:
    today's generation of every cluster, and each distinct selector's condition clusters."""

    generations: dict[str, int]
    reached: dict[SelectorKey, ConditionClusters]

    def reached_by(self, verification: Verification) -> ConditionClusters:
        return self.reached[_key_tuple(verification.selector)]


def cluster_generations() -> dict[str, int]:
    """Today's generation of every cluster, by cluster name in name order."""
    return dict(Cluster.objects.order_by("name").values_list("name", "generation"))


def result_inputs(verifications: Sequence[Verification],
                  generations: dict[str, int] | None = None) -> ResultInputs:
    """`ResultInputs` of some requests: the generations once (`cluster_generations`, unless
    given), each distinct selector's condition clusters once (a page of requests costs a few
    queries, not a few per request)."""
    reached: dict[SelectorKey, ConditionClusters] = {}
    for verification in verifications:
        key = _key_tuple(verification.selector)
        if key not in reached:
            reached[key] = condition_clusters(verification.selector)
    if generations is None:
        generations = cluster_generations()
    return ResultInputs(generations=generations, reached=reached)


def verification_results(verifications: Sequence[Verification]) -> list[VerificationResult]:
    """`verification_result` of each, from their `result_inputs`."""
    inputs = result_inputs(verifications)
    return [
        verification_result(v, reached=inputs.reached_by(v), generations=inputs.generations)
        for v in verifications
    ]
