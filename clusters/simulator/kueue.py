"""Kueue on a simulated cluster (SPEC 15): ClusterQueues, LocalQueues, plain pod groups'
Workloads, admission in order while quota lasts, and the visibility API's positions.

Modelled on Kueue's own sources (kubernetes-sigs/kueue: `pkg/controller/jobs/pod`,
`pkg/scheduler/flavorassigner`, `pkg/workload`, `pkg/visibility`), in what RLark relies on:

- A Job whose pod templates carry `kueue.x-k8s.io/queue-name` is one pod group, named by
  `kueue.x-k8s.io/pod-group-name` (RLark's manifest names it after the Job); its Workload has
  the group's name, in the Job's namespace, and one pod set per distinct pod role (Kueue names
  a group's pod sets by an 8-hex-digit hash of the pod's role: its containers, nodeSelector and
  so on), each with the count of pods of that role and one pod's requests.
- Until the Workload is admitted every pod of the group carries the scheduling gate
  `kueue.x-k8s.io/admission`: the scheduler does not look at it.
- Each pass admits, per ClusterQueue, the pending Workloads in creation order while quota
  lasts (`BestEffortFIFO`: one that does not fit is skipped, later ones are still tried). A
  pod set takes the first flavor (in the ClusterQueue's order) that holds all its requests on
  top of what the Workload's earlier pod sets took; the quota of a (flavor, resource) is its
  nominal quota, plus, in a cohort, what the cohort's other members leave unused, up to the
  borrowing limit. A Workload that does not fit keeps `QuotaReserved=False`, reason `Pending`,
  and the flavor assigner's message ("couldn't assign flavors to pod set 1a2b3c4d:
  insufficient unused quota for nvidia.com/gpu in flavor a100, 8 more needed").
- Admitted: `QuotaReserved=True` ("Quota reserved in ClusterQueue ..."), `Admitted=True`
  ("The workload is admitted"), `status.admission` with each pod set's flavors and usage. When
  the Job ends the Workload is `Finished` ("Pods succeeded: 4/4.") and its quota is free; a
  deleted Job takes its Workload with it.

- Priority: a pod group whose pods carry `kueue.x-k8s.io/priority-class` gets that
  WorkloadPriorityClass's value (`spec.priority`, `priorityClassName`, `priorityClassSource:
  kueue.x-k8s.io/workloadpriorityclass`); a class the cluster does not have makes no Workload
  (the Job gets a `WorkloadPriorityClassNotFound` Warning, its pods stay gated); none: 0.
  Pending Workloads are tried by priority, then by creation or last eviction (Kueue's
  `requeuingStrategy.timestamp: Eviction`).
- Preemption within a ClusterQueue (`pkg/scheduler/preemption`, classical): when a Workload
  does not fit and its ClusterQueue's `withinClusterQueue` is `LowerPriority` (or
  `LowerOrNewerEqualPriority`), the admitted Workloads of that queue with a lower priority (or
  an equal one, admitted later) are candidates, lowest priority first, then the most recently
  admitted; they are removed until the Workload fits, then those not needed are put back. The
  targets get `Evicted=True` reason `Preempted` and `Preempted=True` reason `InClusterQueue`,
  both with Kueue's message ("Preempted to accommodate a workload (UID: ..., JobUID: UNKNOWN)
  due to prioritization in the ClusterQueue; preemptor path: /vision-rl; preemptee path:
  /vision-rl": a pod group's Workload has no `kueue.x-k8s.io/job-uid` label). The preemptor
  waits (`QuotaReserved=False`, the flavor assigner's message) and is admitted on a later pass,
  once the targets' quota is free.
- Eviction (`pkg/workload/evict`, `pkg/controller/jobframework`): an evicted Workload's Job is
  stopped (its pods are deleted and come back gated: `ClusterState` does it), then its quota is
  released: `QuotaReserved=False` reason `Pending` with the eviction's message, `Admitted=False`
  `NoReservation`, `status.admission` gone, and `Requeued` True for a preemption (it waits in
  its queue again) or False for a deactivation. `deactivate` is an administrator's `spec.active:
  false` (`Evicted` reason `Deactivated`, "The workload is deactivated", or with Kueue's own
  causes `DeactivatedDueToRequeuingLimitExceeded` / `...MaximumExecutionTimeExceeded`); an
  inactive Workload is not queued until `activate` (`Requeued=True` `Reactivated`, "The workload
  was reactivated"). Admitted again: `Evicted` and `Preempted` turn False, reason
  `QuotaReserved`, "Previously: " and the old message.

Admission checks, partial admission, cohort reclamation and fair sharing, borrowWithinCohort,
pod PriorityClasses and topology are not modelled. Quantities are kept in scheduler units
(`clusters.podrequests`: millicores, bytes, whole devices).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusters.podrequests import PodSpecError, format_units, pod_requests
from clusters.simulator.kueuespec import PODS, ClusterQueueSpec, KueueSpec
from clusters.simulator.objects import now_timestamp
from clusters.simulator.pods import pod_refs, pod_spec

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"
VISIBILITY_API_VERSION = "visibility.kueue.x-k8s.io/v1beta1"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
_ENDED = ("Succeeded", "Failed")

# Kueue's words (apis/kueue/v1beta1/workload_types.go, pkg/scheduler/preemption).
EVICTED_BY_PREEMPTION = "Preempted"
IN_CLUSTER_QUEUE = "InClusterQueue"
DEACTIVATED = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"
DEACTIVATION_CAUSES = {
    "RequeuingLimitExceeded": "exceeding the maximum number of re-queuing retries",
    "MaximumExecutionTimeExceeded": "exceeding the maximum execution time",
}
"""The causes Kueue deactivates a Workload for by itself, with its words for each."""
_PREEMPTION_REASONS = {IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue"}

Object = dict[str, Any]

# -- pod groups and their Workloads -----------------------------------------------------------


@dataclass(frozen=True)
class PodSet:
    """Pods of one role of a group: Kueue's pod set (named by the role's hash)."""

    name: str
    count: int
    requests: Mapping[str, int]  # one pod's, scheduler units
    template: Object


@dataclass
class Workload:
    namespace: str
    name: str
    uid: str
    created: str
    order: int
    queue: str
    owner: tuple[str, str]  # the Job's name and uid
    pod_sets: tuple[PodSet, ...]
    problem: str = ""  # a pod spec Kueue cannot read (the Workload stays pending)
    conditions: dict[str, Object] = field(default_factory=dict)
    cluster_queue: str = ""
    assignments: tuple[Object, ...] = ()
    usage: dict[tuple[str, str], int] = field(default_factory=dict)  # (flavor, resource)
    version: int = 0
    priority: int = 0
    priority_class: str = ""
    active: bool = True  # spec.active: an inactive Workload is not queued
    reserved: int = 0  # when its quota was last reserved (a counter): the newest goes first
    evicting: bool = False  # Evicted=True and its Job not stopped yet (`take_evictions`)

    @property
    def admitted(self) -> bool:
        return (self.conditions.get("Admitted") or {}).get("status") == "True"

    @property
    def finished(self) -> bool:
        return (self.conditions.get("Finished") or {}).get("status") == "True"

    @property
    def pending(self) -> bool:
        """Waiting in its queue: not admitted, not finished, active."""
        return not self.admitted and not self.finished and self.active

    @property
    def evicted(self) -> bool:
        return (self.conditions.get("Evicted") or {}).get("status") == "True"

    def set_condition(self, kind: str, status: str, reason: str, message: str,
                      now: str) -> bool:
        old = self.conditions.get(kind)
        since = now
        if old is not None:
            if (old["status"], old["reason"], old["message"]) == (status, reason, message):
                return False
            if old["status"] == status:
                since = old["lastTransitionTime"]
        self.conditions[kind] = {
            "type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": 1,
        }
        return True


def role_hash(template: Object) -> str:
    """The 8 hex digits Kueue names a pod group's pod set by: a hash of what makes the pod's
    role (containers, init containers, nodeSelector, affinity, tolerations, ...)."""
    given = template.get("spec")
    spec: Object = given if isinstance(given, dict) else {}
    shape = {key: spec.get(key) for key in (
        "initContainers", "containers", "nodeSelector", "affinity", "tolerations",
        "runtimeClassName", "priority", "topologySpreadConstraints", "overhead",
        "resourceClaims")}
    text = json.dumps({"spec": shape}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def group_of(job: Object) -> tuple[str, str] | None:
    """(group name, LocalQueue) of a Job whose pod templates join a Kueue pod group."""
    for task in (job.get("spec") or {}).get("tasks") or []:
        template = task.get("template") if isinstance(task, dict) else None
        labels = ((template or {}).get("metadata") or {}).get("labels") or {}
        queue, group = labels.get(QUEUE_NAME_LABEL), labels.get(POD_GROUP_NAME_LABEL)
        if isinstance(queue, str) and queue:
            return (group if isinstance(group, str) and group else job["metadata"]["name"]),\
                queue
    return None


def priority_class_of(job: Object) -> str:
    """The WorkloadPriorityClass the group's pods name (`kueue.x-k8s.io/priority-class`)."""
    for task in (job.get("spec") or {}).get("tasks") or []:
        template = task.get("template") if isinstance(task, dict) else None
        labels = ((template or {}).get("metadata") or {}).get("labels") or {}
        name = labels.get(PRIORITY_CLASS_LABEL)
        if isinstance(name, str) and name:
            return name
    return ""


