"""Training progress at fleet scale: the incremental progress pass against reading each Head
Task log's last 256 KiB per run, in the same run.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/progress.py [--clusters 20]
        [--runs 5000] [--history 3600] [--step-seconds 5] [--wait 15]

Starts the fleet simulator in a child process with `--state`: `--runs` Running Jobs spread over
`--clusters` clusters, each started `--history` seconds ago, so each Head Task's log already
holds `history / step-seconds` of RLinf's step tables (about 1.3 KB a step) and gains one every
`--step-seconds`. The matching Running run records go into a scratch database (created and
migrated for this run, dropped at the end). Then, one cluster after the other in this process
(beat runs them as parallel tasks: the sum is the conservative figure, the slowest cluster's
pass is what a real pass waits for):

- **progress pass** — `jobs.progress.reader.read_cluster_progress` for every cluster: the first
  pass (every run new: its newest 200 lines); a pass with new steps on beat's cadence (each
  cluster read `--wait` seconds after its own previous pass, so each log gained `--wait /
  --step-seconds` steps: 3 at the defaults, what a 15 s poll interval sees); then, with every
  run frozen through the simulator's control endpoint, a pass with nothing new;
- **last 256 KiB** — the design it is measured against, kept here only (read through the same
  `PodLogReader`): per run and pass, the log's last 256 KiB (its last 2,000 lines, at most
  256 KiB) and the step pattern over all of it. It reads the same whether or not a step
  came, so it runs once (`--baseline-twice` runs it again after the freeze, for its
  nothing-new figure).
- **fleet** — the same two passes (new steps `--wait` seconds after a fleet pass that brought
  every cursor up to date, and nothing new) as a deployment runs them: every cluster's pass a
  task of `--workers` worker processes (forked from this one, as Celery's prefork pool;
  default 4, the image's `RLARK_WORKER_CONCURRENCY`), the wall time from the first task given
  to the last one done.

- **before** — the pass with new steps and the one with nothing new again with each read
  made as before `PodLogReader` (the gateway's `read_pod_log`: one generated-client call a
  read), against the same simulator, for the figure beside the new one.

Printed per pass: wall time (sum and slowest cluster; for the fleet, the whole fleet's), the
CPU seconds of RLark's side (this process, or the fleet's worker processes task by task) and
of the simulator process meanwhile (PostgreSQL's are neither), log bytes read, requests,
database queries, steps taken, and the load average when the pass ended; at the end the
baseline and the progress pass side by side, per pass, before and now, and which figure meets
the target (under 10 s for the fleet's pass, at least 10x fewer bytes).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.inventory_sync import QueryLog  # noqa: E402
from bench.status_sync import register, scratch_database  # noqa: E402

TAIL_BYTES = 256 * 1024
TARGET_SECONDS = 10.0
TARGET_RATIO = 10.0
MANIFEST = "spec:\n  tasks:\n  - name: actor\n    head: true\n    replicas: 1\n"


@dataclass(frozen=True)
class Figures:
    label: str
    wall: float
    slowest: float
    bytes: int
    requests: int
    queries: int
    steps: int
    load: float
    cpu: float  # CPU seconds of RLark's side: this process (or the fleet's workers)
    simulator_cpu: float  # CPU seconds of the simulator process meanwhile

    def cells(self) -> str:
        return (f"{self.wall:6.2f} s (slowest {self.slowest:5.2f} s; CPU {self.cpu:5.2f} s + "
                f"simulator {self.simulator_cpu:5.2f} s) {self.bytes / 1e6:8.2f} MB "
                f"{self.requests:5d} req")

    def line(self) -> str:
        return (f"  {self.label:<52} {self.wall:7.2f} s (slowest cluster {self.slowest:5.2f} s) "
                f"CPU {self.cpu:6.2f} s, simulator CPU {self.simulator_cpu:6.2f} s, "
                f"{self.bytes / 1e6:9.2f} MB {self.requests:6d} requests {self.queries:6d} "
                f"queries {self.steps:6d} steps (load average {self.load:.1f})")


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def jobs_state(clusters: list[dict[str, Any]], runs: int,
               started: datetime) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """The simulator's state file: `runs` Running Jobs (one head task each) spread evenly."""
    from clusters.simulator.testing import job_body, task_body

    stamp = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    saved: dict[str, Any] = {spec["name"]: {"resourceVersion": 1, "jobs": []}
                             for spec in clusters}
    placed = []
    for index in range(runs):
        spec = clusters[index % len(clusters)]
        name = f"bench-{index:05d}"
        body = job_body(name, namespace=spec["namespace"],
                        tasks=[task_body("actor", replicas=1, selector={}, head=True)])
        body["metadata"].update(namespace=spec["namespace"], uid=str(uuid.uuid4()),
                                resourceVersion="1", creationTimestamp=stamp, generation=1)
        body["status"] = {"phase": "Running", "startTime": stamp, "conditions": [],
                          "lastTransitionTime": stamp}
        saved[spec["name"]]["jobs"].append(body)
        placed.append((spec["name"], spec["namespace"], name))
    return {"clusters": saved}, placed


