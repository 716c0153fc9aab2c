"""The whole-job pre-flight (SPEC 15): does the job fit now, will it queue, can it never fit?

Pure: the matched nodes' capacity and their clusters' occupancy state come in the context
(`CheckContext.capacity` / `.occupancy`, read in one query per check), the Kueue quota view
as `ClusterFacts.kueue`. The computation per node and role is `clusters.preflight`'s (shared
with `POST selector-matches/` and the Pending explanations); this module applies it to a
job's roles and turns it into findings:

- `capacity.never_fits` (error) for a role some matched node of which can never hold one
  worker's CPU, memory or pod; GPUs and devices keep `gpu.exceeds_capacity` /
  `device.exceeds_capacity` (the same allocatable rule), so they are not reported twice;
- `capacity.will_queue` (warning) for a role some nodes of which lack free capacity now, with
  the nodes short and by how much; and for the job when its Kueue ClusterQueue has less
  quota unused now than the job asks (above what it could ever give is
  `admission.exceeds_quota`, which makes the verdict `never_fits`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusters.placement import LISTED_NODES_MAX
from clusters.podrequests import CPU, MEMORY, PODS
from clusters.preflight import (
    NEVER_FITS,
    WILL_QUEUE,
    QuotaWait,
    RolePreflight,
    job_verdict,
    needs_units,
    quota_waits,
    role_preflight,
)
from jobs.core.findings.admission import (
    EXCEEDS_QUOTA,
    admission_findings,
    job_cluster_queue,
    job_totals,
    worker_requests,
)
from jobs.core.findings.base import SHOWN_MAX
from jobs.core.spec import CheckContext, JobSpec, field_of, role_match, spec_roles
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

WILL_QUEUE_CODE = "capacity.will_queue"
NEVER_FITS_CODE = "capacity.never_fits"

# The resources `capacity.never_fits` speaks for, and the role field each is typed in.
_NEVER_FIELDS = {CPU: "cpu.request", MEMORY: "memory.request", PODS: "selector"}


def _label(role: object) -> str | None:
    name = field_of(role, "name", None)
    return name[:SHOWN_MAX] if isinstance(name, str) else None


_MEMO = "role_preflights"


def role_preflights(spec: JobSpec, ctx: CheckContext) -> tuple[RolePreflight, ...]:
    """Each role's pre-flight, in role order: computed once per spec and context (a request
    shows it in the findings, the role panel, the checklist and `capacity`)."""
    known = ctx.memo.get(_MEMO)
    if known is not None and known[0] is spec:
        return known[1]  # type: ignore[no-any-return]
    found = tuple(
        role_preflight(_label(role), [(n.cluster, n.name) for n in role_match(role, ctx).nodes],
                       ctx.capacity, needs_units(worker_requests(role)), ctx.occupancy)
        for role in spec_roles(spec)
    )
    ctx.memo[_MEMO] = (spec, found)
    return found


def _quota(spec: JobSpec, ctx: CheckContext) -> tuple[bool, list[QuotaWait]]:
    """(whether Kueue could never admit the job, the resources short of quota now)."""
    if any(f.code == EXCEEDS_QUOTA for f in admission_findings(spec, ctx)):
        return True, []
    found = job_cluster_queue(spec, ctx)
    if found is None:
        return False, []
    view, queue = found
    return False, quota_waits(view, queue, job_totals(spec, ctx))


def preflight(spec: JobSpec, ctx: CheckContext) -> dict[str, Any]:
    """The job detail's `capacity` block: the job's verdict, the occupancy it read (`as_of`,
    the oldest of its clusters'; null when none was counted), each role's pre-flight, and
    `quota`, the Kueue resources short of unused quota now."""
    roles = role_preflights(spec, ctx)
    never_quota, waits = _quota(spec, ctx)
    verdicts = [r.verdict for r in roles]
    if never_quota:
        verdicts.append(NEVER_FITS)
    elif waits:
        verdicts.append(WILL_QUEUE)
    as_of = min((r.as_of for r in roles if r.as_of), default="")
    return {"verdict": job_verdict(verdicts), "as_of": as_of or None,
            "roles": [r.as_dict() for r in roles], "quota": [w.as_dict() for w in waits]}


def capacity_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    """`capacity.never_fits` and `capacity.will_queue`, per role, then for the job's quota."""
    for index, result in enumerate(role_preflights(spec, ctx)):
        if result.replicas == 0:
            continue  # `selector.no_match` says it
        if result.verdict == NEVER_FITS:
            yield from _never_findings(index, result)
        elif result.verdict == WILL_QUEUE:
            yield new_finding(
                WILL_QUEUE_CODE, result.message(), role=result.role,
                field=f"roles[{index}].selector", severity="warning",
                replicas=result.replicas, fits_now=result.fits_now,
                fits_ever=result.fits_ever, short_count=result.short_count,
                short=[s.as_dict() for s in result.short[:LISTED_NODES_MAX]],
                as_of=result.as_of)
    _never, waits = _quota(spec, ctx)
    if waits:
        first = waits[0].as_dict()
        yield new_finding(
            WILL_QUEUE_CODE,
            _("Kueue would hold the job until quota is freed: ClusterQueue %(queue)s has "
              "%(unused)s %(resource)s unused now, the job needs %(needed)s.") % {
                "queue": first["cluster_queue"], "unused": first["unused"],
                "resource": first["resource"], "needed": first["needed"]},
            severity="warning", quota=[w.as_dict() for w in waits])


def _never_findings(index: int, result: RolePreflight) -> Iterator[Finding]:
    for resource, where in _NEVER_FIELDS.items():
        short = [s for s in result.never_short if s.resource == resource]
        if not short:
            continue
        first = short[0].as_dict()
        yield new_finding(
            NEVER_FITS_CODE,
            _("Role %(role)s: %(node)s can never hold a worker: %(allocatable)s %(resource)s "
              "allocatable, %(needed)s needed per worker (%(count)d matched node(s) cannot).")
            % {"role": result.role or "?", "node": first["node"],
               "allocatable": first["allocatable"], "resource": resource,
               "needed": first["needed"], "count": len(short)},
            role=result.role, field=f"roles[{index}].{where}", resource=resource,
            replicas=result.replicas, fits_ever=result.fits_ever,
            short=[s.as_dict() for s in short[:LISTED_NODES_MAX]], as_of=result.as_of)