def preemption_message(preemptor: Workload, reason: str, preemptor_path: str,
                       preemptee_path: str) -> str:
    """Kueue's `preemptionMessage` (pkg/scheduler/preemption/preemption.go). A pod group's
    Workload carries no `kueue.x-k8s.io/job-uid` label: its JobUID reads UNKNOWN."""
    return (f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, "
            f"JobUID: UNKNOWN) due to {_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}; "
            f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}")


def pod_sets_of(job: Object) -> tuple[tuple[PodSet, ...], str]:
    """The group's pod sets (by role hash, in the order first seen) and a problem, if any."""
    counts: dict[str, int] = {}
    first: dict[str, Any] = {}
    for ref in pod_refs(job):
        name = role_hash(ref.template)
        counts[name] = counts.get(name, 0) + 1
        first.setdefault(name, ref)
    sets = []
    for name, count in counts.items():
        ref = first[name]
        try:
            requests = dict(pod_requests(pod_spec(ref)))
        except PodSpecError as error:
            return (), f"the pod's spec is invalid: {error}"
        sets.append(PodSet(name=name, count=count, requests=requests, template=ref.template))
    return tuple(sets), ""


def _amount(resource: str, units: int) -> str:
    return str(units) if resource == PODS else format_units(resource, units)


# -- the model ----------------------------------------------------------------------------------


