"""The engine's verdict on a draft, optionally with one role as the form currently holds it.

Live feedback (the matched node count while conditions change) and a form shown again
with what the user typed both judge input that is not saved yet; they go through the same
`jobs.context` builders and `jobs.core.findings.check` as everything else, with only that
role replaced in the frozen spec.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jobs.context import (
    Evaluation,
    check_context_for,
    cluster_inventory_of,
    evaluate,
    role_spec,
    spec_from_job,
    team_ssh_keys,
)
from jobs.core.findings import check
from jobs.core.spec import JobSpec, RoleSpec
from jobs.models import Job, Role
from rlark_site.foundation.tenancy.models import Team

__all__ = ["BasicsInput", "evaluate_basics", "evaluate_draft", "unsaved_role_spec"]


def unsaved_role_spec(body: Mapping[str, Any]) -> RoleSpec:
    """A draft-body role as the engine sees it, without storing it."""
    role = Role(
        name=body.get("name", ""), cluster=body.get("cluster", ""),
        selector=body.get("selector", []), gpus=body.get("gpus", 0),
        devices=body.get("devices", []), cpu=body.get("cpu", {}), memory=body.get("memory", {}),
        image=body.get("image", ""), image_digest=body.get("image_digest", ""),
        prepare_script=body.get("prepare_script", ""), env=body.get("env", []),
        mounts=body.get("mounts", []),
    )
    return role_spec(role)


@dataclasses.dataclass(frozen=True)
class BasicsInput:
    """Step 1 as the form holds it: each role row is (name, position of the stored role it
    edits or None for a new one)."""

    name: str
    task_type: str
    rows: tuple[tuple[str, int | None], ...]
    header_role: str


def evaluate_basics(*, team: Team, job: Job | None, basics: BasicsInput) -> Evaluation:
    """The engine's verdict on step 1 as typed, saved or not (a new draft has no job yet).

    The stored draft (or an empty one) with its name, type, roles and Header replaced by the
    form's; a row that edits a stored role keeps that role's configuration, renamed. Nothing
    is saved; the context is built by the same `check_context_for` as every check.
    """
    keys = team_ssh_keys(team)  # read once for the spec and the context
    base = spec_from_job(job, team_keys=keys) if job is not None else JobSpec(
        team=team.slug, name="", task_type="", roles=())
    roles = tuple(
        dataclasses.replace(base.roles[origin], name=name)
        if origin is not None and 0 <= origin < len(base.roles) else unsaved_role_spec(
            {"name": name})
        for name, origin in basics.rows
    )
    spec = dataclasses.replace(base, name=basics.name, task_type=basics.task_type, roles=roles,
                               header_role=basics.header_role)
    names = job.ssh_key_names if job is not None and isinstance(job.ssh_key_names, list) else []
    ctx = check_context_for(spec, team=team, exclude_job_id=job.pk if job is not None else None,
                            ssh_key_names=[str(n) for n in names], team_keys=keys)
    return Evaluation(spec=spec, ctx=ctx, findings=check(spec, ctx))


def evaluate_draft(job: Job, *, role_index: int | None = None,
                   role_body: Mapping[str, Any] | None = None) -> Evaluation:
    """`jobs.context.evaluate(job)`, or with role `role_index` replaced by `role_body`."""
    if role_body is None or role_index is None:
        return evaluate(job)
    keys = team_ssh_keys(job.team_id)  # read once for the spec and the context
    spec = spec_from_job(job, team_keys=keys)
    roles = list(spec.roles)
    if 0 <= role_index < len(roles):
        roles[role_index] = unsaved_role_spec(role_body)
    spec = dataclasses.replace(spec, roles=tuple(roles))
    names = job.ssh_key_names if isinstance(job.ssh_key_names, list) else []
    inventory = cluster_inventory_of(spec)
    ctx = check_context_for(spec, team=job.team, exclude_job_id=job.pk,
                            ssh_key_names=[str(n) for n in names], team_keys=keys,
                            inventory=inventory)
    return Evaluation(spec=spec, ctx=ctx, findings=check(spec, ctx), inventory=inventory)
