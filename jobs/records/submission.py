"""Submission: freeze a checked job into a run record, then create its Job on the cluster once.

`job_submit` runs in the request: it re-checks the job with the one engine
(`jobs.context.evaluate`), freezes the manifest and snapshots into a `RunRecord` and queues
the Celery task only after the transaction commits.

`submit_attempt` is one try of that task. It is idempotent:

- the record is claimed with a conditional UPDATE that sets a lease
  (`submission_lease_until`); a second message for the same record finds no claimable row
  and does nothing, and a crashed worker's claim can be taken over once its lease expired;
- every try is a `SubmissionAttempt` row, written before the cluster is called, so a try a
  worker died in is visible (and closed as interrupted by the next one);
- a try after an earlier one first looks the Job up (`get_job`): if it is there and ours,
  the earlier try created it and the submission is complete;
- a 409 from `create_job` is resolved the same way: ours (same `rlark.io/spec-sha256`, or
  RLark's managed-by and team labels when the object carries no hash) is success, anything
  else is a clear permanent failure;
- transient errors (5xx, 429, timeouts, refused connections) give the record back with its
  lease set to the moment of the next try, bounded by `conf.submit_max_attempts()`;
  permanent ones (other 4xx, among them 422) end in `submit_failed` with the API's message.

Every change of the run's state goes through the run state machine (`jobs.records.lifecycle`).

The Job is created from the frozen YAML (parsed, never re-rendered).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import pghistory
import yaml
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.credentials import CredentialError, credentials_for
from clusters.k8s import (
    AlreadyExists,
    Credentials,
    KubeError,
    NotFound,
    backoff_delays,
    create_job,
    delete_job,
    get_job,
)
from clusters.kueue import AdmissionStatus
from clusters.models import Cluster
from jobs.context import Evaluation, evaluate
from jobs.core.render import ANNOTATION_SPEC_SHA256, LABEL_TEAM, build_manifest, kueue_queue
from jobs.core.spec import CheckContext, JobSpec
from jobs.jobfiles.document import spec_of
from jobs.models import AttemptOutcome, Job, JobState, RunRecord, SubmissionAttempt
from jobs.records import conf
from jobs.records.lifecycle import move, sources
from jobs.records.snapshots import (
    deployment_parameters_snapshot,
    launch_list_snapshot,
    verifications_snapshot,
)
from rlark_site.foundation.exceptions import ApplicationError

__all__ = [
    "MANAGED_BY_LABEL",
    "AttemptResult",
    "enqueue_submission",
    "is_ours",
    "job_submit",
    "stalled_run_record_ids",
    "submit_attempt",
]

logger = logging.getLogger(__name__)

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"


# --- freezing -------------------------------------------------------------------------------


def _findings_error(message: str, findings: list[dict[str, Any]]) -> ApplicationError:
    return ApplicationError(message, extra={"findings": findings}, status_code=422)


def _link_records(job: Job) -> None:
    """Make unlinked deployment parameters reference the job's launch list (SPEC 7: both ways).

    Records linked to other records never get here: the engine reports
    `deployment_parameters.launch_list_mismatch` and submission refuses.
    """
    parameters = job.deployment_parameters
    if job.launch_list is not None and parameters is not None and parameters.launch_list_id is None:
        parameters.launch_list = job.launch_list
        parameters.save(update_fields=["launch_list", "updated_at"])


def _header_cluster(spec: JobSpec) -> str:
    for role in spec.roles:
        if role.name == spec.header_role:
            return role.cluster if isinstance(role.cluster, str) else ""
    return ""


def _verification_ids(evaluation: Evaluation, job: Job) -> set[int]:
    ids = {view.id for view in evaluation.ctx.verifications.values()}
    if job.deployment_parameters is not None:
        ids |= set(job.deployment_parameters.verifications.values_list("pk", flat=True))
    return ids


def _locked_draft(job: Job) -> Job:
    locked = (
        Job.objects.select_for_update(of=("self",))
        .select_related("team", "launch_list__created_by", "deployment_parameters__created_by")
        .get(pk=job.pk)
    )
    if locked.state != JobState.DRAFT:
        raise ApplicationError(
            _("This job was already submitted; clone its run record to run it again."),
            extra={"state": locked.state},
            status_code=409,
        )
    return locked


def enqueue_submission(run_record_id: int) -> None:
    """Send the submission task for a committed run record."""
    from jobs.tasks import submit_run_record

    submit_run_record.delay(run_record_id)


def _enqueue_after_commit(run_record_id: int) -> None:
    """Send the task once the transaction commits; a broker that is down is logged, not raised.

    The record is committed in `queued` either way, so the beat's resume task sends it later
    (`stalled_run_record_ids`); the request still answers 202.
    """

    def send() -> None:
        enqueue_submission(run_record_id)

    transaction.on_commit(send, robust=True)


@transaction.atomic
def job_submit(*, job: Job, user: Any) -> RunRecord:
    """Check, freeze and queue a draft; 422 with the findings while an error remains.

    The task is sent only once the transaction commits (a rolled-back submission sends
    nothing). If the broker is down then, the beat's resume task sends it later.
    """
    locked = _locked_draft(job)
    evaluation = evaluate(locked)
    if evaluation.has_errors:
        raise _findings_error(
            _("The job still has errors; fix them before submitting."),
            [finding.as_dict() for finding in evaluation.findings],
        )
    _link_records(locked)
    manifest = build_manifest(evaluation.spec, evaluation.ctx)
    cluster = _header_cluster(evaluation.spec)
    namespace = str(manifest.data.get("metadata", {}).get("namespace") or "")
    if not cluster or not namespace:
        raise _findings_error(_("The Header role does not place the job on a cluster."), [])
    with pghistory.context(user=user.pk, team=locked.team.slug):
        record = RunRecord.objects.create(
            team=locked.team,
            job=locked,
            job_name=locked.name,
            cluster=cluster,
            namespace=namespace,
            manifest_yaml=manifest.yaml,
            manifest_sha256=manifest.sha256,
            launch_list_snapshot=launch_list_snapshot(locked.launch_list),
            deployment_parameters_snapshot=deployment_parameters_snapshot(
                locked.deployment_parameters
            ),
            verifications_snapshot=verifications_snapshot(_verification_ids(evaluation, locked)),
            findings_snapshot=[finding.as_dict() for finding in evaluation.findings],
            job_file_snapshot=spec_of(locked),
            admission=submitted_admission(evaluation.spec, evaluation.ctx),
            frozen_by=user,
        )
    _enqueue_after_commit(record.pk)
    return record


def submitted_admission(spec: JobSpec, ctx: CheckContext) -> dict[str, Any]:
    """A run's admission as submitted: pending in the team's LocalQueue on a Kueue cluster
    (until the status sync reads its Workload), {} elsewhere."""
    queue = kueue_queue(spec, ctx)
    if queue is None:
        return {}
    return AdmissionStatus(queue=queue, cluster_queue="", state="pending").as_dict()


# --- one try ----------------------------------------------------------------------------------


class AttemptResult(NamedTuple):
    """What one run of the task did; `retry_in` is set when another try is due."""

    outcome: str  # an AttemptOutcome value, or "skipped" / "cancelled"
    retry_in: float | None = None


@dataclass(frozen=True)
class _Outcome:
    outcome: AttemptOutcome
    http_status: int | None
    message: str
    uid: str = ""

    @property
    def succeeded(self) -> bool:
        return self.outcome in (AttemptOutcome.CREATED, AttemptOutcome.ALREADY_EXISTS)


def _claim(run_record_id: int, now: datetime) -> bool:
    """Take the record for one try (conditional UPDATE); False when it is not ours to take."""
    lease_until = now + timedelta(seconds=conf.submit_lease())
    claimed = (
        RunRecord.objects.filter(pk=run_record_id, state__in=sources(JobState.SUBMITTING))
        .filter(Q(submission_lease_until__isnull=True) | Q(submission_lease_until__lte=now))
        .update(state=JobState.SUBMITTING, submission_lease_until=lease_until)
    )
    return claimed == 1


def _open_attempt(record: RunRecord, *, task_id: str, now: datetime) -> SubmissionAttempt:
    """Record the try before calling the cluster; close tries a dead worker left open."""
    with transaction.atomic():
        record.attempts.filter(outcome=AttemptOutcome.IN_PROGRESS).update(
            outcome=AttemptOutcome.TRANSIENT_ERROR,
            finished_at=now,
            message=_("Interrupted: the worker stopped before recording an outcome."),
        )
        last = record.attempts.aggregate(last=Max("number"))["last"] or 0
        return SubmissionAttempt.objects.create(
            run_record=record, number=last + 1, task_id=task_id[:255]
        )


class _Unusable(Exception):
    """The record's cluster cannot be called at all (not registered, unreadable secret)."""


