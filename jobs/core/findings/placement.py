"""Where a role runs: its cluster, its selector's matched nodes, the verification, GPUs and
devices."""

from __future__ import annotations

from collections.abc import Iterator

from clusters.labels import selector_problems
from jobs.core.findings.base import (
    DNS_LABEL,
    LISTED_NODES_MAX,
    NAME_MAX,
    ROLE_NAME,
    SHOWN_MAX,
    CheckedRole,
    _,
    node_list,
    shown,
)
from jobs.core.spec import (
    Finding,
    as_items,
    field_of,
    is_count,
)


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
    for problem in selector_problems(field_of(r.role, "selector", ())):
        yield r.finding(problem.code, problem.message, "selector", **problem.detail)
    if not r.selector_ok:
        return
    match = r.match
    if match.count == 0:
        yield r.finding(
            "selector.no_match",
            _("The selector matches no node of any cluster."),
            "selector",
        )
    if r.is_header and match.count != 1:
        yield r.finding(
            "header.replicas",
            _("The Header role's selector must match exactly 1 node; it matches %(count)d.")
            % {"count": match.count},
            "selector",
            count=match.count,
            nodes=node_list(match.nodes),
        )
    yield from placement_findings(r)
    not_ready = [n for n in match.nodes if not n.ready]
    if not_ready:
        yield r.finding(
            "selector.not_ready",
            _("%(count)d matched node(s) are not Ready; their workers will wait until they are.")
            % {"count": len(not_ready)},
            "selector",
            severity="warning",
            nodes=node_list(not_ready),
        )
    yield from hostname_findings(r)
    yield from verification_findings(r)


def placement_findings(r: CheckedRole) -> Iterator[Finding]:
    if r.cluster is None:
        return
    foreign = r.match.foreign_nodes(r.cluster)
    if foreign:
        yield r.finding(
            "selector.cross_cluster",
            _("The selector also matches %(count)d node(s) outside cluster %(cluster)s.")
            % {"count": len(foreign), "cluster": r.cluster},
            "selector",
            cluster=r.cluster,
            count=len(foreign),
            nodes=node_list(foreign),
        )
    if not r.match.confining_conditions(r.cluster):
        yield r.finding(
            "selector.no_cluster_label",
            _(
                "No single condition of the selector matches only nodes of cluster %(cluster)s; "
                "add one (for example the cluster's topology label)."
            )
            % {"cluster": r.cluster},
            "selector",
            cluster=r.cluster,
        )


def hostname_findings(r: CheckedRole) -> Iterator[Finding]:
    job = field_of(r.spec, "name")
    if r.match.count == 0 or r.name is None or not isinstance(job, str):
        return
    if not (ROLE_NAME.fullmatch(r.name) and DNS_LABEL.fullmatch(job)):
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
            current_nodes=node_list(r.match.nodes),
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
    if gpus == 0 or r.match.count == 0:
        return
    gpu_max = r.match.gpu_max()
    if gpu_max is not None and gpu_max > 0:
        if gpus > gpu_max:
            yield r.finding(
                "gpu.exceeds_capacity",
                _("%(gpus)d GPUs per worker is more than the %(max)d every matched node has.")
                % {"gpus": gpus, "max": gpu_max},
                "gpus",
                requested=gpus,
                max=gpu_max,
            )
        return
    confirmed = r.confirmed
    if confirmed is None or confirmed.confirmed_gpu is None or confirmed.confirmed_gpu < gpus:
        yield r.finding(
            "gpu.unconfirmed",
            _(
                "The matched nodes report no GPU capacity; %(gpus)d GPUs per worker needs an "
                "admin's confirmation on the verification."
            )
            % {"gpus": gpus},
            "gpus",
            requested=gpus,
            max=gpu_max,
            confirmed=confirmed.confirmed_gpu if confirmed else None,
        )


def device_findings(r: CheckedRole) -> Iterator[Finding]:
    facts = r.ctx.clusters.get(r.cluster) if r.cluster else None
    maxima = r.match.devices_max() if r.match.count else {}
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
            or not name.startswith("rlinf.io/")
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
        limit = maxima.get(name, 0)
        if r.match.count and count > limit and confirmed.get(name, 0) < count:
            yield r.finding(
                "device.exceeds_capacity",
                _(
                    "%(count)d × %(name)s per worker is more than the %(max)d every matched node "
                    "has."
                )
                % {"count": count, "name": name, "max": limit},
                path,
                name=name,
                requested=count,
                max=limit,
            )
