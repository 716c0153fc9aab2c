"""Status sync at fleet scale: one listing per cluster namespace against one GET per job.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/status_sync.py [--clusters 20]
        [--jobs 5000] [--page-size 500] [--in-process]

Starts the fleet simulator (a child process by default, as bench/inventory_sync.py does) on
a generated fleet of `--clusters` clusters, creates `--jobs` Jobs spread over them through
the gateway, and writes the matching pending run records into a scratch database (created
and migrated for this run, dropped at the end). Then it times, in the same run:

- **per job** — the design this replaces, kept here only: one `get_job` per active run (one
  try), each observation applied on its own under the run's row lock;
- **per cluster** — `jobs.records.status.sync_cluster` for every cluster, one after the
  other in this process (beat runs them as parallel tasks; the sum is the conservative
  figure): one paged `list_jobs` per namespace, changes applied in bulk.

Each design runs twice from the same starting point: a pass where every run changes (its
first `Pending` is recorded) and an unchanged pass (nothing to write). Printed: wall time,
requests to the clusters, database queries, and how many times faster the new design is.
Both sides measure the status sync's own work: notifications are switched off, as the
per-job baseline never sent them; the design "+ notifications" then runs the capture pass with
the check production runs after each cluster's pass (`emit_run_changes`: which state events
the runs reached, two queries per cluster since 2026-12-01, one query per run before).

The capture-enabled case: the same per-cluster pass with the pod capture of
`jobs.observe.capture` on (every run's pod becomes a kept attempt on the first pass), once
with the capture this replaces (`legacy_capture_cluster`, kept here only: a kept-attempts
query, a state query and an `update_or_create` per run and pod) and once with RLark's
(one query for the kept attempts, one upsert statement per namespace for what changed, log
reads only for pods that ended). `--skip-old-capture` leaves the slow old one out. Every
figure is printed with the 1-minute load average when its pass ended: on a shared machine
the figures follow the load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.inventory_sync import QueryLog, simulator  # noqa: E402

SCRATCH_NAME = f"rlark_bench_status_sync_{os.getpid()}"
TARGET_SECONDS = 10.0
TARGET_SPEEDUP = 10.0


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


class RequestCount:
    """Counts the gateway calls a pass makes (wraps the real functions)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(**kwargs: Any) -> Any:
            self.count += 1
            return call(**kwargs)

        return counted


@dataclass(frozen=True)
class Figures:
    label: str
    wall: float
    requests: int
    queries: int
    changed: int
    load: float  # the 1-minute load average when the pass ended

    def line(self) -> str:
        return (f"  {self.label:<34} {self.wall:8.2f} s  {self.requests:6d} requests  "
                f"{self.queries:7d} DB queries  {self.changed:5d} runs changed  "
                f"(load average {self.load:.1f})")


def create_jobs(handle: Any, clusters: list[dict[str, Any]],
                jobs: int) -> list[tuple[str, str, str]]:
    """`jobs` Jobs spread evenly over the clusters; (cluster, namespace, name) of each."""
    from clusters.k8s import create_job
    from clusters.simulator.testing import job_body, task_body

    placed = [
        (spec["name"], spec["namespace"], f"bench-{index:05d}")
        for index in range(jobs)
        for spec in [clusters[index % len(clusters)]]
    ]
    task = task_body("actor", replicas=1, selector={"rlinf.io/pool": "status-sync"}, head=True)

    def create(where: tuple[str, str, str]) -> None:
        cluster, namespace, name = where
        create_job(credentials=handle.credentials(cluster), namespace=namespace,
                   body=job_body(name, namespace=namespace, tasks=[task]))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, placed))
    return placed


def register(handle: Any, clusters: list[dict[str, Any]]) -> None:
    from clusters.inventory.services import ClusterRegistration, cluster_register

    for spec in clusters:
        cluster_register(registration=ClusterRegistration(
            name=spec["name"], namespace=spec["namespace"],
            api_url=handle.cluster_url(spec["name"]), token=spec["token"], verify_tls=False,
        ))


