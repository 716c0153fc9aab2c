"""Kueue admission (SPEC 15), pure: the cluster setting and its team → LocalQueue map, the
labels RLark puts on a Kueue cluster's pod templates, the quota view the findings engine and
the queues page read, and a Workload's conditions read as one admission state.

RLark never implements quotas: Kueue admits. What lives here only reads what Kueue reports
(ClusterQueues, LocalQueues, Workloads, the visibility API's positions) and says, before
Submit, when a job asks for more than its team's ClusterQueue could ever give (nominal quota
plus what it may borrow in its cohort), as Kueue's flavor assigner computes it.

Kueue objects are `kueue.x-k8s.io/v1beta1` (field names as Kueue's: `resourceGroups`,
`nominalQuota`, `borrowingLimit`, `flavorsUsage`, ...). Everything read from a cluster is
untrusted: the readers here never raise on a malformed object and keep at most `MAX_*` of
anything.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from clusters.labels import is_dns_label
from clusters.quantities import QuantityError, parse_quantity
from rlark_site.foundation.findings import translate as _

__all__ = [
    "ADMISSION_CHOICES",
    "ADMISSION_GATE",
    "ADMISSION_KUEUE",
    "ADMISSION_NONE",
    "ADMISSION_STATES",
    "KUEUE_GROUP",
    "KUEUE_VERSION",
    "MAX_CLUSTER_QUEUES",
    "MAX_LOCAL_QUEUES",
    "MAX_QUEUE_MAP",
    "POD_GROUP_NAME_LABEL",
    "POD_GROUP_TOTAL_COUNT_ANNOTATION",
    "QUEUED_STATES",
    "QUEUE_NAME_LABEL",
    "VISIBILITY_GROUP",
    "VISIBILITY_VERSION",
    "AdmissionStatus",
    "ClusterQueueView",
    "KueueView",
    "LocalQueueView",
    "ResourceQuota",
    "WorkloadEviction",
    "amount_of",
    "cluster_queue_view",
    "cluster_queues_in",
    "format_amount",
    "local_queue_view",
    "local_queues_in",
    "normalised_queue_map",
    "pending_positions",
    "queue_map_problems",
    "workload_admission",
    "workload_eviction",
]

ADMISSION_NONE = "none"
ADMISSION_KUEUE = "kueue"
ADMISSION_CHOICES = (ADMISSION_NONE, ADMISSION_KUEUE)

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta1"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSION = "v1beta1"

# Kueue's plain pod groups (pkg/controller/jobs/pod/constants): the rlinf.io operator is not
# a Kueue-integrated framework, so every pod of a Job joins one group named after the Job.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
# The scheduling gate Kueue's pod webhook adds and removes once the group's Workload is admitted.
ADMISSION_GATE = "kueue.x-k8s.io/admission"

MAX_QUEUE_MAP = 500  # teams one cluster maps to LocalQueues
MAX_CLUSTER_QUEUES = 1000  # ClusterQueues kept per cluster
MAX_LOCAL_QUEUES = 5000  # LocalQueues kept per cluster
_MAX_FLAVORS = 64  # flavors kept per ClusterQueue
_MAX_RESOURCES = 64  # resources kept per flavor
_MAX_TEXT = 2000  # characters kept of a condition's message
_NAME_MAX = 253

# `state` of a job's admission, from its Workload's conditions (SPEC 15).
ADMISSION_STATES = ("pending", "quota_reserved", "admitted", "evicted", "preempted", "finished")
QUEUED_STATES = frozenset({"pending", "evicted", "preempted"})
"""The states of a Workload without quota that Kueue may admit again: the job waits for
Kueue (a preempted or evicted Workload keeps its `Evicted` condition True until then)."""


# -- the cluster setting ------------------------------------------------------------------------


def queue_map_problems(value: object, *, known_teams: Collection[str]) -> list[str]:
    """What is wrong with a team → LocalQueue map (an empty list when nothing is).

    The map is a JSON object of team slugs to LocalQueue names: at most `MAX_QUEUE_MAP` entries,
    every team known to RLark, every queue name a DNS label (Kueue's queue-name label value).
    """
    if not isinstance(value, Mapping):
        return [_("The team → LocalQueue map must be an object of team slugs to queue names.")]
    if len(value) > MAX_QUEUE_MAP:
        return [_("At most %(limit)d teams can be mapped to LocalQueues on one cluster.")
                % {"limit": MAX_QUEUE_MAP}]
    problems = []
    for team, queue in value.items():
        shown_team = str(team)[:100]
        if not isinstance(team, str) or team not in known_teams:
            problems.append(_("%(team)s is not a team.") % {"team": shown_team})
        elif not is_dns_label(queue):
            problems.append(
                _("The LocalQueue of team %(team)s must be 1–63 lower-case letters, digits or "
                  "hyphens, starting and ending with a letter or digit.") % {"team": shown_team})
    return problems


def normalised_queue_map(value: Mapping[str, str]) -> dict[str, str]:
    """The map as stored: teams in sorted order (so equal maps are equal JSON)."""
    return {team: value[team] for team in sorted(value)}


# -- quantities ----------------------------------------------------------------------------------


def amount_of(text: object) -> Decimal | None:
    """A quantity (string, or a whole number) as a Decimal; None when it is not one."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        text = str(text)
    try:
        return parse_quantity(text) if isinstance(text, str) else None
    except QuantityError:
        return None


def format_amount(amount: Decimal) -> str:
    """A Decimal amount as a plain quantity string: ``8``, ``0.5``, ``68719476736``."""
    normal = amount.normalize()
    text = format(normal, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


# -- the quota view ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceQuota:
    """One (flavor, resource) of a ClusterQueue: its quota and what is used of it now.

    Quantities are Kubernetes quantity strings as Kueue reports them (`""` for an absent
    optional limit); `used` is `status.flavorsUsage` (admitted), `reserved` is
    `status.flavorsReservation` (quota reserved, admitted or not), `borrowed` what of `used` is
    borrowed from the cohort.
    """

    flavor: str
    resource: str
    nominal: str
    borrowing_limit: str = ""
    lending_limit: str = ""
    used: str = "0"
    reserved: str = "0"
    borrowed: str = "0"

    def amount(self, field: str) -> Decimal | None:
        """One of the quantity fields as a Decimal (None when absent or unreadable)."""
        return amount_of(getattr(self, field))

    def as_dict(self) -> dict[str, str | None]:
        return {
            "flavor": self.flavor, "resource": self.resource, "nominal": self.nominal,
            "borrowing_limit": self.borrowing_limit or None,
            "lending_limit": self.lending_limit or None,
            "used": self.used, "reserved": self.reserved, "borrowed": self.borrowed,
        }


@dataclass(frozen=True)
class ClusterQueueView:
    """A ClusterQueue as its last read saw it."""

    name: str
    cohort: str = ""
    quotas: tuple[ResourceQuota, ...] = ()
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0

    def resources(self) -> tuple[str, ...]:
        """The resources it covers (in the order first covered)."""
        return tuple(dict.fromkeys(q.resource for q in self.quotas))

    def quota(self, flavor: str, resource: str) -> ResourceQuota | None:
        for quota in self.quotas:
            if quota.flavor == flavor and quota.resource == resource:
                return quota
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "cohort": self.cohort or None,
            "quotas": [q.as_dict() for q in self.quotas],
            "pending_workloads": self.pending_workloads,
            "reserving_workloads": self.reserving_workloads,
            "admitted_workloads": self.admitted_workloads,
        }


@dataclass(frozen=True)
class LocalQueueView:
    """A LocalQueue: the namespace's door to a ClusterQueue, with what its Workloads use."""

    namespace: str
    name: str
    cluster_queue: str
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    usage: tuple[tuple[str, str, str], ...] = ()  # (flavor, resource, total): `flavorUsage`

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace, "name": self.name, "cluster_queue": self.cluster_queue,
            "pending_workloads": self.pending_workloads,
            "reserving_workloads": self.reserving_workloads,
            "admitted_workloads": self.admitted_workloads,
            "usage": [{"flavor": f, "resource": r, "total": t} for f, r, t in self.usage],
        }


