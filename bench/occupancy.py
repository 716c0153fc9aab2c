"""Occupancy pass: 20 clusters x 1,000 nodes x 10 pods per node through the simulator over HTTP.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/occupancy.py [--clusters 20]
        [--nodes 1000] [--pods-per-node 10] [--baseline-clusters 20]

Starts the fleet simulator (a child process) on a fleet from
`clusters.simulator.fleet.generate_fleet` whose clusters carry `pods:` (foreign pods: ten a
node, some asking a GPU), registers every cluster in a scratch database (created and
migrated for this run, dropped at the end) and polls each through
`clusters.inventory.services.poll_cluster` (the real gateway, the real client, over HTTP):

1. the whole first poll (every node new: created with its audit event, every occupancy row
   written),
2. the fleet's first occupancy pass: every node already in the inventory, no occupancy row
   yet (the rows of 1. deleted, unmeasured), so the poll writes every row and no node; this
   is the pass the target names (creating the nodes is `bench/inventory_sync.py`'s),
3. an unchanged re-pass (0 occupancy rows written, no audit event).

For each it prints the fleet's wall time (all clusters, one after the other), the part of it
spent in the occupancy (the one cluster-wide paged pod list, the tally and the write), pods
read, pod-list requests, occupancy rows written and audit events. Then, in the same run, the
baseline: the same occupancy computed with one pod list per node
(`fieldSelector=...,spec.nodeName=<node>`, the simulator answering from its node index like
the API server's), for `--baseline-clusters` clusters; its figure for the whole fleet is
scaled from them when fewer (said so). The baseline goes through the same gateway function
(`clusters.k8s.iter_pod_usage_pages`, the same client, the same decoder) against the same
simulator, and adds up the same tally. The machine's load average is printed beside the
figures, and the CPU seconds each spent (this process, the simulator's process; PostgreSQL's
not counted): wall-clock on a shared machine moves with the other work on it, CPU time less.

Targets (issue 21): the fleet's first occupancy pass under 30 s and >= 10x faster (reading
the pods) than the per-node listing; the unchanged re-pass writes 0 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import scratch_database, setup_django

GPU = "nvidia.com/gpu"


def with_pods(document: dict[str, Any], per_node: int) -> dict[str, Any]:
    """Ten (`per_node`) foreign pods on every node: a little cpu and memory each, and on a
    GPU node the first pods one GPU each (half the node's GPUs)."""
    for cluster in document["clusters"]:
        pods = []
        for node in cluster["nodes"]:
            gpus = int(node["allocatable"].get(GPU, 0)) // 2
            for index in range(per_node):
                requests: dict[str, Any] = {"cpu": "100m", "memory": "256Mi"}
                if index < gpus:
                    requests[GPU] = 1
                pods.append({"name": f"{node['name']}-w{index}", "namespace": "work",
                             "node": node["name"], "requests": requests})
        cluster["pods"] = pods
    return document


def own_cpu() -> float:
    """CPU seconds of this process (all threads), user and system."""
    return time.process_time()


def process_cpu(pid: int) -> float:
    """CPU seconds of another process (the simulator), user and system, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Timer:
    """Wall time and this process's CPU time spent inside the wrapped functions (the poll's
    own, unchanged)."""

    seconds: float = 0.0
    cpu: float = 0.0
    calls: int = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), own_cpu()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.cpu += own_cpu() - cpu
                self.calls += 1
        return timed


@dataclass
class Pass:
    title: str
    wall: float = 0.0
    occupancy: float = 0.0  # reading (the pod list and the tally) and writing the rows
    reading: float = 0.0
    cpu: float = 0.0  # this process's CPU seconds, the whole pass
    reading_cpu: float = 0.0  # of which reading the pods
    simulator_cpu: float = 0.0  # the simulator process's CPU seconds, the whole pass
    pods: int = 0
    pod_pages: int = 0
    written: int = 0
    events: int = 0
    problems: list[str] = field(default_factory=list)
    load: float = 0.0


@contextmanager
def timed_occupancy() -> Iterator[tuple[Timer, Timer, list[int]]]:
    """Time the poll's occupancy steps (reading: list + tally; writing) and count the pages
    of the pod list (each page is one request)."""
    from clusters.inventory import services

    timer, writing, pages = Timer(), Timer(), [0]
    saved = services._read_occupancy, services.write_occupancy, services.iter_pod_usage_pages
    listing = services.iter_pod_usage_pages

    def counted(**kwargs: Any) -> Iterator[Any]:
        for page in listing(**kwargs):
            pages[0] += 1
            yield page

    services._read_occupancy = timer.wrap(services._read_occupancy)
    services.write_occupancy = writing.wrap(services.write_occupancy)
    services.iter_pod_usage_pages = counted
    try:
        yield timer, writing, pages
    finally:
        (services._read_occupancy, services.write_occupancy,
         services.iter_pod_usage_pages) = saved


WHOLE_FIRST = "whole first poll"
FIRST_OCCUPANCY = "first occupancy pass"


def forget_occupancy() -> None:
    """The fleet as it stands before its first occupancy pass: every node in the inventory,
    no occupancy row yet (the rows the whole first poll wrote are deleted, unmeasured)."""
    from clusters.models import Cluster, NodeOccupancy

    NodeOccupancy.objects.all().delete()
    Cluster.objects.update(occupancy_as_of=None, occupancy_pods=0)


def audit_events() -> int:
    from pghistory.models import Events

    return Events.objects.count()


def fleet_pass(title: str, cluster_ids: list[int], simulator_pid: int) -> Pass:
    from clusters.inventory.services import PollOutcome, poll_cluster

    figures = Pass(title)
    events = audit_events()
    with timed_occupancy() as (timer, writing, pages):
        started, cpu, simulator = time.perf_counter(), own_cpu(), process_cpu(simulator_pid)
        for cluster_id in cluster_ids:
            result = poll_cluster(cluster_id=cluster_id)
            if result.outcome != PollOutcome.OK or result.occupancy_problem:
                figures.problems.append(f"{result.cluster}: {result.summary()}")
            figures.pods += result.stats.pods if result.stats else 0
            figures.written += result.stats.occupancy_written if result.stats else 0
        figures.wall = time.perf_counter() - started
        figures.cpu = own_cpu() - cpu
        figures.simulator_cpu = process_cpu(simulator_pid) - simulator
    figures.reading = timer.seconds
    figures.reading_cpu = timer.cpu
    figures.occupancy = timer.seconds + writing.seconds
    figures.pod_pages = pages[0]
    figures.events = audit_events() - events
    figures.load = os.getloadavg()[0]
    return figures


@dataclass
class Baseline:
    clusters: int
    nodes: int
    wall: float
    pods: int
    requests: int
    load: float
    cpu: float
    simulator_cpu: float


def per_node_listing(handle: Any, names: list[str], simulator_pid: int) -> Baseline:
    """The same tally, each node's pods listed on their own (one request per node)."""
    from clusters.inventory import conf
    from clusters.inventory.occupancy import Tally
    from clusters.k8s import iter_pod_usage_pages
    from clusters.models import Node

    nodes = pods = requests = 0
    started, cpu, simulator = time.perf_counter(), own_cpu(), process_cpu(simulator_pid)
    for name in names:
        credentials = handle.credentials(name)
        node_names = list(Node.objects.filter(cluster__name=name, gone=False)
                          .values_list("name", flat=True))
        counted = Tally(nodes={node: {} for node in node_names})
        for node in node_names:
            for page in iter_pod_usage_pages(credentials=credentials, node_name=node,
                                             page_size=conf.page_size()):
                requests += 1
                counted.add_usages(page)
        counted.check()
        nodes += len(node_names)
        pods += counted.pods
    return Baseline(len(names), nodes, time.perf_counter() - started, pods, requests,
                    os.getloadavg()[0], own_cpu() - cpu, process_cpu(simulator_pid) - simulator)


