"""Writes for launch lists, deployment parameters and the lifecycle of submitted jobs.

Submission itself lives in `jobs.records.submission`. Every service checks only what the
caller's shape check cannot: that referenced records belong to the same team, that the two
records link each other one-to-one, and that a lifecycle step fits the job's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pghistory
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.credentials import CredentialError, credentials_for
from clusters.k8s import KubeError, NotFound, delete_job
from clusters.models import Cluster, Verification, VerificationState
from jobs.context import spec_from_job
from jobs.core.parameters import record_roles_from_spec
from jobs.drafts.services import job_create, not_found
from jobs.models import (
    DeploymentParameters,
    FirstRunCheck,
    Job,
    JobState,
    LaunchList,
    Role,
    RunRecord,
    StatusChange,
)
from jobs.observe.capture import capture_before_cancel
from jobs.records import conf
from jobs.records.checklist import ANSWERS, checklist_codes
from jobs.records.confirmation import mark_stale_if_changed
from jobs.records.lifecycle import CANCELLABLE_STATES, move
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "deployment_parameters_create",
    "deployment_parameters_fill_from_job",
    "deployment_parameters_update",
    "first_run_check_record",
    "job_cancel",
    "launch_list_create",
    "launch_list_update",
    "run_record_clone",
]

LAUNCH_LIST_FIELDS = (
    "title", "entry", "datasets", "models_used", "hyperparameters", "notes", "expected_signals",
    "image", "role_images", "progress",
)
PARAMETERS_FIELDS = ("title", "roles", "network_domain", "storage_notes", "network_notes")


def _context(user: Any, team: Team) -> Any:
    return pghistory.context(user=user.pk, team=team.slug)


# --- launch lists -----------------------------------------------------------------------------


def _team_parameters(team: Team, pk: Any) -> DeploymentParameters | None:
    if pk is None:
        return None
    parameters = DeploymentParameters.objects.filter(team=team, pk=pk).first()
    if parameters is None:
        raise not_found(_("Deployment parameters"), pk, field="deployment_parameters")
    return parameters


def _link_from_launch_list(launch_list: LaunchList,
                           parameters: DeploymentParameters | None) -> None:
    """Make `parameters` (or nothing) the deployment parameters of `launch_list`."""
    current = DeploymentParameters.objects.filter(launch_list=launch_list).first()
    if current is not None and (parameters is None or current.pk != parameters.pk):
        if parameters is not None:
            raise ApplicationError(
                _("This launch list is already linked to deployment parameters %(title)s; "
                  "unlink them first.") % {"title": current.title},
                extra={"field": "deployment_parameters"}, status_code=409,
            )
        current.launch_list = None
        current.save(update_fields=["launch_list", "updated_at"])
    if parameters is not None and parameters.launch_list_id != launch_list.pk:
        _require_unlinked_parameters(parameters)
        parameters.launch_list = launch_list
        parameters.save(update_fields=["launch_list", "updated_at"])


def _require_unlinked_parameters(parameters: DeploymentParameters) -> None:
    if parameters.launch_list_id is not None:
        raise ApplicationError(
            _("Deployment parameters %(title)s already reference another launch list; unlink "
              "them first.") % {"title": parameters.title},
            extra={"field": "deployment_parameters"}, status_code=409,
        )


def _set_fields(obj: Any, fields: Mapping[str, Any], names: Iterable[str]) -> None:
    for name in names:
        if name in fields:
            setattr(obj, name, fields[name])


@transaction.atomic
def launch_list_create(*, team: Team, user: Any, fields: Mapping[str, Any]) -> LaunchList:
    """A new launch list; `deployment_parameters` (an id) links the two records."""
    launch_list = LaunchList(team=team, created_by=user)
    _set_fields(launch_list, fields, LAUNCH_LIST_FIELDS)
    with _context(user, team):
        launch_list.save()
        if fields.get("deployment_parameters") is not None:
            parameters = _team_parameters(team, fields["deployment_parameters"])
            _link_from_launch_list(launch_list, parameters)
    return launch_list


@transaction.atomic
def launch_list_update(*, launch_list: LaunchList, user: Any,
                       fields: Mapping[str, Any]) -> LaunchList:
    """Change the given fields; `deployment_parameters: null` unlinks the parameters."""
    locked = LaunchList.objects.select_for_update().select_related("team").get(pk=launch_list.pk)
    _set_fields(locked, fields, LAUNCH_LIST_FIELDS)
    with _context(user, locked.team):
        locked.save()
        if "deployment_parameters" in fields:
            parameters = _team_parameters(locked.team, fields["deployment_parameters"])
            _link_from_launch_list(locked, parameters)
    return locked


# --- deployment parameters --------------------------------------------------------------------


def _team_launch_list(team: Team, pk: Any) -> LaunchList | None:
    if pk is None:
        return None
    launch_list = LaunchList.objects.filter(team=team, pk=pk).first()
    if launch_list is None:
        raise not_found(_("Launch list"), pk, field="launch_list")
    return launch_list


def _set_launch_list(parameters: DeploymentParameters, launch_list: LaunchList | None) -> None:
    if launch_list is not None:
        other = DeploymentParameters.objects.filter(launch_list=launch_list).exclude(
            pk=parameters.pk
        ).first()
        if other is not None:
            raise ApplicationError(
                _("Launch list %(launch_list)s is already linked to deployment parameters "
                  "%(title)s; unlink it there first.")
                % {"launch_list": launch_list.title, "title": other.title},
                extra={"field": "launch_list"}, status_code=409,
            )
    parameters.launch_list = launch_list


def _team_verifications(team: Team, ids: Iterable[Any]) -> list[Verification]:
    wanted = list(dict.fromkeys(ids))
    found = {v.pk: v for v in Verification.objects.filter(team=team, pk__in=wanted)}
    missing = [pk for pk in wanted if pk not in found]
    if missing:
        raise not_found(_("Verification"), missing[0], field="verifications")
    return [found[pk] for pk in wanted]


def _apply_parameters(parameters: DeploymentParameters, fields: Mapping[str, Any]) -> None:
    _set_fields(parameters, fields, PARAMETERS_FIELDS)
    if "launch_list" in fields:
        _set_launch_list(parameters, _team_launch_list(parameters.team, fields["launch_list"]))


@transaction.atomic
def deployment_parameters_create(*, team: Team, user: Any,
                                 fields: Mapping[str, Any]) -> DeploymentParameters:
    """New deployment parameters; `launch_list` (an id) and `verifications` (ids) link them."""
    parameters = DeploymentParameters(
        team=team, created_by=user, confirmation_requested_by=user,
        confirmation_requested_at=timezone.now(),
    )
    _apply_parameters(parameters, fields)
    with _context(user, team):
        parameters.save()
        if "verifications" in fields:
            parameters.verifications.set(_team_verifications(team, fields["verifications"]))
    return parameters


@transaction.atomic
def deployment_parameters_update(*, parameters: DeploymentParameters, user: Any,
                                 fields: Mapping[str, Any]) -> DeploymentParameters:
    locked = (
        DeploymentParameters.objects.select_for_update()
        .select_related("team")
        .get(pk=parameters.pk)
    )
    _apply_parameters(locked, fields)
    with _context(user, locked.team):
        locked.save()
        if "verifications" in fields:
            locked.verifications.set(_team_verifications(locked.team, fields["verifications"]))
        mark_stale_if_changed(locked)
    return locked


def _confirming_verifications(team: Team, roles: list[dict[str, Any]]) -> list[Verification]:
    """The newest approved verification of each role's exact (cluster, selector)."""
    found: dict[int, Verification] = {}
    for role in roles:
        if not isinstance(role["cluster"], str) or not role["cluster"] or not role["selector"]:
            continue
        verification = (
            Verification.objects.filter(
                team=team, cluster__name=role["cluster"], selector=role["selector"],
                state=VerificationState.APPROVED,
            )
            .order_by("-decided_at", "-pk")
            .first()
        )
        if verification is not None:
            found[verification.pk] = verification
    return list(found.values())


