"""Reads of launch lists, deployment parameters, run records and their audit trail.

Every read is scoped to the user's teams (platform admins also read run records and audit
events); "missing" and "another team's" are the same 404.
"""

from __future__ import annotations

import difflib
from typing import Any

from django.apps import apps
from django.db.models import CharField, F, Prefetch, QuerySet, Value
from django.utils.translation import gettext as _

from clusters.models import Verification, VerificationState
from jobs.models import (
    ConfirmationState,
    DeploymentParameters,
    FirstRunCheck,
    Job,
    LaunchList,
    Role,
    RunRecord,
    StatusChange,
    SubmissionAttempt,
)
from jobs.records.rundiff import RunDiff, semantic_diff
from rlark_site.foundation.audit.selectors import (
    AuditEvent,
    AuditLookup,
    audit_events,
    event_as_dict,
)
from rlark_site.foundation.exceptions import NotFoundError
from rlark_site.foundation.tenancy.access import (
    access_team_object,
    is_platform_admin,
    require_platform_admin,
    scope_to_member_teams,
    teams_for_user,
)
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "AUDIT_EVENTS_IN_CHAIN",
    "audit_events_for_user",
    "deployment_parameters_for_team",
    "deployment_parameters_for_user",
    "deployment_parameters_get_for_user",
    "events_as_dicts",
    "first_run_checks_of",
    "job_audit_refs",
    "launch_list_get_for_user",
    "launch_lists_for_user",
    "manifest_diff",
    "other_run_record_for_diff",
    "parameters_confirmation_queue",
    "parameters_for_decision",
    "pending_admin_counts",
    "pending_admin_requests",
    "run_diff",
    "run_record_chain",
    "run_record_get_for_user",
    "run_records_for_user",
    "verifications_for_team",
]

AUDIT_EVENTS_IN_CHAIN = 1000


# --- launch lists and deployment parameters ---------------------------------------------------


def pending_admin_counts() -> tuple[int, int]:
    """(pending verifications, pending deployment-parameter confirmations)."""
    return (
        Verification.objects.filter(state=VerificationState.PENDING).count(),
        DeploymentParameters.objects.filter(confirmation_state=ConfirmationState.PENDING)
        .count(),
    )


def pending_admin_requests() -> int:
    """How many requests wait for a platform admin's decision (the navigation's count):
    pending verifications and pending deployment-parameter confirmations."""
    return sum(pending_admin_counts())


_CONFIRMATION_RELATED = (
    "confirmation_job", "confirmation_requested_by", "confirmation_decided_by",
)
QUEUE_STATES = ("pending", "confirmed", "rejected", "stale", "all")


def parameters_confirmation_queue(user: Any, *, state: str = "pending",
                                  team: str = "") -> QuerySet[DeploymentParameters]:
    """Platform admins: deployment parameters by confirmation state, oldest request first."""
    require_platform_admin(user)
    records = DeploymentParameters.objects.select_related(
        "team", "created_by", "launch_list", *_CONFIRMATION_RELATED
    ).prefetch_related("jobs", "verifications__cluster")
    if state != "all":
        records = records.filter(confirmation_state=state)
    if team:
        records = records.filter(team__slug=team)
    return records.order_by(F("confirmation_requested_at").asc(nulls_last=True), "id")


def parameters_for_decision(user: Any, pk: int) -> DeploymentParameters:
    """One record for a platform admin to decide on (any team); 404 when missing."""
    require_platform_admin(user)
    found = parameters_confirmation_queue(user, state="all").filter(pk=pk).first()
    if found is None:
        raise NotFoundError(_("Deployment parameters not found."))
    return found


def launch_lists_for_user(user: Any, *, team: Team | None = None) -> QuerySet[LaunchList]:
    lists = scope_to_member_teams(
        LaunchList.objects.select_related("team", "created_by", "deployment_parameters"), user
    )
    if team is not None:
        lists = lists.filter(team=team)
    return lists.prefetch_related("jobs").order_by("-updated_at", "-id")


def launch_list_get_for_user(user: Any, pk: int) -> LaunchList:
    return access_team_object(
        LaunchList.objects.select_related("team", "created_by", "deployment_parameters"),
        user, pk=pk,
    )


def deployment_parameters_for_user(user: Any, *,
                                   team: Team | None = None) -> QuerySet[DeploymentParameters]:
    records = scope_to_member_teams(
        DeploymentParameters.objects.select_related(
            "team", "created_by", "launch_list", *_CONFIRMATION_RELATED
        ), user
    )
    if team is not None:
        records = records.filter(team=team)
    return records.prefetch_related("jobs", "verifications").order_by("-updated_at", "-id")


def deployment_parameters_for_team(team: Team) -> QuerySet[DeploymentParameters]:
    """Choices for a form of a team the caller already belongs to."""
    return DeploymentParameters.objects.filter(team=team).order_by("title", "id")


