"""Writes of the admin verification queue: request, decide, and follow inventory drift.

States: ``pending`` -> ``approved`` | ``rejected``; ``approved`` -> ``stale`` when a later
inventory poll changes the matched node set. Every transition is an UPDATE of the audited
`Verification` row (pghistory records it with the request or task context); decisions are
claimed with a conditional ``UPDATE ... WHERE state = 'pending'`` so two admins acting at
once cannot both win.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pghistory
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.matching import NODES_PAGE_DEFAULT, match_many, match_selector, parse_selector_input
from clusters.models import Cluster, Node, Verification, VerificationState
from clusters.placement import request_placement_findings, request_refusals
from clusters.signals import verification_changed
from clusters.types import DEVICE_PREFIX, MatchedNode, SelectorMatch, node_ref
from clusters.verifications.selectors import selector_key_text
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.findings import new_finding
from rlark_site.foundation.tenancy.access import (
    AnyUser,
    is_platform_admin,
    membership_of,
    require_platform_admin,
)
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "Asks",
    "RequestOutcome",
    "lock_combination",
    "verification_approve",
    "verification_reject",
    "verification_request",
    "verification_request_outcome",
    "verifications_follow_inventory",
]

OPEN_STATES = (VerificationState.PENDING, VerificationState.APPROVED)


@dataclass(frozen=True)
class Asks:
    """What a request asks an admin to confirm besides the placement itself."""

    for_header_role: bool = False
    gpu: int | None = None
    devices: tuple[tuple[str, int], ...] = ()
    host_paths: tuple[str, ...] = ()

    def covered_by(self, other: Asks) -> bool:
        """Whether `other` already asks for everything this asks for."""
        other_devices = dict(other.devices)
        return (
            (other.for_header_role or not self.for_header_role)
            and (self.gpu is None or (other.gpu is not None and self.gpu <= other.gpu))
            and all(count <= other_devices.get(name, -1) for name, count in self.devices)
            and set(self.host_paths) <= set(other.host_paths)
        )

    def merged(self, other: Asks) -> Asks:
        devices = dict(other.devices)
        for name, count in self.devices:
            devices[name] = max(count, devices.get(name, count))
        gpus = [g for g in (self.gpu, other.gpu) if g is not None]
        return Asks(
            for_header_role=self.for_header_role or other.for_header_role,
            gpu=max(gpus) if gpus else None,
            devices=tuple(sorted(devices.items())),
            host_paths=tuple(sorted(set(self.host_paths) | set(other.host_paths))),
        )


@dataclass(frozen=True)
class RequestOutcome:
    verification: Verification
    reused: bool  # an open request for the same (team, cluster, selector) answered it
    updated: bool = False  # ... and its asks were widened to include the new ones


def _invalid(code: str, field: str, message: str, **detail: Any) -> ApplicationError:
    finding = new_finding(code, message, field=field, **detail)
    return ApplicationError(message, extra={"findings": [finding.as_dict()]}, status_code=400)


def _count(value: object, *, code: str, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid(code, field, _("Give a whole number of 0 or more."), value=str(value)[:50])
    return value


def _devices(value: Mapping[str, object] | None, *, field: str) -> tuple[tuple[str, int], ...]:
    if not value:
        return ()
    if not isinstance(value, Mapping):
        raise _invalid("device.invalid", field, _("Give devices as {name: count}."))
    for name in value:
        if not isinstance(name, str) or not name.startswith(DEVICE_PREFIX):
            raise _invalid(
                "device.unknown", field,
                _("%(name)s is not an rlinf.io/* device resource.") % {"name": repr(name)},
                name=str(name)[:100],
            )
    counts = {name: _count(count, code="device.invalid", field=f"{field}.{name}")
              for name, count in value.items()}
    return tuple(sorted((name, count) for name, count in counts.items() if count is not None))


def _host_paths(value: Sequence[object] | None, *, field: str) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise _invalid("mount.path.invalid", field, _("Give host paths as a list."))
    for path in value:
        if (not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/")
                or "\x00" in path):
            raise _invalid(
                "mount.path.invalid", field,
                _("%(path)s is not an absolute path without '..'.") % {"path": repr(path)[:100]},
                path=str(path)[:100],
            )
    return tuple(sorted({posixpath.normpath(p) for p in value if isinstance(p, str)}))


def _require_member(user: AnyUser, team: Team) -> None:
    if not is_platform_admin(user) and membership_of(user, team) is None:
        raise NotFoundError(_("Team not found."))


def _involved_clusters(match: SelectorMatch, cluster: Cluster) -> set[str]:
    names = {cluster.name} | set(match.clusters)
    for _condition, reached in match.condition_clusters:
        names |= reached
    return names


def _node_snapshot(node: MatchedNode) -> dict[str, Any]:
    return {**node_ref(node), "gpu": node.gpu, "devices": dict(node.devices),
            "ready": node.ready}


def _previews(match: SelectorMatch, cluster: Cluster) -> dict[str, list[dict[str, Any]]]:
    """The first nodes of the snapshot that pages show (all, outside the verification's
    cluster, NotReady), kept with its summary so that showing a request never reads its
    whole node list (`selectors.snapshot_nodes` and friends read them)."""
    limit = NODES_PAGE_DEFAULT
    outside = [n for n in match.nodes if n.cluster != cluster.name][:limit]
    not_ready = [n for n in match.nodes if not n.ready][:limit]
    return {
        "first_nodes": [_node_snapshot(n) for n in match.nodes[:limit]],
        "first_outside": [_node_snapshot(n) for n in outside],
        "first_not_ready": [_node_snapshot(n) for n in not_ready],
    }


def _snapshot(match: SelectorMatch, cluster: Cluster,
              generations: Mapping[str, int]) -> dict[str, Any]:
    involved = _involved_clusters(match, cluster)
    return {
        "matches": [_node_snapshot(n) for n in match.nodes],
        "match_signature": [list(pair) for pair in match.signature()],
        "match_summary": {**match.summary().as_dict(), **_previews(match, cluster)},
        "inventory_generations": {
            name: generations[name] for name in sorted(involved) if name in generations
        },
    }


def _generations() -> dict[str, int]:
    return dict(Cluster.objects.values_list("name", "generation"))


def lock_combination(team: Team, cluster: Cluster, key: str) -> None:
    """Serialise requests for one combination so two at once cannot both create a row."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"verification:{team.pk}:{cluster.pk}:{key}"],
        )