@transaction.atomic
def deployment_parameters_fill_from_job(*, parameters: DeploymentParameters, job: Job,
                                        user: Any) -> DeploymentParameters:
    """Copy a draft's per-role placement and resources, and the verifications confirming them.

    Replaces `roles` and `network_domain` with exactly what the job has
    (`jobs.core.parameters.record_roles_from_spec`, so the record has no mismatch with the
    job); approved verifications of the roles' exact (cluster, selector) combinations are
    added to those already referenced. A confirmation whose record changed becomes stale.
    """
    if job.team_id != parameters.team_id:
        raise not_found(_("Job"), job.name, field="job")
    locked = DeploymentParameters.objects.select_for_update().select_related("team").get(
        pk=parameters.pk
    )
    roles = record_roles_from_spec(spec_from_job(job))
    locked.roles = roles
    locked.network_domain = job.network_domain
    with _context(user, locked.team):
        locked.save(update_fields=["roles", "network_domain", "updated_at"])
        locked.verifications.add(*_confirming_verifications(locked.team, roles))
        mark_stale_if_changed(locked)
    return locked


# --- lifecycle --------------------------------------------------------------------------------


def _run_record(job: Job, *, lock: bool = False) -> RunRecord:
    records = RunRecord.objects.select_for_update() if lock else RunRecord.objects.all()
    record = records.filter(job=job).first()
    if record is None:
        raise ApplicationError(
            _("This job has not been submitted."), extra={"state": job.state}, status_code=409
        )
    return record


def _delete_remote(record: RunRecord) -> None:
    """Delete the run's Job from its cluster; already gone is fine."""
    cluster = Cluster.objects.filter(name=record.cluster).first()
    if cluster is None:
        return
    try:
        delete_job(
            credentials=credentials_for(cluster), namespace=record.namespace,
            name=record.job_name, timeout=conf.kube_timeout(),
        )
    except NotFound:
        return
    except (KubeError, CredentialError) as exc:
        raise ApplicationError(
            _("The cluster did not delete the Job: %(error)s. Nothing was changed; try again.")
            % {"error": exc},
            status_code=502,
        ) from exc


