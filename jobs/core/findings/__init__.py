"""The single validation engine: every rule of SPEC section 4, as findings.

`check(spec, ctx)` is pure (no database: everything outside the draft comes from `ctx`)
and total: it never raises, whatever the draft holds (wrong types, huge or hostile
strings). Findings come in a stable order: the job itself, its deployment parameters
(confirmed, current, describing the job), then each role in order, then the common
configuration, then admission (Kueue), then capacity (the pre-flight), then the size of what
would be rendered. Every code, its severity and meaning is listed in docs/findings.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from jobs.core.findings.admission import admission_findings
from jobs.core.findings.base import CheckedRole
from jobs.core.findings.capacity import capacity_findings, preflight
from jobs.core.findings.common import MAX_MANIFEST_SCRIPT_BYTES, common_findings, size_findings
from jobs.core.findings.images import (
    image_findings,
    launch_list_findings,
    launch_list_image_findings,
)
from jobs.core.findings.job import job_findings, record_link_findings, role_name_findings
from jobs.core.findings.mounts import SYSTEM_DIRECTORIES, SYSTEM_TREES, mount_findings
from jobs.core.findings.parameters import parameters_findings
from jobs.core.findings.placement import (
    cluster_findings,
    device_findings,
    gpu_findings,
    selector_findings,
)
from jobs.core.findings.resources import resource_findings
from jobs.core.findings.scripts import env_findings, script_findings
from jobs.core.spec import CheckContext, JobSpec, field_of, spec_roles
from rlark_site.foundation.findings import Finding, has_errors

__all__ = [
    "MAX_MANIFEST_SCRIPT_BYTES",
    "SYSTEM_DIRECTORIES",
    "SYSTEM_TREES",
    "Finding",
    "check",
    "has_errors",
    "parameters_check",
    "preflight",
]


def _role_findings(r: CheckedRole, earlier_names: Sequence[object]) -> Iterator[Finding]:
    yield from role_name_findings(r, earlier_names)
    yield from cluster_findings(r)
    yield from selector_findings(r)
    yield from gpu_findings(r)
    yield from device_findings(r)
    yield from resource_findings(r)
    yield from image_findings(r)
    yield from launch_list_image_findings(r)
    yield from script_findings(field_of(r.role, "prepare_script"), r.finding, "prepare_script")
    yield from env_findings(r)
    yield from mount_findings(r)


def check(spec: JobSpec, ctx: CheckContext) -> list[Finding]:
    """Every finding for `spec` against `ctx`, in a stable order; never raises."""
    findings = list(job_findings(spec, ctx))
    findings += launch_list_findings(spec, ctx)
    findings += parameters_findings(spec, ctx)
    roles = spec_roles(spec)
    names: list[object] = []
    for index, role in enumerate(roles):
        findings += _role_findings(CheckedRole(spec=spec, ctx=ctx, index=index, role=role), names)
        names.append(field_of(role, "name", None))
    findings += common_findings(spec, ctx, roles)
    findings += admission_findings(spec, ctx)
    findings += capacity_findings(spec, ctx)
    findings += size_findings(spec, ctx, roles)
    return findings


def parameters_check(spec: JobSpec, ctx: CheckContext) -> list[Finding]:
    """The findings `check` gives about the job's deployment parameters (every
    `deployment_parameters.*` code but `missing`): how the two records link, and the record
    against the job. `ctx` needs only the verifications, the record links and `parameters`
    (the admin queue builds it for a page of records at once)."""
    return [*record_link_findings(spec, ctx), *parameters_findings(spec, ctx)]
