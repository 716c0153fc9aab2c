"""A node's allocatable, requested and free capacity, as the inventory keeps them (pure).

The one reader of occupancy for everyone who asks "does it fit?": the nodes API and pages,
the pre-flight, the Pending explanations. Amounts are scheduler units
(`clusters.podrequests`): cpu in millicores, memory in bytes, the rest whole units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from clusters.podrequests import CPU, MEMORY, PODS, format_units, scheduler_units
from clusters.quantities import QuantityError, nano_units
from clusters.types import GPU_RESOURCE

__all__ = ["NodeCapacity", "allocatable_units", "node_capacity", "quantities",
           "requested_units"]


def allocatable_units(*, gpu: int | None, devices: Mapping[str, int | None],
                      cpu_milli: int | None, memory_bytes: int | None,
                      pods: int | None) -> dict[str, int]:
    """A node row's allocatable as scheduler units, each resource only when known."""
    known: dict[str, int | None] = {CPU: cpu_milli, MEMORY: memory_bytes, PODS: pods,
                                    GPU_RESOURCE: gpu, **devices}
    return {resource: amount for resource, amount in known.items() if amount is not None}


@lru_cache(maxsize=8192)
def _units(resource: str, text: str) -> int:
    return scheduler_units(resource, nano_units(text))


def requested_units(requested: Mapping[str, object]) -> dict[str, int]:
    """A stored `requested` map (quantity strings) as scheduler units; an entry that is not
    a quantity (never written by RLark) is left out."""
    amounts: dict[str, int] = {}
    for resource, text in requested.items():
        try:
            amounts[resource] = _units(resource, str(text))
        except QuantityError:
            continue
    return amounts


@dataclass(frozen=True)
class NodeCapacity:
    """`allocatable` and (when `counted`) `requested`; `free` per allocatable resource is
    allocatable - requested, never below 0. An uncounted node's `requested` and `free` are
    unknown (empty), not zero."""

    allocatable: Mapping[str, int]
    requested: Mapping[str, int] = field(default_factory=dict)
    counted: bool = False

    @property
    def free(self) -> dict[str, int]:
        if not self.counted:
            return {}
        return {resource: max(0, amount - self.requested.get(resource, 0))
                for resource, amount in self.allocatable.items()}

    def requested_with_zeros(self) -> dict[str, int]:
        """`requested` with a 0 for every allocatable resource nobody requests."""
        if not self.counted:
            return {}
        return {**dict.fromkeys(self.allocatable, 0), **self.requested}


def node_capacity(*, gpu: int | None, devices: Mapping[str, int | None], cpu_milli: int | None,
                  memory_bytes: int | None, pods: int | None,
                  requested: Mapping[str, object] | None) -> NodeCapacity:
    """A node's capacity from its row and its occupancy (`requested` None: never counted)."""
    allocatable = allocatable_units(gpu=gpu, devices=devices, cpu_milli=cpu_milli,
                                    memory_bytes=memory_bytes, pods=pods)
    if requested is None:
        return NodeCapacity(allocatable)
    return NodeCapacity(allocatable, requested_units(requested), counted=True)


def quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """Scheduler units as Kubernetes quantity strings, by resource name."""
    return {resource: format_units(resource, amount)
            for resource, amount in sorted(amounts.items())}