class KueueModel:
    """Kueue on one cluster: its queues (`KueueSpec`) and the Workloads of its pod groups.
    The cluster's state holds one and calls it under the cluster's lock."""

    def __init__(self, spec: KueueSpec | None) -> None:
        self.spec = spec
        self.workloads: dict[tuple[str, str], Workload] = {}
        self._order = 0
        self._reserved = 0
        self._version = 0

    @property
    def enabled(self) -> bool:
        return self.spec is not None

    def replace(self, spec: KueueSpec | None) -> None:
        """New queues (the Workloads stay; admitted ones keep their quota)."""
        self.spec = spec
        self._version += 1

    def reset(self) -> None:
        self.workloads.clear()
        self._version += 1

    def _bump(self, workload: Workload) -> None:
        self._version += 1
        workload.version = self._version

    # The pod groups

    def observe(self, jobs: Iterable[Object], *, now: str | None = None
                ) -> list[tuple[Object, str]]:
        """Bring the Workloads in line with the Jobs: one for every new pod group, Finished
        when its Job ended, gone with its Job. Returns the Jobs Kueue cannot make a Workload
        for yet, each with its Warning (a WorkloadPriorityClass the cluster does not have)."""
        if self.spec is None:
            return []
        now = now or now_timestamp()
        seen: set[tuple[str, str]] = set()
        refused: list[tuple[Object, str]] = []
        for job in jobs:
            group = group_of(job)
            if group is None:
                continue
            name, queue = group
            key = (job["metadata"]["namespace"], name)
            seen.add(key)
            workload = self.workloads.get(key)
            if workload is None or workload.owner[1] != job["metadata"]["uid"]:
                class_name = priority_class_of(job)
                priority = self.spec.priority_class(class_name) if class_name else None
                if class_name and priority is None:
                    refused.append((job, f'WorkloadPriorityClass "{class_name}" not found'))
                    seen.discard(key)
                    continue
                workload = self._create(job, key, queue, now, priority=priority.value
                                        if priority else 0, priority_class=class_name)
            phase = (job.get("status") or {}).get("phase")
            if phase in _ENDED and not workload.finished:
                self._finish(workload, phase, now)
        for key in [k for k in self.workloads if k not in seen]:
            del self.workloads[key]
            self._version += 1
        return refused

    def forget_job(self, namespace: str, name: str) -> None:
        """The Job is deleted: its Workload goes (and frees its quota) at once."""
        for key in [k for k, w in self.workloads.items()
                    if k[0] == namespace and w.owner[0] == name]:
            del self.workloads[key]
            self._version += 1

    def _create(self, job: Object, key: tuple[str, str], queue: str, now: str, *,
                priority: int = 0, priority_class: str = "") -> Workload:
        sets, problem = pod_sets_of(job)
        self._order += 1
        workload = Workload(namespace=key[0], name=key[1], uid=str(uuid.uuid4()), created=now,
                            order=self._order, queue=queue,
                            owner=(job["metadata"]["name"], job["metadata"]["uid"]),
                            pod_sets=sets, problem=problem, priority=priority,
                            priority_class=priority_class)
        self.workloads[key] = workload
        self._bump(workload)
        return workload

    def _finish(self, workload: Workload, phase: str, now: str) -> None:
        total = sum(s.count for s in workload.pod_sets)
        succeeded = total if phase == "Succeeded" else 0
        workload.set_condition("Finished", "True", phase, f"Pods succeeded: {succeeded}/{total}.",
                               now)
        workload.usage = {}
        workload.evicting = False
        self._bump(workload)

    def gated(self, job: Object) -> bool:
        """Whether the Job's pods still carry Kueue's scheduling gate."""
        if self.spec is None:
            return False
        group = group_of(job)
        if group is None:
            return False
        workload = self.workloads.get((job["metadata"]["namespace"], group[0]))
        return workload is None or not workload.admitted

    # Admission

    def _used(self, queue: str) -> dict[tuple[str, str], int]:
        used: dict[tuple[str, str], int] = {}
        for workload in self.workloads.values():
            if workload.admitted and not workload.finished and workload.cluster_queue == queue:
                for key, amount in workload.usage.items():
                    used[key] = used.get(key, 0) + amount
        return used

    def _cohort(self, queue: ClusterQueueSpec) -> list[ClusterQueueSpec]:
        assert self.spec is not None
        if not queue.cohort:
            return [queue]
        return [q for q in self.spec.cluster_queues if q.cohort == queue.cohort]

    def capacity(self, queue: ClusterQueueSpec, flavor: str, resource: str,
                 usage: Mapping[str, Mapping[tuple[str, str], int]]) -> tuple[int, int]:
        """(what the queue could ever hold, what it can still take now) of (flavor, resource):
        Kueue's PotentialAvailable and Available for a flat cohort, lending limits aside."""
        own = next((f for f in queue.flavors if f.name == flavor), None)
        quota = own.quota(resource) if own is not None else None
        if quota is None:
            return 0, 0
        used_here = usage.get(queue.name, {}).get((flavor, resource), 0)
        if not queue.cohort:
            return quota.nominal, max(quota.nominal - used_here, 0)
        members = self._cohort(queue)
        lent = 0
        free = 0
        for member in members:
            member_flavor = next((f for f in member.flavors if f.name == flavor), None)
            member_quota = member_flavor.quota(resource) if member_flavor else None
            if member_quota is None:
                continue
            if member.name != queue.name:
                lent += member_quota.nominal
            free += member_quota.nominal - usage.get(member.name, {}).get((flavor, resource), 0)
        limit = quota.borrowing_limit
        potential = quota.nominal + (min(limit, lent) if limit is not None else lent)
        available = min(free, potential - used_here)
        return potential, max(available, 0)

    def _assign(self, workload: Workload, queue: ClusterQueueSpec,
                usage: Mapping[str, Mapping[tuple[str, str], int]]
                ) -> tuple[list[Object], dict[tuple[str, str], int], str]:
        """Flavors for every pod set (Kueue's flavor assigner), the usage they take, and, when
        some pod set fits no flavor, the message saying why."""
        assumed: dict[tuple[str, str], int] = {}
        assignments: list[Object] = []
        messages: list[str] = []
        for pod_set in workload.pod_sets:
            requests = {r: a * pod_set.count for r, a in pod_set.requests.items() if a}
            if queue.covers(PODS):
                requests[PODS] = pod_set.count
            uncovered = [r for r in requests if not queue.covers(r)]
            if uncovered:
                messages.append(f"couldn't assign flavors to pod set {pod_set.name}: resource "
                                f"{uncovered[0]} unavailable in ClusterQueue")
                continue
            chosen, reasons = self._first_fit(queue, requests, assumed, usage)
            if chosen is None:
                messages.append(f"couldn't assign flavors to pod set {pod_set.name}: "
                                + ", ".join(sorted(reasons)))
                continue
            for resource, amount in requests.items():
                assumed[(chosen, resource)] = assumed.get((chosen, resource), 0) + amount
            assignments.append({
                "name": pod_set.name, "count": pod_set.count,
                "flavors": {r: chosen for r in requests},
                "resourceUsage": {r: _amount(r, a) for r, a in requests.items()},
            })
        return assignments, assumed, "; ".join(messages)

    def _first_fit(self, queue: ClusterQueueSpec, requests: Mapping[str, int],
                   assumed: Mapping[tuple[str, str], int],
                   usage: Mapping[str, Mapping[tuple[str, str], int]]
                   ) -> tuple[str | None, list[str]]:
        reasons: list[str] = []
        for flavor in queue.flavors:
            fits = True
            for resource, amount in requests.items():
                if flavor.quota(resource) is None:
                    fits = False
                    continue
                potential, available = self.capacity(queue, flavor.name, resource, usage)
                before = assumed.get((flavor.name, resource), 0)
                value = before + amount
                if value > potential:
                    reasons.append(
                        f"insufficient quota for {resource} in flavor {flavor.name}, previously "
                        f"considered podsets requests ({_amount(resource, before)}) + current "
                        f"podset request ({_amount(resource, amount)}) > maximum capacity "
                        f"({_amount(resource, potential)})")
                    fits = False
                elif value > available:
                    reasons.append(f"insufficient unused quota for {resource} in flavor "
                                   f"{flavor.name}, {_amount(resource, value - available)} "
                                   "more needed")
                    fits = False
            if fits:
                return flavor.name, []
        return None, reasons

    def admit(self, *, now: str | None = None) -> list[Workload]:
        """One scheduling pass: per ClusterQueue, its pending Workloads in creation order,
        each admitted when it fits the quota left (BestEffortFIFO); those admitted."""
        if self.spec is None:
            return []
        now = now or now_timestamp()
        usage = {q.name: self._used(q.name) for q in self.spec.cluster_queues}
        admitted: list[Workload] = []
        for workload in sorted(self.workloads.values(), key=_queue_order):
            if not workload.pending:
                continue
            blocker = self._blocker(workload)
            if blocker:
                if workload.set_condition("QuotaReserved", "False", "Inadmissible", blocker, now):
                    self._bump(workload)
                continue
            local = self.spec.local_queue(workload.namespace, workload.queue)
            assert local is not None
            queue = self.spec.cluster_queue(local.cluster_queue)
            assert queue is not None
            assignments, taken, message = self._assign(workload, queue, usage)
            if message:
                # The targets keep their quota until their Jobs are stopped and it is released
                # (`release`): the preemptor is admitted on a later pass.
                for target in self._preemption_targets(workload, queue, usage):
                    self._preempt(target, workload, queue, now)
                if workload.set_condition("QuotaReserved", "False", "Pending", message, now):
                    self._bump(workload)
                continue
            self._reserve(workload, queue.name, assignments, taken, now)
            for key, amount in taken.items():
                usage[queue.name][key] = usage[queue.name].get(key, 0) + amount
            admitted.append(workload)
        return admitted

    # Preemption and eviction

    def _preemption_targets(self, workload: Workload, queue: ClusterQueueSpec,
                            usage: Mapping[str, Mapping[tuple[str, str], int]]
                            ) -> list[Workload]:
        """Kueue's classical preemption within a ClusterQueue: the fewest lower-priority
        admitted Workloads whose quota lets `workload` fit, or none when no set of them does."""
        policy = queue.within_cluster_queue
        if policy not in ("LowerPriority", "LowerOrNewerEqualPriority"):
            return []
        candidates = [
            w for w in self.workloads.values()
            if w.admitted and not w.finished and not w.evicted and w.cluster_queue == queue.name
            and (w.priority < workload.priority or (
                policy == "LowerOrNewerEqualPriority" and w.priority == workload.priority
                and w.order > workload.order))]
        # Kueue's CandidatesOrdering for one queue: lowest priority, then newest admission.
        candidates.sort(key=lambda w: (w.priority, -w.reserved))
        trial = {name: dict(used) for name, used in usage.items()}
        mine = trial.setdefault(queue.name, {})

        def take(target: Workload, sign: int) -> None:
            for key, amount in target.usage.items():
                mine[key] = mine.get(key, 0) + sign * amount

        def fits() -> bool:
            return not self._assign(workload, queue, trial)[2]

        targets: list[Workload] = []
        for candidate in candidates:
            take(candidate, -1)
            targets.append(candidate)
            if fits():
                for index in range(len(targets) - 2, -1, -1):  # fillBackWorkloads
                    take(targets[index], +1)
                    if fits():
                        del targets[index]
                    else:
                        take(targets[index], -1)
                return targets
        return []

    def _path(self, queue: ClusterQueueSpec) -> str:
        """Kueue's `buildCQPath`: the cohort, then the ClusterQueue."""
        return "/" + "/".join([*([queue.cohort] if queue.cohort else []), queue.name])

    def _preempt(self, target: Workload, preemptor: Workload, queue: ClusterQueueSpec,
                 now: str) -> None:
        path = self._path(queue)
        message = preemption_message(preemptor, IN_CLUSTER_QUEUE, path, path)
        target.set_condition("Evicted", "True", EVICTED_BY_PREEMPTION, message, now)
        target.set_condition("Preempted", "True", IN_CLUSTER_QUEUE, message, now)
        target.evicting = True
        self._bump(target)

    def deactivate(self, workload: Workload, *, cause: str = "",
                   now: str | None = None) -> None:
        """`spec.active: false` (an administrator's, or Kueue's own for `cause`, one of
        `DEACTIVATION_CAUSES`): Evicted at once; an admitted one's Job is to be stopped."""
        now = now or now_timestamp()
        reason = f"{DEACTIVATED}DueTo{cause}" if cause else DEACTIVATED
        message = (f"{DEACTIVATED_MESSAGE} due to {DEACTIVATION_CAUSES[cause]}" if cause
                   else DEACTIVATED_MESSAGE)
        workload.active = False
        workload.set_condition("Evicted", "True", reason, message, now)
        workload.evicting = workload.admitted
        self._bump(workload)

    def activate(self, workload: Workload, *, now: str | None = None) -> None:
        """`spec.active: true` again: queued anew (its `Evicted` stays until admitted)."""
        if workload.active:
            return
        now = now or now_timestamp()
        workload.active = True
        workload.set_condition("Requeued", "True", "Reactivated", "The workload was reactivated",
                               now)
        self._order += 1
        workload.order = self._order
        self._bump(workload)

    def take_evictions(self) -> list[Workload]:
        """The evicted Workloads whose Jobs are still to be stopped (then `release` each)."""
        return sorted((w for w in self.workloads.values() if w.evicting),
                      key=lambda w: w.order)

    def release(self, workload: Workload, *, now: str | None = None) -> None:
        """The evicted Workload's Job is stopped: its quota is released, and a preempted one
        waits in its queue again, ordered by the eviction (jobframework's step 6)."""
        now = now or now_timestamp()
        evicted = workload.conditions.get("Evicted") or {}
        reason, message = str(evicted.get("reason") or ""), str(evicted.get("message") or "")
        requeued = reason == EVICTED_BY_PREEMPTION
        workload.set_condition("Requeued", "True" if requeued else "False", reason, message, now)
        workload.set_condition("QuotaReserved", "False", "Pending", message, now)
        workload.set_condition("Admitted", "False", "NoReservation",
                               "The workload has no reservation", now)
        workload.cluster_queue = ""
        workload.assignments = ()
        workload.usage = {}
        workload.evicting = False
        if requeued:
            self._order += 1
            workload.order = self._order
        self._bump(workload)

    def find(self, namespace: str, name: str) -> Workload | None:
        return self.workloads.get((namespace, name))

    def _blocker(self, workload: Workload) -> str:
        assert self.spec is not None
        if workload.problem:
            return workload.problem
        local = self.spec.local_queue(workload.namespace, workload.queue)
        if local is None:
            return f"LocalQueue {workload.queue} doesn't exist"
        if self.spec.cluster_queue(local.cluster_queue) is None:
            return f"ClusterQueue {local.cluster_queue} doesn't exist"
        return ""

    def _reserve(self, workload: Workload, queue: str, assignments: list[Object],
                 taken: dict[tuple[str, str], int], now: str) -> None:
        workload.cluster_queue = queue
        workload.assignments = tuple(assignments)
        workload.usage = dict(taken)
        workload.set_condition("QuotaReserved", "True", "QuotaReserved",
                               f"Quota reserved in ClusterQueue {queue}", now)
        workload.set_condition("Admitted", "True", "Admitted", "The workload is admitted", now)
        for kind in ("Evicted", "Preempted"):  # workload.SetQuotaReservation's reset
            old = workload.conditions.get(kind)
            if old is not None and old["status"] == "True":
                workload.set_condition(kind, "False", "QuotaReserved",
                                       f"Previously: {old['message']}", now)
        self._reserved += 1
        workload.reserved = self._reserved
        self._bump(workload)

    # What the API serves

    def pending_in(self, queue: str) -> list[Workload]:
        """The pending Workloads of a ClusterQueue, in the order Kueue would try them."""
        if self.spec is None:
            return []
        spec = self.spec
        ordered = sorted(self.workloads.values(), key=_queue_order)
        return [w for w in ordered if w.pending and (local := spec.local_queue(
            w.namespace, w.queue)) is not None and local.cluster_queue == queue]

    def workload_object(self, workload: Workload, *, cluster: str) -> Object:
        status: Object = {"conditions": list(workload.conditions.values())}
        if workload.cluster_queue and not workload.finished:
            status["admission"] = {"clusterQueue": workload.cluster_queue,
                                   "podSetAssignments": list(workload.assignments)}
        return {
            "apiVersion": KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {
                "name": workload.name, "namespace": workload.namespace, "uid": workload.uid,
                "resourceVersion": str(workload.version),
                "creationTimestamp": workload.created, "generation": 1,
                "labels": {"kueue.x-k8s.io/queue-name": workload.queue},
                "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
                "ownerReferences": [{"apiVersion": "rlinf.io/v1alpha1", "kind": "Job",
                                     "name": workload.owner[0], "uid": workload.owner[1]}],
            },
            "spec": {
                "queueName": workload.queue, "active": workload.active,
                "priority": workload.priority,
                **({"priorityClassName": workload.priority_class,
                    "priorityClassSource": WORKLOAD_PRIORITY_CLASS_SOURCE}
                   if workload.priority_class else {}),
                "podSets": [{"name": s.name, "count": s.count, "template": s.template}
                            for s in workload.pod_sets],
            },
            "status": status,
        }

    def workload_items(self, namespace: str | None, *, cluster: str) -> list[Object]:
        keys = sorted(k for k in self.workloads if namespace is None or k[0] == namespace)
        return [self.workload_object(self.workloads[k], cluster=cluster) for k in keys]

    def get_workload(self, namespace: str, name: str, *, cluster: str) -> Object | None:
        workload = self.workloads.get((namespace, name))
        return None if workload is None else self.workload_object(workload, cluster=cluster)

    def _usage_list(self, usage: Mapping[tuple[str, str], int], queue: ClusterQueueSpec,
                    borrowed: Mapping[tuple[str, str], int] | None = None) -> list[Object]:
        return [{"name": flavor.name, "resources": [
            {"name": q.resource, "total": _amount(q.resource, usage.get((flavor.name, q.resource),
                                                                          0)),
             **({"borrowed": _amount(q.resource, borrowed.get((flavor.name, q.resource), 0))}
                if borrowed is not None else {})}
            for q in flavor.quotas]} for flavor in queue.flavors]

    def cluster_queue_objects(self) -> list[Object]:
        if self.spec is None:
            return []
        objects = []
        for queue in sorted(self.spec.cluster_queues, key=lambda q: q.name):
            used = self._used(queue.name)
            borrowed = {}
            for flavor in queue.flavors:
                for quota in flavor.quotas:
                    key = (flavor.name, quota.resource)
                    borrowed[key] = max(used.get(key, 0) - quota.nominal, 0)
            admitted = [w for w in self.workloads.values()
                        if w.admitted and not w.finished and w.cluster_queue == queue.name]
            spec: Object = {
                "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [{"coveredResources": queue.covered(), "flavors": [
                    {"name": flavor.name, "resources": [
                        {"name": q.resource, "nominalQuota": q.nominal_text,
                         **({"borrowingLimit": q.borrowing_text} if q.borrowing_text else {})}
                        for q in flavor.quotas]}
                    for flavor in queue.flavors]}],
            }
            if queue.cohort:
                spec["cohort"] = queue.cohort
            spec["preemption"] = {"withinClusterQueue": queue.within_cluster_queue,
                                  "reclaimWithinCohort": "Never"}
            objects.append({
                "apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue",
                "metadata": {"name": queue.name, "uid": _uid("clusterqueue", queue.name),
                             "resourceVersion": str(self._version), "generation": 1},
                "spec": spec,
                "status": {
                    "pendingWorkloads": len(self.pending_in(queue.name)),
                    "reservingWorkloads": len(admitted), "admittedWorkloads": len(admitted),
                    "flavorsReservation": self._usage_list(used, queue, borrowed),
                    "flavorsUsage": self._usage_list(used, queue, borrowed),
                    "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                    "message": "Can admit new workloads",
                                    "lastTransitionTime": now_timestamp()}],
                },
            })
        return objects

    def local_queue_objects(self, namespace: str | None) -> list[Object]:
        if self.spec is None:
            return []
        objects = []
        for local in sorted(self.spec.local_queues, key=lambda q: (q.namespace, q.name)):
            if namespace is not None and local.namespace != namespace:
                continue
            mine = [w for w in self.workloads.values()
                    if (w.namespace, w.queue) == (local.namespace, local.name)]
            admitted = [w for w in mine if w.admitted and not w.finished]
            used: dict[tuple[str, str], int] = {}
            for workload in admitted:
                for key, amount in workload.usage.items():
                    used[key] = used.get(key, 0) + amount
            queue = self.spec.cluster_queue(local.cluster_queue)
            usage = self._usage_list(used, queue) if queue is not None else []
            objects.append({
                "apiVersion": KUEUE_API_VERSION, "kind": "LocalQueue",
                "metadata": {"name": local.name, "namespace": local.namespace,
                             "uid": _uid("localqueue", local.namespace, local.name),
                             "resourceVersion": str(self._version), "generation": 1},
                "spec": {"clusterQueue": local.cluster_queue},
                "status": {
                    "pendingWorkloads": sum(1 for w in mine if w.pending),
                    "reservingWorkloads": len(admitted), "admittedWorkloads": len(admitted),
                    "flavorsReservation": usage, "flavorUsage": usage,
                    "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                    "message": "Can submit new workloads to localQueue",
                                    "lastTransitionTime": now_timestamp()}],
                },
            })
        return objects

    def priority_class_objects(self) -> list[Object]:
        """The WorkloadPriorityClasses (`kueue.x-k8s.io/v1beta1`), by name."""
        if self.spec is None:
            return []
        return [{"apiVersion": KUEUE_API_VERSION, "kind": "WorkloadPriorityClass",
                 "metadata": {"name": c.name, "uid": _uid("workloadpriorityclass", c.name),
                              "resourceVersion": "1", "generation": 1},
                 "value": c.value, **({"description": c.description} if c.description else {})}
                for c in sorted(self.spec.priority_classes, key=lambda c: c.name)]

    def resource_flavor_objects(self) -> list[Object]:
        if self.spec is None:
            return []
        names = sorted({f.name for q in self.spec.cluster_queues for f in q.flavors})
        return [{"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor",
                 "metadata": {"name": name, "uid": _uid("resourceflavor", name),
                              "resourceVersion": "1", "generation": 1}, "spec": {}}
                for name in names]

    def _pending_item(self, workload: Workload, *, position: int, local_position: int
                      ) -> Object:
        return {
            "metadata": {"name": workload.name, "namespace": workload.namespace,
                         "creationTimestamp": workload.created,
                         "ownerReferences": [{"apiVersion": "rlinf.io/v1alpha1", "kind": "Job",
                                              "name": workload.owner[0],
                                              "uid": workload.owner[1]}]},
            "priority": workload.priority, "localQueueName": workload.queue,
            "positionInClusterQueue": position, "positionInLocalQueue": local_position,
        }

    @staticmethod
    def _summary(items: list[Object]) -> Object:
        return {"kind": "PendingWorkloadsSummary", "apiVersion": VISIBILITY_API_VERSION,
                "metadata": {"creationTimestamp": None}, "items": items}

    def _local_positions(self, pending: list[Workload]) -> list[int]:
        seen: dict[tuple[str, str], int] = {}
        positions = []
        for workload in pending:
            key = (workload.namespace, workload.queue)
            positions.append(seen.get(key, 0))
            seen[key] = seen.get(key, 0) + 1
        return positions

    def cluster_queue_pending_summary(self, queue: str, *, limit: int, offset: int
                                      ) -> Object | None:
        """The visibility API's pending Workloads of a ClusterQueue (None: no such queue)."""
        if self.spec is None or self.spec.cluster_queue(queue) is None:
            return None
        pending = self.pending_in(queue)
        local = self._local_positions(pending)
        return self._summary([
            self._pending_item(w, position=i, local_position=local[i])
            for i, w in enumerate(pending)][offset:offset + limit])

    def pending_workloads_summary(self, namespace: str, local_queue: str, *, limit: int,
                                  offset: int) -> Object | None:
        """The visibility API's `PendingWorkloadsSummary` of a LocalQueue (None: no such
        LocalQueue), positions counted from 0 as Kueue counts them."""
        if self.spec is None:
            return None
        local = self.spec.local_queue(namespace, local_queue)
        if local is None:
            return None
        items: list[Object] = []
        mine = 0
        for position, workload in enumerate(self.pending_in(local.cluster_queue)):
            if (workload.namespace, workload.queue) != (namespace, local_queue):
                continue
            if mine >= offset and len(items) < limit:
                items.append(self._pending_item(workload, position=position, local_position=mine))
            mine += 1
        return self._summary(items)


def _queue_order(workload: Workload) -> tuple[int, int]:
    """Kueue's queue order: higher priority first, then creation or last eviction."""
    return (-workload.priority, workload.order)


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kueue/" + "/".join(parts)))
