"""Pending, explained (SPEC 15): why a submitted job waits, in one sentence.

The status pass (`jobs.records.status.sync_cluster`) calls `observe_pending` once per cluster
pass with what it has already read: the pods of each namespace (the attempt capture's one list
per namespace: their `PodScheduled` condition carries kube-scheduler's FailedScheduling
message, verbatim; their request and node selector), the Kueue admission it read back, and
the cluster's nodes with their occupancy from the inventory (one query, only when a Pending
run has an unbound pod). Where a Pending run has a pod waiting unbound, the namespace's
`FailedScheduling` events are listed once (`events_of`): the scheduler's message where the
pod's condition has none (a condition not written yet, or cleared), and how many times it
tried (`attempts`, the event's count) with the last try. Nothing is read per job or per
viewer.

What is stored (`RunRecord.pending`) are the facts: `since`, `source` and per role the
workers, how many wait, the cluster's message and the nodes short (the pre-flight's per-node
rule, `clusters.preflight.node_fit`). The sentence (`summary`) is made from them when shown
(`pending_view`), in the language of whoever reads it: the page's, the API caller's, each
email recipient's.

`source` is `kueue` while the Workload is not admitted (Kueue's message), `scheduler` when a
pod is `Unschedulable` (kube-scheduler's message), `rlark` when RLark's occupancy view is the
only evidence (pods not yet looked at by the scheduler, or none created yet).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from clusters.capacity import NodeCapacity
from clusters.inventory.selectors import node_capacity_of
from clusters.k8s import EventInfo, PodInfo
from clusters.kueue import QUEUED_STATES
from clusters.models import Node
from clusters.podrequests import PODS
from clusters.preflight import Shortfall, node_fit
from clusters.types import GPU_RESOURCE
from jobs.models import JobState, Role, RunRecord

__all__ = ["MESSAGE_MAX", "NodeView", "clean_message", "cluster_nodes", "explain",
           "observe_pending", "pending_view", "store_pending", "summary"]

MESSAGE_MAX = 2000
"""The most characters of a cluster's message kept (kube-scheduler's are a line or two)."""
SHORT_MAX = 20
"""The most nodes short kept per role."""
_LABEL_TASK = "rlinf.io/task"
_LABEL_JOB = "rlinf.io/job"
_UNSCHEDULABLE = "Unschedulable"
_FAILED_SCHEDULING = "FailedScheduling"
_KUEUE_WAITING = QUEUED_STATES
# C0 controls but tab and newline, DEL, C1 controls, lone surrogates: never stored or shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def clean_message(text: object) -> str:
    """A cluster's message as kept: control characters dropped, at most `MESSAGE_MAX`."""
    cleaned = _CONTROL.sub("", str(text or "")[:MESSAGE_MAX * 4])
    if len(cleaned) > MESSAGE_MAX:
        return cleaned[:MESSAGE_MAX - 1] + "…"
    return cleaned


@dataclass(frozen=True)
class NodeView:
    """A node of the inventory as the explanation needs it."""

    name: str
    labels: Mapping[str, str]
    ready: bool
    capacity: NodeCapacity


def cluster_nodes(cluster: str) -> list[NodeView]:
    """The cluster's present nodes with their occupancy: one query."""
    nodes = (Node.objects.filter(cluster__name=cluster, gone=False)
             .select_related("cluster", "occupancy").order_by("name"))
    return [NodeView(node.name, node.labels if isinstance(node.labels, dict) else {},
                     bool(node.ready), node_capacity_of(node)) for node in nodes]


def _short(needs: Mapping[str, int], selector: Mapping[str, str], taken: set[str],
           nodes: Sequence[NodeView], cluster: str) -> list[dict[str, str]]:
    """The matching ready nodes not already holding a worker of the role that lack capacity
    now: nodes that will hold a worker once freed first, then by name; `SHORT_MAX` at most."""
    found: list[tuple[bool, str, Shortfall]] = []
    wanted = {PODS: 1, **needs}
    for node in nodes:
        if not node.ready or node.name in taken:
            continue
        if any(node.labels.get(key) != value for key, value in selector.items()):
            continue
        fit = node_fit(node.capacity, wanted, cluster=cluster, node=node.name, usable=True)
        never = fit.state == "never"
        found.extend((never, node.name, item) for item in fit.short)
    found.sort(key=lambda entry: (entry[0], entry[1], entry[2].resource != GPU_RESOURCE))
    return [item.as_dict() for _never, _name, item in found[:SHORT_MAX]]


def _matching(selector: Mapping[str, str], nodes: Sequence[NodeView]) -> int:
    return sum(1 for node in nodes if node.ready
               and all(node.labels.get(k) == v for k, v in selector.items()))