@contextmanager
def simulator(document: dict[str, Any], state: dict[str, Any],
              step_seconds: float) -> Iterator[Any]:
    from clusters.simulator.testing import start_simulator_process

    with tempfile.TemporaryDirectory() as directory:
        fleet, saved = Path(directory) / "fleet.yaml", Path(directory) / "jobs.json"
        fleet.write_text(yaml.safe_dump(document), encoding="utf-8")
        saved.write_text(json.dumps(state), encoding="utf-8")
        process = start_simulator_process(fleet, state=saved, timeout=300,
                                          step_seconds=step_seconds)
        try:
            yield process
        finally:
            process.stop()


def write_runs(placed: list[tuple[str, str, str]], started: datetime) -> None:
    from django.contrib.auth import get_user_model

    from jobs.models import Job, JobState, RunRecord, StatusChange
    from rlark_site.foundation.tenancy.models import Team

    team = Team.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create(username="bench")
    jobs = Job.objects.bulk_create(
        [Job(team=team, name=name, created_by=user, header_role="Actor")
         for _, _, name in placed], batch_size=1000)
    snapshot = {"progress": {"pattern": "", "stall_after_seconds": 1800,
                             "cancel_after_stalled_seconds": None}, "expected_signals": []}
    records = RunRecord.objects.bulk_create([
        RunRecord(team=team, job=job, job_name=name, cluster=cluster, namespace=namespace,
                  manifest_yaml=MANIFEST, manifest_sha256="", frozen_by=user,
                  state=JobState.RUNNING, submitted_at=started, launch_list_snapshot=snapshot)
        for job, (cluster, namespace, name) in zip(jobs, placed, strict=True)
    ], batch_size=1000)
    StatusChange.objects.bulk_create([StatusChange(run_record=record, phase="Running")
                                      for record in records], batch_size=1000)
    StatusChange.objects.update(observed_at=started)


class Counted:
    """Counts the log reads and their bytes: every read of the pass goes through `reader`
    (the gateway's `PodLogReader` of the cluster, or `PerCall` for the before figure)."""

    def __init__(self, per_call: bool = False) -> None:
        self.per_call, self.requests, self.bytes = per_call, 0, 0
        self._lock = threading.Lock()

    def reader(self, credentials: Any) -> Any:
        from clusters.k8s import PodLogReader
        from jobs.progress import conf

        timeout = conf.kube_timeout()
        real = PerCall(credentials, timeout) if self.per_call \
            else PodLogReader(credentials, timeout=timeout)
        return _Counting(real, self)

    def add(self, log: Any) -> None:
        size = len(log.text.encode(errors="replace"))
        with self._lock:
            self.requests += 1
            self.bytes += size


class PerCall:
    """The read before `PodLogReader`: the gateway's `read_pod_log`, one generated-client call
    each (`param_serialize`, the pool manager's URL parsing), for the before figure."""

    def __init__(self, credentials: Any, timeout: float) -> None:
        self.credentials, self.timeout = credentials, timeout

    def read(self, **kwargs: Any) -> Any:
        from clusters.k8s import read_pod_log

        return read_pod_log(credentials=self.credentials, timeout=self.timeout, **kwargs)


class _Counting:
    def __init__(self, real: Any, counted: Counted) -> None:
        self.real, self.counted = real, counted

    def read(self, **kwargs: Any) -> Any:
        log = self.real.read(**kwargs)
        self.counted.add(log)
        return log