@dataclass(frozen=True)
class KueueView:
    """A Kueue cluster's queues as the last inventory poll read them (`as_of`, ISO 8601).

    The one quota view: the findings engine gets it in its context (never calling a cluster),
    the queues API and the cluster page show it. `potential` is what a ClusterQueue could ever
    give of a resource in one flavor (SPEC 15 `admission.exceeds_quota`); `unused` what it
    could give right now, for a verdict "will queue because quota is used now".
    """

    cluster_queues: tuple[ClusterQueueView, ...] = ()
    local_queues: tuple[LocalQueueView, ...] = ()
    as_of: str = ""
    error: str = ""  # why the last read failed ("" when it did not); the queues are the last good

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        return next((q for q in self.cluster_queues if q.name == name), None)

    def local_queue(self, namespace: str, name: str) -> LocalQueueView | None:
        return next((q for q in self.local_queues
                     if q.namespace == namespace and q.name == name), None)

    def cohort_members(self, queue: ClusterQueueView) -> tuple[ClusterQueueView, ...]:
        """The other ClusterQueues of `queue`'s cohort (none without a cohort)."""
        if not queue.cohort:
            return ()
        return tuple(q for q in self.cluster_queues
                     if q.cohort == queue.cohort and q.name != queue.name)

    def _lendable(self, queue: ClusterQueueView, flavor: str, resource: str) -> Decimal:
        """What the cohort's other members lend of (flavor, resource): each member's nominal
        quota, capped by its lending limit."""
        total = Decimal(0)
        for member in self.cohort_members(queue):
            quota = member.quota(flavor, resource)
            if quota is None:
                continue
            amount = quota.amount("nominal") or Decimal(0)
            limit = quota.amount("lending_limit")
            total += min(amount, limit) if limit is not None else amount
        return total

    def potential(self, queue: ClusterQueueView, flavor: str, resource: str) -> Decimal:
        """Most the queue could ever hold of (flavor, resource): nominal quota plus what it may
        borrow (its borrowing limit, or without one all its cohort lends; nothing outside a
        cohort), as Kueue's `PotentialAvailable`."""
        quota = queue.quota(flavor, resource)
        if quota is None:
            return Decimal(0)
        nominal = quota.amount("nominal") or Decimal(0)
        if not queue.cohort:
            return nominal
        lendable = self._lendable(queue, flavor, resource)
        limit = quota.amount("borrowing_limit")
        return nominal + (min(limit, lendable) if limit is not None else lendable)

    def unused(self, queue: ClusterQueueView, flavor: str, resource: str) -> Decimal:
        """What the queue could reserve of (flavor, resource) now, without preempting: its own
        unreserved quota, or in a cohort what the whole cohort has unreserved, capped by its
        borrowing limit. (Lending limits are not applied to what others reserved: an
        estimate for "will queue", never the reason a job is refused.)"""
        quota = queue.quota(flavor, resource)
        if quota is None:
            return Decimal(0)
        nominal = quota.amount("nominal") or Decimal(0)
        reserved = quota.amount("reserved") or Decimal(0)
        if not queue.cohort:
            return max(nominal - reserved, Decimal(0))
        free = nominal - reserved
        for member in self.cohort_members(queue):
            other = member.quota(flavor, resource)
            if other is not None:
                free += ((other.amount("nominal") or Decimal(0))
                         - (other.amount("reserved") or Decimal(0)))
        limit = quota.amount("borrowing_limit")
        if limit is not None:
            free = min(free, nominal + limit - reserved)
        return max(free, Decimal(0))

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster_queues": [q.as_dict() for q in self.cluster_queues],
            "local_queues": [q.as_dict() for q in self.local_queues],
            "as_of": self.as_of, "error": self.error,
        }

    @classmethod
    def from_stored(cls, cluster_queues: Any, local_queues: Any, *, as_of: str = "",
                    error: str = "") -> KueueView:
        """The view from what `as_dict` stored (tolerant: a malformed entry is skipped)."""
        return cls(
            cluster_queues=tuple(q for q in (_stored_cluster_queue(d) for d in
                                             _items(cluster_queues, MAX_CLUSTER_QUEUES)) if q),
            local_queues=tuple(q for q in (_stored_local_queue(d) for d in
                                           _items(local_queues, MAX_LOCAL_QUEUES)) if q),
            as_of=as_of, error=error,
        )