def explain(*, pods: Sequence[PodInfo], admission: Mapping[str, Any], since: datetime | None,
            cluster: str, nodes: Sequence[NodeView] | None,
            role_names: Mapping[str, str] | None = None,
            events: Mapping[str, EventInfo] | None = None) -> dict[str, Any]:
    """The stored facts of one Pending run (pure): its pods, its admission, the nodes, and the
    newest `FailedScheduling` event of each pod (by pod name)."""
    role_names = role_names or {}
    events = events or {}
    kueue_waiting = str(admission.get("state") or "") in _KUEUE_WAITING
    by_task: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in pods:
        by_task[pod.labels.get(_LABEL_TASK, "")].append(pod)
    roles: list[dict[str, Any]] = []
    scheduler = False
    for task in sorted(by_task):
        members = by_task[task]
        waiting = [pod for pod in members if not pod.node and pod.phase == "Pending"]
        entry: dict[str, Any] = {"role": role_names.get(task, task), "workers": len(members),
                                 "waiting": len(waiting), "reason": "", "message": "",
                                 "short": [], "matching": None}
        if waiting:
            told = next((p for p in waiting if p.scheduling_reason == _UNSCHEDULABLE), None)
            heard = [events[p.name] for p in waiting if p.name in events]
            newest = max(heard, key=lambda event: event.last_at) if heard else None
            if newest is not None and not kueue_waiting:
                entry["attempts"] = max(event.count for event in heard)
                entry["last_attempt_at"] = newest.last_at or None
            if kueue_waiting:
                entry["reason"] = clean_message(admission.get("reason"))[:255]
                entry["message"] = clean_message(admission.get("message"))
            elif told is not None and told.scheduling_message:
                scheduler = True
                entry["reason"] = told.scheduling_reason
                entry["message"] = clean_message(told.scheduling_message)
            elif newest is not None:
                scheduler = True
                entry["reason"] = _UNSCHEDULABLE
                entry["message"] = clean_message(newest.message)
            elif told is not None:
                scheduler = True
                entry["reason"] = told.scheduling_reason
            if nodes is not None and not kueue_waiting:
                first = waiting[0]
                taken = {pod.node for pod in members if pod.node}
                entry["short"] = _short(first.requests, first.node_selector, taken, nodes,
                                        cluster)
                entry["matching"] = _matching(first.node_selector, nodes)
        roles.append(entry)
    source = "kueue" if kueue_waiting else "scheduler" if scheduler else "rlark"
    facts: dict[str, Any] = {"since": since.isoformat() if since else None, "source": source,
                             "roles": roles}
    if kueue_waiting:
        facts["queue"] = {key: admission.get(key) for key in
                          ("queue", "cluster_queue", "state", "position")}
    return facts


def _resource_word(resource: str) -> str:
    if resource == GPU_RESOURCE:
        return _("GPUs")
    if resource == "cpu":
        return _("CPU")
    if resource == "memory":
        return _("memory")
    if resource == "pods":
        return _("a pod slot")
    return resource


def _role_sentence(role: Mapping[str, Any]) -> str:
    values = {"role": role.get("role") or "", "waiting": role.get("waiting") or 0,
              "workers": role.get("workers") or 0}
    short = role.get("short") or []
    if short:
        first = short[0]
        return ngettext(
            "%(role)s: %(waiting)d of %(workers)d worker waits for %(resource)s: %(node)s has "
            "%(free)s of %(allocatable)s free, %(needed)s needed.",
            "%(role)s: %(waiting)d of %(workers)d workers wait for %(resource)s: %(node)s has "
            "%(free)s of %(allocatable)s free, %(needed)s needed.",
            int(values["workers"]),
        ) % {**values, "resource": _resource_word(str(first.get("resource"))),
             "node": first.get("node"), "free": first.get("free"),
             "allocatable": first.get("allocatable"), "needed": first.get("needed")}
    if role.get("matching") == 0:
        return ngettext(
            "%(role)s: %(waiting)d of %(workers)d worker waits: no ready node matches its "
            "labels.",
            "%(role)s: %(waiting)d of %(workers)d workers wait: no ready node matches their "
            "labels.", int(values["workers"])) % values
    if role.get("reason") == _UNSCHEDULABLE:
        return ngettext(
            "%(role)s: %(waiting)d of %(workers)d worker cannot be scheduled (the scheduler "
            "says why).",
            "%(role)s: %(waiting)d of %(workers)d workers cannot be scheduled (the scheduler "
            "says why).", int(values["workers"])) % values
    return ngettext(
        "%(role)s: %(waiting)d of %(workers)d worker is not scheduled yet.",
        "%(role)s: %(waiting)d of %(workers)d workers are not scheduled yet.",
        int(values["workers"])) % values


