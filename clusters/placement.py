"""The placement rules of SPEC section 4 for one (cluster, selector) combination, over its matches.

Both judges of a placement call these functions: the job's findings engine
(`jobs.core.findings.placement`, on today's matches and the approved verification's
confirmations) and the admin verification queue (`clusters.verifications.selectors`, on the
request's snapshot and its own confirmations). A rule therefore has one code, one severity and
one message wherever it is shown; only where a finding points (`role`, `field`) is the
caller's, because a job role and a verification request name their inputs differently.

Severities (docs/findings.md): every placement rule is an `error`, because each one refuses
submission. The capacity and host-directory rules (`gpu.unconfirmed`,
`device.exceeds_capacity`, `mount.host_path.unconfirmed`) are lifted by an admin's
confirmation on the verification; in the queue the same error tells the admin what a job
would be refused for unless they confirm it.

Pure: no database. The matches come as any `MatchFacts`: a live `SelectorMatch`, or the
queue's view of a stored snapshot (its summary, node lists read a page at a time).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

__all__ = [
    "CONFIRMABLE_CODES",
    "LISTED_NODES_MAX",
    "PLACEMENT_CODES",
    "MatchFacts",
    "device_capacity_finding",
    "gpu_finding",
    "host_path_finding",
    "request_placement_findings",
    "request_refusals",
    "selector_placement_findings",
]

# Findings list at most this many nodes in `detail` (a broad selector matches thousands).
LISTED_NODES_MAX = 50

PLACEMENT_CODES = (
    "selector.no_match",
    "header.replicas",
    "selector.cross_cluster",
    "selector.no_cluster_label",
    "gpu.exceeds_capacity",
    "gpu.unconfirmed",
    "device.exceeds_capacity",
    "mount.host_path.unconfirmed",
)

# The placement errors an admin's confirmation on the verification lifts: asking for that
# confirmation is what a verification request is for.
CONFIRMABLE_CODES = frozenset(
    {"gpu.unconfirmed", "device.exceeds_capacity", "mount.host_path.unconfirmed"}
)


class MatchFacts(Protocol):
    """What the placement rules read of one selector's matches."""

    @property
    def count(self) -> int: ...

    def foreign_count(self, cluster: str) -> int: ...

    def confining_conditions(self, cluster: str) -> tuple[tuple[str, str], ...]: ...

    def gpu_max(self) -> int | None: ...

    def devices_max(self) -> dict[str, int]: ...

    def listed_nodes(self, limit: int) -> list[dict[str, Any]]: ...

    def listed_foreign_nodes(self, cluster: str, limit: int) -> list[dict[str, Any]]: ...


def selector_placement_findings(
    match: MatchFacts,
    *,
    cluster: str | None,
    header: bool,
    role: str | None = None,
    field: str = "selector",
    header_field: str | None = None,
) -> list[Finding]:
    """Where the selector's matches lie: no match, the Header role's single node, nodes
    outside `cluster`, and a condition confining the matches to `cluster` (the last two only
    when the cluster is known). `header` is whether the selector places a Header role."""
    findings = []
    if match.count == 0:
        findings.append(
            new_finding(
                "selector.no_match",
                _("The selector matches no node of any cluster."),
                role=role,
                field=field,
            )
        )
    if header and match.count != 1:
        findings.append(
            new_finding(
                "header.replicas",
                _("The Header role's selector must match exactly 1 node; it matches %(count)d.")
                % {"count": match.count},
                role=role,
                field=header_field or field,
                count=match.count,
                nodes=match.listed_nodes(LISTED_NODES_MAX),
            )
        )
    if cluster is not None:
        findings += _confinement_findings(match, cluster=cluster, role=role, field=field)
    return findings


def _confinement_findings(
    match: MatchFacts, *, cluster: str, role: str | None, field: str
) -> list[Finding]:
    findings = []
    foreign = match.foreign_count(cluster)
    if foreign:
        findings.append(
            new_finding(
                "selector.cross_cluster",
                _("The selector also matches %(count)d node(s) outside cluster %(cluster)s.")
                % {"count": foreign, "cluster": cluster},
                role=role,
                field=field,
                cluster=cluster,
                count=foreign,
                nodes=match.listed_foreign_nodes(cluster, LISTED_NODES_MAX),
            )
        )
    if match.count and not match.confining_conditions(cluster):
        findings.append(
            new_finding(
                "selector.no_cluster_label",
                _(
                    "No single condition of the selector matches only nodes of cluster "
                    "%(cluster)s; add one (for example the cluster's topology label)."
                )
                % {"cluster": cluster},
                role=role,
                field=field,
                cluster=cluster,
            )
        )
    return findings


