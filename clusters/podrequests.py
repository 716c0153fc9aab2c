"""A pod's effective resource request, computed as kube-scheduler computes it (pure).

This is the one place of the rule: the inventory poll adds it up per node (occupancy), the
fleet simulator schedules by it, and whoever judges whether a worker fits reads the
amounts it produces. Written after k8s.io/component-helpers `resource.PodRequests`
(`AggregateContainerRequests`), the sidecar KEP-753 ("resources calculation for
scheduling") and the pod-level resources KEP-2837:

- the sum of the containers' requests, plus every restartable init container's (an init
  container with `restartPolicy: Always`, a sidecar: it keeps running beside them);
- at least, per resource, what each init container needs while it runs: its own request
  plus the sidecars started before it (a sidecar's own turn counts the sidecars up to and
  including itself);
- pod-level `spec.resources.requests` replace that total for the resources pod-level
  resources support (`cpu`, `memory`; hugepages are not tracked here);
- plus `spec.overhead` (the RuntimeClass's per-pod overhead).

Only the resources the inventory keeps are read: `cpu`, `memory`, `nvidia.com/gpu` and
every `rlinf.io/*`; other names are ignored without being parsed. Amounts are added as
whole nano units, as exactly as Kubernetes adds quantities, and only the totals are rounded
up to what the scheduler compares (`MilliValue()` for cpu, `Value()` for the rest): cpu in
millicores, memory in bytes, devices in whole devices (`scheduler units`).

A pod spec that is not shaped like one (a list where a mapping belongs, a quantity that is
not one, absurd sizes) raises `PodSpecError` naming the field: a real API server never
serves such a pod, so a caller treats it as a problem of the whole listing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from clusters.quantities import (
    NANO,
    QuantityError,
    format_bytes,
    format_count,
    format_milli,
    nano_units,
)
from clusters.types import DEVICE_PREFIX, GPU_RESOURCE

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
POD_LEVEL_RESOURCES = (CPU, MEMORY)
"""What pod-level `spec.resources.requests` may set (of the resources tracked here)."""

MAX_CONTAINERS = 1000
"""More containers (or init containers) in one pod than any real pod has: a broken answer."""

Requests = dict[str, int]
"""Amounts by resource name: whole nano units inside `PodResources`, scheduler units out."""

__all__ = [
    "CPU",
    "MEMORY",
    "PODS",
    "InitContainer",
    "PodResources",
    "PodSpecError",
    "Requests",
    "effective_requests",
    "format_units",
    "is_tracked",
    "pod_requests",
    "pod_resources_from_spec",
    "requests_from_quantities",
    "scheduler_units",
]


class PodSpecError(ValueError):
    """A pod spec (or a requests mapping) is not shaped as the API serves one."""


def is_tracked(resource: str) -> bool:
    """Whether occupancy keeps this resource (`pods` is counted, never requested)."""
    return resource in (CPU, MEMORY, GPU_RESOURCE) or resource.startswith(DEVICE_PREFIX)


@dataclass(frozen=True)
class InitContainer:
    """An init container's requests (nano units); `restartable` for a sidecar."""

    requests: Requests
    restartable: bool = False


@dataclass(frozen=True)
class PodResources:
    """What of a pod spec decides its request, in nano units, tracked resources only."""

    containers: tuple[Requests, ...] = ()
    init_containers: tuple[InitContainer, ...] = ()
    pod_requests: Requests = field(default_factory=dict)  # pod-level: cpu, memory only
    overhead: Requests = field(default_factory=dict)


@lru_cache(maxsize=4096)
def _nano_of_text(text: str) -> int:
    return nano_units(text)


