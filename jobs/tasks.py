"""Celery tasks of the jobs app: submission, its recovery, and status sync.

Tasks take ids, call one service and hold no logic of their own. `acks_late` and
`reject_on_worker_lost` (set in settings, repeated on the submission task) mean a worker
killed mid-task leaves its message to be delivered again; the services make that safe.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from jobs.metrics import record_submission
from jobs.notify.services import deliver_event, deliver_webhook
from jobs.observe.signals import scan_first_signals
from jobs.progress import conf as progress_conf
from jobs.progress.reader import cancel_stalled_run as cancel_stalled
from jobs.progress.reader import clusters_with_running_runs, read_cluster_progress
from jobs.records import conf
from jobs.records.status import clusters_with_active_runs, flag_overdue_pending, sync_cluster
from jobs.records.submission import stalled_run_record_ids, submit_attempt


@shared_task(
    bind=True,
    name="jobs.tasks.submit_run_record",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,  # bounded by the attempts recorded in the database, not by Celery
)
def submit_run_record(self: Task, run_record_id: int) -> str:
    """Create the run record's Job on its cluster; retried with backoff on transient errors."""
    result = submit_attempt(run_record_id=run_record_id, task_id=self.request.id or "")
    record_submission(run_record_id=run_record_id, outcome=str(result.outcome))
    if result.retry_in is not None:
        raise self.retry(countdown=result.retry_in, max_retries=None)
    return result.outcome


@shared_task(name="jobs.tasks.resume_stalled_submissions")
def resume_stalled_submissions() -> int:
    """Send the submission task again for records whose worker or message was lost."""
    ids = stalled_run_record_ids()
    for run_record_id in ids:
        submit_run_record.delay(run_record_id)
    return len(ids)


@shared_task(name="jobs.tasks.sync_submitted_jobs", ignore_result=True)
def sync_submitted_jobs() -> list[str]:
    """Fan out: one status sync task per cluster with active runs; flag runs Pending too long.

    A cluster's task expires after one interval, so a slow cluster's passes never pile up.
    """
    clusters = clusters_with_active_runs()
    for cluster in clusters:
        sync_cluster_status.apply_async(args=[cluster], expires=conf.status_poll_interval())
    flag_overdue_pending()
    return clusters


@shared_task(name="jobs.tasks.sync_cluster_status")
def sync_cluster_status(cluster: str) -> dict[str, Any]:
    """One status pass over a cluster's active runs (one listing per namespace)."""
    return sync_cluster(cluster=cluster)._asdict()


@shared_task(name="jobs.tasks.sync_first_signals")
def sync_first_signals() -> int:
    """Look for the launch lists' expected first signals in Running jobs' Head Task logs."""
    return scan_first_signals()


@shared_task(name="jobs.tasks.sync_training_progress", ignore_result=True)
def sync_training_progress() -> list[str]:
    """Fan out: one progress pass per cluster with Running runs (expires after one interval)."""
    clusters = clusters_with_running_runs()
    for cluster in clusters:
        sync_cluster_progress.apply_async(args=[cluster], expires=progress_conf.poll_interval())
    return clusters


@shared_task(name="jobs.tasks.sync_cluster_progress")
def sync_cluster_progress(cluster: str) -> dict[str, Any]:
    """Read the Head Task logs of a cluster's Running runs since last time; stalls."""
    return read_cluster_progress(cluster=cluster)._asdict()


@shared_task(name="jobs.tasks.cancel_stalled_run", acks_late=True)
def cancel_stalled_run(episode_id: int) -> bool:
    """Cancel a run stalled longer than its launch list allows (claimed once by the pass)."""
    return cancel_stalled(episode_id)


@shared_task(bind=True, name="jobs.tasks.notify_event", acks_late=True)
def notify_event(self: Task, event_id: int) -> None:
    """Email the users who chose the event and queue its team webhook delivery."""
    deliver_event(event_id)


@shared_task(bind=True, name="jobs.tasks.notify_webhook", acks_late=True, max_retries=None)
def notify_webhook(self: Task, delivery_id: int) -> None:
    """One try of a webhook delivery; retried with backoff until delivered or given up."""
    retry_in = deliver_webhook(delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in, max_retries=None)
