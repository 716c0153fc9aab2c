"""Job files in and out of drafts: export, validate, apply, clone, sweep, verify (SPEC 17).

Every write goes through the drafts' own services (`job_create`, `job_update`) and every
judgement through the findings engine (`jobs.context.evaluate`), so a draft made from a file is
the draft the API or the wizard would have made. Nothing is written for a bad file, a dry run,
a validation, or an apply that changes nothing (no row, no audit event).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils.translation import gettext as _

from clusters.verifications.services import verification_request_outcome
from jobs.context import Evaluation, evaluate
from jobs.core.jobfile import JobFile, JobFileError, Problem, check_document
from jobs.core.overrides import Override, overridden, parse_override, split_values
from jobs.core.spec import RoleSpec, header_index
from jobs.drafts.selectors import job_get_for_user, team_for_user
from jobs.drafts.serializers import JobDraftSerializer
from jobs.drafts.services import draft_preview, job_create, job_update
from jobs.jobfiles.document import document_of, spec_changes, spec_of
from jobs.jobfiles.schema import job_file_schema
from jobs.models import Job, JobState, RunRecord
from jobs.wizard.selectors import cluster_by_name
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.tenancy.access import access_team_object
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "MAX_OVERRIDES",
    "SWEEP_MAX_COMBINATIONS",
    "Applied",
    "SweepMember",
    "job_file_apply",
    "job_file_clone",
    "job_file_create",
    "job_file_sweep",
    "job_file_validate",
    "job_verify_roles",
    "source_spec",
    "usable_selector",
    "verification_asks",
]

SWEEP_MAX_COMBINATIONS = 100
MAX_OVERRIDES = 100
# Findings that mean "this role lacks a verification covering what it asks" (jobs verify).
LACKING_VERIFICATION = frozenset({
    "selector.unverified", "selector.verification_stale", "gpu.unconfirmed",
    "device.exceeds_capacity", "mount.host_path.unconfirmed",
})


@dataclass
class Applied:
    """What an apply did (or, on a dry run, would do) to the draft of one name."""

    name: str
    team: Team
    action: str  # created | updated | unchanged
    changes: list[dict[str, Any]]
    evaluation: Evaluation
    state: str
    job: Job | None  # the stored draft; None when a dry run would create it
    values: dict[str, Any] = field(default_factory=dict)  # overrides / grid values applied


def job_for_file_export(user: Any, name: str) -> Job:
    """The job `user` may download as a job file: one of their teams' (a draft or a submitted
    job), or a submitted job of any team for a platform admin, who reads every run record and
    whose record page links this file. 404 otherwise, for a missing job alike."""
    try:
        return job_get_for_user(user, name)
    except NotFoundError:
        submitted = Job.objects.filter(run_record__isnull=False).select_related(
            "team", "run_record").prefetch_related("roles")
        return access_team_object(submitted, user, admins_see_all=True, name=name)


def source_spec(job: Job) -> dict[str, Any]:
    """A job's spec as a file: the draft as stored, or the body frozen when it was submitted."""
    run = job.run
    if run is not None and run.job_file_snapshot:
        return dict(run.job_file_snapshot)
    return spec_of(job)


def _serializer_problems(errors: Any, prefix: str = "spec") -> list[Problem]:
    """The draft serializer's shape errors (the schema let them through) as file problems."""
    problems: list[Problem] = []

    def walk(detail: Any, path: str) -> None:
        if isinstance(detail, Mapping):
            for key, value in detail.items():
                walk(value, path if key == "non_field_errors" else f"{path}.{key}")
        elif isinstance(detail, list) and any(isinstance(d, (Mapping, list)) for d in detail):
            for index, value in enumerate(detail):
                walk(value, f"{path}[{index}]")
        else:
            for message in detail if isinstance(detail, list) else [detail]:
                problems.append(Problem("schema.value", str(message), path=path))

    walk(errors, prefix)
    return problems


def _draft_data(spec: Mapping[str, Any]) -> dict[str, Any]:
    serializer = JobDraftSerializer(data=dict(spec))
    if not serializer.is_valid():
        raise JobFileError(_serializer_problems(serializer.errors))
    return dict(serializer.validated_data)