def _credentials(cluster_name: str) -> Credentials:
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        raise _Unusable(_("Cluster %(name)s is not registered.") % {"name": cluster_name})
    try:
        return credentials_for(cluster)
    except CredentialError as exc:
        raise _Unusable(str(exc)) from exc


def _metadata(obj: Any) -> dict[str, Any]:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _mapping(metadata: dict[str, Any], key: str) -> dict[str, Any]:
    value = metadata.get(key)
    return value if isinstance(value, dict) else {}


def is_ours(existing: dict[str, Any], frozen: dict[str, Any]) -> bool:
    """Whether a Job found on the cluster is the one this frozen manifest describes.

    The spec hash annotation decides when the object carries one; an object without it is
    recognised by RLark's managed-by label and the same team label.
    """
    theirs, mine = _metadata(existing), _metadata(frozen)
    their_hash = _mapping(theirs, "annotations").get(ANNOTATION_SPEC_SHA256)
    if their_hash:
        return bool(their_hash == _mapping(mine, "annotations").get(ANNOTATION_SPEC_SHA256))
    their_labels, my_labels = _mapping(theirs, "labels"), _mapping(mine, "labels")
    return all(
        my_labels.get(key) and their_labels.get(key) == my_labels.get(key)
        for key in (MANAGED_BY_LABEL, LABEL_TEAM)
    )