def verifications_for_team(team: Team) -> QuerySet[Verification]:
    """The team's verification requests, newest first (choices for deployment parameters)."""
    return Verification.objects.filter(team=team).select_related("cluster").order_by(
        "-created_at", "-id"
    )


def deployment_parameters_get_for_user(user: Any, pk: int) -> DeploymentParameters:
    return access_team_object(
        DeploymentParameters.objects.select_related(
            "team", "created_by", "launch_list", *_CONFIRMATION_RELATED
        ).prefetch_related("verifications__cluster"),
        user, pk=pk,
    )


# --- run records ------------------------------------------------------------------------------


def _records() -> QuerySet[RunRecord]:
    return RunRecord.objects.select_related("team", "job", "frozen_by")


def run_records_for_user(user: Any, *, name_contains: str = "") -> QuerySet[RunRecord]:
    """The run records a user may read (admins: all), newest first, optionally by name."""
    records = scope_to_member_teams(_records(), user, admins_see_all=True)
    if name_contains:
        records = records.filter(job_name__icontains=name_contains)
    return records.order_by("-frozen_at", "-id")


def run_record_get_for_user(user: Any, name: str) -> RunRecord:
    """One run record by job name; 404 for anyone outside its team (admins read all)."""
    return access_team_object(
        _records().prefetch_related(
            Prefetch("attempts", queryset=SubmissionAttempt.objects.order_by("number")),
            Prefetch("status_changes",
                     queryset=StatusChange.objects.order_by("observed_at", "id")),
            Prefetch("first_run_checks",
                     queryset=FirstRunCheck.objects.select_related("checked_by")
                     .order_by("checked_at", "id")),
        ),
        user, admins_see_all=True, job_name=name,
    )


def _child_refs(job: Job, record: RunRecord | None) -> list[tuple[str, Any]]:
    """(label, pk) of every role the job ever had (deleted ones included, from the audit trail
    itself) and of the run record's attempts, status changes and first-run checks: one query."""
    # Roles are read from the Role event table itself (indexed by job), not through `Events`,
    # which would expand every role event of every job before filtering.
    role_events = apps.get_model("jobs", "RoleEvent")

    def labelled(label: str, queryset: QuerySet[Any], field: str = "pk") -> QuerySet[Any]:
        return queryset.order_by().values_list(Value(label, output_field=CharField()), field)

    parts = [labelled("jobs.Role", role_events.objects.filter(job_id=job.pk), "pgh_obj_id"),
             labelled("jobs.Role", Role.objects.filter(job_id=job.pk))]
    if record is not None:
        parts += [labelled("jobs.SubmissionAttempt", record.attempts.all()),
                  labelled("jobs.StatusChange", record.status_changes.all()),
                  labelled("jobs.FirstRunCheck", record.first_run_checks.all())]
    found = set(parts[0].union(*parts[1:]))
    return sorted(((label, str(pk) if label == "jobs.Role" else pk) for label, pk in found),
                  key=lambda ref: (ref[0], int(ref[1])))


def job_audit_refs(job: Job, record: RunRecord | None = None) -> list[tuple[str, Any]]:
    """(model label, pk) of everything a run's audit trail covers."""
    refs: list[tuple[str, Any]] = [("jobs.Job", job.pk)]
    children = _child_refs(job, record)
    refs += [ref for ref in children if ref[0] == "jobs.Role"]
    launch_lists = {job.launch_list_id}
    parameters = {job.deployment_parameters_id}
    if record is not None:
        refs.append(("jobs.RunRecord", record.pk))
        refs += [ref for ref in children if ref[0] != "jobs.Role"]
        launch_lists.add(record.launch_list_snapshot.get("id"))
        parameters.add(record.deployment_parameters_snapshot.get("id"))
    refs += [("jobs.LaunchList", pk) for pk in sorted(x for x in launch_lists if x is not None)]
    refs += [("jobs.DeploymentParameters", pk)
             for pk in sorted(x for x in parameters if x is not None)]
    return refs


def events_as_dicts(events: list[AuditEvent]) -> list[dict[str, Any]]:
    """Events as plain data, with the actor's username beside the id (read with the events)."""
    rows = []
    for event in events:
        row = event_as_dict(event)
        row["actor_username"] = event.actor_username
        rows.append(row)
    return rows


def _attempt(attempt: SubmissionAttempt) -> dict[str, Any]:
    return {
        "number": attempt.number, "task_id": attempt.task_id, "outcome": attempt.outcome,
        "http_status": attempt.http_status, "message": attempt.message,
        "started_at": attempt.started_at, "finished_at": attempt.finished_at,
    }


def _status_change(change: StatusChange) -> dict[str, Any]:
    return {"phase": change.phase, "reason": change.reason, "message": change.message,
            "observed_at": change.observed_at}


