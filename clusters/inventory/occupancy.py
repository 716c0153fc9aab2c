"""Node occupancy: what the pods bound to each node request (pure: no database, no cluster).

Render, then apply. `tally` adds the pods of a streamed pod listing up per node as the pages
arrive (each pod's `PodUsage`: its effective request, computed by the gateway with
`clusters.podrequests`, the one rule), keeping one small mapping per node and nothing per
pod but its uid; `occupancy_changes` compares the
result with the stored rows and answers only the rows that differ;
`clusters.inventory.sync.write_occupancy` writes them in bulk.

Amounts are scheduler units (`clusters.podrequests`): cpu in millicores, memory in bytes,
everything else (GPUs, `rlinf.io/*` devices, `pods`) in whole units. Stored and answered
rows carry them as Kubernetes quantity strings (`format_units`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from clusters.k8s import BoundPod, PodUsage
from clusters.podrequests import PODS, format_units

MAX_AMOUNT = 2**63 - 1
"""The largest total a node may carry (Kubernetes' scheduler keeps them as int64)."""
MAX_RESOURCES = 64
"""The most distinct resources one node's pods may request (cpu, memory, pods, GPUs and a
site's few `rlinf.io/*` devices): more is a broken or hostile answer, and would grow the
tally (and the stored row) with every new name."""


class OccupancyProblem(ValueError):
    """The pod listing adds up to something no real cluster reports."""


@dataclass
class Tally:
    """Per node of the listing (by name): the summed requests of its pods and `pods`, their
    count; `pods` in all, and the pods of nodes outside the node listing or listed twice
    (not counted). Besides one small mapping per node it keeps each pod's key (its uid, to
    skip a pod listed twice): the listing's `max_pods` bounds them."""

    nodes: dict[str, dict[str, int]]
    pods: int = 0
    elsewhere: int = 0
    repeated: int = 0
    _seen: set[str] = field(default_factory=set, repr=False)

    def add(self, pod: BoundPod) -> None:
        self.add_usages((pod.usage,))

    def add_usages(self, usages: Iterable[PodUsage]) -> None:
        """Count each pod of `usages` (a page of the listing) on its node, once."""
        seen, nodes, counted_pods = self._seen, self.nodes, 0
        try:
            for key, node, requests in usages:
                if key in seen:
                    self.repeated += 1
                    continue
                seen.add(key)
                counted = nodes.get(node)
                if counted is None:
                    self.elsewhere += 1
                    continue
                for resource, amount in requests.items():
                    counted[resource] = counted.get(resource, 0) + amount
                counted[PODS] = counted.get(PODS, 0) + 1
                counted_pods += 1
                if len(counted) > MAX_RESOURCES:
                    raise OccupancyProblem(f"node {node}: the pods request more than "
                                           f"{MAX_RESOURCES} distinct resources")
        finally:
            self.pods += counted_pods

    def check(self) -> None:
        """Raise `OccupancyProblem` for a node whose totals leave the int64 range."""
        for node, amounts in self.nodes.items():
            for resource, amount in amounts.items():
                if amount > MAX_AMOUNT:
                    raise OccupancyProblem(
                        f"node {node}: the pods' {resource} requests add up beyond 2^63")


def tally(pages: Iterable[Iterable[PodUsage]], *, nodes: Collection[str]) -> Tally:
    """Add the pods of every page (`clusters.k8s.iter_pod_usage_pages`) up per node of
    `nodes` (the cluster's listed nodes)."""
    counted = Tally(nodes={name: {} for name in nodes})
    for page in pages:
        counted.add_usages(page)
    counted.check()
    return counted


def requested_quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """A node's totals as the stored `requested` map: quantity strings, zeros left out."""
    return {resource: format_units(resource, amount)
            for resource, amount in sorted(amounts.items()) if amount}


class StoredOccupancy(NamedTuple):
    """A present node and its stored `requested` (JSON text; None when it has no row)."""

    node_id: int
    requested_text: str | None


def occupancy_changes(
    counted: Tally, stored: Mapping[str, StoredOccupancy]
) -> list[tuple[int, dict[str, str]]]:
    """`(node id, requested)` of every stored node whose counted occupancy differs from its
    row, or that has no row yet; nodes of the tally without a stored node are left out."""
    changes = []
    for name, row in stored.items():
        amounts = counted.nodes.get(name)
        if amounts is None:
            continue
        requested = requested_quantities(amounts)
        if row.requested_text is None or json.loads(row.requested_text) != requested:
            changes.append((row.node_id, requested))
    return changes
