"""The Kueue part of a fleet file (SPEC 15): a cluster's ClusterQueues and LocalQueues, their
schema, validation and parsed form (`KueueSpec`). The model using them is
`clusters.simulator.kueue`; fleet files and the control endpoint read them here.

```yaml
kueue:
  cluster_queues:
    - name: vision-rl
      cohort: research            # optional: members lend each other unused quota
      preemption:                 # optional: Kueue's spec.preemption (default Never)
        within_cluster_queue: LowerPriority
      flavors:                    # tried in order; every flavor lists the same resources
        - name: a100
          resources:
            nvidia.com/gpu: {nominal_quota: 16, borrowing_limit: 8}
            cpu: {nominal_quota: 256}
  local_queues:
    - {namespace: rl-gpu-b, name: vision-rl-queue, cluster_queue: vision-rl}
  workload_priority_classes:      # optional: named by a pod's kueue.x-k8s.io/priority-class
    - {name: high, value: 1000}
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clusters.labels import is_dns_label
from clusters.podrequests import scheduler_units
from clusters.quantities import QuantityError, nano_units

PODS = "pods"
_MAX_QUEUES = 200
_MAX_FLAVORS = 16
_MAX_PRIORITY_CLASSES = 100
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
"""Kueue's `ClusterQueue.spec.preemption.withinClusterQueue` policies."""
PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1  # a WorkloadPriorityClass value is an int32

Object = dict[str, Any]

_QUOTA_SCHEMA: Object = {
    "type": "object",
    "additionalProperties": False,
    "required": ["nominal_quota"],
    "properties": {
        "nominal_quota": {"type": ["integer", "string"]},
        "borrowing_limit": {"type": ["integer", "string"]},
    },
}
KUEUE_SCHEMA: Object = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "cluster_queues": {
            "type": "array",
            "maxItems": _MAX_QUEUES,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "flavors"],
                "properties": {
                    "name": {"type": "string"},
                    "cohort": {"type": "string"},
                    "preemption": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "within_cluster_queue": {"enum": list(WITHIN_CLUSTER_QUEUE)},
                        },
                    },
                    "flavors": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": _MAX_FLAVORS,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name", "resources"],
                            "properties": {
                                "name": {"type": "string"},
                                "resources": {
                                    "type": "object",
                                    "minProperties": 1,
                                    "maxProperties": 64,
                                    "additionalProperties": _QUOTA_SCHEMA,
                                },
                            },
                        },
                    },
                },
            },
        },
        "local_queues": {
            "type": "array",
            "maxItems": _MAX_QUEUES * 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["namespace", "name", "cluster_queue"],
                "properties": {
                    "namespace": {"type": "string"},
                    "name": {"type": "string"},
                    "cluster_queue": {"type": "string"},
                },
            },
        },
        "workload_priority_classes": {
            "type": "array",
            "maxItems": _MAX_PRIORITY_CLASSES,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "value"],
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": "integer"},
                    "description": {"type": "string", "maxLength": 2048},
                },
            },
        },
    },
}
"""A cluster's `kueue:` in the fleet file, and the body of `PUT /_control/clusters/{c}/kueue`."""


# -- the queues ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaSpec:
    """One resource of one flavor: nominal quota and borrowing limit (scheduler units), and
    the quantities as written (what the ClusterQueue object shows)."""

    resource: str
    nominal: int
    borrowing_limit: int | None
    nominal_text: str
    borrowing_text: str | None = None


@dataclass(frozen=True)
class FlavorSpec:
    name: str
    quotas: tuple[QuotaSpec, ...]

    def quota(self, resource: str) -> QuotaSpec | None:
        return next((q for q in self.quotas if q.resource == resource), None)


@dataclass(frozen=True)
class ClusterQueueSpec:
    name: str
    flavors: tuple[FlavorSpec, ...]
    cohort: str = ""
    within_cluster_queue: str = "Never"  # spec.preemption.withinClusterQueue

    def covers(self, resource: str) -> bool:
        return any(flavor.quota(resource) is not None for flavor in self.flavors)

    def covered(self) -> list[str]:
        return list(dict.fromkeys(q.resource for f in self.flavors for q in f.quotas))


