"""Inventory sync throughput: one large cluster polled through the simulator.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/inventory_sync.py [--nodes 10000]
        [--page-size 500] [--changed 100] [--in-process]

Starts the fleet simulator (a child process by default, so server and poller do not
share one interpreter; `--in-process` runs it in threads of this process) on a one-cluster
fleet from `clusters.simulator.fleet.generate_fleet`, registers the cluster in a scratch
database (created and migrated for this run, dropped at the end) and times
`clusters.inventory.services.poll_cluster` — the real gateway over HTTP — for:

1. the first sync (every node new; each run polls a fresh cluster row),
2. an unchanged re-poll (no node row may be written),
3. a re-poll after `--changed` nodes got a new label through the control endpoint.

For each it prints the median wall time of `--repeat` runs (and the best and the mean: a
full garbage collection lands in some runs only, which the median hides), how much of it
went into the gateway listing the nodes over HTTP (the floor of any poll, the same for
every scenario) and everything else, nodes/s, database queries (per page of
`--page-size` nodes), time spent inside the database and in garbage collection (with the
number of full collections), and audit events written. The machine's load average is
printed too: the figures are wall-clock.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCRATCH_NAME = f"rlark_bench_inventory_sync_{os.getpid()}"
OLDEST_GENERATION = 2


@dataclass
class QueryLog:
    """Counts queries and the time spent in them (a `connection.execute_wrapper`)."""

    count: int = 0
    seconds: float = 0.0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                 context: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started
            self.count += 1


class GcLog:
    """Counts full (oldest generation) garbage collections and the time spent collecting.

    A poll that leaves many tracked objects alive makes the interpreter walk the whole
    heap, which in a Django process costs more than the rest of an unchanged re-poll.
    """

    def __init__(self) -> None:
        self.full = 0
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._started
        self.full += info["generation"] == OLDEST_GENERATION

    @contextmanager
    def watching(self) -> Iterator[GcLog]:
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)


@dataclass(frozen=True)
class Figures:
    """One scenario, run `len(walls)` times: every figure but the wall time is the last run's."""

    label: str
    walls: list[float]
    listings: list[float]
    collections: list[GcLog]
    nodes: int
    pages: int
    queries: int
    db_seconds: float
    events: int

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def beyond_listing(self) -> float:
        """Median time of the poll's own work: the wall time minus the gateway's listing."""
        return statistics.median(w - x for w, x in zip(self.walls, self.listings, strict=True))

    def lines(self) -> list[str]:
        per_page = self.queries / self.pages if self.pages else float("nan")
        runs = len(self.walls)
        return [
            f"{self.label}  ({runs} run{'s' if runs > 1 else ''})",
            f"  wall time         {self.wall:8.3f} s   (best {min(self.walls):.3f} s, "
            f"mean {statistics.mean(self.walls):.3f} s)",
            f"  listing nodes     {statistics.median(self.listings):8.3f} s   (gateway, HTTP)",
            f"  everything else   {self.beyond_listing:8.3f} s",
            f"  nodes/s           {self.nodes / self.wall:8.0f}",
            f"  pages             {self.pages:8d}",
            f"  DB queries        {self.queries:8d}  ({per_page:.2f} per page)",
            f"  time in DB        {self.db_seconds:8.3f} s",
            f"  time in GC        {statistics.median(c.seconds for c in self.collections):8.3f} s"
            f"   ({sum(c.full for c in self.collections)} full collections in {runs} runs)",
            f"  audit events      {self.events:8d}",
        ]


@contextmanager
def scratch_database() -> Iterator[None]:
    """A freshly migrated database for this run only; dropped afterwards."""
    from django.db import connection

    original = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"]["NAME"] = SCRATCH_NAME
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)


@contextmanager
def simulator(document: dict[str, Any], *, in_process: bool) -> Iterator[Any]:
    from clusters.simulator.testing import run_simulator, start_simulator_process

    if in_process:
        with run_simulator(document) as handle:
            yield handle
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fleet.yaml"
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        process = start_simulator_process(path, timeout=180)
        try:
            yield process
        finally:
            process.stop()


def audit_event_count() -> int:
    from clusters.models import Node

    return Node.pgh_event_model.objects.count()  # type: ignore[attr-defined]


