"""The whole-job pre-flight of SPEC 15 (pure: no database, no cluster).

Does a worker fit on a node, now or ever, and which resources are short by how much? The
findings engine (`jobs.core.findings.capacity`), `POST selector-matches/` (`needs`) and the
Pending explanations all answer it here, from the one reader of occupancy
(`clusters.capacity.NodeCapacity`).

A role's worker needs its GPUs, devices, CPU and memory requests and one pod (`pods`) on each
of its matched nodes (one worker per matched node). Per node:

- `never`: some resource's allocatable is below the need (the worker can never be placed);
- `unknown`: the cluster's occupancy was never counted, the cluster is stale, or the node
  does not report an allocatable the worker needs;
- `short`: the allocatable holds the worker, but what is free now does not;
- `fits`: free >= need for every resource.

A role is `never_fits` if any node is `never` (or it matches no node), else `will_queue` if any
node is `short`, else `unknown` if any is unknown, else `fits_now`; the job takes the worst of
its roles in that order (never_fits > will_queue > unknown > fits_now), and a Kueue quota used
now (`quota_waits`) makes a job that fits `will_queue`.

Amounts are scheduler units (`clusters.podrequests`): cpu in millicores, memory in bytes, the
rest whole units; answers carry them as Kubernetes quantity strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from clusters.capacity import NodeCapacity
from clusters.kueue import ClusterQueueView, KueueView, format_amount
from clusters.podrequests import PODS, format_units, scheduler_units
from clusters.quantities import NANO
from rlark_site.foundation.findings import translate as _

__all__ = [
    "FITS_NOW",
    "NEVER_FITS",
    "SHORT_LISTED_MAX",
    "UNKNOWN",
    "VERDICTS",
    "WILL_QUEUE",
    "ClusterOccupancy",
    "NodeFit",
    "QuotaWait",
    "RolePreflight",
    "Shortfall",
    "job_verdict",
    "needs_units",
    "node_fit",
    "quota_waits",
    "role_preflight",
]

FITS_NOW = "fits_now"
WILL_QUEUE = "will_queue"
NEVER_FITS = "never_fits"
UNKNOWN = "unknown"
VERDICTS = (FITS_NOW, WILL_QUEUE, NEVER_FITS, UNKNOWN)
_RANK = {FITS_NOW: 0, UNKNOWN: 1, WILL_QUEUE: 2, NEVER_FITS: 3}

SHORT_LISTED_MAX = 50
"""An answer lists at most this many shortfalls per role (a broad selector matches thousands)."""


@dataclass(frozen=True)
class ClusterOccupancy:
    """How far a cluster's occupancy can be trusted: `as_of` (ISO 8601) of the last good
    count ("" when never counted) and whether the cluster is stale (its last poll failed)."""

    as_of: str = ""
    stale: bool = False

    @property
    def usable(self) -> bool:
        return bool(self.as_of) and not self.stale


@dataclass(frozen=True)
class Shortfall:
    """One resource of one node that cannot hold the worker: `free` now (or, for a node that
    can never hold it, still what is free) against `allocatable`, and `needed`."""

    cluster: str
    node: str
    resource: str
    free: int
    allocatable: int
    needed: int

    @property
    def never(self) -> bool:
        return self.allocatable < self.needed

    @property
    def lacking(self) -> str:
        """By how much the node is short, as a quantity: of its allocatable when it can never
        hold the worker, else of what is free now."""
        have = self.allocatable if self.never else self.free
        return format_units(self.resource, max(0, self.needed - have))

    def as_dict(self) -> dict[str, str]:
        return {"cluster": self.cluster, "node": self.node, "resource": self.resource,
                "free": format_units(self.resource, self.free),
                "allocatable": format_units(self.resource, self.allocatable),
                "needed": format_units(self.resource, self.needed)}


@dataclass(frozen=True)
class NodeFit:
    """One matched node against one worker: `state` is fits | short | never | unknown."""

    cluster: str
    node: str
    state: str
    short: tuple[Shortfall, ...] = ()
    unknown: tuple[str, ...] = ()  # resources whose allocatable the node does not report


def needs_units(amounts: Mapping[str, Decimal]) -> dict[str, int]:
    """What one worker needs in scheduler units (rounded up as the scheduler rounds), from
    base-unit amounts (`jobs.core.findings.admission.worker_requests`), plus its one pod."""
    needs = {resource: scheduler_units(resource, int(-(-amount * NANO // 1)))
             for resource, amount in amounts.items() if amount > 0}
    needs[PODS] = 1
    return needs


def node_fit(capacity: NodeCapacity | None, needs: Mapping[str, int], *, cluster: str,
             node: str, usable: bool) -> NodeFit:
    """`needs` against one node's capacity (`usable`: its cluster's occupancy is current)."""
    if capacity is None:
        return NodeFit(cluster, node, "unknown", unknown=tuple(sorted(needs)))
    counted = usable and capacity.counted
    shown_free = capacity.free  # the last count (even a stale one), for the answer only
    short: list[Shortfall] = []
    unreported: list[str] = []
    for resource, needed in sorted(needs.items()):
        if needed <= 0:
            continue
        allocatable = capacity.allocatable.get(resource)
        if allocatable is None:
            unreported.append(resource)
            continue
        free = shown_free.get(resource, allocatable)
        if allocatable < needed or (counted and free < needed):
            short.append(Shortfall(cluster, node, resource, free, allocatable, needed))
    never = tuple(s for s in short if s.never)
    if never:
        return NodeFit(cluster, node, "never", never)
    if unreported or not counted:
        return NodeFit(cluster, node, "unknown", (), tuple(unreported))
    return NodeFit(cluster, node, "short" if short else "fits", tuple(short))


@dataclass(frozen=True)
class RolePreflight:
    """One role's pre-flight: its verdict, how many workers (`replicas`, one per matched node)
    and how many nodes hold one now (`fits_now`) or ever (`fits_ever`), the shortfalls (at
    most `SHORT_LISTED_MAX`; `short_count` in all), and the occupancy it read (`as_of`, the
    oldest of its clusters'; "" when none was counted)."""

    role: str | None
    verdict: str
    replicas: int
    fits_now: int
    fits_ever: int
    short: tuple[Shortfall, ...]
    short_count: int
    unknown_clusters: tuple[str, ...]
    as_of: str

    @property
    def never_short(self) -> tuple[Shortfall, ...]:
        return tuple(s for s in self.short if s.never)

    @property
    def now_short(self) -> tuple[Shortfall, ...]:
        return tuple(s for s in self.short if not s.never)

    def message(self) -> str:
        """One translated sentence saying why the role has its verdict."""
        first = self.short[0] if self.short else None
        facts = {"replicas": self.replicas, "fits_now": self.fits_now,
                 "fits_ever": self.fits_ever}
        if self.verdict == NEVER_FITS and first is None:
            return _("The selector matches no node.")
        if self.verdict == NEVER_FITS:
            assert first is not None
            return _("%(waiting)d of %(replicas)d workers can never be placed: %(node)s has "
                     "%(allocatable)s %(resource)s allocatable, %(needed)s needed.") % {
                **facts, "waiting": self.replicas - self.fits_ever, **_shown(first)}
        if self.verdict == WILL_QUEUE:
            assert first is not None
            return _("%(waiting)d of %(replicas)d workers would wait for capacity now: "
                     "%(node)s has %(free)s of %(allocatable)s %(resource)s free, %(needed)s "
                     "needed.") % {**facts, "waiting": self.replicas - self.fits_now,
                                   **_shown(first)}
        if self.verdict == UNKNOWN:
            return _("Free capacity is not known for cluster(s) %(clusters)s (occupancy never "
                     "counted, the cluster is stale, or a node does not report a resource the "
                     "worker needs).") % {"clusters": ", ".join(self.unknown_clusters) or "?"}
        return _("All %(replicas)d matched nodes have room for a worker now.") % facts

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "verdict": self.verdict, "replicas": self.replicas,
                "fits_now": self.fits_now, "fits_ever": self.fits_ever,
                "message": str(self.message()), "short": [s.as_dict() for s in self.short]}


