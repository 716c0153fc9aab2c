"""Value types describing the inventory as the rules see it (no database, no Django).

`jobs.core.spec` re-exports them; the findings engine and the renderer consume them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class MatchedNode(NamedTuple):
    """One node a selector matched. A named tuple, not a frozen dataclass: a broad selector
    builds thousands of them per keystroke, at a third of a dataclass's cost each."""

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

def selector_key(selector: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(selector.items()))

