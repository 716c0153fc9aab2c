"""Where a role runs: its cluster, its selector's matched nodes, the verification, GPUs and
devices."""

from __future__ import annotations

from collections.abc import Iterator

from clusters.labels import is_dns_label, selector_problems
from clusters.placement import (
    LISTED_NODES_MAX,
    device_capacity_finding,
    gpu_finding,
    selector_placement_findings,
)
from clusters.types import DEVICE_PREFIX, node_ref
from jobs.core.findings.base import (
    NAME_MAX,
    ROLE_NAME,
    SHOWN_MAX,
    CheckedRole,
    shown,
)
from jobs.core.spec import (
    as_items,
    field_of,
    is_count,
)
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.findings import translate as _


def cluster_findings(r: CheckedRole) -> Iterator[Finding]:
    cluster = field_of(r.role, "cluster")
    if cluster is None or cluster == "":
        yield r.finding("role.cluster.missing", _("Choose the role's cluster."), "cluster")
    elif r.cluster is None:
        yield r.finding(
            "role.cluster.unknown",
            _("Cluster %(cluster)s is not known to RLark.") % {"cluster": repr(shown(cluster))},
            "cluster",
            value=shown(cluster),
        )


def selector_findings(r: CheckedRole) -> Iterator[Finding]:
    yield from selector_problems(
        field_of(r.role, "selector", ()), role=r.label, field=r.field("selector")
    )
    if not r.selector_ok:
        return
    yield from selector_placement_findings(
        r.match, cluster=r.cluster, header=r.is_header, role=r.label, field=r.field("selector")
    )
    not_ready = [n for n in r.match.nodes if not n.ready]
    if not_ready:
        yield r.finding(
            "selector.not_ready",
            _("%(count)d matched node(s) are not Ready; their workers will wait until they are.")
            % {"count": len(not_ready)},
            "selector",
            severity="warning",
            nodes=[node_ref(n) for n in not_ready[:LISTED_NODES_MAX]],
        )
    yield from hostname_findings(r)
    yield from verification_findings(r)


def hostname_findings(r: CheckedRole) -> Iterator[Finding]:
    job = field_of(r.spec, "name")
    if r.match.count == 0 or r.name is None or not isinstance(job, str):
        return
    if not (ROLE_NAME.fullmatch(r.name) and is_dns_label(job)):
        return
    hostname = f"{job}-{r.name.lower()}-{r.match.count - 1}"
    if len(hostname) > NAME_MAX:
        yield r.finding(
            "role.hostname.too_long",
            _(
                "Pod hostnames <job>-<task>-<index> must fit in 63 characters; %(host)s has "
                "%(length)d. Shorten the job or role name."
            )
            % {"host": hostname[:SHOWN_MAX], "length": len(hostname)},
            "name",
            length=len(hostname),
            max=NAME_MAX,
        )


def verification_findings(r: CheckedRole) -> Iterator[Finding]:
    if r.cluster is None:
        return
    view = r.verification
    if view is None or view.state not in ("approved", "stale"):
        yield r.finding(
            "selector.unverified",
            _("No approved verification for this selector on cluster %(cluster)s; request one.")
            % {"cluster": r.cluster},
            "selector",
            cluster=r.cluster,
            verification=view.id if view else None,
            state=view.state if view else None,
        )
    elif r.confirmed is None:
        yield r.finding(
            "selector.verification_stale",
            _(
                "The approved verification no longer equals today's matched nodes; request a new "
                "one."
            ),
            "selector",
            cluster=r.cluster,
            verification=view.id,
            state=view.state,
            approved_nodes=[list(pair) for pair in view.node_signature[:LISTED_NODES_MAX]],
            current_nodes=r.match.listed_nodes(LISTED_NODES_MAX),
        )


def gpu_findings(r: CheckedRole) -> Iterator[Finding]:
    gpus = field_of(r.role, "gpus", 0)
    if not is_count(gpus) or gpus < 0:
        yield r.finding(
            "gpu.invalid",
            _("GPUs per worker must be a whole number, 0 or more."),
            "gpus",
            value=shown(gpus),
        )
        return
    confirmed = r.confirmed
    finding = gpu_finding(
        r.match,
        gpus=gpus,
        confirmed_gpu=confirmed.confirmed_gpu if confirmed else None,
        role=r.label,
        field=r.field("gpus"),
    )
    if finding is not None:
        yield finding


def device_findings(r: CheckedRole) -> Iterator[Finding]:
    facts = r.ctx.clusters.get(r.cluster) if r.cluster else None
    confirmed = dict(r.confirmed.confirmed_devices) if r.confirmed else {}
    seen: set[str] = set()
    for j, device in enumerate(as_items(field_of(r.role, "devices", ()))):
        path = f"devices[{j}]"
        if not isinstance(device, (tuple, list)) or len(device) != 2:
            yield r.finding("device.invalid", _("A device is a name and a count."), path)
            continue
        name, count = device
        if (
            not isinstance(name, str)
            or not name.startswith(DEVICE_PREFIX)
            or (facts is not None and name not in facts.device_names)
        ):
            yield r.finding(
                "device.unknown",
                _("%(name)s is not an rlinf.io/* resource the cluster reports.")
                % {"name": repr(shown(name))},
                path,
                name=shown(name),
                available=sorted(facts.device_names) if facts else [],
            )
            continue
        if name in seen:
            yield r.finding(
                "device.duplicate",
                _("Device %(name)s is listed twice.") % {"name": name},
                path,
                name=name,
            )
            continue
        seen.add(name)
        if not is_count(count) or count < 1:
            yield r.finding(
                "device.invalid",
                _("The count of %(name)s must be a whole number, 1 or more.") % {"name": name},
                path,
                name=name,
                value=shown(count),
            )
            continue
        finding = device_capacity_finding(
            r.match,
            name=name,
            count=count,
            confirmed_devices=confirmed,
            role=r.label,
            field=r.field(path),
        )
        if finding is not None:
            yield finding