def progress_pass(counted: Counted) -> tuple[int, list[float]]:
    """Every cluster's pass once, one after the other, its reads counted."""
    from jobs.progress import reader

    steps, times = 0, []
    for cluster in reader.clusters_with_running_runs():
        found, spent = _cluster_pass(cluster, counted)
        steps += found
        times.append(spent)
    return steps, times


UNMEASURED = QueryLog()
"""The queries of `cadence_pass`'s unmeasured passes (left out of its figures)."""


def _cluster_pass(cluster: str, counted: Counted | None) -> tuple[int, float]:
    """One cluster's pass; its reads counted by `counted`, or unmeasured (None)."""
    from django.db import connection

    from jobs.progress import reader

    real = reader.log_reader
    if counted is not None:
        reader.log_reader = counted.reader  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        if counted is None:
            with connection.execute_wrapper(UNMEASURED):
                steps = reader.read_cluster_progress(cluster=cluster).steps
        else:
            steps = reader.read_cluster_progress(cluster=cluster).steps
        return steps, time.perf_counter() - started
    finally:
        reader.log_reader = real  # type: ignore[assignment]


def cadence_pass(counted: Counted, wait: float) -> tuple[int, list[float]]:
    """The pass with new steps on beat's cadence: each cluster's measured pass comes `wait`
    seconds after that cluster's previous pass (so each log gained `wait / step-seconds` steps,
    as between two passes of a real deployment), not after every other cluster's passes and
    the baseline. Each cluster gets an unmeasured pass first (its cursor brought up to date);
    a measured pass runs as soon as it is due (before the next unmeasured one), so it is late
    by at most the pass in flight. Returns the measured passes' steps and times and prints the
    gaps they saw."""
    from jobs.progress import reader

    waiting = list(reader.clusters_with_running_runs())
    due: list[tuple[float, str, float]] = []  # (due, cluster, previous pass ended)
    steps, times, gaps = 0, [], []
    while waiting or due:
        now = time.monotonic()
        if due and (due[0][0] <= now or not waiting):
            when, cluster, previous = due.pop(0)
            time.sleep(max(0.0, when - time.monotonic()))
            gaps.append(time.monotonic() - previous)
            found, spent = _cluster_pass(cluster, counted)
            steps += found
            times.append(spent)
            continue
        cluster = waiting.pop(0)
        cpu, simulator_cpu = own_cpu(), process_cpu(SIMULATOR_PID)
        _cluster_pass(cluster, None)
        UNMEASURED_CPU[0] += own_cpu() - cpu
        UNMEASURED_CPU[1] += process_cpu(SIMULATOR_PID) - simulator_cpu
        ended = time.monotonic()
        due.append((ended + wait, cluster, ended))
    print(f"  (new steps: each cluster read {min(gaps):.1f}-{max(gaps):.1f} s after its "
          f"previous pass; --wait {wait:g})", flush=True)
    return steps, times


def tail_pass(counted: Counted, credentials: dict[str, Any]) -> tuple[int, list[float]]:
    """The baseline: each run's last 256 KiB read and matched whole, every pass (through
    the same reader as the progress pass)."""
    from jobs.core.progress import compile_step_pattern
    from jobs.models import JobState, RunRecord

    pattern = compile_step_pattern("")
    steps, times = 0, []
    runs = RunRecord.objects.filter(state=JobState.RUNNING).order_by("cluster", "pk")
    by_cluster: dict[str, list[Any]] = {}
    for record in runs.only("cluster", "namespace", "job_name"):
        by_cluster.setdefault(record.cluster, []).append(record)
    for cluster, records in by_cluster.items():
        started = time.perf_counter()
        logs = counted.reader(credentials[cluster])

        def read(record: Any, logs: Any = logs) -> int:
            log = logs.read(namespace=record.namespace, name=f"{record.job_name}-actor-0",
                            tail_lines=2000, max_bytes=TAIL_BYTES)
            return sum(isinstance(pattern.last_step(line), tuple)
                       for line in log.text.splitlines())

        with ThreadPoolExecutor(max_workers=8) as pool:
            steps += sum(pool.map(read, records))
        times.append(time.perf_counter() - started)
    return steps, times


