"""Reads of launch lists, deployment parameters, run records and their audit trail.

Every read is scoped to the user's teams (platform admins also read run records and audit
events); "missing" and "another team's" are the same 404.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import F, QuerySet
from django.utils.translation import gettext as _

from clusters.models import Verification, VerificationState
from jobs.gpu.selectors import gpu_body
from jobs.models import (
    ConfirmationState,
    DeploymentParameters,
    Job,
    LaunchList,
    RunRecord,
)
from jobs.progress.selectors import progress_body
from jobs.records.rundiff import RunDiff, semantic_diff
from jobs.usage.selectors import run_gpu_hours
from rlark_site.foundation.audit.selectors import (
    AuditEvent,
    AuditLookup,
    audit_events,
    event_as_dict,
)
from rlark_site.foundation.exceptions import NotFoundError
from rlark_site.foundation.rawsql import jsonb
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
    """One run record by job name; 404 for anyone outside its team (admins read all).

    Its attempts, status changes and first-run checks are not read with it: `run_record_chain`
    reads them in the statement that finds what its audit trail covers. Its training progress
    (`RunProgress`, one row or none) and its GPU reading (`RunGpu`, likewise) come in the same
    statement."""
    return access_team_object(_records().select_related("progress", "gpu"), user,
                              admins_see_all=True,
                              job_name=name)


# The id of every role the job ever had: deleted ones included, from the Role event table
# itself, not through pghistory's `Events`, which would expand every role event of every job
# first.
_ROLE_IDS_SQL = """
SELECT e.pgh_obj_id AS id FROM jobs_roleevent e WHERE e.job_id = %(job)s
UNION SELECT r.id FROM jobs_role r WHERE r.job_id = %(job)s
"""

# Every role the job ever had and the run record's attempts, status changes and first-run
# checks (none for a NULL record).
_CHILD_REFS_SQL = f"""
SELECT 'jobs.Role', role.id FROM ({_ROLE_IDS_SQL}) AS role
UNION SELECT 'jobs.SubmissionAttempt', a.id FROM jobs_submissionattempt a
    WHERE a.run_record_id = %(record)s
UNION SELECT 'jobs.StatusChange', s.id FROM jobs_statuschange s WHERE s.run_record_id = %(record)s
UNION SELECT 'jobs.FirstRunCheck', f.id FROM jobs_firstruncheck f
    WHERE f.run_record_id = %(record)s
"""  # noqa: S608  (a fixed fragment; values are parameters)


def _sorted_refs(found: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """(label, pk) once each, by label then id; role ids as text (as pghistory keys them)."""
    unique = {(label, int(pk)) for label, pk in found}
    return [(label, str(pk) if label == "jobs.Role" else pk) for label, pk in sorted(unique)]


def _child_refs(job: Job, record: RunRecord | None) -> list[tuple[str, Any]]:
    """(label, pk) of every role the job ever had and of the run record's attempts, status
    changes and first-run checks: one query."""
    with connection.cursor() as cursor:
        cursor.execute(_CHILD_REFS_SQL,
                       {"job": job.pk, "record": record.pk if record is not None else None})
        return _sorted_refs(cursor.fetchall())


def job_audit_refs(job: Job, record: RunRecord | None = None, *,
                   children: list[tuple[str, Any]] | None = None) -> list[tuple[str, Any]]:
    """(model label, pk) of everything a run's audit trail covers; `children` are
    `_child_refs(job, record)` when the caller has them (else one query)."""
    refs: list[tuple[str, Any]] = [("jobs.Job", job.pk)]
    if children is None:
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


def _attempt(*, number: int, task_id: str, outcome: str, http_status: int | None,
             message: str, started_at: datetime, finished_at: datetime | None) -> dict[str, Any]:
    return {
        "number": number, "task_id": task_id, "outcome": outcome,
        "http_status": http_status, "message": message,
        "started_at": started_at, "finished_at": finished_at,
    }


def _status_change(*, phase: str, reason: str, message: str,
                   observed_at: datetime) -> dict[str, Any]:
    return {"phase": phase, "reason": reason, "message": message, "observed_at": observed_at}


def _first_run_check(*, observed: bool, evidence: str, notes: str, troubleshooting: Any,
                     checked_by: str, checked_at: datetime) -> dict[str, Any]:
    return {
        "observed": observed, "evidence": evidence, "notes": notes,
        "troubleshooting": troubleshooting, "checked_by": checked_by, "checked_at": checked_at,
    }


def first_run_checks_of(record: RunRecord) -> list[dict[str, Any]]:
    checks = record.first_run_checks.select_related("checked_by").order_by("checked_at", "id")
    return [
        _first_run_check(observed=check.observed, evidence=check.evidence, notes=check.notes,
                         troubleshooting=check.troubleshooting,
                         checked_by=check.checked_by.get_username(), checked_at=check.checked_at)
        for check in checks
    ]


def _job_summary(job: Job, record: RunRecord) -> dict[str, Any]:
    return {
        "name": job.name, "team": record.team.slug, "state": record.state,
        "cluster": record.cluster, "namespace": record.namespace,
        "submitted_at": record.submitted_at, "pending_since": record.pending_since,
        "pending_flagged": record.pending_flagged, "status_reason": record.status_reason,
        "status_message": record.status_message,
    }


# A run's lists and the rest of what its audit trail covers, in one statement: one row per
# role id (label 'jobs.Role', no data), attempt, status change and first-run check (its fields
# in `data`, its times typed), each list in the order the chain shows it.
_RUN_CHILDREN_SQL = f"""
SELECT 'jobs.Role' AS label, role.id, NULL::bigint AS number, NULL::jsonb AS data,
    NULL::timestamptz AS at, NULL::timestamptz AS until