def summary(facts: Mapping[str, Any]) -> str:
    """The one sentence, in the active language."""
    if not facts:
        return ""
    if facts.get("source") == "kueue":
        queue = facts.get("queue") or {}
        values = {"position": queue.get("position"), "queue": queue.get("queue") or "—",
                  "cluster_queue": queue.get("cluster_queue") or "—"}
        if queue.get("state") == "preempted":
            if queue.get("position"):
                return _("Preempted by Kueue, waiting to be admitted again: position "
                         "%(position)s in ClusterQueue %(cluster_queue)s.") % values
            return _("Preempted by Kueue, waiting to be admitted again in LocalQueue "
                     "%(queue)s.") % values
        if queue.get("state") == "evicted":
            if queue.get("position"):
                return _("Evicted by Kueue, waiting to be admitted again: position "
                         "%(position)s in ClusterQueue %(cluster_queue)s.") % values
            return _("Evicted by Kueue, out of LocalQueue %(queue)s until it is requeued.") \
                % values
        if queue.get("position"):
            return _("Waiting for Kueue to admit the job: position %(position)s in "
                     "ClusterQueue %(cluster_queue)s.") % values
        return _("Waiting for Kueue to admit the job in LocalQueue %(queue)s.") % values
    waiting = [role for role in facts.get("roles") or [] if role.get("waiting")]
    if not facts.get("roles"):
        return _("The cluster has not created the job's pods yet.")
    if not waiting:
        return _("Every worker is placed; the pods are starting.")
    return " ".join(_role_sentence(role) for role in waiting)


def pending_view(facts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`pending` as the API, pages and notifications show it: the facts and the summary in
    the active language; None when the run is not Pending."""
    if not facts:
        return None
    roles = [{"role": role.get("role") or "", "workers": role.get("workers") or 0,
              "waiting": role.get("waiting") or 0, "message": role.get("message") or "",
              "attempts": role.get("attempts"), "last_attempt_at": role.get("last_attempt_at"),
              "short": list(role.get("short") or [])} for role in facts.get("roles") or []]
    view: dict[str, Any] = {"since": facts.get("since"), "source": facts.get("source"),
                            "summary": summary(facts), "roles": roles}
    if facts.get("queue"):
        view["queue"] = dict(facts["queue"])
    return view


def _role_names(pks: Iterable[int]) -> dict[int, dict[str, str]]:
    """Per run, its roles' Task names (lower case) → the names as typed: one query."""
    names: dict[int, dict[str, str]] = defaultdict(dict)
    rows = Role.objects.filter(job__run_record__pk__in=list(pks)).values_list(
        "job__run_record__pk", "name")
    for pk, name in rows:
        names[pk][str(name).lower()] = str(name)
    return names


def _newest_per_pod(events: Iterable[EventInfo]) -> dict[str, EventInfo]:
    newest: dict[str, EventInfo] = {}
    for event in events:
        if event.kind == "Pod" and event.reason == _FAILED_SCHEDULING and (
                event.name not in newest or event.last_at > newest[event.name].last_at):
            newest[event.name] = event
    return newest


def observe_pending(records: Sequence[RunRecord], pods: Mapping[str, Sequence[PodInfo]], *,
                    cluster: str,
                    events_of: Callable[[str], Sequence[EventInfo]] | None = None,
                    ) -> dict[int, dict[str, Any]]:
    """Each run's `pending` now (run record id → facts; {} when not Pending), from the pods
    listed per namespace (a namespace not listed: its runs keep what they have) and, for a
    namespace where a Pending run's pod waits unbound, its `FailedScheduling` events
    (`events_of(namespace)`, called once for that namespace; [] when they cannot be read)."""
    stored = RunRecord.objects.filter(pk__in=[r.pk for r in records]).order_by().values_list(
        "pk", "state", "pending_since")
    states = {pk: state for pk, state, _since in stored}
    since = {pk: at for pk, _state, at in stored}
    waiting = [r for r in records if states.get(r.pk) == JobState.PENDING]
    observed: dict[int, dict[str, Any]] = {
        r.pk: {} for r in records if states.get(r.pk) != JobState.PENDING}
    if not waiting:
        return observed
    by_job: dict[tuple[str, str], list[PodInfo]] = defaultdict(list)
    for namespace, listed in pods.items():
        for pod in listed:
            by_job[(namespace, pod.labels.get(_LABEL_JOB, ""))].append(pod)
    unbound_in = {r.namespace for r in waiting if r.namespace in pods and any(
        not pod.node for pod in by_job[(r.namespace, r.job_name)])}
    nodes = cluster_nodes(cluster) if unbound_in else None
    events = {namespace: _newest_per_pod(events_of(namespace)) if events_of else {}
              for namespace in sorted(unbound_in)}
    names = _role_names(r.pk for r in waiting)
    for record in waiting:
        if record.namespace not in pods:
            continue
        admission = record.admission if isinstance(record.admission, dict) else {}
        observed[record.pk] = explain(
            pods=by_job[(record.namespace, record.job_name)], admission=admission,
            since=since.get(record.pk), cluster=cluster, nodes=nodes,
            role_names=names.get(record.pk), events=events.get(record.namespace))
    return observed


def store_pending(records: Sequence[RunRecord], observed: Mapping[int, dict[str, Any]]) -> int:
    """Write the explanations that changed (one bulk statement); how many changed. The runs
    in memory get theirs (the pass's notifications read them)."""
    changed = []
    for record in records:
        facts = observed.get(record.pk)
        if facts is not None and facts != record.pending:
            record.pending = facts
            changed.append(record)
    if changed:
        RunRecord.objects.bulk_update(changed, ["pending"], batch_size=250)
    return len(changed)
