"""A platform admin's confirmation of deployment parameters (管理员确认的部署参数).

States: ``pending`` -> ``confirmed`` | ``rejected`` (an admin decides, in the queue or the API);
``confirmed`` -> ``stale`` when the record changes afterwards (stored here by
`mark_stale_if_changed`, called by every service that writes the record) or when the job it
was confirmed for changes (computed: `confirmation_status` and the findings engine compare
`confirmed_content` with today's); ``rejected`` | ``stale`` | ``confirmed`` -> ``pending`` when a
team member requests confirmation again.

Every transition is an UPDATE of the audited `DeploymentParameters` row, with the actor and
the transition in the audit context. Decisions are claimed with a conditional UPDATE
(``WHERE confirmation_state = 'pending'``): of two admins at once exactly one wins, the other
gets 409.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pghistory
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.context import parameters_view, record_content_of, spec_from_job, team_ssh_keys
from jobs.core.findings.parameters import describe_change
from jobs.core.parameters import content_changes, effective_confirmation, job_content
from jobs.models import ConfirmationState, DeploymentParameters, Job
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.tenancy.access import AnyUser, require_platform_admin

__all__ = [
    "ConfirmationStatus",
    "confirmation_confirm",
    "confirmation_jobs",
    "confirmation_reject",
    "confirmation_request",
    "confirmation_status",
    "confirmation_statuses",
    "current_content",
    "fingerprint",
    "mark_stale_if_changed",
    "parameters_view",
    "pending_confirmations",
]


def fingerprint(content: Mapping[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def _job_content(job: Job | None,
                 team_keys: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    return job_content(spec_from_job(job, team_keys=team_keys)) if job is not None else None


def current_content(parameters: DeploymentParameters, job: Job | None = None, *,
                    team_keys: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What a confirmation now would cover: the record, and `job` (default: the one asked for)."""
    job = job if job is not None else parameters.confirmation_job
    return {"record": record_content_of(parameters), "job": _job_content(job, team_keys),
            "job_name": job.name if job is not None else None}


@dataclass(frozen=True)
class ConfirmationStatus:
    """Where a record's confirmation stands for a job (default: the job it was asked for)."""

    state: str  # the effective state: stored, or `stale` when something confirmed changed
    stored_state: str
    changes: list[dict[str, Any]] = field(default_factory=list)
    job_name: str | None = None
    fingerprint: str = ""  # of what a confirmation now would cover

    @property
    def state_label(self) -> str:
        return str(ConfirmationState(self.state).label)

    @property
    def reasons(self) -> list[str]:
        return [describe_change(change) for change in self.changes]

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "stored_state": self.stored_state, "job": self.job_name,
                "changes": self.changes, "reasons": self.reasons,
                "fingerprint": self.fingerprint}


def confirmation_status(parameters: DeploymentParameters, job: Job | None = None, *,
                        team_keys: Mapping[str, str] | None = None) -> ConfirmationStatus:
    current = current_content(parameters, job, team_keys=team_keys)
    stored = parameters.confirmation_state
    state, changes = effective_confirmation(
        str(stored), parameters.confirmed_content or {}, record=current["record"],
        job=current["job"], stale_reasons=parameters.confirmation_stale_reasons or [],
    )
    return ConfirmationStatus(state=str(state), stored_state=str(stored), changes=changes,
                              job_name=current["job_name"], fingerprint=fingerprint(current))


def confirmation_jobs(records: Iterable[DeploymentParameters]) -> tuple[
        dict[int, Job], dict[int, dict[str, str]]]:
    """The jobs the records' confirmations were asked for (by pk, with their roles and teams)
    and each of their teams' SSH keys (by team id), in a few queries for a whole list."""
    job_ids = {r.confirmation_job_id for r in records if r.confirmation_job_id is not None}
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=job_ids)
            .select_related("team").prefetch_related("roles")} if job_ids else {}
    keys = {team_id: team_ssh_keys(team_id) for team_id in {j.team_id for j in jobs.values()}}
    return jobs, keys


def confirmation_statuses(
    records: Iterable[DeploymentParameters], *,
    jobs: tuple[dict[int, Job], dict[int, dict[str, str]]] | None = None,
) -> dict[int, ConfirmationStatus]:
    """`confirmation_status` of each record (by pk) for the job it was asked for, in bounded
    queries for a list: the jobs with their roles and teams at once, each team's SSH keys once
    (`confirmation_jobs`, unless the caller read them).

    Prefetch the records' `verifications` (`record_content_of` reads them)."""
    records = list(records)
    by_pk, keys = jobs if jobs is not None else confirmation_jobs(records)
    statuses = {}
    for record in records:
        job = by_pk.get(record.confirmation_job_id) if record.confirmation_job_id else None
        statuses[record.pk] = confirmation_status(
            record, job, team_keys=keys[job.team_id] if job is not None else None
        )
    return statuses


def pending_confirmations() -> int:
    return DeploymentParameters.objects.filter(
        confirmation_state=ConfirmationState.PENDING
    ).count()


# --- writes -----------------------------------------------------------------------------------


