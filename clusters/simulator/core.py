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
        return sum(reconcile_cluster(cluster) for cluster in self.clusters.values())

    def reset(self) -> None:
        """Every cluster back to its fleet-file nodes and faults, with no Jobs and empty logs."""
        for cluster in self.clusters.values():
            cluster.reset()