def _items(value: Any, limit: int) -> list[Any]:
    return list(value[:limit]) if isinstance(value, list) else []


def _text(value: Any, limit: int = _NAME_MAX) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _stored_cluster_queue(data: Any) -> ClusterQueueView | None:
    if not isinstance(data, dict) or not _text(data.get("name")):
        return None
    quotas = tuple(
        ResourceQuota(
            flavor=_text(q.get("flavor")), resource=_text(q.get("resource")),
            nominal=_text(q.get("nominal"), 64) or "0",
            borrowing_limit=_text(q.get("borrowing_limit"), 64),
            lending_limit=_text(q.get("lending_limit"), 64),
            used=_text(q.get("used"), 64) or "0", reserved=_text(q.get("reserved"), 64) or "0",
            borrowed=_text(q.get("borrowed"), 64) or "0",
        )
        for q in _items(data.get("quotas"), _MAX_FLAVORS * _MAX_RESOURCES) if isinstance(q, dict)
    )
    return ClusterQueueView(
        name=_text(data["name"]), cohort=_text(data.get("cohort")), quotas=quotas,
        pending_workloads=_int(data.get("pending_workloads")),
        reserving_workloads=_int(data.get("reserving_workloads")),
        admitted_workloads=_int(data.get("admitted_workloads")),
    )


