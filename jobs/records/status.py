"""Status sync: poll submitted Jobs, record phase changes, flag jobs stuck in Pending.

Only changes are written: a `StatusChange` row when the phase differs from the last one
recorded, and the run's state (through the run state machine, `jobs.records.lifecycle`),
reason and flags when they differ from what is stored. A
pass reads each active Job once (`get_job`, one try: the next pass is the retry); when a
cluster does not answer, the rest of its Jobs wait for the next pass and other clusters
go on. Overlapping passes are safe: each change is applied under a row lock on the run
record and compared with the last recorded phase first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, NamedTuple

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.credentials import CredentialError, credentials_for
from clusters.k8s import Credentials, KubeError, NotFound, get_job
from clusters.models import Cluster
from jobs.models import JobState, RunRecord, StatusChange
from jobs.notify.services import emit_run_changes
from jobs.observe.capture import capture_cluster
from jobs.records import conf
from jobs.records.lifecycle import ACTIVE_STATES, FINAL_STATES, PHASE_STATES, move

__all__ = [
    "GONE_PHASE",
    "SyncReport",
    "flag_overdue_pending",
    "observe_job",
    "scheduling_reason",
    "sync_submitted_jobs",
]

logger = logging.getLogger(__name__)

GONE_PHASE = "Gone"
_REASON_MAX = 255


class SyncReport(NamedTuple):
    checked: int
    changed: int
    unreachable: int
    flagged: int


def scheduling_reason(status: Mapping[str, Any]) -> tuple[str, str]:
    """The (reason, message) the cluster reports: `status.reason`, else a failing condition."""
    reason, message = status.get("reason"), status.get("message")
    if reason or message:
        return str(reason or ""), str(message or "")
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("status") == "False":
            return str(condition.get("reason") or ""), str(condition.get("message") or "")
    return "", ""


def _last_phase(record: RunRecord) -> str | None:
    last = record.status_changes.order_by("-observed_at", "-id").first()
    return last.phase if last is not None else None


def _apply(record: RunRecord, *, state: str, reason: str, message: str,
           now: datetime) -> list[str]:
    """Move the run to `state` and store what the cluster says; the names of changed fields."""
    changed = move(record, state, now=now)
    for field, value in (("status_reason", reason[:_REASON_MAX]), ("status_message", message)):
        if getattr(record, field) != value:
            setattr(record, field, value)
            changed.append(field)
    return changed


def _record(record: RunRecord, *, phase: str, state: str | None, reason: str, message: str,
            now: datetime) -> bool:
    """Apply one observation under the record's row lock; True when anything changed.

    `state` None: a phase RLark does not know, recorded in the history without a move.
    """
    with transaction.atomic():
        locked = RunRecord.objects.select_for_update().get(pk=record.pk)
        if locked.state not in ACTIVE_STATES:
            return False
        phase_changed = _last_phase(locked) != phase
        if phase_changed:
            StatusChange.objects.create(
                run_record=locked, phase=phase, reason=reason[:_REASON_MAX], message=message
            )
        fields = _apply(locked, state=state or locked.state, reason=reason, message=message,
                        now=now)
        if fields:
            locked.status_checked_at = now
            locked.save(update_fields=[*fields, "status_checked_at"])
        return phase_changed or bool(fields)


def observe_job(record: RunRecord, remote: Mapping[str, Any] | None, *,
                now: datetime | None = None) -> bool:
    """Record what the cluster says about a run's Job (None: the Job is gone)."""
    now = now or timezone.now()
    if remote is None:
        return _record(
            record, phase=GONE_PHASE, state=JobState.FAILED, reason="NotFound",
            message=_("The Job is no longer on its cluster (deleted outside RLark)."), now=now,
        )
    status = remote.get("status") or {}
    phase = str(status.get("phase") or "")
    if not phase:
        return False
    reason, message = scheduling_reason(status)
    return _record(record, phase=phase, state=PHASE_STATES.get(phase), reason=reason,
                   message=message, now=now)


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


def _active_records() -> list[RunRecord]:
    return list(
        RunRecord.objects.filter(state__in=ACTIVE_STATES).order_by("cluster", "pk")
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


def _sync_cluster(credentials: Credentials, records: Iterable[RunRecord],
                  now: datetime) -> tuple[int, int, bool]:
    """(checked, changed, unreachable) for one cluster's records."""
    checked = changed = 0
    for record in records:
        try:
            remote: dict[str, Any] | None = get_job(
                credentials=credentials, namespace=record.namespace, name=record.job_name,
                timeout=conf.kube_timeout(), attempts=1,
            )
        except NotFound:
            remote = None
        except KubeError as exc:
            if exc.transient:
                logger.info("status sync: cluster %s unreachable: %s", record.cluster, exc)
                return checked, changed, True
            logger.warning("status sync: %s: %s", record.job_name, exc)
            continue
        checked += 1
        changed += observe_job(record, remote, now=now)
    return checked, changed, False


def sync_submitted_jobs(*, now: datetime | None = None) -> SyncReport:
    """One pass over every submitted, active Job, then the Pending deadline check.

    After a cluster's Jobs are observed, their pods are kept as attempts in the run records
    (`jobs.observe.capture.capture_cluster`: one pods list per namespace)."""
    now = now or timezone.now()
    checked = changed = unreachable = 0
    for cluster_name, records in groupby(_active_records(), key=lambda r: r.cluster):
        credentials = _credentials(cluster_name)
        if credentials is None:
            unreachable += 1
            continue
        members = list(records)
        done, moved, lost = _sync_cluster(credentials, members, now)
        checked, changed, unreachable = checked + done, changed + moved, unreachable + lost
        if not lost:
            capture_cluster(credentials, members, final_states=FINAL_STATES)
        emit_run_changes(members)
    flagged = flag_overdue_pending(now=timezone.now())
    return SyncReport(checked=checked, changed=changed, unreachable=unreachable, flagged=flagged)
