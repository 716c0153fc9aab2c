"""The status sync's part for runs on Kueue clusters (SPEC 15): what the Job's Workload says.

Per status pass and cluster namespace with such runs: one list of the namespace's Workloads
(the pod group's Workload is named after the Job), then one visibility read per LocalQueue that
has runs still pending (their position in the ClusterQueue). Never a read per job or per
viewer: pages and the API show what the last pass stored (`RunRecord.admission`).

A run whose Workload Kueue has not made yet stays pending as submitted; a cluster whose Kueue
API is gone (404) or that does not answer keeps what the last pass stored. A preempted or
evicted Workload waits in its queue again (its position is read like a pending one's), and its
`Evicted` condition is offered as the run's cause (SPEC 16: `preempted` or `evicted`, the
Workload's message as the evidence, `jobs.observe.classify.workload_eviction_evidence`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.k8s import Credentials, KubeError, NotFound, list_workloads, pending_workloads
from clusters.kueue import (
    QUEUED_STATES,
    AdmissionStatus,
    pending_positions,
    workload_admission,
    workload_eviction,
)
from clusters.models import KueueQueues
from jobs.models import RunRecord
from jobs.observe.causes import cause_dict
from jobs.observe.classify import workload_eviction_evidence
from jobs.records import conf

__all__ = ["local_queue_targets", "observe_admissions", "store_admissions"]

logger = logging.getLogger(__name__)

_MAX_WORKLOADS = 100_000  # per namespace listing


def _queue_of(record: RunRecord) -> str:
    admission = record.admission if isinstance(record.admission, dict) else {}
    queue = admission.get("queue")
    return queue if isinstance(queue, str) else ""


def _workloads(credentials: Credentials, namespace: str) -> dict[str, dict[str, Any]] | None:
    """The namespace's Workloads by name; None when the cluster has no Kueue (any more)."""
    try:
        items = list_workloads(credentials=credentials, namespace=namespace,
                               page_size=conf.status_page_size(), max_items=_MAX_WORKLOADS,
                               timeout=conf.kube_timeout(), attempts=1)
    except NotFound:
        return None
    return {str((w.get("metadata") or {}).get("name") or ""): w for w in items}


def _positions(credentials: Credentials, namespace: str, queue: str
               ) -> dict[str, tuple[int, int]]:
    """The pending Workloads of one LocalQueue with their positions (none when unreadable)."""
    try:
        return pending_positions(pending_workloads(
            credentials=credentials, namespace=namespace, local_queue=queue,
            timeout=conf.kube_timeout(), attempts=1))
    except KubeError as error:
        logger.info("visibility of %s/%s unreadable: %s", namespace, queue, error)
        return {}


def local_queue_targets(cluster: str) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue) → ClusterQueue, as the cluster's last inventory poll read its
    LocalQueues (one query): a pending Workload names no ClusterQueue yet."""
    stored = KueueQueues.objects.filter(cluster__name=cluster).first()
    if stored is None:
        return {}
    return {(q.namespace, q.name): q.cluster_queue for q in stored.view().local_queues}


def _eviction_cause(record: RunRecord, workload: Any) -> dict[str, Any] | None:
    """The run's cause from its Workload's eviction, when it has one that is not stored yet
    and would be earlier than the stored cause (`offer_causes` keeps the earliest)."""
    eviction = workload_eviction(workload)
    if eviction is None:
        return None
    evidence = workload_eviction_evidence(eviction.reason, eviction.message,
                                          parse_datetime(eviction.at) if eviction.at else None)
    cause = cause_dict(evidence, pod="", found_at=timezone.now())
    stored = record.cause if isinstance(record.cause, dict) else {}
    if stored and str(stored.get("at") or "") <= cause["at"]:
        return None
    return cause


def observe_admissions(credentials: Credentials, namespace: str, records: Sequence[RunRecord],
                       *, cluster_queues: Mapping[tuple[str, str], str] | None = None,
                       causes: dict[int, dict[str, Any]] | None = None
                       ) -> dict[int, dict[str, Any]]:
    """Each Kueue run's admission now (run record id → `AdmissionStatus.as_dict`), read with
    one Workload listing and one visibility read per LocalQueue with runs waiting for Kueue.
    Raises the gateway's `KubeError` when the listing fails (the caller keeps what it stored).
    `cluster_queues` (`local_queue_targets`) names the ClusterQueue of a Workload not admitted
    yet. `causes` receives the cause each evicted Workload offers (run record id → cause)."""
    runs = [(record, queue) for record in records if (queue := _queue_of(record))]
    if not runs:
        return {}
    workloads = _workloads(credentials, namespace)
    if workloads is None:
        return {}  # Kueue's API is gone: what was read last stays
    seen: dict[int, AdmissionStatus] = {
        record.pk: workload_admission(workloads.get(record.job_name), queue=queue)
        for record, queue in runs
    }
    if causes is not None:
        for record, _queue in runs:
            cause = _eviction_cause(record, workloads.get(record.job_name))
            if cause is not None:
                causes[record.pk] = cause
    waiting = sorted({status.queue for status in seen.values()
                      if status.state in QUEUED_STATES})
    positions = {queue: _positions(credentials, namespace, queue) for queue in waiting}
    for record, _queue in runs:
        status = seen[record.pk]
        if not status.cluster_queue and cluster_queues:
            status = replace(status, cluster_queue=cluster_queues.get(
                (namespace, status.queue), ""))
        place = positions.get(status.queue, {}).get(record.job_name)
        if status.state in QUEUED_STATES and place is not None:
            status = replace(status, position=place[0], position_in_local_queue=place[1])
        seen[record.pk] = status
    return {pk: status.as_dict() for pk, status in seen.items()}


def store_admissions(records: Sequence[RunRecord], observed: dict[int, dict[str, Any]]) -> int:
    """Write the admissions that changed (one bulk statement); how many changed."""
    changed = []
    for record in records:
        admission = observed.get(record.pk)
        if admission is not None and admission != record.admission:
            record.admission = admission
            changed.append(record)
    if changed:
        RunRecord.objects.bulk_update(changed, ["admission"], batch_size=250)
    return len(changed)