def _stored_local_queue(data: Any) -> LocalQueueView | None:
    if not isinstance(data, dict) or not _text(data.get("name")):
        return None
    usage = tuple(
        (_text(u.get("flavor")), _text(u.get("resource")), _text(u.get("total"), 64) or "0")
        for u in _items(data.get("usage"), _MAX_FLAVORS * _MAX_RESOURCES) if isinstance(u, dict)
    )
    return LocalQueueView(
        namespace=_text(data.get("namespace")), name=_text(data["name"]),
        cluster_queue=_text(data.get("cluster_queue")),
        pending_workloads=_int(data.get("pending_workloads")),
        reserving_workloads=_int(data.get("reserving_workloads")),
        admitted_workloads=_int(data.get("admitted_workloads")),
        usage=usage,
    )


# -- reading Kueue's objects ---------------------------------------------------------------------


def _section(obj: Any, key: str) -> dict[str, Any]:
    """`obj[key]` when both are JSON objects, else {} (an untrusted object read safely)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _quantity_text(value: Any) -> str:
    """A quantity as Kueue's JSON carries it (a string, or a number), "" when unreadable."""
    amount = amount_of(value)
    if amount is None:
        return ""
    return value if isinstance(value, str) else format_amount(amount)


def _usage_map(value: Any) -> dict[tuple[str, str], tuple[str, str]]:
    """`status.flavorsUsage` / `flavorsReservation`: (flavor, resource) → (total, borrowed)."""
    usage: dict[tuple[str, str], tuple[str, str]] = {}
    for flavor in _items(value, _MAX_FLAVORS):
        if not isinstance(flavor, dict):
            continue
        for resource in _items(flavor.get("resources"), _MAX_RESOURCES):
            if isinstance(resource, dict):
                usage[(_text(flavor.get("name")), _text(resource.get("name")))] = (
                    _quantity_text(resource.get("total")) or "0",
                    _quantity_text(resource.get("borrowed")) or "0",
                )
    return usage