@transaction.atomic
def job_cancel(*, job: Job, user: Any | None, reason: str = "CancelledByUser",
               message: str = "") -> RunRecord:
    """Delete a submitted job's Job from its cluster and keep the record (state cancelled).

    The run record is locked before its state is checked and stays locked through the
    cluster call, so of concurrent cancels exactly one deletes and records; the others wait
    and then answer 409. When the cluster call fails, the transaction rolls back and nothing
    is recorded as cancelled. A submission try racing this waits for the lock, sees
    `cancelled` and removes whatever it created.

    Before the Job is deleted (its pods go with it), every pod of a run on its cluster is
    captured into the record (`capture_before_cancel`: bounded in time; what it could not
    read is noted on the record, and the cancel goes on).

    `user` None is RLark itself (a cancel after a stall): the status history then carries
    `reason` and `message` instead of the user's name.
    """
    record = _run_record(job, lock=True)
    if record.state not in CANCELLABLE_STATES:
        raise ApplicationError(
            _("Only a queued, pending or running job can be cancelled."),
            extra={"state": record.state}, status_code=409,
        )
    if record.state != JobState.QUEUED:  # a Job may be on the cluster
        capture_before_cancel(record)
        record.refresh_from_db(fields=["capture_incomplete"])
    _delete_remote(record)
    now = timezone.now()
    context = _context(user, job.team) if user is not None else pghistory.context(
        team=job.team.slug, actor="rlark", reason=reason)
    with context:
        changed = move(record, JobState.CANCELLED, now=now)
        record.cancelled_at = now
        record.submission_lease_until = None
        record.save(update_fields=[*changed, "cancelled_at", "submission_lease_until"])
        StatusChange.objects.create(
            run_record=record, phase="Cancelled", reason=reason,
            message=message or _("Cancelled by %(user)s.") % {
                "user": user.get_username() if user is not None else "RLark"},
        )
    return record


def _troubleshooting(answers: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """Checklist answers as stored: {code: {"answer": ok|problem|unchecked, "note": str}}."""
    known = set(checklist_codes())
    stored: dict[str, dict[str, str]] = {}
    for code, value in (answers or {}).items():
        item = value if isinstance(value, Mapping) else {"answer": value}
        answer, note = str(item.get("answer") or "unchecked"), str(item.get("note") or "")
        if code not in known or answer not in ANSWERS:
            raise ApplicationError(
                _("Unknown checklist item or answer: %(code)s = %(answer)s.")
                % {"code": code, "answer": answer},
                extra={"field": "troubleshooting"},
            )
        stored[code] = {"answer": answer, "note": note}
    return stored


@transaction.atomic
def first_run_check_record(*, job: Job, user: Any, observed: bool, evidence: str = "",
                           notes: str = "",
                           troubleshooting: Mapping[str, Any] | None = None) -> FirstRunCheck:
    """Store whether the expected first signal came, once the job was seen Running.

    Troubleshooting answers are kept only when the signal was not observed.
    """
    record = _run_record(job)
    if not record.status_changes.filter(phase="Running").exists():
        raise ApplicationError(
            _("The job has not been seen Running yet; the first-run check comes after that."),
            extra={"state": job.state}, status_code=409,
        )
    answers = {} if observed else _troubleshooting(troubleshooting)
    with _context(user, job.team):
        return FirstRunCheck.objects.create(
            run_record=record, observed=observed, evidence=evidence, notes=notes,
            troubleshooting=answers, checked_by=user,
        )


def _role_body(role: Role) -> dict[str, Any]:
    return {
        "name": role.name, "cluster": role.cluster, "selector": role.selector,
        "gpus": role.gpus, "devices": role.devices, "cpu": role.cpu, "memory": role.memory,
        "image": role.image, "image_digest": role.image_digest,
        "prepare_script": role.prepare_script, "env": role.env, "mounts": role.mounts,
    }


def run_record_clone(*, run_record: RunRecord, user: Any, name: str) -> Job:
    """A new draft named `name` with the submitted job's roles and common configuration.

    The launch list and deployment parameters links are kept; the user changes them in the
    wizard when the new run needs its own records.
    """
    source = run_record.job
    data = {
        "name": name,
        "task_type": source.task_type,
        "header_role": source.header_role,
        "network_domain": source.network_domain,
        "ssh_keys": list(source.ssh_key_names or []),
        "run_script": source.run_script,
        "tensorboard_log_dir": source.tensorboard_log_dir,
        "image_compatibility_confirmed": source.image_compatibility_confirmed,
        "launch_list": source.launch_list_id,
        "deployment_parameters": source.deployment_parameters_id,
        "roles": [_role_body(role) for role in source.roles.order_by("position")],
    }
    return job_create(team=run_record.team, user=user, data=data)