def _first_run_check(check: FirstRunCheck) -> dict[str, Any]:
    return {
        "observed": check.observed, "evidence": check.evidence, "notes": check.notes,
        "troubleshooting": check.troubleshooting, "checked_by": check.checked_by.get_username(),
        "checked_at": check.checked_at,
    }


def first_run_checks_of(record: RunRecord) -> list[dict[str, Any]]:
    return [_first_run_check(check) for check in record.first_run_checks.all()]


def _job_summary(job: Job, record: RunRecord) -> dict[str, Any]:
    return {
        "name": job.name, "team": record.team.slug, "state": record.state,
        "cluster": record.cluster, "namespace": record.namespace,
        "submitted_at": record.submitted_at, "pending_since": record.pending_since,
        "pending_flagged": record.pending_flagged, "status_reason": record.status_reason,
        "status_message": record.status_message,
    }


def run_record_chain(record: RunRecord) -> dict[str, Any]:
    """The whole chain of one run, in order (SPEC 7): records, YAML, attempts, history, audit."""
    events = audit_events(objects=job_audit_refs(record.job, record)).page(
        AUDIT_EVENTS_IN_CHAIN, oldest_first=True
    )
    return {
        "job": _job_summary(record.job, record),
        "launch_list": record.launch_list_snapshot,
        "deployment_parameters": record.deployment_parameters_snapshot,
        "verifications": record.verifications_snapshot,
        "manifest": {
            "yaml": record.manifest_yaml, "sha256": record.manifest_sha256,
            "frozen_at": record.frozen_at, "frozen_by": record.frozen_by.get_username(),
            "findings_accepted": record.findings_snapshot,
        },
        "submission": {
            "state": record.submission_state, "submitted_at": record.submitted_at,
            "remote_uid": record.remote_uid, "failure_message": record.failure_message,
            "cancelled_at": record.cancelled_at,
            "capture_incomplete": record.capture_incomplete,
            "attempts": [_attempt(a) for a in record.attempts.all()],
        },
        "status_history": [_status_change(c) for c in record.status_changes.all()],
        "first_run_checks": first_run_checks_of(record),
        "audit_events": events_as_dicts(events),
    }


def manifest_diff(record: RunRecord, other: RunRecord) -> str:
    """Unified diff of `other`'s frozen YAML against `record`'s."""
    lines = difflib.unified_diff(
        other.manifest_yaml.splitlines(keepends=True),
        record.manifest_yaml.splitlines(keepends=True),
        fromfile=f"{other.job_name} ({other.manifest_sha256[:12]})",
        tofile=f"{record.job_name} ({record.manifest_sha256[:12]})",
    )
    return "".join(lines)


def run_diff(record: RunRecord, other: RunRecord) -> RunDiff:
    """What changed from `other`'s run to `record`'s, by role and field (the name left out)."""
    return semantic_diff(old_yaml=other.manifest_yaml, old_name=other.job_name,
                         new_yaml=record.manifest_yaml, new_name=record.job_name)


def other_run_record_for_diff(user: Any, record: RunRecord, name: str) -> RunRecord:
    """A run record of the same team to compare with; 404 otherwise."""
    other = run_record_get_for_user(user, name)
    if other.team_id != record.team_id:
        raise NotFoundError(_("Run record not found."))
    return other


# --- audit events -----------------------------------------------------------------------------


def _is_user_id(actor: str) -> bool:
    return actor.isdecimal() and len(actor) <= 18  # (longer: no user has that id)


def _job_for_audit(user: Any, name: str) -> Job:
    # The run record comes along (one query): the trail covers it and its rows.
    return access_team_object(
        Job.objects.select_related("team", "run_record"), user, admins_see_all=True, name=name
    )


def _run_record_of(job: Job) -> RunRecord | None:
    try:
        return job.run_record
    except RunRecord.DoesNotExist:
        return None


def audit_events_for_user(user: Any, *, job: str = "", actor: str = "",
                          model: str = "") -> AuditLookup:
    """Audit events, newest first: a team member sees their teams' (admins see all).

    `job` narrows to one job's whole trail (404 when the job is not the user's to see);
    `actor` is a username or a user id; `model` a model label or name.
    """
    objects = None
    if job:
        found = _job_for_audit(user, job)
        objects = job_audit_refs(found, _run_record_of(found))
    scope: dict[str, Any] = {}
    if not is_platform_admin(user) and not job:
        teams = list(teams_for_user(user))
        scope = {"team_ids": [t.pk for t in teams], "team_slugs": [t.slug for t in teams]}
    return audit_events(
        objects=objects, model=model or None,
        # a user id, or a username looked up within the read of their contexts
        actor_id=int(actor) if _is_user_id(actor) else None,
        actor_username=actor if actor and not _is_user_id(actor) else None,
        **scope,
    )