def _spec_quotas(groups: Any) -> list[dict[str, str]]:
    quotas = []
    for group in _items(groups, _MAX_FLAVORS):
        if not isinstance(group, dict):
            continue
        for flavor in _items(group.get("flavors"), _MAX_FLAVORS):
            if not isinstance(flavor, dict) or not _text(flavor.get("name")):
                continue
            for resource in _items(flavor.get("resources"), _MAX_RESOURCES):
                if isinstance(resource, dict) and _text(resource.get("name")):
                    quotas.append({
                        "flavor": _text(flavor["name"]), "resource": _text(resource["name"]),
                        "nominal": _quantity_text(resource.get("nominalQuota")) or "0",
                        "borrowing_limit": _quantity_text(resource.get("borrowingLimit")),
                        "lending_limit": _quantity_text(resource.get("lendingLimit")),
                    })
    return quotas[:_MAX_FLAVORS * _MAX_RESOURCES]


def cluster_queue_view(obj: Any) -> ClusterQueueView | None:
    """A `kueue.x-k8s.io/v1beta1` ClusterQueue object read as a view (None without a name)."""
    if not isinstance(obj, dict):
        return None
    metadata = _section(obj, "metadata")
    name = _text(metadata.get("name"))
    if not name:
        return None
    spec = _section(obj, "spec")
    status = _section(obj, "status")
    used = _usage_map(status.get("flavorsUsage"))
    reserved = _usage_map(status.get("flavorsReservation"))
    quotas = tuple(
        ResourceQuota(
            **q,
            used=used.get((q["flavor"], q["resource"]), ("0", "0"))[0],
            reserved=reserved.get((q["flavor"], q["resource"]), ("0", "0"))[0],
            borrowed=used.get((q["flavor"], q["resource"]), ("0", "0"))[1],
        )
        for q in _spec_quotas(spec.get("resourceGroups"))
    )
    return ClusterQueueView(
        name=name, cohort=_text(spec.get("cohort")), quotas=quotas,
        pending_workloads=_int(status.get("pendingWorkloads")),
        reserving_workloads=_int(status.get("reservingWorkloads")),
        admitted_workloads=_int(status.get("admittedWorkloads")),
    )


def local_queue_view(obj: Any) -> LocalQueueView | None:
    """A `kueue.x-k8s.io/v1beta1` LocalQueue object read as a view (None without a name)."""
    if not isinstance(obj, dict):
        return None
    metadata = _section(obj, "metadata")
    name = _text(metadata.get("name"))
    if not name:
        return None
    spec = _section(obj, "spec")
    status = _section(obj, "status")
    usage = tuple((flavor, resource, total) for (flavor, resource), (total, _borrowed)
                  in _usage_map(status.get("flavorUsage")).items())
    return LocalQueueView(
        namespace=_text(metadata.get("namespace")), name=name,
        cluster_queue=_text(spec.get("clusterQueue")),
        pending_workloads=_int(status.get("pendingWorkloads")),
        reserving_workloads=_int(status.get("reservingWorkloads")),
        admitted_workloads=_int(status.get("admittedWorkloads")),
        usage=usage,
    )


# -- a Workload's admission ---------------------------------------------------------------------


@dataclass(frozen=True)
class AdmissionStatus:
    """A job's admission as its Workload says: `state` (one of `ADMISSION_STATES`), the
    deciding condition's reason and message (Kueue's words, verbatim), the queues, and the
    position in its ClusterQueue (1 = next; None unless pending and known)."""

    queue: str
    cluster_queue: str
    state: str
    reason: str = ""
    message: str = ""
    position: int | None = None
    position_in_local_queue: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue, "cluster_queue": self.cluster_queue or None,
            "state": self.state, "reason": self.reason, "message": self.message,
            "position": self.position, "position_in_local_queue": self.position_in_local_queue,
        }


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for condition in _items(status.get("conditions"), 64):
        if isinstance(condition, dict) and isinstance(condition.get("type"), str):
            found[condition["type"]] = condition
    return found


