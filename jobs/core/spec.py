"""Frozen, database-free views of a job draft and of the world it is checked against.

The findings engine (`jobs.core.findings`) and the manifest renderer (`jobs.core.render`) are
pure functions over these types. `jobs.context` builds them from the database;
tests build them by hand. Values are kept exactly as the user gave them (a GPU count
may be the string ``"eight"``) so that bad input is reported, never lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from clusters.capacity import NodeCapacity
from clusters.preflight import ClusterOccupancy
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
    "JobSpec",
    "LaunchListImages",
    "MatchedNode",
    "Mount",
    "ParametersView",
    "ResourcePair",
    "RoleSpec",
    "SelectorMatch",
    "VerificationView",
    "as_items",
    "as_text",
    "field_of",
    "header_index",
    "is_count",
    "job_namespace",
    "role_match",
    "role_selector",
    "selector_key",
    "spec_roles",
]

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
class LaunchListImages:
    """The main container image the job's launch list records (SPEC 3, step 4: each role's
    image must equal it): `image` for every role, `role_images` per role (role name -> reference,
    names compared ignoring case); a role named in `role_images` takes that reference."""

    image: str = ""
    role_images: tuple[tuple[str, str], ...] = ()

    @property
    def recorded(self) -> bool:
        return bool(self.image or self.role_images)

    def for_role(self, name: str) -> str | None:
        """The reference recorded for role `name`, or None when the launch list names none."""
        lowered = name.lower()
        for role, reference in self.role_images:
            if role.lower() == lowered:
                return reference
        return self.image or None


@dataclass(frozen=True)
class ParametersView:
    """One deployment-parameters record, frozen for a check."""

    id: int
    title: str
    state: str  # pending | confirmed | rejected | stale
    roles: tuple[Any, ...]  # as stored: [{"role", "cluster", "selector", ...}]
    network_domain: str = ""
    verification_ids: frozenset[int] = frozenset()
    content: Mapping[str, Any] = dc_field(default_factory=dict)  # `record_content` today
    confirmed: Mapping[str, Any] = dc_field(default_factory=dict)  # stored at confirmation
    decision_note: str = ""
    stale_reasons: tuple[Mapping[str, Any], ...] = ()


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
    unknown_ssh_key_names: tuple[str, ...] = ()  # names the draft asks for that the team lacks
    # How the job's two records link to each other (SPEC 7: they reference each other):
    # the launch list the deployment parameters point at, and the deployment parameters that
    # point at the job's launch list (None when unlinked).
    parameters_launch_list_id: int | None = None
    launch_list_parameters_id: int | None = None
    # The images the job's launch list records; None when no launch list is linked (or known).
    launch_list_images: LaunchListImages | None = None
    # The job's deployment parameters (None when none is linked or found).
    parameters: ParametersView | None = None
    # The pre-flight's inputs (SPEC 15): every matched node's capacity by (cluster, node),
    # and the occupancy state of their clusters (empty: not read, every verdict `unknown`).
    capacity: Mapping[tuple[str, str], NodeCapacity] = dc_field(default_factory=dict)
    occupancy: Mapping[str, ClusterOccupancy] = dc_field(default_factory=dict)
    # What is computed of this context once and shown in several places of one answer (the
    # roles' pre-flight: findings, role panel, checklist, `capacity`), with the spec it was
    # computed for. Not an input: a fresh one for every context (`replace` included).
    memo: dict[str, tuple[object, Any]] = dc_field(
        default_factory=dict, init=False, compare=False, repr=False)

    def match_for(self, selector: dict[str, str]) -> SelectorMatch:
        return self.matches.get(selector_key(selector), SelectorMatch(nodes=()))

    def verification_for(self, cluster: str, selector: dict[str, str]) -> VerificationView | None:
        return self.verifications.get((cluster, selector_key(selector)))


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


# -- reading a spec that may not have been checked -------------------------------------------


def field_of(obj: object, name: str, default: Any = "") -> Any:
    """`obj.name`, or `default` when a hand-built or malformed draft lacks it."""
    return getattr(obj, name, default)


def role_selector(role: object) -> dict[str, str]:
    """The role's conditions; {} unless every one is a pair of strings."""
    pairs = as_items(field_of(role, "selector", ()))
    valid = [
        (p[0], p[1])
        for p in pairs
        if isinstance(p, (tuple, list)) and len(p) == 2
        if isinstance(p[0], str) and isinstance(p[1], str)
    ]
    return dict(valid) if len(valid) == len(pairs) else {}


def role_match(role: object, ctx: CheckContext) -> SelectorMatch:
    """The global matches of the role's selector (none for an empty or malformed selector)."""
    selector = role_selector(role)
    return ctx.match_for(selector) if selector else SelectorMatch(nodes=())


def spec_roles(spec: JobSpec) -> tuple[Any, ...]:
    """The spec's roles (none when `roles` is not a list or tuple)."""
    roles = field_of(spec, "roles", ())
    return tuple(roles) if isinstance(roles, (list, tuple)) else ()


def header_index(spec: JobSpec) -> int | None:
    """The position of the Header role (the first role named exactly `spec.header_role`)."""
    header = field_of(spec, "header_role")
    if not isinstance(header, str) or not header:
        return None
    for index, role in enumerate(spec_roles(spec)):
        if field_of(role, "name") == header:
            return index
    return None


def job_namespace(spec: JobSpec, ctx: CheckContext) -> str:
    """Where the Job is created: the namespace of the first node (by cluster, then node name)
    the Header role matches ("" without a Header role or a match)."""
    head = header_index(spec)
    if head is None:
        return ""
    nodes = role_match(spec_roles(spec)[head], ctx).nodes
    return min(nodes, key=lambda n: (n.cluster, n.name)).namespace if nodes else ""