def _asks_of(verification: Verification) -> Asks:
    return Asks(
        for_header_role=verification.for_header_role,
        gpu=verification.requested_gpu,
        devices=tuple(sorted(verification.requested_devices.items())),
        host_paths=tuple(verification.requested_host_paths),
    )


def _widen(verification: Verification, asks: Asks, note: str) -> None:
    merged = asks.merged(_asks_of(verification))
    verification.for_header_role = merged.for_header_role
    verification.requested_gpu = merged.gpu
    verification.requested_devices = dict(merged.devices)
    verification.requested_host_paths = list(merged.host_paths)
    if note and note not in verification.request_note:
        verification.request_note = "\n".join(p for p in (verification.request_note, note) if p)
    verification.save(update_fields=[
        "for_header_role", "requested_gpu", "requested_devices", "requested_host_paths",
        "request_note",
    ])


def _reuse(existing: Verification, asks: Asks, note: str) -> RequestOutcome | None:
    """Answer the request with an open one, widening a pending one's asks if needed."""
    if asks.covered_by(_asks_of(existing)):
        return RequestOutcome(existing, reused=True)
    if existing.state == VerificationState.PENDING:
        _widen(existing, asks, note)
        return RequestOutcome(existing, reused=True, updated=True)
    return None


def _refuse_failing(match: SelectorMatch, cluster: Cluster, asks: Asks) -> None:
    """Refuse a request whose selector already fails a placement rule no admin's confirmation
    lifts (`clusters.placement.request_refusals`): 422 with those findings."""
    refusals = request_refusals(request_placement_findings(
        match, cluster=cluster.name, for_header_role=asks.for_header_role, gpu=asks.gpu or 0,
        devices=dict(asks.devices), host_paths=asks.host_paths,
    ))
    if refusals:
        raise ApplicationError(
            _("This selector fails the automated checks; fix it before asking an admin to "
              "verify it."),
            extra={"findings": [f.as_dict() for f in refusals]},
            status_code=422,
        )