def _is_true(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


# Which condition decides the state, in order: the first true one wins; none true: pending.
_DECIDING = (("Finished", "finished"), ("Preempted", "preempted"), ("Evicted", "evicted"),
             ("Admitted", "admitted"), ("QuotaReserved", "quota_reserved"))


def workload_admission(workload: Any, *, queue: str = "") -> AdmissionStatus:
    """The admission state a Workload's conditions say (`queue`: when the Workload names none).

    A Workload that is absent (None) is pending: Kueue creates it once the group's pods exist.
    """
    if not isinstance(workload, dict):
        return AdmissionStatus(queue=queue, cluster_queue="", state="pending")
    spec = _section(workload, "spec")
    status = _section(workload, "status")
    admission = _section(status, "admission")
    conditions = _conditions(status)
    state, deciding = "pending", conditions.get("QuotaReserved")
    for kind, name in _DECIDING:
        if _is_true(conditions.get(kind)):
            state, deciding = name, conditions[kind]
            break
    return AdmissionStatus(
        queue=_text(spec.get("queueName")) or queue,
        cluster_queue=_text(admission.get("clusterQueue")),
        state=state,
        reason=_text((deciding or {}).get("reason"), 255),
        message=_text((deciding or {}).get("message"), _MAX_TEXT),
    )


@dataclass(frozen=True)
class WorkloadEviction:
    """A Workload's `Evicted=True` condition: Kueue's reason (`Preempted`, `Deactivated...`,
    `PodsReadyTimeout`, ...), message and when (its `lastTransitionTime`, as written)."""

    reason: str
    message: str
    at: str


def workload_eviction(workload: Any) -> WorkloadEviction | None:
    """The Workload's eviction while its `Evicted` condition is True, else None."""
    if not isinstance(workload, dict):
        return None
    evicted = _conditions(_section(workload, "status")).get("Evicted")
    if not _is_true(evicted):
        return None
    assert evicted is not None
    return WorkloadEviction(reason=_text(evicted.get("reason"), 255),
                            message=_text(evicted.get("message"), _MAX_TEXT),
                            at=_text(evicted.get("lastTransitionTime"), 64))


def pending_positions(summary: Any) -> dict[str, tuple[int, int]]:
    """A visibility `PendingWorkloadsSummary`: Workload name → (position in its ClusterQueue,
    position in its LocalQueue), both counted from 1 (Kueue counts from 0)."""
    positions: dict[str, tuple[int, int]] = {}
    items = summary.get("items") if isinstance(summary, dict) else None
    for item in _items(items, 100_000):
        if not isinstance(item, dict):
            continue
        metadata = _section(item, "metadata")
        name = _text(metadata.get("name"))
        if name:
            positions[name] = (_int(item.get("positionInClusterQueue")) + 1,
                               _int(item.get("positionInLocalQueue")) + 1)
    return positions


def cluster_queues_in(views: Iterable[ClusterQueueView | None]) -> tuple[ClusterQueueView, ...]:
    """The views that were read, sorted by name, at most `MAX_CLUSTER_QUEUES`."""
    return tuple(sorted((v for v in views if v is not None), key=lambda v: v.name)
                 )[:MAX_CLUSTER_QUEUES]


def local_queues_in(views: Iterable[LocalQueueView | None]) -> tuple[LocalQueueView, ...]:
    """The views that were read, sorted by namespace and name, at most `MAX_LOCAL_QUEUES`."""
    return tuple(sorted((v for v in views if v is not None),
                        key=lambda v: (v.namespace, v.name)))[:MAX_LOCAL_QUEUES]
