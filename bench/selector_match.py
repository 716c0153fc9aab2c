"""Selector-match latency on a large synthetic inventory, against a plain in-memory scan.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/selector_match.py [--clusters 50]
        [--nodes 1000] [--rounds 5] [--seed 0]

Creates a scratch database (migrated like the real one), loads the fleet from
`clusters.simulator.fleet.generate_fleet` in bulk, then times `match_selector` +
`describe_match` (the match the findings engine and a verification's snapshot read, and the
body of `POST /api/v1/selector-matches/`, which the endpoint computes with `describe_selector`
without reading every match; tests/clusters/test_matching.py compares the two) over a mix of
selectors of different selectivity, side by side with a Python scan of the same rows held in
memory that builds the same result. Both results are compared for every selector.

Then the pre-flight (SPEC 15): every node gets cpu/memory/pods allocatable and an occupancy
row (a third of the nodes with GPUs in use), and a 3-role job per cluster (Header on one
node, Rollout on a pool, Environment on a rack; 8, 0 or 4 GPUs a worker, so that verdicts
differ) is judged by `jobs.core.findings.capacity.preflight` over what a check reads for it
(a wizard step-2 or step-4 request: the matched nodes with their free capacity, then the
verdict), both ways side by side in one run, alternating job by job:
- baseline, the path before `matches_capacity`: `match_many` (one or two queries per
  selector) and `matched_capacity` (one query), kept callable here;
- new, the path `jobs.context.check_context_for` takes: `matches_capacity`, one query for
  the matches and the capacity.
Both answers (the matches, the capacity read and the whole `capacity` body) are compared for
every job and round. Printed: wall p50/p95 (target p95 < 25 ms), this process's CPU time and
the PostgreSQL backend's (from /proc) per job, and the load average before and after.
The scratch database is dropped at the end.
Without DATABASE_URL, embedded PostgreSQL is used.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCRATCH_NAME = f"rlark_bench_selector_match_{os.getpid()}"


@dataclass(frozen=True)
class Row:
    cluster: str
    name: str
    namespace: str
    labels: dict[str, str]
    gpu: int | None
    devices: dict[str, int | None]
    ready: bool


@contextmanager
def scratch_database() -> Iterator[None]:
    """A freshly migrated database for this run only; dropped afterwards."""
    from django.db import connection

    connection.settings_dict["TEST"]["NAME"] = SCRATCH_NAME
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)


def _count(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def load_inventory(document: dict[str, Any]) -> list[Row]:
    """Insert clusters and nodes in bulk; return the same rows for the in-memory scan."""
    from django.db import connection

    from clusters.models import Cluster, Node

    rows: list[Row] = []
    for spec in document["clusters"]:
        cluster = Cluster.objects.create(
            name=spec["name"], namespace=spec["namespace"], api_url=f"http://127.0.0.1:1/{spec['name']}",
            generation=1,
        )
        nodes = []
        for node in spec["nodes"]:
            alloc = node.get("allocatable", {})
            row = Row(
                cluster=cluster.name, name=node["name"], namespace=cluster.namespace,
                labels=dict(node["labels"]), gpu=_count(alloc.get("nvidia.com/gpu")),
                devices={k: _count(v) for k, v in alloc.items() if k.startswith("rlinf.io/")},
                ready=bool(node.get("ready", True)),
            )
            rows.append(row)
            nodes.append(Node(
                cluster=cluster, name=row.name, namespace=row.namespace, labels=row.labels,
                gpu=row.gpu, devices=row.devices, ready=row.ready,
                cpu_milli=96_000, memory_bytes=1 << 40, pods=110,
            ))
        Node.objects.bulk_create(nodes, batch_size=2000)
        load_occupancy(cluster, nodes)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE clusters_node")
        cursor.execute("ANALYZE clusters_cluster")
        cursor.execute("VACUUM ANALYZE clusters_clusterlabel")
    rows.sort(key=lambda r: (r.cluster, r.name))
    return rows


def load_occupancy(cluster: Any, nodes: list[Any]) -> None:
    """An occupancy row per node (every third node with 4 GPUs and 32 CPUs in use)."""
    from django.utils import timezone

    from clusters.models import ClusterState, NodeOccupancy

    now = timezone.now()
    NodeOccupancy.objects.bulk_create([
        NodeOccupancy(node=node, cluster=cluster, changed_at=now,
                      requested=({"nvidia.com/gpu": "4", "cpu": "32", "pods": "3"} if i % 3 == 0
                                 else {"pods": "1"}))
        for i, node in enumerate(nodes)], batch_size=2000)
    type(cluster).objects.filter(pk=cluster.pk).update(
        occupancy_as_of=now, state=ClusterState.OK)


def preflight_jobs(document: dict[str, Any]) -> list[Any]:
    """A 3-role job spec per cluster: Header on one node, Rollout on a pool, Environment on
    a rack (16 CPUs and 64Gi a worker; 8, 0 or 4 GPUs, by cluster)."""
    from jobs.core.spec import JobSpec, ResourcePair, RoleSpec

    jobs = []
    for i, spec in enumerate(document["clusters"]):
        name = spec["name"]
        labels = spec["nodes"][(i * 37) % len(spec["nodes"])]["labels"]
        zone = ("topology.rlinf.io/cluster", name)
        selectors = {
            "Actor": (("kubernetes.io/hostname", labels["kubernetes.io/hostname"]), zone),
            "Rollout": (("rlinf.io/pool", labels["rlinf.io/pool"]), zone),
            "Environment": (("rlinf.io/rack", labels["rlinf.io/rack"]), zone),
        }
        jobs.append(JobSpec(team="t", name=f"job-{i}", task_type="rl", header_role="Actor",
                            roles=tuple(RoleSpec(name=role, cluster=name, selector=selector,
                                                 gpus=(8, 0, 4)[i % 3],
                                                 cpu=ResourcePair(request="16"),
                                                 memory=ResourcePair(request="64Gi"))
                                        for role, selector in selectors.items())))
    return jobs


@dataclass(frozen=True)
class Judged:
    """What one way of judging a job read and answered (compared between the two ways)."""

    matches: Any
    capacity: Any
    occupancy: Any
    body: dict[str, Any]


def _selectors(spec: Any) -> list[dict[str, str]]:
    return [dict(role.selector) for role in spec.roles]


def preflight_baseline(spec: Any) -> Judged:
    """The path before `matches_capacity`: the matches (`match_many`, as the context had
    them), the matched nodes' capacity in one more query, the verdict."""
    from clusters.inventory.selectors import matched_capacity
    from clusters.matching import match_many
    from jobs.core.findings.capacity import preflight
    from jobs.core.spec import CheckContext

    selectors = _selectors(spec)
    matches = match_many(selectors)
    capacity = matched_capacity(selectors)
    ctx = CheckContext(matches=matches, capacity=capacity.nodes, occupancy=capacity.occupancy)
    return Judged(matches, capacity.nodes, capacity.occupancy, preflight(spec, ctx))


