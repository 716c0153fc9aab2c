"""The simulator without its HTTP server: every cluster of a fleet plus the controller pass."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from clusters.simulator.controller import reconcile_cluster
from clusters.simulator.fleet import Fleet
from clusters.simulator.gpumetrics import render as render_gpu_metrics
from clusters.simulator.objects import set_clock_offset
from clusters.simulator.progress import DEFAULT_STEP_SECONDS
from clusters.simulator.scheduler import Candidate, Usage, reserve
from clusters.simulator.schema import JobSchema
from clusters.simulator.state import ClusterState


class StateFileError(ValueError):
    """A `--state` file that cannot be read back."""


class Simulator:
    """All simulated clusters of one fleet.

    `stopping` is set when the server shuts down, so that requests held back by
    injected latency or timeouts are released at once. `scheduling` is held by whatever
    decides on capacity (a controller pass, adding a foreign pod), so that two of them never
    count the same free capacity.
    """

    def __init__(self, fleet: Fleet, *, crd_path: Path | None = None,
                 step_seconds: float = DEFAULT_STEP_SECONDS) -> None:
        self.fleet = fleet
        self.clusters = {spec.name: ClusterState(spec, step_seconds=step_seconds)
                         for spec in fleet.clusters}
        self.job_schema = JobSchema(crd_path)
        self.stopping = threading.Event()
        self.scheduling = threading.RLock()

    def usage(self) -> Usage:
        """What the bound pods that have not ended request on each node of the fleet."""
        usage: Usage = {}
        for cluster in self.clusters.values():
            for key, request in cluster.capacity_holders():
                reserve(usage, key, request)
        return usage

    def gpu_metrics(self, cluster: str) -> str:
        """The cluster's DCGM-like `/metrics` text: its nodes' GPUs and the running pods
        that hold them (a pod of another cluster's Job, through a network domain, included)."""
        holders = [holder for state in self.clusters.values()
                   for node_cluster, holder in state.gpu_holders() if node_cluster == cluster]
        return render_gpu_metrics(cluster, self.clusters[cluster].node_specs(), holders)

    def tick(self) -> int:
        """Run one scheduler and controller pass over every cluster; how many Jobs changed."""
        with self.scheduling:
            candidates = {
                name: sorted((Candidate(name, node) for node in cluster.node_specs()),
                             key=lambda c: c.node.name)
                for name, cluster in self.clusters.items()
            }
            usage = self.usage()
            changed = 0
            for name, cluster in self.clusters.items():
                domain_candidates = {
                    domain: sorted((c for member in members for c in candidates.get(member, [])),
                                   key=lambda c: (c.node.name, c.cluster))
                    for domain, members in self.fleet.network_domains
                    if name in members
                }
                changed += reconcile_cluster(cluster, candidates=candidates[name],
                                             domain_candidates=domain_candidates, usage=usage)
            return changed

    def reset(self) -> None:
        """Every cluster back to its fleet-file nodes and faults, with no Jobs and empty logs;
        the clock back to the real time."""
        set_clock_offset(0)
        for cluster in self.clusters.values():
            cluster.reset()

    def version(self) -> tuple[int, ...]:
        """Changes whenever anything in any cluster changed."""
        return tuple(cluster.version() for cluster in self.clusters.values())

    def save_jobs(self, path: Path) -> None:
        """Write every cluster's Jobs to `path` (atomically: a temporary file, then a rename)."""
        saved: dict[str, Any] = {
            name: cluster.export_jobs() for name, cluster in self.clusters.items()
        }
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"clusters": saved}))
        temporary.replace(path)

    def load_jobs(self, path: Path) -> int:
        """Bring back the Jobs `save_jobs` wrote (clusters no longer in the fleet are skipped);
        how many came back. A missing file is an empty state."""
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as error:
            raise StateFileError(f"{path}: {error}") from error
        clusters = saved.get("clusters") if isinstance(saved, dict) else None
        if not isinstance(clusters, dict):
            raise StateFileError(f"{path} is not a simulator state file")
        return sum(
            self.clusters[name].import_jobs(jobs)
            for name, jobs in clusters.items()
            if name in self.clusters and isinstance(jobs, dict)
        )
