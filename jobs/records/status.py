"""Status sync: follow submitted Jobs, record phase changes, flag runs stuck in Pending.

One pass per cluster (`sync_cluster`, one Celery task per cluster fanned out by beat): the
cluster's active runs are read from the database, every namespace they live in is listed
once through the gateway (`clusters.k8s.list_jobs`, paged, one try: the next pass is the
retry), and what changed is applied in bulk. A run whose Job is missing from its
namespace's listing is recorded as gone (phase `Gone`, the run fails), as a 404 was when
each Job was read on its own. When a cluster does not answer, its runs wait for the next
pass; other clusters have their own tasks. After a cluster's Jobs are observed, their pods
are kept as attempts in the run records (`jobs.observe.capture.capture_cluster`: one pods list
per namespace), and the same pods, with the admission read and the inventory's occupancy,
explain each Pending run (`jobs.records.pending`).

Only changes are written: a `StatusChange` row when the phase differs from the last one
recorded, and the run's state (through the run state machine, `jobs.records.lifecycle`),
reason and flags when they differ from what is stored. Overlapping passes are safe: the
runs to change are locked and compared again (state, last phase) before anything is
written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.credentials import CredentialError, credentials_for
from clusters.k8s import (
    Credentials,
    EventInfo,
    KubeError,
    NotFound,
    PodInfo,
    list_events,
    list_jobs,
)
from clusters.models import Cluster
from jobs.gpu.reader import observe_cluster_gpus
from jobs.models import JobState, RunRecord, StatusChange
from jobs.notify.services import emit_run_changes
from jobs.observe.capture import capture_cluster
from jobs.observe.causes import offer_causes
from jobs.records import conf
from jobs.records.admission import local_queue_targets, observe_admissions, store_admissions
from jobs.records.lifecycle import ACTIVE_STATES, FINAL_STATES, PHASE_STATES, move
from jobs.records.pending import observe_pending, store_pending
from rlark_site.foundation.bulk import insert

__all__ = [
    "GONE_PHASE",
    "Observation",
    "SyncReport",
    "apply_observations",
    "clusters_with_active_runs",
    "flag_overdue_pending",
    "observation",
    "scheduling_reason",
    "sync_cluster",
    "sync_submitted_jobs",
]

logger = logging.getLogger(__name__)

GONE_PHASE = "Gone"
_REASON_MAX = 255
_BATCH = 250  # rows per bulk statement (an UPDATE's CASE grows with its rows)


class SyncReport(NamedTuple):
    checked: int
    changed: int
    unreachable: int
    flagged: int


class Observation(NamedTuple):
    """What the cluster says about one run's Job; `state` None for a phase RLark does not map."""

    phase: str
    state: str | None
    reason: str
    message: str


def scheduling_reason(status: Mapping[str, Any]) -> tuple[str, str]:
    """The (reason, message) the cluster reports: `status.reason`, else a failing condition."""
    reason, message = status.get("reason"), status.get("message")
    if reason or message:
        return str(reason or ""), str(message or "")
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("status") == "False":
            return str(condition.get("reason") or ""), str(condition.get("message") or "")
    return "", ""


def observation(remote: Mapping[str, Any] | None) -> Observation | None:
    """A Job as listed (None: missing, so gone) read as an observation; None without a phase."""
    if remote is None:
        return Observation(
            GONE_PHASE, JobState.FAILED, "NotFound",
            _("The Job is no longer on its cluster (deleted outside RLark)."),
        )
    status = remote.get("status") or {}
    phase = str(status.get("phase") or "")
    if not phase:
        return None
    reason, message = scheduling_reason(status)
    return Observation(phase, PHASE_STATES.get(phase), reason[:_REASON_MAX], message)


# What a pass never reads of a run: its frozen submission (the manifest and the snapshots,
# kilobytes a run) and long texts only other pages show.
_NOT_READ = ("manifest_yaml", "launch_list_snapshot", "deployment_parameters_snapshot",
             "verifications_snapshot", "findings_snapshot", "failure_message",
             "capture_incomplete")


def _with_last_phase(records: QuerySet[RunRecord]) -> QuerySet[RunRecord]:
    """The runs with the last phase recorded for each, without the columns a pass never reads."""
    last = StatusChange.objects.filter(run_record=OuterRef("pk")).order_by("-observed_at", "-id")
    return records.defer(*_NOT_READ).annotate(last_phase=Subquery(last.values("phase")[:1]))


def _differs(record: RunRecord, seen: Observation) -> bool:
    return (
        getattr(record, "last_phase", None) != seen.phase
        or (seen.state is not None and seen.state != record.state)
        or (record.status_reason, record.status_message) != (seen.reason, seen.message)
    )


def _apply(record: RunRecord, seen: Observation, now: datetime) -> list[str]:
    """Move the run and store what the cluster says (in memory); the names of changed fields."""
    changed = move(record, seen.state or record.state, now=now)
    for field, value in (("status_reason", seen.reason), ("status_message", seen.message)):
        if getattr(record, field) != value:
            setattr(record, field, value)
            changed.append(field)
    return changed


