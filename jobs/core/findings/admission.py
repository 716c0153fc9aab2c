"""Admission through Kueue (SPEC 15): the team has a LocalQueue on the Job's cluster, and the
job asks for no more than the team's ClusterQueue could ever give.

Pure: the quota view is the one the last inventory poll read (`ClusterFacts.kueue`), never a
call to the cluster. Quota is what Kueue counts: each pod's requests (a container's limit where
it gives no request, as the API server defaults it), one pod per matched node of each role.
Kueue assigns each role's pod set one flavor per resource and the whole Job may spread over the
flavors, so a role must fit in one flavor and the job in all of them together; "could ever
give" is nominal quota plus what the ClusterQueue may borrow in its cohort
(`KueueView.potential`). A quota used by other jobs right now only makes the job wait: that is
a verdict of the pre-flight (`capacity.*`), not a finding here.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from clusters.kueue import ClusterQueueView, KueueView, format_amount
from clusters.quantities import QuantityError, parse_quantity
from clusters.types import GPU_RESOURCE, ClusterFacts
from jobs.core.findings.base import SHOWN_MAX
from jobs.core.spec import (
    CheckContext,
    JobSpec,
    as_items,
    as_text,
    field_of,
    header_index,
    is_count,
    job_namespace,
    role_match,
    spec_roles,
)
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

NO_QUEUE = "admission.no_queue"
QUEUE_UNKNOWN = "admission.queue_unknown"
EXCEEDS_QUOTA = "admission.exceeds_quota"

# Where each resource of a worker is typed in a role (for the finding's field).
_RESOURCE_FIELDS = {GPU_RESOURCE: "gpus", "cpu": "cpu.request", "memory": "memory.request"}


def worker_requests(role: object) -> dict[str, Decimal]:
    """What one worker (pod) of `role` asks for, as Kueue counts it: GPUs, devices, and CPU and
    memory requests (or limits, where no request is given). Unreadable values count nothing
    (other findings report them)."""
    requests: dict[str, Decimal] = {}
    gpus = field_of(role, "gpus", 0)
    if is_count(gpus) and gpus > 0:
        requests[GPU_RESOURCE] = Decimal(gpus)
    for device in as_items(field_of(role, "devices", ())):
        if isinstance(device, (tuple, list)) and len(device) == 2:
            name, count = device
            if isinstance(name, str) and is_count(count) and count > 0:
                requests[name] = Decimal(count)
    for kind in ("cpu", "memory"):
        pair = field_of(role, kind, None)
        text = as_text(field_of(pair, "request")) or as_text(field_of(pair, "limit"))
        try:
            amount = parse_quantity(text) if text else Decimal(0)
        except QuantityError:
            continue
        if amount > 0:
            requests[kind] = amount
    return requests


def _header(spec: JobSpec, ctx: CheckContext) -> tuple[int, ClusterFacts] | None:
    head = header_index(spec)
    if head is None:
        return None
    facts = ctx.clusters.get(as_text(field_of(spec_roles(spec)[head], "cluster")))
    if facts is None or not facts.uses_kueue:
        return None
    return head, facts


def _role_label(role: object) -> str | None:
    name = field_of(role, "name", None)
    return name[:SHOWN_MAX] if isinstance(name, str) else None


def admission_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    """The team's LocalQueue on a Kueue cluster, and the job against its ClusterQueue's quota."""
    header = _header(spec, ctx)
    if header is None:
        return
    head, facts = header
    team = as_text(field_of(spec, "team"))
    header_role = spec_roles(spec)[head]
    queue = facts.kueue_queue(team)
    if queue is None:
        yield new_finding(
            NO_QUEUE,
            _("Cluster %(cluster)s admits Jobs through Kueue and team %(team)s has no "
              "LocalQueue there; a platform admin maps the team to one (cluster page, "
              "Admission).") % {"cluster": facts.name, "team": team[:SHOWN_MAX]},
            role=_role_label(header_role), field=f"roles[{head}].cluster",
            cluster=facts.name, team=team[:SHOWN_MAX],
        )
        return
    view = facts.kueue
    if view is None or not view.as_of:
        return  # never read: nothing known about the queues (the pre-flight says "unknown")
    yield from _queue_findings(spec, ctx, facts, view, queue, head)


def _team_cluster_queue(spec: JobSpec, ctx: CheckContext, view: KueueView, queue: str
                        ) -> ClusterQueueView | None:
    local = view.local_queue(job_namespace(spec, ctx), queue)
    return view.cluster_queue(local.cluster_queue) if local is not None else None


def job_cluster_queue(spec: JobSpec, ctx: CheckContext
                      ) -> tuple[KueueView, ClusterQueueView] | None:
    """The quota view and the team's ClusterQueue the Job would be admitted through (None
    without Kueue, a LocalQueue, or a read of the queues)."""
    header = _header(spec, ctx)
    if header is None:
        return None
    facts = header[1]
    queue = facts.kueue_queue(as_text(field_of(spec, "team")))
    view = facts.kueue
    if queue is None or view is None or not view.as_of:
        return None
    cluster_queue = _team_cluster_queue(spec, ctx, view, queue)
    return (view, cluster_queue) if cluster_queue is not None else None


def job_totals(spec: JobSpec, ctx: CheckContext) -> dict[str, Decimal]:
    """What the whole job asks for as Kueue counts it (every worker of every role)."""
    totals: dict[str, Decimal] = {}
    for _index, _role, replicas, requests in _replicas_and_requests(spec, ctx):
        for resource, amount in requests.items():
            totals[resource] = totals.get(resource, Decimal(0)) + amount * replicas
    return totals


def _queue_findings(spec: JobSpec, ctx: CheckContext, facts: ClusterFacts, view: KueueView,
                    queue: str, head: int) -> Iterator[Finding]:
    namespace = job_namespace(spec, ctx)
    local = view.local_queue(namespace, queue)
    cluster_queue = _team_cluster_queue(spec, ctx, view, queue)
    if local is None or cluster_queue is None:
        yield new_finding(
            QUEUE_UNKNOWN,
            _("Kueue on %(cluster)s has no LocalQueue %(queue)s in namespace %(namespace)s "
              "leading to a ClusterQueue (as of its last poll); Kueue will not admit the Job "
              "until it exists.") % {"cluster": facts.name, "queue": queue,
                                     "namespace": namespace or "?"},
            role=_role_label(spec_roles(spec)[head]), field=f"roles[{head}].cluster",
            severity="warning", cluster=facts.name, local_queue=queue, namespace=namespace,
            as_of=view.as_of,
        )
        return
    yield from quota_findings(spec, ctx, view, cluster_queue, local_queue=queue)


def _replicas_and_requests(spec: JobSpec, ctx: CheckContext
                           ) -> list[tuple[int, object, int, dict[str, Decimal]]]:
    return [(index, role, role_match(role, ctx).count, worker_requests(role))
            for index, role in enumerate(spec_roles(spec))]


def _flavor_details(view: KueueView, queue: ClusterQueueView, resource: str
                    ) -> list[dict[str, str | None]]:
    return [{"flavor": q.flavor, "nominal": q.nominal, "borrowing_limit": q.borrowing_limit or None,
             "potential": format_amount(view.potential(queue, q.flavor, resource))}
            for q in queue.quotas if q.resource == resource]


def quota_findings(spec: JobSpec, ctx: CheckContext, view: KueueView,
                   queue: ClusterQueueView, *, local_queue: str) -> Iterator[Finding]:
    """`admission.exceeds_quota` for every resource the job (or one role) asks more of than the
    ClusterQueue could ever give."""
    rows = _replicas_and_requests(spec, ctx)
    for resource, total in job_totals(spec, ctx).items():
        if total <= 0:
            continue
        flavors = [q.flavor for q in queue.quotas if q.resource == resource]
        ever = sum((view.potential(queue, f, resource) for f in flavors), Decimal(0))
        detail: dict[str, Any] = {
            "cluster_queue": queue.name, "local_queue": local_queue, "resource": resource,
            "flavors": _flavor_details(view, queue, resource), "as_of": view.as_of}
        if total > ever:
            yield new_finding(EXCEEDS_QUOTA, _exceeds_message(
                queue, resource, total, ever, covered=bool(flavors)),
                requested=format_amount(total), quota=format_amount(ever), **detail)
            continue
        most = max((view.potential(queue, f, resource) for f in flavors), default=Decimal(0))
        for index, role, replicas, requests in rows:
            asked = requests.get(resource, Decimal(0)) * replicas
            if asked > most:
                yield new_finding(
                    EXCEEDS_QUOTA,
                    _("Role %(role)s asks for %(asked)s %(resource)s in all (%(replicas)d "
                      "workers) and Kueue places a role in one flavor; the largest flavor of "
                      "ClusterQueue %(queue)s can ever give %(most)s, so Kueue would never "
                      "admit the job.") % {
                        "role": _role_label(role) or "?", "asked": format_amount(asked),
                        "resource": resource, "replicas": replicas, "queue": queue.name,
                        "most": format_amount(most)},
                    role=_role_label(role),
                    field=f"roles[{index}].{_RESOURCE_FIELDS.get(resource, 'devices')}",
                    requested=format_amount(asked), quota=format_amount(most), **detail)


def _exceeds_message(queue: ClusterQueueView, resource: str, total: Decimal, ever: Decimal, *,
                     covered: bool) -> str:
    if not covered:
        return _("The job asks for %(total)s %(resource)s and ClusterQueue %(queue)s has no "
                 "quota for %(resource)s, so Kueue would never admit it.") % {
            "total": format_amount(total), "resource": resource, "queue": queue.name}
    return _("The job asks for %(total)s %(resource)s in all; ClusterQueue %(queue)s can ever "
             "give %(ever)s (its nominal quota and what it may borrow, over all its flavors), "
             "so Kueue would never admit it.") % {
        "total": format_amount(total), "resource": resource, "queue": queue.name,
        "ever": format_amount(ever)}
