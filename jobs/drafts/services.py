"""Writes for job drafts and SSH keys.

A draft keeps what the user typed even when it breaks a rule: the findings engine
reports it (`jobs.context.evaluate`). Only what cannot be stored at all is refused here:
a name the job could not be found by (blank, with ``/``, too long for the column) or one
that is already taken, references to another team's records, and changes to a job that
has left the draft state.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pghistory
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.context import name_findings, name_is_taken
from jobs.core.spec import TASK_TYPES
from jobs.core.sshkeys import SSHKeyError, fingerprint_sha256, normalize_openssh_public_key
from jobs.models import DeploymentParameters, Job, JobState, LaunchList, Role, SSHKey
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.validators import has_control_characters

__all__ = [
    "JOB_NAME_MAX_LENGTH",
    "SSH_KEY_NAME_MAX_LENGTH",
    "draft_preview",
    "job_create",
    "job_delete",
    "job_update",
    "ssh_key_create",
    "ssh_key_delete",
]

JOB_NAME_MAX_LENGTH = 255  # the column; the engine reports anything longer than 63
SSH_KEY_NAME_MAX_LENGTH = 100

# Job fields a draft body sets directly, with the value an absent field takes on a full update.
_JOB_DEFAULTS: dict[str, Any] = {
    "task_type": "rl",
    "header_role": "",
    "network_domain": "",
    "run_script": "",
    "tensorboard_log_dir": "",
    "image_compatibility_confirmed": False,
    "wizard_step": 1,
}


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _pair_list(value: Any) -> list[list[Any]]:
    """A selector or device list as ``[[key, value], ...]`` in the order given."""
    if isinstance(value, Mapping):
        return [[k, v] for k, v in value.items()]
    return [[item[0], item[1]] for item in value or ()]


def _resource(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return {k: value[k] for k in ("request", "limit") if value.get(k) not in (None, "")}


def _mount(value: Mapping[str, Any]) -> dict[str, str]:
    return {k: _text(value.get(k)) for k in ("kind", "source", "target", "storage_class", "size")}


def _env(value: Mapping[str, Any]) -> dict[str, str]:
    return {"name": _text(value.get("name")), "value": _text(value.get("value"))}


def _role(job: Job, position: int, data: Mapping[str, Any]) -> Role:
    gpus = data.get("gpus", 0)
    return Role(
        job=job,
        position=position,
        name=_text(data.get("name")),
        cluster=_text(data.get("cluster")),
        selector=_pair_list(data.get("selector")),
        gpus=0 if gpus is None else gpus,
        devices=_pair_list(data.get("devices")),
        cpu=_resource(data.get("cpu")),
        memory=_resource(data.get("memory")),
        image=_text(data.get("image")),
        image_digest=_text(data.get("image_digest")),
        prepare_script=_text(data.get("prepare_script")),
        env=[_env(item) for item in data.get("env") or ()],
        mounts=[_mount(item) for item in data.get("mounts") or ()],
    )


def _initial_roles(task_type: str) -> list[dict[str, Any]]:
    return [{"name": name} for name in TASK_TYPES.get(task_type, ())]


ROLE_FIELDS = ("position", "name", "cluster", "selector", "gpus", "devices", "cpu", "memory",
               "image", "image_digest", "prepare_script", "env", "mounts")


def _pair_roles(existing: Sequence[Role], wanted: Sequence[Role]) -> dict[int, Role]:
    """Which stored role each wanted role (by index) continues: the one of the same name
    (ignoring case), else an unclaimed one at the same position (a rename in place)."""
    by_name = {role.name.lower(): role for role in existing if role.name}
    pairs: dict[int, Role] = {}
    for index, role in enumerate(wanted):
        same = by_name.get(role.name.lower()) if role.name else None
        if same is not None and same not in pairs.values():
            pairs[index] = same
    by_position = {role.position: role for role in existing if role not in pairs.values()}
    for index in range(len(wanted)):
        if index not in pairs and index in by_position:
            pairs[index] = by_position[index]
    return pairs


def _save_roles(job: Job, roles: Sequence[Mapping[str, Any]]) -> None:
    """Save roles in place: update what changed, insert what is new, delete what is gone, so
    the audit trail holds the real changes (the position constraint is checked at commit)."""
    existing = list(job.roles.order_by("position"))
    wanted = [_role(job, index, data) for index, data in enumerate(roles)]
    pairs = _pair_roles(existing, wanted)
    kept = {role.pk for role in pairs.values()}
    Role.objects.filter(pk__in=[r.pk for r in existing if r.pk not in kept]).delete()
    for index, stored in pairs.items():
        changed = [f for f in ROLE_FIELDS
                   if getattr(stored, f) != getattr(wanted[index], f)]
        for name in changed:
            setattr(stored, name, getattr(wanted[index], name))
        if changed:
            stored.save(update_fields=changed)
    Role.objects.bulk_create(role for index, role in enumerate(wanted) if index not in pairs)


def _name_problem(name: str, code: str, message: str) -> ApplicationError:
    findings = [f.as_dict() for f in name_findings(name, taken=True) if f.code == code]
    return ApplicationError(message, extra={"findings": findings})


def _name_taken(name: str) -> ApplicationError:
    return _name_problem(
        name, "job.name.taken", _("This job name is already taken; choose another.")
    )


def _check_name(name: Any, *, exclude_job_id: int | None) -> str:
    """The name if a draft can be stored under it; ApplicationError with findings otherwise."""
    text = _text(name)
    if (not text or "/" in text or len(text) > JOB_NAME_MAX_LENGTH
            or has_control_characters(text)):
        raise _name_problem(
            text, "job.name.invalid",
            _("A job needs a name to be found by: 1-%(max)d characters without '/' or "
              "control characters.")
            % {"max": JOB_NAME_MAX_LENGTH},
        )
    if name_is_taken(text, exclude_job_id=exclude_job_id):
        raise _name_taken(text)
    return text


def not_found(what: str, pk: Any, *, field: str) -> ApplicationError:
    """A reference to a record that does not exist or belongs to another team (400 on `field`).

    `what` is the record kind, already translated (`_("Launch list")`).
    """
    return ApplicationError(
        _("%(what)s %(id)s not found.") % {"what": what, "id": pk}, extra={"field": field}
    )


_RECORD_KINDS = {
    LaunchList: gettext_lazy("Launch list"),
    DeploymentParameters: gettext_lazy("Deployment parameters"),
}


def _team_record(model: type[LaunchList] | type[DeploymentParameters], pk: Any, *,
                 team: Team, field: str) -> Any:
    if pk is None:
        return None
    record = model.objects.filter(pk=pk, team=team).first()
    if record is None:
        raise not_found(str(_RECORD_KINDS[model]), pk, field=field)
    return record


def _apply_fields(job: Job, data: Mapping[str, Any], *, partial: bool) -> None:
    for field, default in _JOB_DEFAULTS.items():
        if field in data:
            value = data[field]
            setattr(job, field, default if value is None else value)
        elif not partial:
            setattr(job, field, default)
    if "ssh_keys" in data or not partial:
        job.ssh_key_names = [_text(n) for n in data.get("ssh_keys") or ()]
    if "launch_list" in data or not partial:
        job.launch_list = _team_record(
            LaunchList, data.get("launch_list"), team=job.team, field="launch_list"
        )
    if "deployment_parameters" in data or not partial:
        job.deployment_parameters = _team_record(
            DeploymentParameters, data.get("deployment_parameters"),
            team=job.team, field="deployment_parameters",
        )


def _save_job(job: Job) -> None:
    """Save under a savepoint: a concurrent draft with the same name loses cleanly (400)."""
    try:
        with transaction.atomic():
            job.save()
    except IntegrityError as exc:
        raise _name_taken(job.name) from exc


def _reloaded(job: Job) -> Job:
    return Job.objects.select_related("team", "created_by").prefetch_related("roles").get(
        pk=job.pk
    )


@transaction.atomic
def job_create(*, team: Team, user: Any, data: Mapping[str, Any]) -> Job:
    """Create a draft from a job draft body (SPEC 12); rule breaks are kept, not refused.

    Without `roles`, the job type's initial roles are created empty (none for an unknown
    type, which the engine reports as ``job.type.invalid``).
    """
    with pghistory.context(user=user.pk, team=team.slug):
        job = Job(team=team, created_by=user, name=_check_name(data.get("name"),
                                                                exclude_job_id=None))
        _apply_fields(job, data, partial=False)
        _save_job(job)
        roles = data["roles"] if data.get("roles") is not None else _initial_roles(job.task_type)
        _save_roles(job, roles)
    return _reloaded(job)


def _locked_draft(job: Job) -> Job:
    locked = Job.objects.select_for_update().select_related("team").get(pk=job.pk)
    if locked.state != JobState.DRAFT:
        raise ApplicationError(
            _("This job was submitted; only drafts can be changed or deleted."),
            extra={"state": locked.state},
            status_code=409,
        )
    return locked


@transaction.atomic
def job_update(*, job: Job, user: Any, data: Mapping[str, Any], partial: bool) -> Job:
    """Change a draft. `roles`, when given, replaces the whole list (positions in order).

    `partial=False` (PUT) resets absent fields to their defaults and, without `roles`,
    recreates the job type's initial roles; the name is kept when absent.
    """
    locked = _locked_draft(job)
    if "team" in data and data["team"] not in (None, locked.team.slug):
        raise ApplicationError(_("A job cannot move to another team."), extra={"field": "team"})
    with pghistory.context(user=user.pk, team=locked.team.slug):
        if "name" in data and data["name"] != locked.name:
            locked.name = _check_name(data["name"], exclude_job_id=locked.pk)
        _apply_fields(locked, data, partial=partial)
        _save_job(locked)
        if data.get("roles") is not None:
            _save_roles(locked, data["roles"])
        elif not partial:
            _save_roles(locked, _initial_roles(locked.task_type))
    return _reloaded(locked)


def job_preview(*, job: Job, data: Mapping[str, Any]) -> Job:
    """The draft with the job fields of `data` applied as `job_update(partial=True)` would,
    but not saved: what live feedback judges. Refuses what an update would refuse."""
    preview = copy.copy(job)
    _apply_fields(preview, data, partial=True)
    return preview


def draft_preview(*, job: Job, data: Mapping[str, Any]) -> tuple[Job, list[Role]]:
    """The draft `job_update(partial=False)` (or `job_create` for an unsaved `job`) would store
    from `data`, with its roles, built in memory and not saved: what `evaluate(..., roles=)`
    judges and what a job file is compared with. Refuses what the write would refuse (another
    team's launch list or deployment parameters)."""
    preview = copy.copy(job)
    _apply_fields(preview, data, partial=False)
    if data.get("roles") is not None:
        roles = data["roles"]
    else:
        roles = _initial_roles(preview.task_type)
    return preview, [_role(preview, index, body) for index, body in enumerate(roles)]


@transaction.atomic
def job_delete(*, job: Job) -> None:
    """Delete a draft; a submitted job keeps its record (409)."""
    _locked_draft(job).delete()


def _ssh_key_name(name: Any) -> str:
    text = _text(name).strip()
    if not text or len(text) > SSH_KEY_NAME_MAX_LENGTH or has_control_characters(text):
        raise ApplicationError(
            _("A key name is 1-%(max)d characters without control characters.")
            % {"max": SSH_KEY_NAME_MAX_LENGTH},
            extra={"field": "name"},
        )
    return text


def _name_in_use(name: str) -> ApplicationError:
    return ApplicationError(
        _("Your team already has a key named %(name)s.") % {"name": repr(name)},
        extra={"field": "name"},
    )


@transaction.atomic
def ssh_key_create(*, team: Team, user: Any, name: str, public_key: str) -> SSHKey:
    """Add a validated OpenSSH public key (stored as one normalised line) to the team."""
    key_name = _ssh_key_name(name)
    try:
        line = normalize_openssh_public_key(public_key)
        fingerprint = fingerprint_sha256(line)
    except SSHKeyError as exc:
        raise ApplicationError(str(exc), extra={"field": "public_key"}) from exc
    if SSHKey.objects.filter(team=team, name=key_name).exists():
        raise _name_in_use(key_name)
    key = SSHKey(team=team, name=key_name, public_key=line, fingerprint=fingerprint,
                 created_by=user)
    with pghistory.context(user=user.pk, team=team.slug):
        try:
            with transaction.atomic():
                key.save()
        except IntegrityError as exc:
            raise _name_in_use(key_name) from exc
    return key


@transaction.atomic
def ssh_key_delete(*, key: SSHKey) -> None:
    """Remove a key; drafts that name it then report it as unknown."""
    key.delete()
