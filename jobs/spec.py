"""Frozen, database-free views of a job draft and of the world it is checked against.

The findings engine (`jobs.findings`) and the manifest renderer (`jobs.render`) are
pure functions over these types. `jobs.context` builds them from the database;
tests build them by hand. Values are kept exactly as the user gave them (a GPU count
may be the string ``"eight"``) so that bad input is reported, never lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Literal

from clusters.types import (
    ClusterFacts,
    MatchedNode,
    SelectorMatch,
    VerificationView,
    selector_key,
)

__all__ = [
    "DEFAULT_OBJECT_STORAGE_SIZE",
    "MOUNT_KINDS",
    "TASK_TYPES",
    "CheckContext",
    "ClusterFacts",
    "EnvVar",
    "Finding",
    "JobSpec",
    "MatchedNode",
    "Mount",
    "ResourcePair",
    "RoleSpec",
    "SelectorMatch",
    "Severity",
    "VerificationView",
    "as_items",
    "as_text",
    "is_count",
    "selector_key",
]

Severity = Literal["error", "warning"]

TASK_TYPES: dict[str, tuple[str, ...]] = {
    "rl": ("Actor", "Rollout", "Environment"),
    "data_collection": ("Environment",),
    "evaluation": ("Rollout", "Environment"),
    "custom": (),
}

MOUNT_KINDS = ("host_path", "object_storage")
# The storage request of an object-storage volume claim when the mount names none. Object
# storage drivers (S3 and the like) ignore it; block storage classes provision this much.
DEFAULT_OBJECT_STORAGE_SIZE = "1Gi"


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
    # object_storage only: the claim's storage request (a Kubernetes quantity);
    # "" means DEFAULT_OBJECT_STORAGE_SIZE.
    size: str = ""


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
class CheckContext:
    """Everything outside the draft the rules need, loaded once per check."""

    clusters: dict[str, ClusterFacts] = dc_field(default_factory=dict)
    # keyed by the selector as a sorted tuple of (key, value) pairs
    matches: dict[tuple[tuple[str, str], ...], SelectorMatch] = dc_field(default_factory=dict)
    # keyed by (cluster, sorted selector pairs)
    verifications: dict[tuple[str, tuple[tuple[str, str], ...]], VerificationView] = (
        dc_field(default_factory=dict)
    )
    # network domain name -> the clusters it spans
    network_domains: dict[str, frozenset[str]] = dc_field(default_factory=dict)
    taken_names: frozenset[str] = frozenset()  # other jobs' names and Jobs on any cluster
    known_ssh_key_names: frozenset[str] = frozenset()
    unknown_ssh_key_names: tuple[str, ...] = ()  # names the draft asks for that the team lacks
    # How the job's two records link to each other (SPEC 7: they reference each other):
    # the launch list the deployment parameters point at, and the deployment parameters that
    # point at the job's launch list (None when unlinked).
    parameters_launch_list_id: int | None = None
    launch_list_parameters_id: int | None = None

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
    detail: dict[str, Any] = dc_field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "role": self.role,
            "field": self.field,
            "message": str(self.message),
            "detail": self.detail,
        }


def as_text(value: object) -> str:
    """`value` when it is a string, else "" (for readers that tolerate unchecked drafts)."""
    return value if isinstance(value, str) else ""


def as_items(value: object) -> tuple[Any, ...]:
    """The items of a list or tuple (a mapping's (key, value) pairs); () for anything else."""
    if isinstance(value, dict):
        return tuple(value.items())
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return ()


def is_count(value: object) -> bool:
    """Whether `value` is a real int (``True`` and ``8.0`` are not counts)."""
    return isinstance(value, int) and not isinstance(value, bool)