@dataclass(frozen=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: str


@dataclass(frozen=True)
class PriorityClassSpec:
    """A `WorkloadPriorityClass` (`kueue.x-k8s.io/v1beta1`): a name and its value."""

    name: str
    value: int
    description: str = ""


@dataclass(frozen=True)
class KueueSpec:
    cluster_queues: tuple[ClusterQueueSpec, ...] = ()
    local_queues: tuple[LocalQueueSpec, ...] = ()
    priority_classes: tuple[PriorityClassSpec, ...] = ()

    def priority_class(self, name: str) -> PriorityClassSpec | None:
        return next((c for c in self.priority_classes if c.name == name), None)

    def cluster_queue(self, name: str) -> ClusterQueueSpec | None:
        return next((q for q in self.cluster_queues if q.name == name), None)

    def local_queue(self, namespace: str, name: str) -> LocalQueueSpec | None:
        return next((q for q in self.local_queues
                     if (q.namespace, q.name) == (namespace, name)), None)


def _units(resource: str, value: Any) -> int:
    """A quota in scheduler units; raises QuantityError."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise QuantityError("not a quantity")
    text = str(value).strip()
    if resource == PODS:
        amount = nano_units(text)
        return -(-amount // 10**9)
    return scheduler_units(resource, nano_units(text))


def kueue_problems(document: Mapping[str, Any]) -> list[str]:
    """What is wrong with a schema-valid `kueue:` mapping besides its shape (paths relative to
    it): DNS-label names, unique queues, quantities, LocalQueues naming known ClusterQueues."""
    problems: list[str] = []
    names: set[str] = set()
    for index, queue in enumerate(document.get("cluster_queues", [])):
        where = f"cluster_queues[{index}] ({queue['name']})"
        if not is_dns_label(queue["name"]):
            problems.append(f"{where}.name: must be a DNS label")
        if queue["name"] in names:
            problems.append(f"{where}.name: duplicate ClusterQueue name")
        names.add(queue["name"])
        if "cohort" in queue and not is_dns_label(queue["cohort"]):
            problems.append(f"{where}.cohort: must be a DNS label")
        flavors: set[str] = set()
        covered = list(queue["flavors"][0]["resources"]) if queue["flavors"] else []
        for flavor_index, flavor in enumerate(queue["flavors"]):
            flavor_where = f"{where}.flavors[{flavor_index}] ({flavor['name']})"
            if not is_dns_label(flavor["name"]) or flavor["name"] in flavors:
                problems.append(f"{flavor_where}.name: must be a DNS label, once per queue")
            flavors.add(flavor["name"])
            if list(flavor["resources"]) != covered:
                problems.append(f"{flavor_where}.resources: every flavor of a ClusterQueue lists "
                                f"the same resources in the same order ({', '.join(covered)})")
            for resource, quota in flavor["resources"].items():
                for key in ("nominal_quota", "borrowing_limit"):
                    if key in quota:
                        try:
                            _units(resource, quota[key])
                        except QuantityError:
                            problems.append(f'{flavor_where}.resources["{resource}"].{key}: '
                                            f"{quota[key]!r} is not a non-negative quantity")
                if "borrowing_limit" in quota and "cohort" not in queue:
                    problems.append(f'{flavor_where}.resources["{resource}"].borrowing_limit: '
                                    "only a ClusterQueue in a cohort can borrow")
    seen: set[tuple[str, str]] = set()
    for index, local in enumerate(document.get("local_queues", [])):
        where = f"local_queues[{index}] ({local['name']})"
        if not is_dns_label(local["name"]) or not is_dns_label(local["namespace"]):
            problems.append(f"{where}: name and namespace must be DNS labels")
        if (local["namespace"], local["name"]) in seen:
            problems.append(f"{where}: duplicate LocalQueue in namespace {local['namespace']}")
        seen.add((local["namespace"], local["name"]))
        if local["cluster_queue"] not in names:
            problems.append(f"{where}.cluster_queue: {local['cluster_queue']} is not a "
                            "ClusterQueue of this cluster")
    classes: set[str] = set()
    for index, priority in enumerate(document.get("workload_priority_classes", [])):
        where = f"workload_priority_classes[{index}] ({priority['name']})"
        if not is_dns_label(priority["name"]):
            problems.append(f"{where}.name: must be a DNS label")
        if priority["name"] in classes:
            problems.append(f"{where}.name: duplicate WorkloadPriorityClass name")
        classes.add(priority["name"])
        if not PRIORITY_MIN <= priority["value"] <= PRIORITY_MAX:
            problems.append(f"{where}.value: {priority['value']} is not a 32-bit integer "
                            f"({PRIORITY_MIN} to {PRIORITY_MAX})")
    return problems


def kueue_spec_from_dict(document: Mapping[str, Any]) -> KueueSpec:
    """A `KueueSpec` from a mapping `kueue_problems` found nothing wrong with."""
    return KueueSpec(
        cluster_queues=tuple(
            ClusterQueueSpec(
                name=queue["name"], cohort=queue.get("cohort", ""),
                within_cluster_queue=(queue.get("preemption") or {}).get(
                    "within_cluster_queue", "Never"),
                flavors=tuple(
                    FlavorSpec(name=flavor["name"], quotas=tuple(
                        QuotaSpec(
                            resource=resource,
                            nominal=_units(resource, quota["nominal_quota"]),
                            borrowing_limit=(_units(resource, quota["borrowing_limit"])
                                             if "borrowing_limit" in quota else None),
                            nominal_text=str(quota["nominal_quota"]).strip(),
                            borrowing_text=(str(quota["borrowing_limit"]).strip()
                                            if "borrowing_limit" in quota else None),
                        )
                        for resource, quota in flavor["resources"].items()))
                    for flavor in queue["flavors"]),
            )
            for queue in document.get("cluster_queues", [])),
        local_queues=tuple(
            LocalQueueSpec(namespace=local["namespace"], name=local["name"],
                           cluster_queue=local["cluster_queue"])
            for local in document.get("local_queues", [])),
        priority_classes=tuple(
            PriorityClassSpec(name=priority["name"], value=priority["value"],
                              description=priority.get("description", ""))
            for priority in document.get("workload_priority_classes", [])),
    )