def write_runs(placed: list[tuple[str, str, str]]) -> None:
    """A team, its user, and one pending run record (with its job) per created Job."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from jobs.models import Job, JobState, RunRecord
    from rlark_site.foundation.tenancy.models import Team

    team = Team.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create(username="bench")
    jobs = Job.objects.bulk_create(
        [Job(team=team, name=name, created_by=user) for _, _, name in placed], batch_size=1000
    )
    now = timezone.now()
    RunRecord.objects.bulk_create([
        RunRecord(team=team, job=job, job_name=name, cluster=cluster, namespace=namespace,
                  manifest_yaml="", manifest_sha256="", frozen_by=user, state=JobState.PENDING,
                  submitted_at=now, pending_since=now)
        for job, (cluster, namespace, name) in zip(jobs, placed, strict=True)
    ], batch_size=1000)


def forget_observations() -> None:
    """Back to the starting point: no phase recorded, nothing stored from the clusters."""
    from jobs.models import PodAttempt, RunRecord, StatusChange

    StatusChange.objects.all().delete()
    PodAttempt.objects.all().delete()
    RunRecord.objects.update(status_reason="", status_message="", status_checked_at=None)


def per_job_pass(handle: Any, gets: RequestCount) -> int:
    """The replaced design: one GET per active run, each observation applied on its own."""
    from clusters.k8s import NotFound, get_job
    from jobs.models import RunRecord
    from jobs.records import conf
    from jobs.records.lifecycle import ACTIVE_STATES
    from jobs.records.status import apply_observations, observation

    fetch = gets.wrap(get_job)
    credentials = {spec.name: handle.credentials(spec.name) for spec in handle.fleet.clusters}
    changed = 0
    for record in RunRecord.objects.filter(state__in=ACTIVE_STATES).order_by("cluster", "pk"):
        try:
            remote = fetch(credentials=credentials[record.cluster],
                           namespace=record.namespace, name=record.job_name,
                           timeout=conf.kube_timeout(), attempts=1)
        except NotFound:
            remote = None
        seen = observation(remote)
        if seen is not None:
            changed += apply_observations({record.pk: seen})
    return changed


def _nothing(*args: Any, **kwargs: Any) -> int:
    return 0


def legacy_capture_cluster(credentials: Any, records: Any, *, final_states: Any) -> int:
    """The capture this replaces, kept here only: per run, a kept-attempts query (log
    columns included) and a state query; per pod, an `update_or_create` in its own
    transaction; evidence read as RLark does."""
    from collections import defaultdict

    from django.db import transaction
    from django.utils import timezone

    from jobs.models import PodAttempt, RunRecord
    from jobs.observe import capture, conf
    from jobs.observe.models import CaptureReason

    finals = set(final_states)
    by_namespace: dict[str, list[Any]] = defaultdict(list)
    for record in records:
        by_namespace[record.namespace].append(record)
    written = 0
    for namespace, members in by_namespace.items():
        pods = capture.list_pods(credentials=credentials, namespace=namespace,
                                 label_selector=capture.LABEL_JOB,
                                 max_items=conf.capture_max_pods(),
                                 timeout=conf.kube_timeout(), attempts=1)
        by_job: dict[str, list[Any]] = defaultdict(list)
        for pod in pods:
            by_job[pod.labels.get(capture.LABEL_JOB, "")].append(pod)
        for record in members:
            final = RunRecord.objects.filter(pk=record.pk).values_list(
                "state", flat=True).get() in finals
            existing = {a.pod_uid: a for a in PodAttempt.objects.filter(run_record=record)}
            for pod in by_job.get(record.job_name, ()):
                attempt, fields = existing.get(pod.uid), capture._fields(pod)
                changed = capture._changed(attempt, fields)
                wants = (final or capture._ended(pod)) and (
                    changed or attempt is None or not attempt.logs_captured)
                if not changed and not wants:
                    continue
                if wants:
                    fields.update(capture._evidence(credentials, namespace, pod,
                                                    capture._Budget(None)),
                                  capture_reason=CaptureReason.JOB_ENDED)
                elif attempt is None or not attempt.logs_captured:
                    fields.update(capture._classification(pod, capture._Log(), capture._Log()))
                fields.pop("_cause", None)  # not a column (the run's cause, offered apart)
                with transaction.atomic():
                    PodAttempt.objects.update_or_create(
                        run_record=record, pod_uid=pod.uid,
                        defaults={**fields, "captured_at": timezone.now()})
                written += 1
    return written


def per_cluster_pass(lists: RequestCount, *, capture: str = "off", notify: bool = False) -> int:
    """The new design: `sync_cluster` for every cluster with active runs; the pods capture
    `off`, `old` (the replaced one) or `new` (RLark's); with `notify`, the pass also checks
    which state events its runs reached (`emit_run_changes`), as production does."""
    from jobs.observe import capture as capturing
    from jobs.records import status

    real = status.list_jobs, status.capture_cluster, status.emit_run_changes
    gateway = capturing.list_pods, capturing.read_pod_log, capturing.list_events
    status.list_jobs = lists.wrap(real[0])  # type: ignore[assignment]
    capturing.list_pods, capturing.read_pod_log, capturing.list_events = (  # type: ignore[assignment]
        lists.wrap(call) for call in gateway)
    status.capture_cluster = {"off": _nothing, "old": legacy_capture_cluster,  # type: ignore[assignment]
                              "new": real[1]}[capture]
    if not notify:
        status.emit_run_changes = _nothing  # type: ignore[assignment]
    try:
        return sum(status.sync_cluster(cluster=name).changed
                   for name in status.clusters_with_active_runs())
    finally:
        status.list_jobs, status.capture_cluster, status.emit_run_changes = real  # type: ignore[assignment]
        capturing.list_pods, capturing.read_pod_log, capturing.list_events = gateway  # type: ignore[assignment]


def timed(label: str, run: Callable[[RequestCount], int]) -> Figures:
    from django.db import connection

    requests, queries = RequestCount(), QueryLog()
    with connection.execute_wrapper(queries):
        started = time.perf_counter()
        changed = run(requests)
        wall = time.perf_counter() - started
    return Figures(label, wall, requests.count, queries.count, changed, os.getloadavg()[0])


def run(arguments: argparse.Namespace) -> list[Figures]:
    from django.test.utils import override_settings

    from clusters.simulator.fleet import generate_fleet

    document = generate_fleet(clusters=arguments.clusters, nodes_per_cluster=4, seed=7)
    clusters = document["clusters"]
    with simulator(document, in_process=arguments.in_process) as handle, override_settings(
        RLARK_STATUS_PAGE_SIZE=arguments.page_size
    ):
        # The kubernetes client imports its CoreV1Api module (pods, logs, events) on first use:
        # about 10 s once per process on a busy machine, not a cost of any pass.
        import kubernetes.client.api.core_v1_api  # noqa: F401

        register(handle, clusters)
        started = time.perf_counter()
        write_runs(create_jobs(handle, clusters, arguments.jobs))
        print(f"set-up: {arguments.jobs} Jobs created and recorded in "
              f"{time.perf_counter() - started:.1f} s")
        figures = []
        designs: list[tuple[str, Callable[[RequestCount], int]]] = [
            ("per job (one GET each)", lambda r: per_job_pass(handle, r)),
            ("per cluster (one list per namespace)", per_cluster_pass),
            ("per cluster + new pods capture", lambda r: per_cluster_pass(r, capture="new")),
            ("per cluster + new pods capture + notifications",
             lambda r: per_cluster_pass(r, capture="new", notify=True)),
        ]
        if not arguments.skip_old_capture:
            designs.append(("per cluster + old pods capture",
                            lambda r: per_cluster_pass(r, capture="old")))
        for label, design in designs:
            forget_observations()
            figures.append(timed(f"{label}, all change", design))
            figures.append(timed(f"{label}, unchanged", design))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--skip-old-capture", action="store_true",
                        help="leave out the replaced pods capture (minutes at 5,000 jobs)")
    arguments = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    os.environ.setdefault("RLARK_DEV_SECRETS", "1")
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("Set DATABASE_URL (and REDIS_URL) to a PostgreSQL server to use.")
    import django

    django.setup()
    with scratch_database():
        figures = run(arguments)
    where = "this process" if arguments.in_process else "a child process"
    print(f"status sync: {arguments.jobs} active jobs on {arguments.clusters} clusters, page "
          f"size {arguments.page_size}, simulator in {where}, {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}")
    for figure in figures:
        print(figure.line())
    old_change, old_same, new_change, new_same, cap_change, cap_same = figures[:6]
    notify_change, notify_same = figures[6:8]
    for what, old, new in (("all change", old_change, new_change),
                           ("unchanged", old_same, new_same),
                           ("all change, pods capture on", old_change, cap_change),
                           ("unchanged, pods capture on", old_same, cap_same),
                           ("all change, capture and notifications on", old_change,
                            notify_change),
                           ("unchanged, capture and notifications on", old_same, notify_same)):
        speedup = old.wall / new.wall
        verdict = "meets" if new.wall < TARGET_SECONDS and speedup >= TARGET_SPEEDUP else "misses"
        print(f"{what}: per cluster {new.wall:.2f} s (load average {new.load:.1f}) vs per job "
              f"{old.wall:.2f} s (load average {old.load:.1f}): {speedup:.1f}x faster "
              f"({verdict} the target: under {TARGET_SECONDS:.0f} s and at least "
              f"{TARGET_SPEEDUP:.0f}x)")
    if len(figures) == 10:
        for what, old, new in (("all change", figures[8], cap_change),
                               ("unchanged", figures[9], cap_same)):
            print(f"pods capture, {what}: new {new.wall:.2f} s ({new.queries} queries) vs old "
                  f"{old.wall:.2f} s ({old.queries} queries): {old.wall / new.wall:.1f}x faster")


if __name__ == "__main__":
    main()
