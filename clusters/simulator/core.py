"""The simulator without its HTTP server: every cluster of a fleet plus the controller pass."""

from __future__ import annotations

import threading
from pathlib import Path

from clusters.simulator.controller import reconcile_cluster
from clusters.simulator.fleet import Fleet
from clusters.simulator.schema import JobSchema
from clusters.simulator.state import ClusterState


class Simulator:
    """All simulated clusters of one fleet.

    `stopping` is set when the server shuts down, so that requests held back by
    injected latency or timeouts are released at once.
    """

    def __init__(self, fleet: Fleet, *, crd_path: Path | None = None) -> None:
        self.fleet = fleet
        self.clusters = {spec.name: ClusterState(spec) for spec in fleet.clusters}
        self.job_schema = JobSchema(crd_path)
        self.stopping = threading.Event()

    def tick(self) -> int:
        """Run one controller pass over every cluster; returns how many Jobs changed."""
        nodes = {name: cluster.node_specs() for name, cluster in self.clusters.items()}
        changed = 0
        for name, cluster in self.clusters.items():
            domain_nodes = {
                domain: [node for member in members for node in nodes.get(member, [])]
                for domain, members in self.fleet.network_domains
                if name in members
            }
            changed += reconcile_cluster(cluster, domain_nodes=domain_nodes)
        return changed

    def reset(self) -> None:
        """Every cluster back to its fleet-file nodes and faults, with no Jobs and empty logs."""
        for cluster in self.clusters.values():
            cluster.reset()
