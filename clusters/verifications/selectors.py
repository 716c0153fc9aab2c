"""Reads of verifications: lists scoped to the reader, the automated result, and the views the
findings engine consumes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from clusters.matching import match_selector, node_ref
from clusters.models import Verification, VerificationState
from clusters.types import MatchedNode, SelectorMatch, VerificationView
from rlark_site.exceptions import NotFoundError
from rlark_site.tenancy.access import access_team_object, is_platform_admin, scope_to_member_teams
from rlark_site.tenancy.models import Team

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
    return queryset.select_related("team", "cluster", "requested_by", "decided_by")


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


def verification_queue(*, user: AnyUser, state: str | None = OPEN, cluster: str | None = None,
                       team: str | None = None) -> QuerySet[Verification]:
    """The admin queue (oldest first); NotFoundError for anyone but platform admins."""
    if not is_platform_admin(user):
        raise NotFoundError(_("Page not found."))
    return verification_list(user=user, state=state, cluster=cluster, team=team)


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
    wanted = {(cluster, _key_tuple(selector)) for cluster, selector in pairs}
    if not wanted:
        return {}
    by_text = {(cluster, selector_key_text(dict(key))): (cluster, key) for cluster, key in wanted}
    condition = Q()
    for cluster, text in by_text:
        condition |= Q(cluster__name=cluster, selector_key=text)
    rows = (
        Verification.objects.filter(condition, team=team)
        .select_related("cluster").order_by("-created_at", "-id")
    )
    best: dict[VerificationKey, Verification] = {}
    for verification in rows:
        key = by_text[(verification.cluster.name, verification.selector_key)]
        current = best.get(key)
        if current is None or (
            current.state != VerificationState.APPROVED
            and verification.state == VerificationState.APPROVED
        ):
            best[key] = verification
    return {key: _view(v) for key, v in best.items()}


def verification_view_for(team: Team, cluster: str,
                          selector: Mapping[str, str]) -> VerificationView | None:
    """`verification_views` for one combination."""
    return verification_views(team, [(cluster, selector)]).get((cluster, _key_tuple(selector)))


@dataclass(frozen=True)
class VerificationResult:
    """The automated result of a verification: the stored snapshot judged against its
    cluster, plus which single conditions confine the matches today."""

    match: SelectorMatch
    cluster: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    current_signature_differs: bool = False

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return [{**node_ref(n), "ready": n.ready, "gpu": n.gpu, "devices": dict(n.devices)}
                for n in self.match.nodes]

    @property
    def foreign_nodes(self) -> list[dict[str, Any]]:
        return [node_ref(n) for n in self.match.foreign_nodes(self.cluster)]

    @property
    def confining_conditions(self) -> list[dict[str, str]]:
        return [{"key": k, "value": v} for k, v in self.match.confining_conditions(self.cluster)]

    @property
    def confined(self) -> bool:
        return self.match.count > 0 and not self.match.foreign_nodes(self.cluster)

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.match.count,
            "clusters": sorted(self.match.clusters),
            "confined": self.confined,
            "foreign_nodes": self.foreign_nodes,
            "confining_conditions": self.confining_conditions,
            "gpu_max": self.match.gpu_max(),
            "devices_max": self.match.devices_max(),
            "current_inventory_differs": self.current_signature_differs,
            "checks": self.checks,
        }


def _snapshot_node(row: Mapping[str, Any]) -> MatchedNode:
    devices = row.get("devices") or {}
    return MatchedNode(
        cluster=str(row["cluster"]), name=str(row["name"]), namespace=str(row["namespace"]),
        gpu=row.get("gpu"), ready=bool(row.get("ready", True)),
        devices=tuple(sorted((str(k), int(v)) for k, v in devices.items() if v is not None)),
    )


def _check(code: str, severity: str, field_name: str, message: str,
           **detail: Any) -> dict[str, Any]:
    return {"code": code, "severity": severity, "role": None, "field": field_name,
            "message": message, "detail": detail}


def _placement_checks(v: Verification, match: SelectorMatch) -> list[dict[str, Any]]:
    cluster = v.cluster.name
    checks = []
    if match.count == 0:
        checks.append(_check("selector.no_match", "error", "selector",
                             _("The selector matches no node.")))
    foreign = match.foreign_nodes(cluster)
    if foreign:
        checks.append(_check(
            "selector.cross_cluster", "error", "selector",
            _("%(count)d matched nodes lie outside cluster %(cluster)s.")
            % {"count": len(foreign), "cluster": cluster},
            nodes=[node_ref(n) for n in foreign],
        ))
    if match.count and not match.confining_conditions(cluster):
        checks.append(_check(
            "selector.no_cluster_label", "error", "selector",
            _("No single condition on its own matches only nodes of %(cluster)s.")
            % {"cluster": cluster},
        ))
    if v.for_header_role and match.count != 1:
        checks.append(_check(
            "header.replicas", "error", "for_header_role",
            _("A Header role needs exactly 1 matched node; this selector matches %(count)d.")
            % {"count": match.count},
            count=match.count,
        ))
    return checks


def _gpu_checks(v: Verification, match: SelectorMatch) -> list[dict[str, Any]]:
    wanted = v.requested_gpu or 0
    gpu_max = match.gpu_max()
    if wanted == 0 or match.count == 0:
        return []
    if gpu_max:
        if wanted > gpu_max:
            return [_check(
                "gpu.exceeds_capacity", "error", "requested_gpu",
                _("%(gpus)d GPUs per worker is more than the %(max)d every matched node has.")
                % {"gpus": wanted, "max": gpu_max}, requested=wanted, max=gpu_max,
            )]
        return []
    if v.confirmed_gpu is not None and v.confirmed_gpu >= wanted:
        return []
    return [_check(
        "gpu.unconfirmed", "warning", "requested_gpu",
        _("The matched nodes report no GPU capacity; %(gpus)d GPUs per worker needs an admin's "
          "confirmation.") % {"gpus": wanted}, requested=wanted, max=gpu_max,
    )]


def _device_checks(v: Verification, match: SelectorMatch) -> list[dict[str, Any]]:
    maxima = match.devices_max()
    checks = []
    for name, count in sorted(v.requested_devices.items()):
        limit = maxima.get(name, 0)
        if count > limit and v.confirmed_devices.get(name, 0) < count:
            checks.append(_check(
                "device.exceeds_capacity", "warning", f"requested_devices.{name}",
                _("%(count)d × %(name)s per worker is more than the %(max)d every matched node "
                  "has; it needs an admin's confirmation.")
                % {"count": count, "name": name, "max": limit},
                name=name, requested=count, max=limit,
            ))
    return checks


def _host_path_checks(v: Verification) -> list[dict[str, Any]]:
    confirmed = set(v.confirmed_host_paths)
    return [
        _check(
            "mount.host_path.unconfirmed", "warning", "requested_host_paths",
            _("An admin has not confirmed that %(path)s exists on every matched node.")
            % {"path": path}, host_path=path,
        )
        for path in v.requested_host_paths if path not in confirmed
    ]


def verification_result(verification: Verification) -> VerificationResult:
    """The automated checks of a verification's snapshot (one live match for confinement)."""
    today = match_selector(verification.selector)
    snapshot = SelectorMatch(
        nodes=tuple(_snapshot_node(row) for row in verification.matches),
        condition_clusters=today.condition_clusters,
    )
    checks = (
        _placement_checks(verification, snapshot) + _gpu_checks(verification, snapshot)
        + _device_checks(verification, snapshot) + _host_path_checks(verification)
    )
    differs = [list(p) for p in today.signature()] != verification.match_signature
    return VerificationResult(
        match=snapshot, cluster=verification.cluster.name, checks=checks,
        current_signature_differs=differs,
    )