def _shown(shortfall: Shortfall) -> dict[str, str]:
    return {k: v for k, v in shortfall.as_dict().items() if k != "cluster"}


def _named(shortfall: Shortfall, cluster: str, node: str) -> Shortfall:
    """`shortfall` (judged on a node of the same capacity) as the shortfall of `node`."""
    if (shortfall.cluster, shortfall.node) == (cluster, node):
        return shortfall
    return Shortfall(cluster, node, shortfall.resource, shortfall.free, shortfall.allocatable,
                     shortfall.needed)


def role_preflight(
    role: str | None,
    nodes: Sequence[tuple[str, str]],
    capacities: Mapping[tuple[str, str], NodeCapacity],
    needs: Mapping[str, int],
    occupancy: Mapping[str, ClusterOccupancy],
) -> RolePreflight:
    """The pre-flight of one role whose workers go to `nodes` ((cluster, node) pairs, one
    worker each), with each node's capacity and each cluster's occupancy state.

    Nodes that share one `NodeCapacity` object (as `matches_capacity` reads them: a fleet
    repeats a few shapes) are judged once; the shortfalls listed name their own node."""
    fits_now = fits_ever = 0
    short: list[Shortfall] = []
    short_count = 0
    states: set[str] = set()
    unknown_clusters: dict[str, None] = {}
    judged: dict[tuple[int, bool], NodeFit] = {}  # by the capacity's identity: it stays alive
    usable_of = {cluster: state.usable for cluster, state in occupancy.items()}
    for cluster, node in nodes:
        usable = usable_of.get(cluster, False)  # a cluster without a state was never counted
        capacity = capacities.get((cluster, node))
        fit = judged.get((id(capacity), usable))
        if fit is None:
            fit = judged[(id(capacity), usable)] = node_fit(capacity, needs, cluster=cluster,
                                                            node=node, usable=usable)
        states.add(fit.state)
        fits_now += fit.state == "fits"
        fits_ever += fit.state in ("fits", "short") or (fit.state == "unknown"
                                                          and not fit.unknown)
        if fit.state == "unknown":
            unknown_clusters[cluster] = None
        if fit.state in ("short", "never"):
            short_count += len(fit.short)
            short.extend(_named(s, cluster, node)
                         for s in fit.short[:max(0, SHORT_LISTED_MAX - len(short))])
    if not nodes or "never" in states:
        verdict = NEVER_FITS
    elif "short" in states:
        verdict = WILL_QUEUE
    elif "unknown" in states:
        verdict = UNKNOWN
    else:
        verdict = FITS_NOW
    if verdict == NEVER_FITS:
        short = [s for s in short if s.never]
    as_of = min((occupancy[c].as_of for c in {c for c, _n in nodes}
                 if c in occupancy and occupancy[c].as_of), default="")
    return RolePreflight(role=role, verdict=verdict, replicas=len(nodes), fits_now=fits_now,
                         fits_ever=fits_ever, short=tuple(short), short_count=short_count,
                         unknown_clusters=tuple(unknown_clusters), as_of=as_of)