def verification_request_outcome(
    *, team: Team, user: AnyUser, cluster: Cluster, selector: Mapping[str, str],
    for_header_role: bool = False, requested_gpu: int | None = None,
    requested_devices: Mapping[str, int] | None = None,
    requested_host_paths: Sequence[str] | None = None, note: str = "",
    job_name: str = "", role_name: str = "",
) -> RequestOutcome:
    """Request verification of (cluster, selector) for `team`, or reuse the open one.

    Refused (422, with the findings) when today's matches already fail a placement rule that no
    admin's confirmation lifts: no match, a Header role's selector not matching exactly one
    node, nodes outside `cluster`, no condition confining the matches to it, more GPUs than the
    matched nodes have. Asking for GPU, device or host-path confirmations is what a request is
    for, so those findings do not refuse it.
    The global matches are computed at once and stored with the inventory generations of every
    cluster involved. An open (pending or approved) request for the exact same combination
    that already asks for everything asked here is returned instead of a new one; a pending
    one that asks for less is widened. An approval that does not cover the new asks leads to a
    new pending request carrying the approval's asks plus the new ones.
    """
    _require_member(user, team)
    clean = parse_selector_input(dict(selector))
    asks = Asks(  # zero GPUs or devices ask for nothing
        for_header_role=bool(for_header_role),
        gpu=_count(requested_gpu, code="gpu.invalid", field="requested_gpu") or None,
        devices=tuple(
            (name, count) for name, count in _devices(requested_devices, field="requested_devices")
            if count > 0
        ),
        host_paths=_host_paths(requested_host_paths, field="requested_host_paths"),
    )
    key = selector_key_text(clean)
    with transaction.atomic(), pghistory.context(user=user.pk, team=team.slug):
        lock_combination(team, cluster, key)
        match = match_selector(clean)
        _refuse_failing(match, cluster, asks)
        open_requests = Verification.objects.filter(
            team=team, cluster=cluster, selector_key=key, state__in=OPEN_STATES
        ).order_by("-created_at", "-id")
        for existing in open_requests:
            outcome = _reuse(existing, asks, note)
            if outcome is not None:
                return outcome
            asks = asks.merged(_asks_of(existing))
        generations = _generations()
        verification = Verification.objects.create(
            team=team, cluster=cluster, selector=clean, selector_key=key,
            for_header_role=asks.for_header_role, requested_gpu=asks.gpu,
            requested_devices=dict(asks.devices), requested_host_paths=list(asks.host_paths),
            request_note=note, requested_by_id=user.pk, requested_for_job=job_name[:63],
            requested_for_role=role_name[:63], **_snapshot(match, cluster, generations),
        )
        _announce(verification, "requested")
    return RequestOutcome(verification, reused=False)


def verification_request(
    *, team: Team, user: AnyUser, cluster: Cluster, selector: Mapping[str, str],
    for_header_role: bool = False, requested_gpu: int | None = None,
    requested_devices: Mapping[str, int] | None = None,
    requested_host_paths: Sequence[str] | None = None, note: str = "",
    job_name: str = "", role_name: str = "",
) -> Verification:
    """`verification_request_outcome` without saying whether the request was reused."""
    return verification_request_outcome(
        team=team, user=user, cluster=cluster, selector=selector,
        for_header_role=for_header_role, requested_gpu=requested_gpu,
        requested_devices=requested_devices, requested_host_paths=requested_host_paths,
        note=note, job_name=job_name, role_name=role_name,
    ).verification


def _announce(verification: Verification, transition: str) -> None:
    """Tell listeners (notifications) of the transition, inside the current transaction."""
    verification_changed.send(sender=Verification, verification=verification,
                              transition=transition)


def _decision_conflict(verification_id: int) -> ApplicationError:
    current = (
        Verification.objects.filter(id=verification_id)
        .select_related("decided_by").first()
    )
    if current is None:
        return NotFoundError(_("Verification not found."))
    decider = current.decided_by.get_username() if current.decided_by else None
    return ApplicationError(
        _("This request is already %(state)s; only a pending request can be decided.")
        % {"state": current.get_state_display()},
        extra={"state": current.state, "decided_by": decider,
               "decided_at": current.decided_at.isoformat() if current.decided_at else None},
        status_code=409,
    )


def _decide(verification_id: int, admin: AnyUser, **changes: Any) -> Verification:
    """Claim the pending request with a conditional UPDATE: exactly one decision wins."""
    audit = pghistory.context(user=admin.pk, transition=str(changes["state"]))
    with transaction.atomic(), audit:
        claimed = Verification.objects.filter(
            id=verification_id, state=VerificationState.PENDING
        ).update(decided_by_id=admin.pk, decided_at=timezone.now(), **changes)
        if not claimed:
            raise _decision_conflict(verification_id)
        verification = Verification.objects.get(id=verification_id)
        _announce(verification, str(changes["state"]))
    return verification