def gpu_finding(
    match: MatchFacts,
    *,
    gpus: int,
    confirmed_gpu: int | None,
    role: str | None = None,
    field: str = "gpus",
) -> Finding | None:
    """`gpus` per worker against the matched nodes: above the smallest allocatable count
    when the nodes report one, else not confirmed by an admin for at least `gpus`."""
    if gpus <= 0 or match.count == 0:
        return None
    gpu_max = match.gpu_max()
    if gpu_max is not None and gpu_max > 0:
        if gpus <= gpu_max:
            return None
        return new_finding(
            "gpu.exceeds_capacity",
            _("%(gpus)d GPUs per worker is more than the %(max)d every matched node has.")
            % {"gpus": gpus, "max": gpu_max},
            role=role,
            field=field,
            requested=gpus,
            max=gpu_max,
        )
    if confirmed_gpu is not None and confirmed_gpu >= gpus:
        return None
    return new_finding(
        "gpu.unconfirmed",
        _(
            "The matched nodes report no GPU capacity; %(gpus)d GPUs per worker needs an "
            "admin's confirmation on the verification."
        )
        % {"gpus": gpus},
        role=role,
        field=field,
        requested=gpus,
        max=gpu_max,
        confirmed=confirmed_gpu,
    )


def device_capacity_finding(
    match: MatchFacts,
    *,
    name: str,
    count: int,
    confirmed_devices: Mapping[str, int],
    role: str | None = None,
    field: str,
) -> Finding | None:
    """`count` of device `name` per worker above the smallest allocatable among the matched
    nodes (0 where a node lacks it), and not confirmed by an admin for at least `count`."""
    if match.count == 0:
        return None
    limit = match.devices_max().get(name, 0)
    if count <= limit or confirmed_devices.get(name, 0) >= count:
        return None
    return new_finding(
        "device.exceeds_capacity",
        _("%(count)d × %(name)s per worker is more than the %(max)d every matched node has.")
        % {"count": count, "name": name, "max": limit},
        role=role,
        field=field,
        name=name,
        requested=count,
        max=limit,
    )


def host_path_finding(
    path: str, *, confirmed_paths: Collection[str], role: str | None = None, field: str
) -> Finding | None:
    """The host directory `path` (normalised) not confirmed by an admin on the matched nodes."""
    if path in confirmed_paths:
        return None
    return new_finding(
        "mount.host_path.unconfirmed",
        _("An admin has not confirmed that %(path)s exists on every matched node.")
        % {"path": path},
        role=role,
        field=field,
        host_path=path,
    )


def request_placement_findings(
    match: MatchFacts,
    *,
    cluster: str,
    for_header_role: bool,
    gpu: int,
    devices: Mapping[str, int],
    host_paths: Collection[str],
    confirmed_gpu: int | None = None,
    confirmed_devices: Mapping[str, int] | None = None,
    confirmed_host_paths: Collection[str] = (),
) -> list[Finding]:
    """The placement rules on a verification request's matches, with what it asks an admin to
    confirm (`gpu`, `devices`, `host_paths`) and what was confirmed. Fields are the request's
    own (`selector`, `for_header_role`, `requested_gpu`, `requested_devices.<name>`,
    `requested_host_paths`)."""
    findings = selector_placement_findings(
        match, cluster=cluster, header=for_header_role, header_field="for_header_role"
    )
    confirmed = dict(confirmed_devices or {})
    paths = set(confirmed_host_paths)
    extra = [
        gpu_finding(match, gpus=gpu, confirmed_gpu=confirmed_gpu, field="requested_gpu"),
        *(
            device_capacity_finding(match, name=name, count=count, confirmed_devices=confirmed,
                                    field=f"requested_devices.{name}")
            for name, count in sorted(devices.items())
        ),
        *(host_path_finding(path, confirmed_paths=paths, field="requested_host_paths")
          for path in host_paths),
    ]
    return findings + [f for f in extra if f is not None]


def request_refusals(findings: list[Finding]) -> list[Finding]:
    """The errors no admin's confirmation can lift: a request with any of them is refused (an
    admin could only reject it, and no job could be submitted with that selector)."""
    return [f for f in findings if f.severity == "error" and f.code not in CONFIRMABLE_CODES]