def load_client_modules() -> float:
    """Make the `kubernetes` client load its API classes (and their pydantic models), which
    it imports lazily on first use: about 2 s of CPU once per process, which a worker pays
    at its first poll, not at every pass. Loaded before the timed passes; its time is
    printed apart."""
    from kubernetes import client as k8s

    started = time.perf_counter()
    for name in ("CoreV1Api", "StorageV1Api", "CustomObjectsApi"):
        getattr(k8s, name)
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> None:
    from django.core.management import call_command
    from django.test import override_settings

    from clusters.models import Cluster
    from clusters.simulator.fleet import generate_fleet
    from clusters.simulator.testing import start_simulator_process

    document = with_pods(generate_fleet(clusters=args.clusters, nodes_per_cluster=args.nodes,
                                        seed=11), args.pods_per_node)
    total_pods = sum(len(c["pods"]) for c in document["clusters"])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "fleet.yaml"
        path.write_text(json.dumps(document))  # JSON, a YAML document the simulator reads fast
        del document
        started = time.perf_counter()
        handle = start_simulator_process(path, 0, timeout=1800)
        print(f"simulator up in {time.perf_counter() - started:.0f} s "
              f"({args.clusters} clusters x {args.nodes} nodes, {total_pods:,} pods)", flush=True)
        try:
            with override_settings(RLARK_KUBE_TIMEOUT=60):
                call_command("register_fleet", fleet=str(path), simulator_url=handle.base_url)
                clusters = list(Cluster.objects.order_by("name").values_list("id", "name"))
                ids = [cluster_id for cluster_id, _name in clusters]
                names = [name for _id, name in clusters]
                report_header(args, total_pods)
                print(f"kubernetes client API classes loaded in {load_client_modules():.1f} s "
                      f"(once per process; not in the passes)", flush=True)
                passes = []
                for title in (WHOLE_FIRST, FIRST_OCCUPANCY, "unchanged re-pass"):
                    if title == FIRST_OCCUPANCY:
                        forget_occupancy()
                    figures = fleet_pass(title, ids, handle.process.pid)
                    print_pass(figures)
                    passes.append(figures)
                baseline = per_node_listing(handle, names[:args.baseline_clusters],
                                            handle.process.pid)
                print_comparison(args, passes, baseline)
        finally:
            handle.stop()


