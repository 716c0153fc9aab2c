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

from jobs.context import Evaluation, check_context_for, evaluate, role_spec, spec_from_job
from jobs.core.findings import check
from jobs.core.spec import RoleSpec
from jobs.models import Job, Role

__all__ = ["evaluate_draft", "unsaved_role_spec"]


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


def evaluate_draft(job: Job, *, role_index: int | None = None,
                   role_body: Mapping[str, Any] | None = None) -> Evaluation:
    """`jobs.context.evaluate(job)`, or with role `role_index` replaced by `role_body`."""
    if role_body is None or role_index is None:
        return evaluate(job)
    spec = spec_from_job(job)
    roles = list(spec.roles)
    if 0 <= role_index < len(roles):
        roles[role_index] = unsaved_role_spec(role_body)
    spec = dataclasses.replace(spec, roles=tuple(roles))
    names = job.ssh_key_names if isinstance(job.ssh_key_names, list) else []
    ctx = check_context_for(spec, team=job.team, exclude_job_id=job.pk,
                            ssh_key_names=[str(n) for n in names])
    return Evaluation(spec=spec, ctx=ctx, findings=check(spec, ctx))