def _adopt(record: RunRecord, existing: dict[str, Any], frozen: dict[str, Any], *,
           http_status: int) -> _Outcome:
    uid = str(_metadata(existing).get("uid") or "")
    if is_ours(existing, frozen):
        return _Outcome(
            AttemptOutcome.ALREADY_EXISTS, http_status,
            _("The Job already exists on the cluster and is this run's (an earlier try "
              "created it)."),
            uid=uid,
        )
    return _Outcome(
        AttemptOutcome.PERMANENT_ERROR, http_status,
        _("A Job named %(name)s already exists in namespace %(namespace)s on cluster "
          "%(cluster)s and was not created by RLark for this run. Nothing was changed on the "
          "cluster; clone this run record under another job name.")
        % {"name": record.job_name, "namespace": record.namespace, "cluster": record.cluster},
    )


def _error_outcome(error: KubeError, *, transient: bool | None = None) -> _Outcome:
    retry = error.transient if transient is None else transient
    message = str(error)
    if error.status is not None:
        message = f"{error.status} {error.reason}: {error.message}".strip()
    kind = AttemptOutcome.TRANSIENT_ERROR if retry else AttemptOutcome.PERMANENT_ERROR
    return _Outcome(kind, error.status, message)


def _existing(credentials: Credentials, record: RunRecord) -> dict[str, Any] | None:
    try:
        return get_job(
            credentials=credentials, namespace=record.namespace, name=record.job_name,
            timeout=conf.kube_timeout(), attempts=1,
        )
    except NotFound:
        return None


def _after_conflict(credentials: Credentials, record: RunRecord,
                    frozen: dict[str, Any]) -> _Outcome:
    try:
        existing = get_job(
            credentials=credentials, namespace=record.namespace, name=record.job_name,
            timeout=conf.kube_timeout(), attempts=1,
        )
    except NotFound as exc:
        # Deleted between the 409 and the look-up: the next try creates it.
        return _error_outcome(exc, transient=True)
    except KubeError as exc:
        return _error_outcome(exc)
    return _adopt(record, existing, frozen, http_status=409)


def _try_create(record: RunRecord, *, look_first: bool) -> _Outcome:
    """One try against the cluster; never raises for cluster errors."""
    try:
        credentials = _credentials(record.cluster)
    except _Unusable as exc:
        return _Outcome(AttemptOutcome.PERMANENT_ERROR, None, str(exc))
    frozen = yaml.safe_load(record.manifest_yaml)
    try:
        if look_first:
            existing = _existing(credentials, record)
            if existing is not None:
                return _adopt(record, existing, frozen, http_status=200)
        created = create_job(
            credentials=credentials, namespace=record.namespace, body=frozen,
            timeout=conf.kube_timeout(),
        )
    except AlreadyExists:
        return _after_conflict(credentials, record, frozen)
    except KubeError as exc:
        return _error_outcome(exc)
    uid = str(_metadata(created).get("uid") or "")
    return _Outcome(AttemptOutcome.CREATED, 201, _("Created on the cluster."), uid=uid)


def _retry_delay(number: int) -> float:
    delays = backoff_delays(
        attempts=conf.submit_max_attempts(), base=conf.submit_retry_base(),
        cap=conf.submit_retry_cap(),
    )
    return delays[min(number, len(delays)) - 1] if delays else 0.0