def report_header(args: argparse.Namespace, total_pods: int) -> None:
    from django.conf import settings

    print(f"{args.clusters} clusters x {args.nodes} nodes x {args.pods_per_node} pods a node "
          f"= {total_pods:,} pods; page size {settings.RLARK_INVENTORY_PAGE_SIZE}; simulator "
          f"in a child process; {os.cpu_count()} CPUs; load average at start "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)


def print_pass(figures: Pass) -> None:
    print(f"\n{figures.title}: {figures.wall:.1f} s for the fleet's polls "
          f"(nodes, storage classes, Jobs and occupancy), of which occupancy "
          f"{figures.occupancy:.1f} s: reading the pods {figures.reading:.1f} s, writing "
          f"{figures.occupancy - figures.reading:.1f} s (load {figures.load:.1f})")
    print(f"  pods read {figures.pods:,} in {figures.pod_pages} pod-list requests (pages); "
          f"occupancy rows written {figures.written:,}; audit events {figures.events}")
    print(f"  CPU: this process {figures.cpu:.1f} s (reading the pods {figures.reading_cpu:.1f} "
          f"s), the simulator {figures.simulator_cpu:.1f} s")
    for problem in figures.problems:
        print(f"  PROBLEM {problem}")
    sys.stdout.flush()


def print_comparison(args: argparse.Namespace, passes: list[Pass], baseline: Baseline) -> None:
    scale = args.clusters / baseline.clusters
    fleet_wall = baseline.wall * scale
    scaled = "" if scale == 1 else f" (measured on {baseline.clusters} clusters, x{scale:g})"
    fleet_cpu = (baseline.cpu + baseline.simulator_cpu) * scale
    print(f"\nbaseline, one pod list per node: {baseline.wall:.1f} s for {baseline.nodes:,} "
          f"nodes, {baseline.requests:,} requests, {baseline.pods:,} pods (load "
          f"{baseline.load:.1f}); CPU: this process {baseline.cpu:.1f} s, the simulator "
          f"{baseline.simulator_cpu:.1f} s; the fleet: {fleet_wall:.1f} s{scaled}")
    print("\n                         reading s  occupancy s  whole poll s  pod-list requests"
          "    rows  CPU s (bench + simulator)")
    for figures in passes:
        print(f"  {figures.title:22s} {figures.reading:9.1f}  {figures.occupancy:11.1f}  "
              f"{figures.wall:12.1f}  {figures.pod_pages:17,}  {figures.written:>6,}  "
              f"{figures.cpu:.1f} + {figures.simulator_cpu:.1f} (reading: "
              f"{figures.reading_cpu:.1f} + simulator)")
    print(f"  {'per-node listing':22s} {fleet_wall:9.1f}  {'':11s}  {'':12s}  "
          f"{int(baseline.requests * scale):17,}  {'':>6s}  "
          f"{baseline.cpu * scale:.1f} + {baseline.simulator_cpu * scale:.1f}")
    whole, first, again = passes
    print(f"\ntarget: the fleet's first occupancy pass (nodes in the inventory, every row new) "
          f"under 30 s: {first.wall:.1f} s for the whole poll, of which occupancy "
          f"{first.occupancy:.1f} s ({'met' if first.wall < 30 else 'MISSED'})")
    print(f"  the whole first poll (every node new, with its audit event): {whole.wall:.1f} s, "
          f"of which occupancy {whole.occupancy:.1f} s "
          f"({'under' if whole.wall < 30 else 'over'} 30 s)")
    print(f"target: the unchanged re-pass writes 0 rows: {again.written} rows, {again.events} "
          f"audit events in {again.wall:.1f} s ({'met' if again.written == 0 else 'MISSED'})")
    for figures in passes:
        ratio = fleet_wall / figures.reading if figures.reading else float("inf")
        print(f"target: >= 10x the per-node listing ({figures.title}, reading the pods: "
              f"{figures.reading:.1f} s vs {fleet_wall:.1f} s) = {ratio:.1f}x "
              f"({'met' if ratio >= 10 else 'MISSED'})")
        spent = figures.reading_cpu + figures.simulator_cpu
        print(f"  in CPU seconds (bench + simulator; the simulator's whole pass counted): "
              f"{spent:.1f} s vs {fleet_cpu:.1f} s = "
              f"{fleet_cpu / spent if spent else float('inf'):.1f}x")
    print(f"load average now {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--baseline-clusters", type=int, default=20,
                        help="clusters listed per node for the baseline (scaled to the fleet)")
    args = parser.parse_args()
    args.baseline_clusters = max(1, min(args.baseline_clusters, args.clusters))
    setup_django()
    with scratch_database(f"rlark_bench_occupancy_{os.getpid()}"):
        run(args)


if __name__ == "__main__":
    main()