def job_verdict(verdicts: Iterable[str]) -> str:
    """The whole job's verdict: the worst of its roles' (never_fits > will_queue > unknown >
    fits_now); `unknown` for a job without roles."""
    ranked = [v for v in verdicts if v in _RANK]
    return max(ranked, key=_RANK.__getitem__) if ranked else UNKNOWN


@dataclass(frozen=True)
class QuotaWait:
    """A resource the job asks more of than its ClusterQueue could reserve right now."""

    cluster_queue: str
    resource: str
    unused: Decimal
    needed: Decimal

    def as_dict(self) -> dict[str, str]:
        return {"cluster_queue": self.cluster_queue, "resource": self.resource,
                "unused": format_amount(self.unused), "needed": format_amount(self.needed)}


def quota_waits(view: KueueView, queue: ClusterQueueView,
                totals: Mapping[str, Decimal]) -> list[QuotaWait]:
    """The resources of `totals` (the whole job, base units) above what `queue` could reserve
    now over all its flavors (`KueueView.unused`): Kueue would hold the job until quota is
    freed. (Above what it could ever give is `admission.exceeds_quota`.)"""
    waits = []
    for resource, total in sorted(totals.items()):
        if total <= 0:
            continue
        flavors = [q.flavor for q in queue.quotas if q.resource == resource]
        unused = sum((view.unused(queue, f, resource) for f in flavors), Decimal(0))
        if total > unused:
            waits.append(QuotaWait(queue.name, resource, unused, total))
    return waits
