"""The admin queue's capacity panel (SPEC 15): will the job a request was asked for run, and when?

For each request a page shows: the pre-flight of the request itself (one worker with the GPUs
and devices it asks for on each node its selector matches today), and of each job it was
asked for (the jobs app answers `clusters.signals.queue_capacity`: per role the verdict, how
many matched nodes hold a worker now and ever, the nodes short and by how much, and the
occupancy poll it read). Computed for a whole page at once in a few queries, on every page
view: it moves with every occupancy poll, so it is never part of a request's cached panel
(`views._panels` writes it into the cached HTML in place of `CAPACITY_MARK`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.utils.dateparse import parse_datetime

from clusters.inventory.selectors import MatchesCapacity, matches_capacity
from clusters.models import Verification
from clusters.preflight import RolePreflight, needs_units, role_preflight
from clusters.signals import queue_capacity
from clusters.types import GPU_RESOURCE, selector_key

logger = logging.getLogger(__name__)

# Jobs shown per request (a selector approved once may serve many drafts).
JOBS_SHOWN = 3


def as_of_time(value: str | None) -> datetime | None:
    """An `as_of` (ISO 8601) as a datetime for templates; None when never counted."""
    return parse_datetime(value) if value else None


@dataclass(frozen=True)
class RoleCapacity:
    """One role's pre-flight as the panel shows it; `this_request`: the role uses the
    request's cluster and selector (or is the role it was asked for)."""

    preflight: RolePreflight
    this_request: bool = False

    @property
    def as_of(self) -> datetime | None:
        return as_of_time(self.preflight.as_of)


@dataclass(frozen=True)
class JobCapacity:
    """The pre-flight of a job a request was asked for: the job's verdict (its roles' and
    its Kueue quota's), its `as_of`, and each role's."""

    job: str
    state: str
    verdict: str
    as_of_text: str | None
    roles: tuple[RoleCapacity, ...]
    quota: tuple[dict[str, str], ...] = ()

    @property
    def as_of(self) -> datetime | None:
        return as_of_time(self.as_of_text)


@dataclass(frozen=True)
class QueueCapacity:
    """What a request's capacity panel shows."""

    verification_id: int
    request: RolePreflight
    jobs: tuple[JobCapacity, ...] = field(default_factory=tuple)
    more_jobs: int = 0

    @property
    def as_of(self) -> datetime | None:
        return as_of_time(self.request.as_of)


def request_needs(verification: Verification) -> dict[str, int]:
    """One worker of the request: the GPUs and devices it asks for, and its pod."""
    amounts = {GPU_RESOURCE: Decimal(verification.requested_gpu or 0)}
    amounts.update({str(k): Decimal(int(v)) for k, v in
                    (verification.requested_devices or {}).items()})
    return needs_units(amounts)


def _request_preflight(verification: Verification, read: MatchesCapacity) -> RolePreflight:
    match = read.matches.get(selector_key(dict(verification.selector)))
    nodes = [(n.cluster, n.name) for n in match.nodes] if match is not None else []
    return role_preflight(None, nodes, read.capacity.nodes, request_needs(verification),
                          read.capacity.occupancy)


def _jobs_of(verifications: Sequence[Verification]) -> dict[int, list[JobCapacity]]:
    """What the receivers of `queue_capacity` (the jobs app) answer, merged; a receiver
    that fails is logged and the panel shows the request's own pre-flight only."""
    merged: dict[int, list[JobCapacity]] = {}
    for receiver, answer in queue_capacity.send_robust(sender=Verification,
                                                       verifications=list(verifications)):
        if isinstance(answer, BaseException):
            logger.error("queue capacity from %r failed", receiver, exc_info=answer)
            continue
        for pk, jobs in (answer or {}).items():
            merged.setdefault(pk, []).extend(jobs)
    return merged


def queue_capacities(verifications: Sequence[Verification]) -> dict[int, QueueCapacity]:
    """The capacity panel of each request, by id: every request's selector in one query (the
    check's own read, `matches_capacity`), the jobs' pre-flight in the few queries of their
    receiver."""
    if not verifications:
        return {}
    read = matches_capacity(v.selector for v in verifications)
    jobs = _jobs_of(verifications)
    return {
        v.pk: QueueCapacity(
            verification_id=v.pk, request=_request_preflight(v, read),
            jobs=tuple(jobs.get(v.pk, ())[:JOBS_SHOWN]),
            more_jobs=max(0, len(jobs.get(v.pk, ())) - JOBS_SHOWN),
        )
        for v in verifications
    }
