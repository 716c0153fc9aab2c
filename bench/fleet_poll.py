"""Fleet poll: 100 clusters x 1,000 nodes polled by two Celery worker processes.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/fleet_poll.py [--clusters 100]
        [--nodes 1000] [--concurrency 2]

Starts the fleet simulator (a child process) on a fleet from
`clusters.simulator.fleet.generate_fleet`, registers every cluster in a scratch database
(created and migrated for this run, dropped at the end), starts two `celery worker -Q
inventory` processes against it (the broker is REDIS_URL's database, emptied before and
after), then queues one poll task per cluster and waits for every cluster's poll:

1. the first sync of the fleet (every node new),
2. an unchanged re-poll of the fleet (no node row may be written).

For each it prints the wall time from queueing to the last cluster's poll, nodes/s, and
the rows written in the scratch database (inserts, updates and deletes from PostgreSQL's
table statistics, with the tables that got them). Every process started here is stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import REPO, fleet_yaml, scratch_database, setup_django

WAIT_SECONDS = 900.0


def database_url(name: str) -> str:
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgresql://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"


@contextmanager
def workers(database: str, *, count: int, concurrency: int) -> Iterator[None]:
    env = {**os.environ, "DATABASE_URL": database_url(database)}
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "rlark_site", "worker", "-Q", "inventory",
             "--loglevel=WARNING", f"--concurrency={concurrency}", "--without-gossip",
             "--without-mingle", "-n", f"fleet-poll-{i}-{os.getpid()}@%h"],
            cwd=REPO, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for i in range(count)
    ]
    try:
        _wait_until_ready(count)
        yield
    finally:
        for process in started:
            os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait_until_ready(count: int) -> None:
    """Until `count` workers answer a ping (their start is not part of any figure)."""
    from rlark_site.celery import app

    deadline = time.monotonic() + 120
    while len(app.control.ping(timeout=1.0)) < count:
        if time.monotonic() > deadline:
            raise SystemExit("the workers did not start")


def rows_written() -> dict[str, int]:
    """Inserted + updated + deleted rows per table since the database was created."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
        )
        return {name: int(count) for name, count in cursor.fetchall()}


def poll_fleet(title: str, nodes: int) -> None:
    """Queue one poll per cluster; wait for all; print wall time and rows written."""
    from django.db.models import Q

    from clusters.models import Cluster, ClusterState
    from clusters.tasks import poll_cluster_task

    before_rows = rows_written()
    marks = dict(Cluster.objects.values_list("id", "last_polled_at"))
    started = time.perf_counter()
    for cluster_id in marks:
        poll_cluster_task.delay(cluster_id)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        done = sum(
            1 for cluster_id, polled in
            Cluster.objects.values_list("id", "last_polled_at")
            if polled is not None and polled != marks[cluster_id]
        )
        if done == len(marks) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    failed = Cluster.objects.filter(~Q(state=ClusterState.OK)).count()
    time.sleep(1.5)  # table statistics reach the views about a second after commit
    after_rows = rows_written()
    delta = {t: after_rows.get(t, 0) - before_rows.get(t, 0) for t in after_rows}
    written = {t: n for t, n in sorted(delta.items(), key=lambda kv: -kv[1]) if n}
    print(f"\n{title}: {done}/{len(marks)} clusters polled in {wall:.1f} s "
          f"({nodes / wall:,.0f} nodes/s), {failed} not OK")
    print(f"  rows written: {sum(written.values()):,}"
          + "".join(f"\n    {table:36s} {count:>9,}" for table, count in written.items()))


def run(args: argparse.Namespace, database: str) -> None:
    import redis
    from django.conf import settings
    from django.core.management import call_command

    from clusters.simulator.fleet import generate_fleet
    from clusters.simulator.testing import start_simulator_process

    document = generate_fleet(clusters=args.clusters, nodes_per_cluster=args.nodes)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("inventory")
    with tempfile.TemporaryDirectory() as scratch:
        fleet_path = Path(scratch) / "fleet.yaml"
        fleet_path.write_text(fleet_yaml(document))
        simulator = start_simulator_process(fleet_path, 0, timeout=900)  # 100k nodes load slowly
        try:
            call_command("register_fleet", fleet=str(fleet_path), simulator_url=simulator.base_url)
            print(f"{args.clusters} clusters x {args.nodes} nodes; {args.workers} worker "
                  f"processes x {args.concurrency} (queue inventory); page size "
                  f"{settings.RLARK_INVENTORY_PAGE_SIZE}; load {os.getloadavg()[0]:.1f}",
                  flush=True)
            with workers(database, count=args.workers, concurrency=args.concurrency):
                total = args.clusters * args.nodes
                poll_fleet("first sync of the fleet", total)
                poll_fleet("unchanged re-poll of the fleet", total)
        finally:
            simulator.stop()
            broker.delete("inventory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    setup_django()
    with scratch_database(f"rlark_bench_fleet_poll_{os.getpid()}") as database:
        run(args, database)


if __name__ == "__main__":
    main()