def apply_observations(observations: Mapping[int, Observation], *,
                       now: datetime | None = None) -> int:
    """Apply observations keyed by run record id in one transaction; how many runs changed.

    The runs are locked and read again, so a run cancelled or finished meanwhile is left
    alone and a phase another pass recorded is not recorded twice.
    """
    now = now or timezone.now()
    if not observations:
        return 0
    with transaction.atomic():
        locked = _with_last_phase(
            RunRecord.objects.select_for_update(of=("self",))
            .filter(pk__in=list(observations), state__in=ACTIVE_STATES)
            .order_by("pk")
        )
        history: list[dict[str, Any]] = []
        updated: list[RunRecord] = []
        fields: set[str] = set()
        for record in locked:
            seen = observations[record.pk]
            if getattr(record, "last_phase", None) != seen.phase:
                history.append({"run_record_id": record.pk, "phase": seen.phase,
                                "reason": seen.reason, "message": seen.message,
                                "observed_at": now})
            changed = _apply(record, seen, now)
            if changed:
                record.status_checked_at = now
                updated.append(record)
                fields.update(changed)
        insert(StatusChange, history)  # one statement (observed_at: the pass's now, for all)
        if updated:
            RunRecord.objects.bulk_update(updated, [*sorted(fields), "status_checked_at"],
                                          batch_size=_BATCH)
    return len({change["run_record_id"] for change in history}
               | {record.pk for record in updated})


def flag_overdue_pending(*, now: datetime | None = None) -> int:
    """Flag runs Pending longer than `conf.pending_deadline()`; return how many were flagged."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=conf.pending_deadline())
    flagged = 0
    with transaction.atomic():
        overdue = RunRecord.objects.select_for_update().filter(
            state=JobState.PENDING, pending_flagged=False, pending_since__lte=cutoff
        )
        for record in overdue:
            record.pending_flagged = True
            record.save(update_fields=["pending_flagged"])
            flagged += 1
    return flagged


def clusters_with_active_runs() -> list[str]:
    """The clusters that have a pending or running run: one sync task each."""
    return list(
        RunRecord.objects.filter(state__in=ACTIVE_STATES)
        .order_by("cluster").values_list("cluster", flat=True).distinct()
    )


def _credentials(name: str) -> Credentials | None:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        return None
    try:
        return credentials_for(cluster)
    except CredentialError:
        logger.warning("cluster %s: stored credentials cannot be decrypted", name)
        return None


def _listed(credentials: Credentials, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's Jobs by name, every page of one listing (none: the namespace is gone)."""
    try:
        jobs = list_jobs(
            credentials=credentials, namespace=namespace, page_size=conf.status_page_size(),
            timeout=conf.kube_timeout(), attempts=1,
        )
    except NotFound:
        return {}
    return {str((job.get("metadata") or {}).get("name") or ""): job for job in jobs}


def _namespace(record: RunRecord) -> str:
    return record.namespace


SCHEDULING_EVENTS_MAX = 2000
"""The most `FailedScheduling` events one namespace's list reads in a pass."""


def _scheduling_events(credentials: Credentials, cluster: str,
                       namespace: str) -> list[EventInfo]:
    """The namespace's `FailedScheduling` events about pods, one list (none when it cannot be
    read: the pods' own conditions still explain the wait)."""
    try:
        return list_events(credentials=credentials, namespace=namespace, involved_kind="Pod",
                           reason="FailedScheduling", max_items=SCHEDULING_EVENTS_MAX,
                           attempts=1)
    except KubeError as exc:
        logger.info("status sync: %s/%s: scheduling events not read: %s", cluster, namespace,
                    exc)
        return []


def sync_cluster(*, cluster: str, now: datetime | None = None) -> SyncReport:
    """One pass over a cluster's active runs: one listing per namespace, changes in bulk."""
    now = now or timezone.now()
    records = list(_with_last_phase(
        RunRecord.objects.filter(cluster=cluster, state__in=ACTIVE_STATES).order_by("namespace")
    ))
    if not records:
        return SyncReport(0, 0, 0, 0)
    credentials = _credentials(cluster)
    if credentials is None:
        return SyncReport(0, 0, 1, 0)
    cluster_queues = local_queue_targets(cluster)
    observations: dict[int, Observation] = {}
    admissions: dict[int, dict[str, Any]] = {}
    causes: dict[int, dict[str, Any]] = {}  # from Kueue's evictions of the runs' Workloads
    checked = unreachable = 0
    for namespace, grouped in groupby(records, key=_namespace):
        group = list(grouped)
        try:
            listed = _listed(credentials, namespace)
            admissions.update(observe_admissions(credentials, namespace, group,
                                                 cluster_queues=cluster_queues, causes=causes))
        except KubeError as exc:
            if exc.transient:
                logger.info("status sync: cluster %s unreachable: %s", cluster, exc)
                unreachable = 1
                break
            logger.warning("status sync: %s/%s: %s", cluster, namespace, exc)
            continue
        for record in group:
            checked += 1
            seen = observation(listed.get(record.job_name))
            if seen is not None and _differs(record, seen):
                observations[record.pk] = seen
    changed = apply_observations(observations, now=now)
    store_admissions(records, admissions)
    offer_causes(causes)
    if not unreachable:
        pods: dict[str, list[PodInfo]] = {}
        capture_cluster(credentials, records, final_states=FINAL_STATES, listed=pods)
        store_pending(records, observe_pending(
            records, pods, cluster=cluster,
            events_of=lambda namespace: _scheduling_events(credentials, cluster, namespace)))
    observe_cluster_gpus(cluster=cluster, now=now)  # one Prometheus query; never raises for it
    emit_run_changes(records)
    return SyncReport(checked, changed, unreachable, 0)


def sync_submitted_jobs(*, now: datetime | None = None) -> SyncReport:
    """Every cluster's pass in this process, then the Pending deadline check.

    Beat runs the same passes as one task per cluster (`jobs.tasks.sync_submitted_jobs`);
    this is the in-process form, for commands and tests.
    """
    reports = [sync_cluster(cluster=name, now=now) for name in clusters_with_active_runs()]
    return SyncReport(
        checked=sum(report.checked for report in reports),
        changed=sum(report.changed for report in reports),
        unreachable=sum(report.unreachable for report in reports),
        flagged=flag_overdue_pending(now=timezone.now()),
    )