FROM ({_ROLE_IDS_SQL}) AS role
UNION ALL
SELECT 'jobs.SubmissionAttempt', a.id, a.number,
    jsonb_build_object('task_id', a.task_id, 'outcome', a.outcome,
                       'http_status', a.http_status, 'message', a.message),
    a.started_at, a.finished_at
FROM jobs_submissionattempt a WHERE a.run_record_id = %(record)s
UNION ALL
SELECT 'jobs.StatusChange', s.id, NULL,
    jsonb_build_object('phase', s.phase, 'reason', s.reason, 'message', s.message),
    s.observed_at, NULL
FROM jobs_statuschange s WHERE s.run_record_id = %(record)s
UNION ALL
SELECT 'jobs.FirstRunCheck', f.id, NULL,
    jsonb_build_object('observed', f.observed, 'evidence', f.evidence, 'notes', f.notes,
                       'troubleshooting', f.troubleshooting, 'checked_by', u.{{username}}),
    f.checked_at, NULL
FROM jobs_firstruncheck f JOIN {{users}} u ON u.{{user_pk}} = f.checked_by_id
WHERE f.run_record_id = %(record)s
ORDER BY label, number, at, id
"""  # noqa: S608  (fixed fragments and the user table's quoted names; values are parameters)


@cache
def _run_children_sql() -> str:
    users = get_user_model()._meta
    return _RUN_CHILDREN_SQL.format(
        users=connection.ops.quote_name(users.db_table),
        user_pk=connection.ops.quote_name(cast(Any, users.pk).column),
        username=connection.ops.quote_name(
            cast(Any, users.get_field(get_user_model().USERNAME_FIELD)).column),
    )


@dataclass
class _RunChildren:
    refs: list[tuple[str, Any]]  # as `_child_refs` gives them
    attempts: list[dict[str, Any]]
    status_history: list[dict[str, Any]]
    first_run_checks: list[dict[str, Any]]


def _run_children(record: RunRecord) -> _RunChildren:
    """The record's attempts, status changes and first-run checks, as the chain shows them, and
    what its audit trail covers besides the records themselves (one query)."""
    with connection.cursor() as cursor:
        cursor.execute(_run_children_sql(), {"job": record.job_id, "record": record.pk})
        rows = cursor.fetchall()
    children = _RunChildren(refs=_sorted_refs((label, pk) for label, pk, *_ in rows),
                            attempts=[], status_history=[], first_run_checks=[])
    for label, _pk, number, data, at, until in rows:
        fields = jsonb(data)
        if label == "jobs.SubmissionAttempt":
            children.attempts.append(_attempt(number=number, started_at=at, finished_at=until,
                                              **fields))
        elif label == "jobs.StatusChange":
            children.status_history.append(_status_change(observed_at=at, **fields))
        elif label == "jobs.FirstRunCheck":
            children.first_run_checks.append(_first_run_check(checked_at=at, **fields))
    return children


def run_record_chain(record: RunRecord) -> dict[str, Any]:
    """The whole chain of one run, in order (SPEC 7): records, YAML, attempts, history, audit."""
    children = _run_children(record)
    events = audit_events(
        objects=job_audit_refs(record.job, record, children=children.refs)
    ).page(AUDIT_EVENTS_IN_CHAIN, oldest_first=True)
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
            "attempts": children.attempts,
        },
        "status_history": children.status_history,
        "first_run_checks": children.first_run_checks,
        "progress": progress_body(record),
        "cause": record.cause or None,
        "gpu": gpu_body(record),
        "gpu_hours": run_gpu_hours(record),
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
    # The run record comes along (one query), with only what `job_audit_refs` reads: the
    # trail covers it, its rows and the records its snapshots name.
    return access_team_object(
        Job.objects.select_related("run_record").only(
            "id", "launch_list_id", "deployment_parameters_id", "run_record__id",
            "run_record__job_id", "run_record__launch_list_snapshot",
            "run_record__deployment_parameters_snapshot",
        ), user, admins_see_all=True, name=name,
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
