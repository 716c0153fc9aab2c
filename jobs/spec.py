"""Frozen, database-free views of a job draft and of the world it is checked against.

The findings engine (`jobs.findings`) and the manifest renderer (`jobs.render`) are
pure functions over these types. `jobs.context` builds them from the database;
tests build them by hand. Values are kept exactly as the user gave them (a GPU count
may be the string ``"eight"``) so that bad input is reported, never lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]

TASK_TYPES: dict[str, tuple[str, ...]] = {
    "rl": ("Actor", "Rollout", "Environment"),
    "data_collection": ("Environment",),
    "evaluation": ("Rollout", "Environment"),
    "custom": (),
}

MOUNT_KINDS = ("host_path", "object_storage")


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str


@dataclass(frozen=True)
class Mount:
    kind: str  # "host_path" | "object_storage" (anything else is reported)
    target: str
    source: str = ""  # host_path only
    storage_class: str = ""  # object_storage only


@dataclass(frozen=True)
class ResourcePair:
    request: str = ""
    limit: str = ""


@dataclass(frozen=True)
class RoleSpec:
    name: str
    cluster: str = ""
    # Conditions in the order the user gave them; duplicates kept so they can be reported.
    selector: tuple[tuple[str, str], ...] = ()
    gpus: Any = 0  # int when valid; anything else is reported as gpu.invalid
    devices: tuple[tuple[str, Any], ...] = ()  # (resource name, count)
    cpu: ResourcePair = ResourcePair()
    memory: ResourcePair = ResourcePair()
    image: str = ""
    image_digest: str = ""  # recorded digest for a tag reference
    prepare_script: str = ""
    env: tuple[EnvVar, ...] = ()
    mounts: tuple[Mount, ...] = ()

    @property
    def task_name(self) -> str:
        return self.name.lower()

    @property
    def selector_dict(self) -> dict[str, str]:
        """The selector as a mapping (the last value wins for a duplicated key)."""
        return dict(self.selector)


@dataclass(frozen=True)
class JobSpec:
    team: str
    name: str
    task_type: str
    roles: tuple[RoleSpec, ...]
    header_role: str = ""
    network_domain: str = ""
    ssh_keys: tuple[str, ...] = ()  # the public key lines, already resolved from names
    run_script: str = ""
    tensorboard_log_dir: str = ""
    image_compatibility_confirmed: bool = False
    launch_list_id: int | None = None
    deployment_parameters_id: int | None = None


@dataclass(frozen=True)
class MatchedNode:
    cluster: str
    name: str
    namespace: str
    gpu: int | None  # allocatable nvidia.com/gpu; None when the node does not report it
    devices: tuple[tuple[str, int], ...] = ()  # allocatable rlinf.io/* resources
    ready: bool = True


@dataclass(frozen=True)
class SelectorMatch:
    """The global matches of one selector, ordered by (cluster, node name)."""

    nodes: tuple[MatchedNode, ...]
    # For each single condition (key, value): the set of clusters its matches lie in.
    condition_clusters: tuple[tuple[tuple[str, str], frozenset[str]], ...] = ()

    @property
    def count(self) -> int:
        return len(self.nodes)

    @property
    def clusters(self) -> frozenset[str]:
        return frozenset(n.cluster for n in self.nodes)

    def foreign_nodes(self, cluster: str) -> tuple[MatchedNode, ...]:
        return tuple(n for n in self.nodes if n.cluster != cluster)

    def confining_conditions(self, cluster: str) -> tuple[tuple[str, str], ...]:
        """Single conditions whose own matches all lie in `cluster` (and are non-empty)."""
        return tuple(c for c, cl in self.condition_clusters if cl == frozenset({cluster}))

    def gpu_max(self) -> int | None:
        """The smallest allocatable GPU count among matches; None if unknown."""
        values = [n.gpu for n in self.nodes]
        if not values or any(v is None for v in values):
            return None
        return min(v for v in values if v is not None)

    def devices_max(self) -> dict[str, int]:
        """For each device name reported by every matched node: its smallest allocatable."""
        if not self.nodes:
            return {}
        per_node = [dict(n.devices) for n in self.nodes]
        names = set(per_node[0]).intersection(*per_node[1:])
        return {name: min(d[name] for d in per_node) for name in sorted(names)}

    def signature(self) -> tuple[tuple[str, str], ...]:
        return tuple((n.cluster, n.name) for n in self.nodes)


@dataclass(frozen=True)
class VerificationView:
    """The newest verification on record for one (team, cluster, selector)."""

    id: int
    state: str  # pending | approved | rejected | stale
    node_signature: tuple[tuple[str, str], ...]  # (cluster, node) pairs in the snapshot
    confirmed_gpu: int | None = None  # admin-confirmed GPUs per worker
    confirmed_devices: tuple[tuple[str, int], ...] = ()
    confirmed_host_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    namespace: str
    storage_classes: frozenset[str] = frozenset()
    device_names: frozenset[str] = frozenset()  # rlinf.io/* names any node of it reports


@dataclass(frozen=True)
class CheckContext:
    """Everything outside the draft the rules need, loaded once per check."""

    clusters: dict[str, ClusterFacts] = field(default_factory=dict)
    # keyed by the selector as a sorted tuple of (key, value) pairs
    matches: dict[tuple[tuple[str, str], ...], SelectorMatch] = field(default_factory=dict)
    # keyed by (cluster, sorted selector pairs)
    verifications: dict[tuple[str, tuple[tuple[str, str], ...]], VerificationView] = field(
        default_factory=dict
    )
    network_domains: dict[str, frozenset[str]] = field(default_factory=dict)  # name -> clusters
    taken_names: frozenset[str] = frozenset()  # other jobs' names and Jobs on any cluster
    known_ssh_key_names: frozenset[str] = frozenset()
    unknown_ssh_key_names: tuple[str, ...] = ()  # names the draft asks for that the team lacks

    def match_for(self, selector: dict[str, str]) -> SelectorMatch:
        return self.matches.get(selector_key(selector), SelectorMatch(nodes=()))

    def verification_for(self, cluster: str, selector: dict[str, str]) -> VerificationView | None:
        return self.verifications.get((cluster, selector_key(selector)))


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    message: str
    role: str | None = None
    field: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "role": self.role,
            "field": self.field,
            "message": str(self.message),
            "detail": self.detail,
        }


def selector_key(selector: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(selector.items()))