SIMULATOR_PID = 0
"""The simulator process's id (its CPU is read from /proc around each pass)."""
UNMEASURED_CPU = [0.0, 0.0]
"""CPU seconds of `cadence_pass`'s unmeasured passes and its waits (this process, simulator)."""


def timed(label: str, run: Callable[[Counted], tuple[int, list[float]]], *,
          per_call: bool = False) -> Figures:
    from django.db import connection

    counted, queries = Counted(per_call), QueryLog()
    unmeasured, left_out = UNMEASURED.count, list(UNMEASURED_CPU)
    cpu, simulator_cpu = own_cpu(), process_cpu(SIMULATOR_PID)
    with connection.execute_wrapper(queries):
        steps, times = run(counted)
    cpu, simulator_cpu = own_cpu() - cpu, process_cpu(SIMULATOR_PID) - simulator_cpu
    # The wall time is the measured passes' (summed over the clusters: passes of different
    # clusters are parallel tasks in a deployment, one after the other here).
    figures = Figures(label, sum(times), max(times, default=0.0), counted.bytes,
                      counted.requests, queries.count - (UNMEASURED.count - unmeasured), steps,
                      os.getloadavg()[0], cpu - (UNMEASURED_CPU[0] - left_out[0]),
                      simulator_cpu - (UNMEASURED_CPU[1] - left_out[1]))
    print(figures.line(), flush=True)
    return figures


def _fresh_worker() -> None:
    """A forked worker's own cluster clients (the parent's connections stay the parent's; its
    database connections were closed before the fork)."""
    import clusters.k8s.client as client

    client._cache = client._ClientCache(client._CACHE_SIZE)


def _fleet_task(cluster: str) -> tuple[int, int, int, int, float, float]:
    from django.db import connection

    from jobs.progress import reader

    queries = QueryLog()
    started, cpu = time.perf_counter(), time.process_time()
    with connection.execute_wrapper(queries):
        report = reader.read_cluster_progress(cluster=cluster)
    return (report.read, report.bytes, report.steps, queries.count,
            time.perf_counter() - started, time.process_time() - cpu)


def fleet_pass(label: str, workers: int) -> Figures:
    """Every cluster's pass as a task of `workers` forked worker processes, all at once."""
    from django.db import connections

    from jobs.progress import reader

    clusters = reader.clusters_with_running_runs()
    connections.close_all()
    with multiprocessing.get_context("fork").Pool(workers, initializer=_fresh_worker) as pool:
        pool.map(time.sleep, [0.2] * workers, chunksize=1)  # every worker up before the clock
        simulator_cpu = process_cpu(SIMULATOR_PID)
        started = time.perf_counter()
        results = pool.map(_fleet_task, clusters, chunksize=1)
        wall = time.perf_counter() - started
        simulator_cpu = process_cpu(SIMULATOR_PID) - simulator_cpu
    # CPU: the workers' own, task by task (each task's process time)
    figures = Figures(label, wall, max(r[4] for r in results), sum(r[1] for r in results),
                      sum(r[0] for r in results), sum(r[3] for r in results),
                      sum(r[2] for r in results), os.getloadavg()[0],
                      sum(r[5] for r in results), simulator_cpu)
    print(figures.line(), flush=True)
    return figures


def freeze_all(handle: Any, placed: list[tuple[str, str, str]]) -> None:
    def freeze(where: tuple[str, str, str]) -> None:
        cluster, namespace, name = where
        handle.set_progress(cluster, namespace, name, state="frozen")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(freeze, placed))


