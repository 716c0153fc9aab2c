"""The jobs side of the admin queue's capacity panel (`clusters.verifications.capacity`).

A verification belongs to the jobs it was asked for: the draft named when it was requested
(`requested_for_job`, of the same team) and the drafts whose deployment parameters reference
it. For a page of requests their pre-flight (SPEC 15, the findings engine's
`jobs.core.findings.capacity`) is computed in a fixed number of queries: the references, the
jobs with their roles and teams, every role's matches with their nodes' capacity (the
check's own read, `matches_capacity`: one query, the nodes' namespace with them, so a Kueue
cluster's LocalQueue is found as the job detail finds it), and the clusters' facts (Kueue
quota) — however many requests and jobs the page shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Q

from clusters.inventory.selectors import cluster_inventory, matches_capacity
from clusters.models import Verification
from clusters.verifications.capacity import JobCapacity, RoleCapacity
from jobs.context import cluster_facts, spec_from_job
from jobs.core.findings import preflight
from jobs.core.findings.capacity import role_preflights
from jobs.core.spec import CheckContext, JobSpec, role_selector
from jobs.models import DeploymentParameters, Job, JobState

# The drafts of a request shown at most (newest first).
JOBS_READ = 20


def _related(verifications: Sequence[Verification]) -> dict[int, list[Job]]:
    """The drafts each request belongs to, newest first (two queries and the roles')."""
    named = Q()
    for v in verifications:
        if v.requested_for_job:
            named |= Q(team_id=v.team_id, name=v.requested_for_job)
    through = DeploymentParameters.verifications.through
    referenced: dict[int, set[int]] = {}
    for verification_id, parameters_id in through.objects.filter(
            verification_id__in=[v.pk for v in verifications]).values_list(
                "verification_id", "deploymentparameters_id"):
        referenced.setdefault(parameters_id, set()).add(verification_id)
    if not named and not referenced:
        return {}
    condition = named | Q(deployment_parameters_id__in=list(referenced))
    jobs = list(Job.objects.filter(condition, Job.in_state(JobState.DRAFT))
                .select_related("team").prefetch_related("roles")
                .order_by("-updated_at", "-id")[:JOBS_READ * len(verifications)])
    related: dict[int, list[Job]] = {}
    for v in verifications:
        for job in jobs:
            if ((job.team_id == v.team_id and job.name == v.requested_for_job)
                    or v.pk in referenced.get(job.deployment_parameters_id or 0, ())):
                related.setdefault(v.pk, []).append(job)
    return related


def _for_this_request(role: Any, verification: Verification, job: Job) -> bool:
    if job.name == verification.requested_for_job and role.name == (
            verification.requested_for_role or None):
        return True
    return (role.cluster == verification.cluster.name
            and role_selector(role) == dict(verification.selector))


def _job_capacity(spec: JobSpec, ctx: CheckContext, verification: Verification,
                  job: Job) -> JobCapacity:
    whole = preflight(spec, ctx)
    roles = tuple(
        RoleCapacity(preflight=result, this_request=_for_this_request(role, verification, job))
        for role, result in zip(spec.roles, role_preflights(spec, ctx), strict=True)
    )
    return JobCapacity(job=job.name, state=str(JobState.DRAFT), verdict=whole["verdict"],
                       as_of_text=whole["as_of"], roles=roles, quota=tuple(whole["quota"]))


def capacity_of_requested_jobs(sender: Any, *, verifications: Sequence[Verification],
                               **_kwargs: Any) -> dict[int, list[JobCapacity]]:
    """Receiver of `clusters.signals.queue_capacity`: each request's drafts' pre-flight."""
    related = _related(verifications)
    jobs = {job.pk: job for listed in related.values() for job in listed}
    if not jobs:
        return {}
    specs = {pk: spec_from_job(job, team_keys={}) for pk, job in jobs.items()}
    selectors = [s for spec in specs.values() for role in spec.roles if (s := role_selector(role))]
    read = matches_capacity(selectors)
    clusters = cluster_facts(cluster_inventory(sorted(
        {role.cluster for spec in specs.values() for role in spec.roles
         if isinstance(role.cluster, str) and role.cluster})))
    ctx = CheckContext(clusters=clusters, matches=dict(read.matches), capacity=read.capacity.nodes,
                       occupancy=read.capacity.occupancy)
    by_id = {v.pk: v for v in verifications}
    return {pk: [_job_capacity(specs[job.pk], ctx, by_id[pk], job) for job in listed]
            for pk, listed in related.items()}