def verification_approve(
    *, verification_id: int, admin: AnyUser, note: str = "",
    confirm_gpu: int | None = None, confirm_devices: Mapping[str, int] | None = None,
    confirm_host_paths: Sequence[str] | None = None,
) -> Verification:
    """Approve a pending request, optionally confirming GPU/device capacity and host paths
    for the matched nodes. 409 when it is no longer pending (another admin decided first)."""
    require_platform_admin(admin)
    return _decide(
        verification_id, admin, state=VerificationState.APPROVED, decision_note=note.strip(),
        confirmed_gpu=_count(confirm_gpu, code="gpu.invalid", field="confirm_gpu"),
        confirmed_devices=dict(_devices(confirm_devices, field="confirm_devices")),
        confirmed_host_paths=list(_host_paths(confirm_host_paths, field="confirm_host_paths")),
    )


def verification_reject(*, verification_id: int, admin: AnyUser,
                        note: str) -> Verification:
    """Reject a pending request; the note (required) tells the team why."""
    require_platform_admin(admin)
    if not note.strip():
        raise ApplicationError(
            _("Say why the request is rejected."), extra={"field": "note"}, status_code=400
        )
    return _decide(
        verification_id, admin, state=VerificationState.REJECTED, decision_note=note.strip()
    )


def _drift(verification: Verification, match: SelectorMatch) -> dict[str, list[dict[str, Any]]]:
    before = {(m["cluster"], m["name"]): m for m in verification.matches}
    now = {(n.cluster, n.name): n for n in match.nodes}
    return {
        "added": [node_ref(now[k]) for k in sorted(now.keys() - before.keys())],
        "removed": [
            {"cluster": before[k]["cluster"], "name": before[k]["name"],
             "namespace": before[k].get("namespace", "")}
            for k in sorted(before.keys() - now.keys())
        ],
    }


def _touching(cluster: Cluster) -> Q:
    """Open verifications whose snapshot or whose selector today involves `cluster`."""
    matches_here = Node.objects.filter(
        cluster=cluster, gone=False, labels__contains=OuterRef("selector")
    )
    return (
        Q(cluster=cluster)
        | Q(inventory_generations__has_key=cluster.name)
        | Q(Exists(matches_here))
    )


def verifications_follow_inventory(*, cluster: Cluster) -> list[int]:
    """Recompute the open verifications an inventory change of `cluster` may affect.

    An approval whose matched node set changed becomes stale, with the drift recorded; a
    pending request gets the current matches whenever they differ from its snapshot (a
    matched node's allocatable GPUs, devices or readiness too, with the same node set) so
    the admin decides on today's inventory.
    Returns the ids of the approvals made stale.
    """
    now = timezone.now()
    generations = _generations()
    stale: list[int] = []
    audit = pghistory.context(transition="inventory drift", cluster=cluster.name)
    with transaction.atomic(), audit:
        candidates = list(
            Verification.objects.select_for_update()
            .filter(_touching(cluster), state__in=OPEN_STATES)
            .select_related("cluster")
        )
        matches = match_many(v.selector for v in candidates)
        for verification in candidates:
            match = matches[tuple(sorted(verification.selector.items()))]
            same_nodes = [list(p) for p in match.signature()] == verification.match_signature
            if verification.state == VerificationState.APPROVED:
                if same_nodes:  # an approval holds for its snapshot while the set holds
                    continue
                verification.state = VerificationState.STALE
                verification.stale_at = now
                verification.drift = _drift(verification, match)
                verification.save(update_fields=["state", "stale_at", "drift"])
                _announce(verification, "stale")
                stale.append(verification.pk)
            else:
                # A pending request follows every change of its matched nodes (allocatable
                # GPUs or devices, readiness), not only of their set: the admin decides on
                # today's inventory, and the summary's minima feed `gpu.exceeds_capacity`.
                snapshot = _snapshot(match, verification.cluster, generations)
                if same_nodes and snapshot["matches"] == verification.matches:
                    continue
                for field, value in snapshot.items():
                    setattr(verification, field, value)
                verification.save(
                    update_fields=[
                        "matches", "match_signature", "match_summary", "inventory_generations"
                    ]
                )
    return stale