def run(arguments: argparse.Namespace) -> dict[str, Figures]:
    from django.core.cache import cache

    from clusters.simulator.fleet import generate_fleet

    global SIMULATOR_PID
    document = generate_fleet(clusters=arguments.clusters, nodes_per_cluster=4, seed=7)
    clusters = document["clusters"]
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=arguments.history)
    state, placed = jobs_state(clusters, arguments.runs, started)
    with simulator(document, state, arguments.step_seconds) as handle:
        import kubernetes.client.api.core_v1_api  # noqa: F401  (first use costs seconds)

        SIMULATOR_PID = handle.process.pid
        register(handle, clusters)
        write_runs(placed, started)
        cache.clear()
        credentials = {spec["name"]: handle.credentials(spec["name"]) for spec in clusters}
        print(f"set-up: {arguments.runs} Running runs, {arguments.history} s of history each "
              f"(a step every {arguments.step_seconds} s)", flush=True)
        figures = {"first": timed("progress, first pass (all new)", progress_pass)}
        time.sleep(arguments.wait)
        figures["tail new"] = timed("last 256 KiB, new steps",
                                    lambda c: tail_pass(c, credentials))
        figures["new"] = timed("progress, new steps", lambda c: cadence_pass(c, arguments.wait))
        figures["new before"] = timed("progress, new steps, per-call reads (before)",
                                      lambda c: cadence_pass(c, arguments.wait), per_call=True)
        fleet = f"fleet ({arguments.workers} workers)"
        fleet_pass(f"(unmeasured: every cursor up to date), {fleet}", arguments.workers)
        time.sleep(arguments.wait)
        figures["fleet new"] = fleet_pass(f"progress, new steps, {fleet}", arguments.workers)
        freeze_all(handle, placed)
        figures["flush"] = timed("progress, nothing new (flush)", progress_pass)
        figures["same"] = timed("progress, nothing new", progress_pass)
        figures["same before"] = timed("progress, nothing new, per-call reads (before)",
                                       progress_pass, per_call=True)
        figures["fleet same"] = fleet_pass(f"progress, nothing new, {fleet}", arguments.workers)
        figures["tail same"] = timed("last 256 KiB, nothing new",
                                     lambda c: tail_pass(c, credentials)) \
            if arguments.baseline_twice else figures["tail new"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--history", type=int, default=3600)
    parser.add_argument("--step-seconds", type=float, default=5.0)
    parser.add_argument("--wait", type=float, default=15.0,
                        help="seconds between passes (beat's interval)")
    parser.add_argument("--workers", type=int, default=4,
                        help="worker processes of the fleet passes (the image's default "
                             "RLARK_WORKER_CONCURRENCY)")
    parser.add_argument("--baseline-twice", action="store_true",
                        help="run the 256 KiB baseline again after the freeze")
    arguments = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    os.environ.setdefault("RLARK_DEV_SECRETS", "1")
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("Set DATABASE_URL (and REDIS_URL) to a PostgreSQL server to use.")
    import django

    django.setup()
    with scratch_database():
        figures = run(arguments)
    print(f"progress: {arguments.runs} Running runs on {arguments.clusters} clusters, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for figure in figures.values():
        print(figure.line())
    print()
    print(f"  {'pass':<12} | {'last 256 KiB per run (baseline)':<78} | "
          f"{'progress pass (incremental)':<78} | bytes")
    for what, old, fresh in (("new steps", figures["tail new"], figures["new"]),
                             ("nothing new", figures["tail same"], figures["same"])):
        print(f"  {what:<12} | {old.cells()} | {fresh.cells()} | "
              f"{old.bytes / max(1, fresh.bytes):5.0f}x fewer")
    print()
    for what, before, now in (("new steps", figures["new before"], figures["new"]),
                              ("nothing new", figures["same before"], figures["same"])):
        print(f"  {what}, per-call reads (before) | {before.cells()}")
        print(f"  {what}, PodLogReader (now)      | {now.cells()}")
    print()
    for what, old, fresh, fleet in (
            ("new steps", figures["tail new"], figures["new"], figures["fleet new"]),
            ("nothing new", figures["tail same"], figures["same"], figures["fleet same"])):
        ratio = old.bytes / max(1, fresh.bytes)
        print(f"{what}: progress pass {fresh.wall:.2f} s summed over the clusters one after "
              f"the other ({_verdict(fresh.wall, ratio)}), {fleet.wall:.2f} s for the fleet "
              f"on {arguments.workers} workers ({_verdict(fleet.wall, ratio)}); "
              f"{fresh.bytes / 1e6:.2f} MB against {old.wall:.2f} s, {old.bytes / 1e6:.2f} MB: "
              f"{ratio:.0f}x fewer bytes (target: under {TARGET_SECONDS:.0f} s, at least "
              f"{TARGET_RATIO:.0f}x fewer bytes)")


def _verdict(wall: float, ratio: float) -> str:
    return "meets" if wall < TARGET_SECONDS and ratio >= TARGET_RATIO else "misses"


if __name__ == "__main__":
    main()