def _nano(value: object) -> int:
    """A quantity (string, or a JSON number as some clients send) in nano units."""
    if isinstance(value, bool):
        raise QuantityError("not a quantity")
    if isinstance(value, int):
        return _nano_of_text(str(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError("not a quantity")
        return _nano_of_text(repr(value))
    if isinstance(value, str):
        return _nano_of_text(value)
    raise QuantityError("not a quantity")


def requests_from_quantities(value: object, *, where: str) -> Requests:
    """The tracked entries of a `{resource: quantity}` mapping, in nano units.

    None or a missing mapping is empty; anything but a mapping of quantities raises
    `PodSpecError` saying `where` it is.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodSpecError(f"{where}: not a mapping of resources")
    amounts: Requests = {}
    for resource, quantity in value.items():
        if not isinstance(resource, str):
            raise PodSpecError(f"{where}: a resource name is not a string")
        if not is_tracked(resource):
            continue
        try:
            amounts[resource] = _nano(quantity)
        except QuantityError as error:
            raise PodSpecError(f"{where}.{resource}: {_shown(quantity)} is not a "
                               f"quantity ({error})") from error
    return amounts


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _container_list(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    containers = spec.get(key)
    if containers is None:
        return []
    if not isinstance(containers, list):
        raise PodSpecError(f"spec.{key}: not a list")
    if len(containers) > MAX_CONTAINERS:
        raise PodSpecError(f"spec.{key}: {len(containers)} entries, more than {MAX_CONTAINERS}")
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            raise PodSpecError(f"spec.{key}[{index}]: not a mapping")
    return containers


def _container_requests(container: Mapping[str, Any], key: str, index: int) -> Requests:
    resources = container.get("resources")
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise PodSpecError(f"spec.{key}[{index}].resources: not a mapping")
    requests = resources.get("requests")
    try:
        return requests_from_quantities(requests, where="")
    except PodSpecError:  # again, naming the field (a listing holds 1000s of good pods)
        return requests_from_quantities(requests, where=f"spec.{key}[{index}].resources.requests")


def pod_resources_from_spec(spec: object) -> PodResources:
    """Reduce a pod's `spec` (as JSON) to what decides its request. Raises `PodSpecError`."""
    if spec is None:
        return PodResources()
    if not isinstance(spec, Mapping):
        raise PodSpecError("spec: not a mapping")
    containers = tuple(
        _container_requests(c, "containers", i)
        for i, c in enumerate(_container_list(spec, "containers"))
    )
    init_containers = tuple(
        InitContainer(_container_requests(c, "initContainers", i),
                      restartable=c.get("restartPolicy") == "Always")
        for i, c in enumerate(_container_list(spec, "initContainers"))
    )
    pod_level = spec.get("resources")
    if pod_level is not None and not isinstance(pod_level, Mapping):
        raise PodSpecError("spec.resources: not a mapping")
    pod_requests = requests_from_quantities(
        (pod_level or {}).get("requests"), where="spec.resources.requests")
    return PodResources(
        containers=containers,
        init_containers=init_containers,
        pod_requests={k: v for k, v in pod_requests.items() if k in POD_LEVEL_RESOURCES},
        overhead=requests_from_quantities(spec.get("overhead"), where="spec.overhead"),
    )


def _add(total: Requests, amounts: Mapping[str, int]) -> None:
    for resource, amount in amounts.items():
        total[resource] = total.get(resource, 0) + amount


def _raise_to(total: Requests, amounts: Mapping[str, int]) -> None:
    for resource, amount in amounts.items():
        if amount > total.get(resource, 0):
            total[resource] = amount


def _init_peak(init_containers: Iterable[InitContainer], total: Requests) -> Requests:
    """The most any init container's turn needs, per resource; sidecars also join `total`."""
    sidecars: Requests = {}
    peak: Requests = {}
    for init in init_containers:
        if init.restartable:
            _add(total, init.requests)
            _add(sidecars, init.requests)
            _raise_to(peak, sidecars)
        else:
            turn = dict(init.requests)
            _add(turn, sidecars)
            _raise_to(peak, turn)
    return peak


def scheduler_units(resource: str, nano: int) -> int:
    """Nano units rounded up to what kube-scheduler compares: millicores for cpu, whole
    units (bytes, devices) for everything else."""
    scale = NANO // 1000 if resource == CPU else NANO
    return -(-nano // scale)


def format_units(resource: str, amount: int) -> str:
    """Scheduler units of `resource` as a Kubernetes quantity string."""
    if resource == CPU:
        return format_milli(amount)
    if resource == MEMORY:
        return format_bytes(amount)
    return format_count(amount)


def effective_requests(resources: PodResources) -> Requests:
    """The pod's request per tracked resource, in scheduler units (zero amounts left out)."""
    total: Requests = {}
    for container in resources.containers:
        _add(total, container)
    peak = _init_peak(resources.init_containers, total)  # also adds the sidecars to `total`
    _raise_to(total, peak)
    total.update(resources.pod_requests)
    _add(total, resources.overhead)
    units = ((resource, scheduler_units(resource, nano)) for resource, nano in total.items())
    return {resource: amount for resource, amount in units if amount}


def pod_requests(spec: object) -> Requests:
    """`effective_requests` of a pod `spec` (as JSON). Raises `PodSpecError`."""
    return effective_requests(pod_resources_from_spec(spec))