def preflight_new(spec: Any) -> Judged:
    """What `check_context_for` reads now: the matches and their capacity in one query, then
    the verdict."""
    from clusters.inventory.selectors import matches_capacity
    from jobs.core.findings.capacity import preflight
    from jobs.core.spec import CheckContext

    read = matches_capacity(_selectors(spec))
    ctx = CheckContext(matches=dict(read.matches), capacity=read.capacity.nodes,
                       occupancy=read.capacity.occupancy)
    return Judged(ctx.matches, ctx.capacity, ctx.occupancy, preflight(spec, ctx))


def _backend_cpu_reader() -> Callable[[], float | None]:
    """CPU seconds (user + system) of this connection's PostgreSQL backend, from /proc (None
    when the server is not on this machine or not readable)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    stat = Path(f"/proc/{pid}/stat")

    def read() -> float | None:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    return read


@dataclass
class Figures:
    wall: list[float]
    cpu: list[float]
    backend: list[float | None]

    def line(self, label: str) -> str:
        known = [b for b in self.backend if b is not None]
        backend = (f"{statistics.fmean(known):.2f} ms" if len(known) == len(self.backend)
                   else "n/a")
        return (f"{label:9} wall p50 {percentile(self.wall, .5):6.2f} ms, p95 "
                f"{percentile(self.wall, .95):6.2f} ms; CPU a job: this process p50 "
                f"{percentile(self.cpu, .5):5.2f} ms (mean {statistics.fmean(self.cpu):5.2f}), "
                f"PostgreSQL backend mean {backend}")


def _measured(func: Callable[[], Judged], backend_cpu: Callable[[], float | None],
              figures: Figures | None) -> Judged:
    before_backend, before_cpu = backend_cpu(), time.process_time()
    ms, result = timed(func)
    cpu_ms = (time.process_time() - before_cpu) * 1000
    after_backend = backend_cpu()
    if figures is not None:
        figures.wall.append(ms)
        figures.cpu.append(cpu_ms)
        figures.backend.append(None if before_backend is None or after_backend is None
                               else (after_backend - before_backend) * 1000)
    return result


def run_preflight(document: dict[str, Any], rounds: int) -> None:
    jobs = preflight_jobs(document)
    backend_cpu = _backend_cpu_reader()
    ways = {"baseline": (preflight_baseline, Figures([], [], [])),
            "new": (preflight_new, Figures([], [], []))}
    verdicts: dict[str, int] = {}
    workers = 0
    load_before = os.getloadavg()
    for round_index in range(rounds + 1):
        for index, spec in enumerate(jobs):
            order = list(ways.items()) if (index + round_index) % 2 == 0 else (
                list(reversed(ways.items())))
            judged = {name: _measured(partial(func, spec), backend_cpu,
                                      figures if round_index else None)
                      for name, (func, figures) in order}
            if judged["baseline"] != judged["new"]:
                raise SystemExit(f"the two ways answer differently for {spec.name}")
            if round_index == 0:
                continue  # warm-up round
            body = judged["new"].body
            verdicts[body["verdict"]] = verdicts.get(body["verdict"], 0) + 1
            workers += sum(r["replicas"] for r in body["roles"])
    load_after = os.getloadavg()
    print(f"pre-flight: {len(jobs)} 3-role jobs x {rounds} rounds (after one warm-up round), "
          f"{workers / max(1, rounds * len(jobs)):.0f} workers a job on average; verdicts "
          f"{verdicts}; both ways answered the same for every job")
    print("pre-flight with its matches (what a wizard step-2/4 request reads, then the "
          "verdict), target p95 < 25 ms:")
    for name, (_func, figures) in ways.items():
        print("  " + figures.line(name))
    new_p95 = percentile(ways["new"][1].wall, .95)
    print(f"  load average before {'/'.join(f'{x:.1f}' for x in load_before)}, after "
          f"{'/'.join(f'{x:.1f}' for x in load_after)} ({os.cpu_count()} CPUs); target "
          f"{'met' if new_p95 < 25 else 'NOT met'} (new p95 {new_p95:.2f} ms)")


def selector_mix(document: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """(class, selector) pairs from narrow (one node) to broad (a quarter of the fleet)."""
    clusters = document["clusters"]
    mix: list[tuple[str, dict[str, str]]] = []
    for i, spec in enumerate(clusters):
        name = spec["name"]
        node = spec["nodes"][(i * 37) % len(spec["nodes"])]
        labels = node["labels"]
        host = labels["kubernetes.io/hostname"]
        mix += [
            ("1 node: hostname", {"kubernetes.io/hostname": host}),
            ("1 node: hostname+cluster", {"kubernetes.io/hostname": host,
                                          "topology.rlinf.io/cluster": name}),
            ("~16: cluster+rack", {"topology.rlinf.io/cluster": name,
                                   "rlinf.io/rack": labels["rlinf.io/rack"]}),
            ("~125: cluster+pool", {"topology.rlinf.io/cluster": name,
                                    "rlinf.io/pool": labels["rlinf.io/pool"]}),
            ("~125: pool", {"rlinf.io/pool": labels["rlinf.io/pool"]}),
            ("~250: cluster+zone", {"topology.rlinf.io/cluster": name,
                                    "rlinf.io/zone": labels["rlinf.io/zone"]}),
            ("0: no such label", {"rlinf.io/pool": f"{name}-missing"}),
        ]
        if i % 5 == 0:
            mix += [
                ("~1000: cluster", {"topology.rlinf.io/cluster": name}),
                ("~800 cross: rack", {"rlinf.io/rack": labels["rlinf.io/rack"]}),
                ("~2900 cross: zone+gpu", {"rlinf.io/zone": labels["rlinf.io/zone"],
                                           "rlinf.io/gpu-model": "a100"}),
            ]
        if i % 10 == 0:
            mix += [("~12500 cross: zone", {"rlinf.io/zone": labels["rlinf.io/zone"]})]
    return mix


def scan(rows: list[Row], selector: Mapping[str, str]) -> Any:
    """The same SelectorMatch, by looking at every row in memory."""
    from clusters.types import MatchedNode, SelectorMatch

    if not selector:
        return SelectorMatch(nodes=())
    conditions = sorted(selector.items())
    per_condition: list[set[str]] = [set() for _ in conditions]
    nodes = []
    for row in rows:
        labels = row.labels
        hits = [labels.get(k) == v for k, v in conditions]
        for index, hit in enumerate(hits):
            if hit:
                per_condition[index].add(row.cluster)
        if all(hits):
            nodes.append(MatchedNode(
                cluster=row.cluster, name=row.name, namespace=row.namespace, gpu=row.gpu,
                devices=tuple(sorted((k, v) for k, v in row.devices.items() if v is not None)),
                ready=row.ready,
            ))
    return SelectorMatch(
        nodes=tuple(nodes),
        condition_clusters=tuple(
            (cond, frozenset(found)) for cond, found in zip(conditions, per_condition, strict=True)
        ),
    )


def via_api(selector: dict[str, str], cluster: str) -> tuple[Any, dict[str, Any]]:
    """What the selector-matches endpoint runs."""
    from clusters.matching import describe_match, match_selector

    match = match_selector(selector)
    return match, describe_match(match, cluster=cluster)


def via_scan(rows: list[Row], selector: dict[str, str], cluster: str) -> tuple[Any, dict[str, Any]]:
    from clusters.matching import describe_match

    match = scan(rows, selector)
    return match, describe_match(match, cluster=cluster)


def timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = func()
    return (time.perf_counter() - start) * 1000, result


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(args: argparse.Namespace) -> None:
    from clusters.simulator.fleet import generate_fleet

    document = generate_fleet(clusters=args.clusters, nodes_per_cluster=args.nodes, seed=args.seed)
    started = time.perf_counter()
    rows = load_inventory(document)
    # The 50,000 rows held for the scan would otherwise be walked by every full collection,
    # in the middle of whichever of the two paths happens to trigger it (an API process holds
    # no such copy). Frozen, they are left out of collections; both paths gain alike.
    gc.collect()
    gc.freeze()
    print(f"loaded {len(rows)} nodes in {args.clusters} clusters "
          f"in {time.perf_counter() - started:.1f} s")
    if args.preflight_only:
        run_preflight(document, args.rounds)
        return
    mix = selector_mix(document)
    api: dict[str, list[float]] = {}
    plain: dict[str, list[float]] = {}
    for round_index in range(args.rounds + 1):
        for label, selector in mix:
            cluster = selector.get("topology.rlinf.io/cluster", document["clusters"][0]["name"])
            db_ms, got = timed(partial(via_api, selector, cluster))
            scan_ms, expected = timed(partial(via_scan, rows, selector, cluster))
            if got != expected:
                raise SystemExit(f"results differ for {selector}")
            if round_index == 0:
                continue  # warm-up round
            api.setdefault(label, []).append(db_ms)
            plain.setdefault(label, []).append(scan_ms)
    report(api, plain, mix_size=len(mix), rounds=args.rounds)
    run_preflight(document, args.rounds)


def report(api: dict[str, list[float]], plain: dict[str, list[float]], *,
           mix_size: int, rounds: int) -> None:
    print(f"{mix_size} selectors x {rounds} rounds (after one warm-up round); times in ms")
    print(f"{'selector class':28} {'n':>5} {'db p50':>8} {'db p95':>8} "
          f"{'scan p50':>9} {'scan p95':>9} {'x p50':>6}")
    for label in api:
        a, s = api[label], plain[label]
        print(f"{label:28} {len(a):5d} {percentile(a, .5):8.2f} {percentile(a, .95):8.2f} "
              f"{percentile(s, .5):9.2f} {percentile(s, .95):9.2f} "
              f"{percentile(s, .5) / percentile(a, .5):6.1f}")
    all_api = [v for values in api.values() for v in values]
    all_scan = [v for values in plain.values() for v in values]
    p50, p95 = percentile(all_api, .5), percentile(all_api, .95)
    s50, s95 = percentile(all_scan, .5), percentile(all_scan, .95)
    print(f"{'ALL':28} {len(all_api):5d} {p50:8.2f} {p95:8.2f} {s50:9.2f} {s95:9.2f} "
          f"{s50 / p50:6.1f}")
    print(f"match p50 {p50:.2f} ms, p95 {p95:.2f} ms; scan p50 {s50:.2f} ms, p95 {s95:.2f} ms; "
          f"scan/match ratio: {s50 / p50:.1f}x at p50, {s95 / p95:.1f}x at p95, "
          f"{statistics.fmean(all_scan) / statistics.fmean(all_api):.1f}x on the mean")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=1000, help="nodes per cluster")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preflight-only", action="store_true",
                        help="skip the match/scan comparison, time only the pre-flight")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    os.environ.setdefault("RLARK_DEV_SECRETS", "1")
    if os.environ.get("DATABASE_URL"):
        _run_with_django(args)
        return
    from rlark_site.devservices import services

    with services():
        _run_with_django(args)


def _run_with_django(args: argparse.Namespace) -> None:
    import django

    django.setup()
    with scratch_database():
        run(args)


if __name__ == "__main__":
    main()
