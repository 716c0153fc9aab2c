"""Value types describing the inventory as the rules see it (no database, no Django).

`jobs.core.spec` re-exports them; the findings engine and the renderer consume them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from clusters.kueue import ADMISSION_KUEUE, KueueView

ConditionClusters = tuple[tuple[tuple[str, str], frozenset[str]], ...]

# The extended resources the inventory records and a Job's containers ask for: GPUs, and the
# site's devices, every resource named rlinf.io/*.
GPU_RESOURCE = "nvidia.com/gpu"
DEVICE_PREFIX = "rlinf.io/"


def confining_conditions(reached: ConditionClusters, cluster: str) -> tuple[tuple[str, str], ...]:
    """Single conditions whose own matches all lie in `cluster` (and are non-empty)."""
    return tuple(c for c, clusters in reached if clusters == frozenset({cluster}))


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
    condition_clusters: ConditionClusters = ()

    @property
    def count(self) -> int:
        return len(self.nodes)

    @property
    def clusters(self) -> frozenset[str]:
        return frozenset(n.cluster for n in self.nodes)

    def foreign_nodes(self, cluster: str) -> tuple[MatchedNode, ...]:
        return tuple(n for n in self.nodes if n.cluster != cluster)

    def foreign_count(self, cluster: str) -> int:
        return sum(1 for n in self.nodes if n.cluster != cluster)

    def listed_nodes(self, limit: int) -> list[dict[str, Any]]:
        """The first `limit` matches as findings and answers show them."""
        return [node_ref(n) for n in self.nodes[:limit]]

    def listed_foreign_nodes(self, cluster: str, limit: int) -> list[dict[str, Any]]:
        """The first `limit` matches outside `cluster`, as findings and answers show them."""
        return [node_ref(n) for n in self.foreign_nodes(cluster)[:limit]]

    def confining_conditions(self, cluster: str) -> tuple[tuple[str, str], ...]:
        return confining_conditions(self.condition_clusters, cluster)

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

    def per_cluster(self) -> tuple[ClusterCount, ...]:
        """How many matches (and how many Ready) lie in each cluster, by cluster name."""
        counts: dict[str, list[int]] = {}
        for node in self.nodes:
            entry = counts.setdefault(node.cluster, [0, 0])
            entry[0] += 1
            entry[1] += node.ready
        return tuple(ClusterCount(c, n, r) for c, (n, r) in sorted(counts.items()))

    def summary(self) -> MatchSummary:
        """What the rules need of the match without its node list (kept with a snapshot)."""
        return MatchSummary(
            per_cluster=self.per_cluster(), gpu_max_value=self.gpu_max(),
            devices_max_value=tuple(self.devices_max().items()),
            condition_clusters=self.condition_clusters,
        )


@dataclass(frozen=True)
class ClusterCount:
    """How many matches lie in one cluster, and how many of them are Ready."""

    cluster: str
    count: int
    ready: int


@dataclass(frozen=True)
class MatchSummary:
    """A match reduced to counts per cluster and capacity minima: its size does not grow with
    the fleet. `SelectorMatch.summary()` computes one; a verification stores it with its
    snapshot, so judging the snapshot never reads its node list."""

    per_cluster: tuple[ClusterCount, ...]
    gpu_max_value: int | None
    devices_max_value: tuple[tuple[str, int], ...]
    condition_clusters: ConditionClusters = ()

    @property
    def count(self) -> int:
        return sum(c.count for c in self.per_cluster)

    @property
    def clusters(self) -> frozenset[str]:
        return frozenset(c.cluster for c in self.per_cluster)

    def foreign_count(self, cluster: str) -> int:
        return sum(c.count for c in self.per_cluster if c.cluster != cluster)

    def confining_conditions(self, cluster: str) -> tuple[tuple[str, str], ...]:
        return confining_conditions(self.condition_clusters, cluster)

    def gpu_max(self) -> int | None:
        return self.gpu_max_value

    def devices_max(self) -> dict[str, int]:
        return dict(self.devices_max_value)

    def as_dict(self) -> dict[str, Any]:
        """The stored and answered form (no condition clusters: those are read live)."""
        return {
            "count": self.count,
            "per_cluster": [asdict(c) for c in self.per_cluster],
            "gpu_max": self.gpu_max_value,
            "devices_max": self.devices_max(),
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any],
        condition_clusters: ConditionClusters = (),
    ) -> MatchSummary:
        return cls(
            per_cluster=tuple(
                ClusterCount(str(c["cluster"]), int(c["count"]), int(c["ready"]))
                for c in data.get("per_cluster", [])
            ),
            gpu_max_value=data.get("gpu_max"),
            devices_max_value=tuple(sorted(
                (str(k), int(v)) for k, v in (data.get("devices_max") or {}).items()
            )),
            condition_clusters=condition_clusters,
        )


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
    # Admission (SPEC 15, `clusters.kueue`): "none" or "kueue"; with Kueue, the team ->
    # LocalQueue map (sorted pairs) and the queues its last poll read (None: never read).
    admission: str = "none"
    kueue_queues: tuple[tuple[str, str], ...] = ()
    kueue: KueueView | None = None

    @property
    def uses_kueue(self) -> bool:
        return self.admission == ADMISSION_KUEUE

    def kueue_queue(self, team: object) -> str | None:
        """The team's LocalQueue on this cluster (None: Kueue is off, or the team has none)."""
        if not self.uses_kueue:
            return None
        return next((queue for slug, queue in self.kueue_queues if slug == team), None)


def node_ref(node: MatchedNode) -> dict[str, Any]:
    """A matched node as the API, the verification snapshot and the findings show it."""
    return {"cluster": node.cluster, "name": node.name, "namespace": node.namespace}


def selector_key(selector: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(selector.items()))