def _mark_submitted(record: RunRecord, outcome: _Outcome, now: datetime) -> None:
    changed = move(record, JobState.PENDING, now=now)
    record.submission_lease_until = None
    record.remote_uid = outcome.uid[:64]
    record.submitted_at = now
    record.failure_message = ""
    record.save(update_fields=[
        *changed, "submission_lease_until", "remote_uid", "submitted_at", "failure_message",
    ])


def _mark_retry(record: RunRecord, delay: float, now: datetime) -> None:
    changed = move(record, JobState.QUEUED, now=now)
    record.submission_lease_until = now + timedelta(seconds=delay)
    record.save(update_fields=[*changed, "submission_lease_until"])


def _mark_failed(record: RunRecord, message: str, now: datetime) -> None:
    changed = move(record, JobState.SUBMIT_FAILED, now=now)
    record.submission_lease_until = None
    record.failure_message = message
    record.save(update_fields=[*changed, "submission_lease_until", "failure_message"])


def _settle(record: RunRecord, attempt: SubmissionAttempt, outcome: _Outcome,
            now: datetime) -> AttemptResult:
    """Apply a try's outcome to the locked record."""
    if outcome.succeeded:
        _mark_submitted(record, outcome, now)
        return AttemptResult(outcome=outcome.outcome)
    if outcome.outcome == AttemptOutcome.TRANSIENT_ERROR:
        if attempt.number < conf.submit_max_attempts():
            delay = _retry_delay(attempt.number)
            _mark_retry(record, delay, now)
            return AttemptResult(outcome=outcome.outcome, retry_in=delay)
        message = _("Gave up after %(count)d tries; the last one said: %(message)s") % {
            "count": attempt.number, "message": outcome.message,
        }
        _mark_failed(record, message, now)
        return AttemptResult(outcome=AttemptOutcome.PERMANENT_ERROR)
    _mark_failed(record, outcome.message, now)
    return AttemptResult(outcome=outcome.outcome)


def _finish(record_id: int, attempt: SubmissionAttempt, outcome: _Outcome) -> AttemptResult:
    now = timezone.now()
    with transaction.atomic():
        record = RunRecord.objects.select_for_update().get(pk=record_id)
        attempt.outcome = outcome.outcome
        attempt.http_status = outcome.http_status
        attempt.message = outcome.message
        attempt.finished_at = now
        attempt.save(update_fields=["outcome", "http_status", "message", "finished_at"])
        if record.state == JobState.CANCELLED:
            record.submission_lease_until = None
            record.save(update_fields=["submission_lease_until"])
            return AttemptResult(outcome="cancelled")
        if record.state != JobState.SUBMITTING:
            # Another worker settled it meanwhile (only possible after a lease expired).
            return AttemptResult(outcome="skipped")
        return _settle(record, attempt, outcome, now)


def _remove_cancelled(record: RunRecord) -> None:
    """A cancel raced this try: take back off the cluster whatever the try may have created."""
    try:
        delete_job(
            credentials=_credentials(record.cluster), namespace=record.namespace,
            name=record.job_name, timeout=conf.kube_timeout(),
        )
    except NotFound:
        return
    except (KubeError, _Unusable) as exc:
        logger.warning("could not remove cancelled Job %s: %s", record.job_name, exc)


def submit_attempt(*, run_record_id: int, task_id: str = "") -> AttemptResult:
    """One try at creating a run record's Job on its cluster (see the module docstring)."""
    now = timezone.now()
    if not _claim(run_record_id, now):
        return AttemptResult(outcome="skipped")
    record = RunRecord.objects.get(pk=run_record_id)
    attempt = _open_attempt(record, task_id=task_id, now=now)
    outcome = _try_create(record, look_first=attempt.number > 1)
    result = _finish(run_record_id, attempt, outcome)
    if result.outcome == "cancelled":
        _remove_cancelled(record)
    return result


# --- recovery ---------------------------------------------------------------------------------


def stalled_run_record_ids(*, now: datetime | None = None) -> list[int]:
    """Records whose task is evidently not coming: send it again (a duplicate is harmless).

    A record being submitted whose lease expired lost its worker; a queued one that waited
    past the grace period (for its first message or for a retry) lost its message.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=conf.resume_grace())
    lost_worker = Q(state=JobState.SUBMITTING, submission_lease_until__lt=now)
    lost_message = Q(state=JobState.QUEUED) & (
        Q(submission_lease_until__isnull=True, frozen_at__lt=cutoff)
        | Q(submission_lease_until__lt=cutoff)
    )
    return list(
        RunRecord.objects.filter(lost_worker | lost_message)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