class ListingClock:
    """Times the gateway's node listing inside a poll (wraps the real function)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, iterate: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def timed(**kwargs: Any) -> Iterator[Any]:
            pages = iterate(**kwargs)
            while True:
                started = time.perf_counter()
                try:
                    page = next(pages)
                except StopIteration:
                    return
                finally:
                    self.seconds += time.perf_counter() - started
                yield page

        return timed


@dataclass(frozen=True)
class Run:
    wall: float
    listing: float
    result: Any
    queries: QueryLog
    collections: GcLog
    events: int


def poll_once(cluster_id: int) -> Run:
    from django.db import connection

    from clusters.inventory import services

    events_before = audit_event_count()
    log, clock, collections = QueryLog(), ListingClock(), GcLog()
    real_listing = services.iter_node_pages
    services.iter_node_pages = clock.wrap(real_listing)  # type: ignore[assignment]
    try:
        with connection.execute_wrapper(log), collections.watching():
            started = time.perf_counter()
            result = services.poll_cluster(cluster_id=cluster_id)
            wall = time.perf_counter() - started
    finally:
        services.iter_node_pages = real_listing
    if not result.ok:
        raise SystemExit(f"poll failed: {result.summary()}")
    events = audit_event_count() - events_before
    return Run(wall, clock.seconds, result, log, collections, events)


def measure(label: str, cluster_ids: list[int]) -> Figures:
    """Poll each cluster once (one run per cluster), timing each poll."""
    runs = [poll_once(cluster_id) for cluster_id in cluster_ids]
    last = runs[-1]
    return Figures(
        label,
        walls=[run.wall for run in runs],
        listings=[run.listing for run in runs],
        collections=[run.collections for run in runs],
        nodes=last.result.stats.nodes,
        pages=last.result.pages,
        queries=last.queries.count,
        db_seconds=last.queries.seconds,
        events=last.events,
    )


def register_copies(url: str, spec: dict[str, Any], copies: int) -> list[int]:
    """`copies` cluster rows for one simulated cluster, so every first sync starts empty."""
    from clusters.inventory.services import ClusterRegistration, cluster_register

    ids = []
    for index in range(copies):
        cluster, _ = cluster_register(
            registration=ClusterRegistration(
                name=f"{spec['name']}-copy-{index}", namespace=spec["namespace"], api_url=url,
                token=spec["token"], verify_tls=False,
            )
        )
        ids.append(cluster.id)
    return ids


def run(arguments: argparse.Namespace) -> list[Figures]:
    from django.test.utils import override_settings

    from clusters.simulator.fleet import generate_fleet

    document = generate_fleet(clusters=1, nodes_per_cluster=arguments.nodes, seed=7)
    spec = document["clusters"][0]
    runs = arguments.repeat
    with simulator(document, in_process=arguments.in_process) as handle, override_settings(
        RLARK_INVENTORY_PAGE_SIZE=arguments.page_size
    ):
        url = handle.cluster_url(spec["name"])
        clusters = register_copies(url, spec, runs)
        figures = [measure("first sync (all nodes new)", clusters)]
        figures.append(measure("unchanged re-poll", [clusters[0]] * runs))
        for node in spec["nodes"][: arguments.changed]:
            handle.patch_node(spec["name"], node["name"], labels={"rlinf.io/bench": "changed"})
        figures.append(
            measure(f"re-poll with {arguments.changed} relabelled nodes", clusters[:1])
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario (median)")
    parser.add_argument("--in-process", action="store_true")
    arguments = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    os.environ.setdefault("RLARK_DEV_SECRETS", "1")
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("Set DATABASE_URL (and REDIS_URL) to a PostgreSQL server to use.")
    import django

    django.setup()
    with scratch_database():  # the figures are printed before the scratch database goes
        report(arguments, run(arguments))


def report(arguments: argparse.Namespace, figures: list[Figures]) -> None:
    simulator_where = "this process" if arguments.in_process else "a child process"
    print(f"inventory sync: 1 cluster, {arguments.nodes} nodes, page size "
          f"{arguments.page_size}, simulator in {simulator_where}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    for figure in figures:
        print("\n".join(figure.lines()))
    first, unchanged = figures[0], figures[1]
    print(f"unchanged re-poll is {first.wall / unchanged.wall:.1f}x faster than the first sync "
          f"(medians; best runs {min(first.walls) / min(unchanged.walls):.1f}x, "
          f"means {statistics.mean(first.walls) / statistics.mean(unchanged.walls):.1f}x)")
    print(f"beyond the gateway's listing, the unchanged re-poll is "
          f"{first.beyond_listing / unchanged.beyond_listing:.1f}x faster")


if __name__ == "__main__":
    main()