def _existing(name: str, team: Team, *, lock: bool) -> Job | None:
    """The job of that name if it is the team's; 404 when it is another team's."""
    jobs = Job.objects.select_related("team", "created_by")
    if lock:
        jobs = jobs.select_for_update(of=("self",))
    job = jobs.filter(name=name).first()
    if job is not None and job.team_id != team.pk:
        raise NotFoundError(_("Not found."))
    return job


def _state(job: Job | None) -> str:
    if job is None:
        return str(JobState.DRAFT)
    run = RunRecord.objects.filter(job=job).values_list("state", flat=True).first()
    return str(run) if run is not None else str(JobState.DRAFT)


def _plan(*, team: Team, user: Any, name: str, spec: Mapping[str, Any],
          existing: Job | None) -> tuple[dict[str, Any], str, list[dict[str, Any]], Evaluation]:
    """(draft data, action, changes, evaluation of the draft as it would be) for `spec`."""
    data = {**_draft_data(spec), "name": name}
    base = existing if existing is not None else Job(team=team, created_by=user, name=name)
    preview, roles = draft_preview(job=base, data=data)
    wanted = spec_of(preview, roles)
    if existing is None:
        return data, "created", [], evaluate(preview, roles=roles)
    stored = source_spec(existing)
    if stored == wanted:
        return data, "unchanged", [], evaluate(existing) if existing.run is None else evaluate(
            preview, roles=roles)
    return data, "updated", spec_changes(stored, wanted), evaluate(preview, roles=roles)


def _apply_one(*, user: Any, team: Team, name: str, spec: Mapping[str, Any], dry_run: bool,
               values: dict[str, Any] | None = None) -> Applied:
    existing = _existing(name, team, lock=not dry_run)
    data, action, changes, evaluation = _plan(team=team, user=user, name=name, spec=spec,
                                              existing=existing)
    state = _state(existing)
    if action == "updated" and state != JobState.DRAFT:
        raise ApplicationError(
            _("The job %(name)s was submitted (%(state)s); a submitted job cannot change. "
              "Apply the file under another name, or clone it.") % {"name": name, "state": state},
            extra={"state": state, "changes": changes}, status_code=409)
    job = existing
    if not dry_run and action == "created":
        job = job_create(team=team, user=user, data=data)
        evaluation = evaluate(job)
    elif not dry_run and action == "updated" and existing is not None:
        job = job_update(job=existing, user=user,
                         data={**data, "wizard_step": existing.wizard_step}, partial=False)
        evaluation = evaluate(job)
    return Applied(name=name, team=team, action=action, changes=changes, evaluation=evaluation,
                   state=state, job=job, values=values or {})


def _team(user: Any, slug: str | None) -> Team:
    return team_for_user(user, slug)


def job_file_validate(*, user: Any, job_file: JobFile) -> Applied:
    """The findings of the file as the draft of its name would be after apply; nothing stored."""
    team = _team(user, job_file.team)
    existing = _existing(job_file.name, team, lock=False)
    _data, action, changes, evaluation = _plan(team=team, user=user, name=job_file.name,
                                               spec=job_file.spec, existing=existing)
    return Applied(name=job_file.name, team=team, action=action, changes=changes,
                   evaluation=evaluation, state=_state(existing), job=existing)


@transaction.atomic
def job_file_apply(*, user: Any, job_file: JobFile, dry_run: bool = False) -> Applied:
    """Create or update the draft named in the file so that it is exactly the file."""
    team = _team(user, job_file.team)
    return _apply_one(user=user, team=team, name=job_file.name, spec=job_file.spec,
                      dry_run=dry_run)


@transaction.atomic
def job_file_create(*, user: Any, job_file: JobFile, team: Team) -> Job:
    """A new draft from a file (the portal's "New job from file"); `team` when the file names
    none. A name already used (by the team's own job or any other) is refused."""
    target = _team(user, job_file.team or team.slug)
    existing = Job.objects.filter(name=job_file.name).select_related("team").first()
    if existing is not None and existing.team_id == target.pk:
        raise ApplicationError(
            _("Your team already has a job named %(name)s: open it from the job list, or "
              "change metadata.name.") % {"name": job_file.name}, extra={"field": "name"})
    data = {**_draft_data(job_file.spec), "name": job_file.name}
    return job_create(team=target, user=user, data=data)