def mark_stale_if_changed(parameters: DeploymentParameters) -> None:
    """After a write to the record: a confirmation whose record content changed is stale.

    Called inside the writing service's transaction and audit context.
    """
    if parameters.confirmation_state != ConfirmationState.CONFIRMED:
        return
    confirmed = parameters.confirmed_content or {}
    changes = content_changes({"record": confirmed.get("record")},
                              record=record_content_of(parameters), job=None)
    if not changes:
        return
    parameters.confirmation_state = ConfirmationState.STALE
    parameters.confirmation_stale_at = timezone.now()
    parameters.confirmation_stale_reasons = changes
    parameters.save(update_fields=["confirmation_state", "confirmation_stale_at",
                                   "confirmation_stale_reasons"])


def _request_job(parameters: DeploymentParameters, job: Job | None) -> Job | None:
    if job is not None:
        if job.team_id != parameters.team_id or job.deployment_parameters_id != parameters.pk:
            raise ApplicationError(
                _("Job %(job)s does not use these deployment parameters; link them in the job "
                  "first.") % {"job": job.name},
                extra={"field": "job"}, status_code=400,
            )
        return job
    linked = Job.objects.filter(deployment_parameters=parameters).order_by("-updated_at", "-id")
    return linked.first()


@transaction.atomic
def confirmation_request(*, parameters: DeploymentParameters, user: AnyUser,
                         job: Job | None = None, note: str = "") -> DeploymentParameters:
    """Ask a platform admin to confirm the record for `job` (default: the newest job using it).

    409 when it is confirmed and nothing confirmed has changed since.
    """
    locked = DeploymentParameters.objects.select_for_update().select_related("team").get(
        pk=parameters.pk
    )
    job = _request_job(locked, job)
    status = confirmation_status(locked, job)
    if status.state == ConfirmationState.CONFIRMED:
        raise ApplicationError(
            _("These deployment parameters are confirmed and nothing confirmed has changed."),
            extra={"state": status.state}, status_code=409,
        )
    locked.confirmation_state = ConfirmationState.PENDING
    locked.confirmation_job = job
    locked.confirmation_requested_by_id = user.pk
    locked.confirmation_requested_at = timezone.now()
    locked.confirmation_request_note = note.strip()
    with pghistory.context(user=user.pk, team=locked.team.slug,
                           transition="confirmation requested"):
        locked.save(update_fields=[
            "confirmation_state", "confirmation_job", "confirmation_requested_by",
            "confirmation_requested_at", "confirmation_request_note",
        ])
    return locked


def _conflict(parameters_id: int) -> ApplicationError:
    current = DeploymentParameters.objects.filter(pk=parameters_id).select_related(
        "confirmation_decided_by"
    ).first()
    if current is None:
        return NotFoundError(_("Deployment parameters not found."))
    decider = current.confirmation_decided_by
    return ApplicationError(
        _("These deployment parameters are %(state)s; only pending ones can be decided.")
        % {"state": current.get_confirmation_state_display()},
        extra={
            "state": current.confirmation_state,
            "decided_by": decider.get_username() if decider is not None else None,
            "decided_at": (current.confirmation_decided_at.isoformat()
                           if current.confirmation_decided_at else None),
        },
        status_code=409,
    )


def _claim(parameters_id: int, admin: AnyUser, **changes: Any) -> DeploymentParameters:
    transition = f"confirmation {changes['confirmation_state']}"
    with pghistory.context(user=admin.pk, transition=transition):
        claimed = DeploymentParameters.objects.filter(
            pk=parameters_id, confirmation_state=ConfirmationState.PENDING
        ).update(confirmation_decided_by_id=admin.pk, confirmation_decided_at=timezone.now(),
                 **changes)
    if not claimed:
        raise _conflict(parameters_id)
    return DeploymentParameters.objects.get(pk=parameters_id)


def _pending(parameters_id: int) -> DeploymentParameters:
    parameters = (
        DeploymentParameters.objects.select_for_update(of=("self",))
        .select_related("confirmation_job__team").filter(pk=parameters_id).first()
    )
    if parameters is None:
        raise NotFoundError(_("Deployment parameters not found."))
    return parameters


@transaction.atomic
def confirmation_confirm(*, parameters_id: int, admin: AnyUser, note: str = "",
                         expected_fingerprint: str = "") -> DeploymentParameters:
    """Confirm pending parameters as they are now, for the job they were asked for.

    `expected_fingerprint` (the `fingerprint` the admin was shown) guards against confirming
    something that changed while they looked: 409 when it differs.
    """
    require_platform_admin(admin)
    parameters = _pending(parameters_id)
    if parameters.confirmation_state != ConfirmationState.PENDING:
        raise _conflict(parameters_id)
    content = current_content(parameters)
    if expected_fingerprint and expected_fingerprint != fingerprint(content):
        raise ApplicationError(
            _("The deployment parameters or their job changed while you looked; review them "
              "again."),
            extra={"state": parameters.confirmation_state}, status_code=409,
        )
    return _claim(
        parameters_id, admin, confirmation_state=ConfirmationState.CONFIRMED,
        confirmation_note=note.strip(), confirmed_content=content,
        confirmed_fingerprint=fingerprint(content), confirmation_stale_at=None,
        confirmation_stale_reasons=[],
    )


@transaction.atomic
def confirmation_reject(*, parameters_id: int, admin: AnyUser,
                        note: str) -> DeploymentParameters:
    """Reject pending parameters; the note (required) tells the team why."""
    require_platform_admin(admin)
    if not note.strip():
        raise ApplicationError(
            _("Say why the deployment parameters are rejected."), extra={"field": "note"},
            status_code=400,
        )
    return _claim(parameters_id, admin, confirmation_state=ConfirmationState.REJECTED,
                  confirmation_note=note.strip())