def _overrides(texts: Sequence[str], *, field_name: str) -> list[Override]:
    if len(texts) > MAX_OVERRIDES:
        raise JobFileError([Problem("override.syntax", _("At most %(max)d overrides.")
                                    % {"max": MAX_OVERRIDES})])
    return [parse_override(text, source=f"{field_name}[{index}]")
            for index, text in enumerate(texts)]


def _checked_spec(name: str, team: str | None, spec: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` checked as a whole file would be (problems name their paths)."""
    document = document_of(name=name, team=team or "", spec=spec)
    if team is None:
        del document["metadata"]["team"]
    check_document(document, job_file_schema())
    return dict(spec)


@transaction.atomic
def job_file_clone(*, user: Any, source: Job, name: str, overrides: Sequence[str],
                   dry_run: bool = False) -> Applied:
    """A new draft `name` from `source` (as stored, or as frozen at submission), with overrides."""
    spec_schema = job_file_schema()["properties"]["spec"]
    spec, values = overridden(source_spec(source), _overrides(overrides, field_name="set"),
                              spec_schema)
    _checked_spec(name, source.team.slug, spec)
    data = {**_draft_data(spec), "name": name}
    if dry_run:
        preview, roles = draft_preview(job=Job(team=source.team, created_by=user, name=name),
                                       data=data)
        return Applied(name=name, team=source.team, action="created", changes=[],
                       evaluation=evaluate(preview, roles=roles), state=str(JobState.DRAFT),
                       job=None, values=values)
    job = job_create(team=source.team, user=user, data=data)
    return Applied(name=name, team=source.team, action="created", changes=[],
                   evaluation=evaluate(job), state=str(JobState.DRAFT), job=job, values=values)


@dataclass(frozen=True)
class SweepMember:
    name: str
    spec: dict[str, Any]
    values: dict[str, Any]


def _grids(grids: Sequence[str]) -> list[tuple[Override, list[str]]]:
    if not grids:
        raise JobFileError([Problem("sweep.empty", _("Give at least one grid: "
                                                     "grid=PATH=V1,V2."))])
    parsed: list[tuple[Override, list[str]]] = []
    seen: set[str] = set()
    for index, text in enumerate(grids):
        override = parse_override(text, source=f"grid[{index}]")
        if override.path in seen:
            raise JobFileError([Problem("override.duplicate", _("The grid path %(path)s is "
                                        "given twice.") % {"path": override.path},
                                        path=override.path)])
        seen.add(override.path)
        parsed.append((override, split_values(override.value)))
    return parsed


def sweep_members(job_file: JobFile, grids: Sequence[str]) -> list[SweepMember]:
    """One spec per combination of the grids (the last grid changes fastest), named
    ``<name>-<n>`` from 1; `JobFileError` past `SWEEP_MAX_COMBINATIONS`."""
    parsed = _grids(grids)
    count = 1
    for _override, options in parsed:
        count *= len(options)
    if count > SWEEP_MAX_COMBINATIONS:
        raise SweepTooLarge(count)
    spec_schema = job_file_schema()["properties"]["spec"]
    members = []
    for number, combination in enumerate(itertools.product(*(o for _g, o in parsed)), start=1):
        chosen = [Override(path=g.path, value=v, source=g.source)
                  for (g, _o), v in zip(parsed, combination, strict=True)]
        spec, values = overridden(job_file.spec, chosen, spec_schema)
        name = f"{job_file.name}-{number}"
        members.append(SweepMember(name=name, spec=_checked_spec(name, job_file.team, spec),
                                   values=values))
    return members


class SweepTooLarge(JobFileError):
    def __init__(self, count: int) -> None:
        self.count = count
        super().__init__([Problem("sweep.too_many", _(
            "The grids make %(count)d combinations; a sweep makes at most %(max)d drafts.")
            % {"count": count, "max": SWEEP_MAX_COMBINATIONS})])


@transaction.atomic
def job_file_sweep(*, user: Any, job_file: JobFile, grids: Sequence[str], submit: bool = False,
                   dry_run: bool = False) -> list[Applied]:
    """Every member applied (created, updated or unchanged), optionally submitted: all or none."""
    from jobs.records.submission import job_submit  # the records layer builds on drafts

    team = _team(user, job_file.team)
    members = sweep_members(job_file, grids)
    applied = [_apply_one(user=user, team=team, name=m.name, spec=m.spec, dry_run=dry_run,
                          values=m.values) for m in members]
    if submit:
        blocked = [a for a in applied if a.state == JobState.DRAFT and a.evaluation.has_errors]
        if blocked:
            raise ApplicationError(
                _("%(count)d of the sweep's drafts still have errors; nothing was stored or "
                  "submitted.") % {"count": len(blocked)},
                extra={"drafts": [sweep_row(a) for a in applied]}, status_code=422)
        if not dry_run:
            for item in applied:
                if item.state == JobState.DRAFT and item.job is not None:
                    record = job_submit(job=item.job, user=user)
                    item.state = str(record.state)
    return applied


def sweep_row(item: Applied) -> dict[str, Any]:
    return {"name": item.name, "values": item.values, "action": item.action,
            "changes": item.changes, "findings": [f.as_dict() for f in item.evaluation.findings],
            "has_errors": item.evaluation.has_errors, "state": item.state}


# --- verify -----------------------------------------------------------------------------------


def usable_selector(role: RoleSpec) -> dict[str, str]:
    """The role's conditions that can be labels at all (what a verification is asked for)."""
    return {k: v for k, v in role.selector if isinstance(k, str) and isinstance(v, str)}


def verification_asks(role: RoleSpec) -> dict[str, Any]:
    """What a verification of the role should confirm besides placement: GPUs, devices, host
    paths (the wizard's "Request verification" and `jobs/{name}/verify/` alike)."""
    gpus = role.gpus if isinstance(role.gpus, int) and not isinstance(role.gpus, bool) else 0
    devices = {str(n): c for n, c in role.devices
               if isinstance(c, int) and not isinstance(c, bool) and c > 0}
    paths = [m.source for m in role.mounts if m.kind == "host_path" and m.source]
    return {"requested_gpu": gpus or None, "requested_devices": devices or None,
            "requested_host_paths": paths or None}


def _lacking(evaluation: Evaluation, index: int) -> bool:
    place = f"roles[{index}]"
    return any(f.code in LACKING_VERIFICATION and (f.field or "").startswith(place)
               and (f.field or "")[len(place):len(place) + 1] in ("", ".")
               for f in evaluation.findings)


def _verify_role(job: Job, user: Any, evaluation: Evaluation, index: int) -> dict[str, Any]:
    role = evaluation.spec.roles[index]
    row: dict[str, Any] = {"role": str(role.name), "index": index, "cluster": str(role.cluster),
                           "outcome": "covered", "verification": None, "state": None,
                           "findings": []}
    if not _lacking(evaluation, index):
        return row
    cluster = cluster_by_name(str(role.cluster))
    selector = usable_selector(role)
    if cluster is None or not selector:
        message = _("Choose the role's cluster and node selector first.")
        return {**row, "outcome": "refused", "findings": [
            {"code": "verification.refused", "severity": "error", "role": str(role.name),
             "field": f"roles[{index}]", "message": message, "detail": {}}]}
    try:
        with transaction.atomic():
            outcome = verification_request_outcome(
                team=job.team, user=cast(AbstractBaseUser, user), cluster=cluster,
                selector=selector, for_header_role=header_index(evaluation.spec) == index,
                **verification_asks(role), job_name=job.name, role_name=str(role.name))
    except ApplicationError as exc:
        return {**row, "outcome": "refused", "findings": list(exc.extra.get("findings") or [
            {"code": "verification.refused", "severity": "error", "role": str(role.name),
             "field": f"roles[{index}]", "message": exc.message, "detail": {}}])}
    return {**row, "outcome": "reused" if outcome.reused and not outcome.updated else "requested",
            "verification": outcome.verification.pk, "state": outcome.verification.state}


def job_verify_roles(*, job: Job, user: Any) -> list[dict[str, Any]]:
    """Request verification of every role of a draft that lacks one, each in its own
    transaction; one row per role (docs/api.md, `jobs/{name}/verify/`)."""
    state = _state(job)
    if state != JobState.DRAFT:
        raise ApplicationError(_("This job was submitted; only drafts are verified."),
                               extra={"state": state}, status_code=409)
    evaluation = evaluate(job)
    return [_verify_role(job, user, evaluation, index)
            for index in range(len(evaluation.spec.roles))]
