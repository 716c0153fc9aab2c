"""Watchers: many people watching the same running job's page cost the cluster one read.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/watchers.py [--viewers 200]
        [--interval 2] [--rounds 3]

Creates a scratch database, a cluster row pointing at an in-process fleet simulator, one
running job (its run record and its Job on the simulator, 1 + 4 pods), and `--viewers`
logged-in browsers. Each round (one refresh interval), every viewer fetches the job's live
pods-and-events fragment (`jobs:job-live`) once, from 16 threads. The simulator counts the
pods and events requests it received. Run twice, side by side:

  baseline: no shared cache (Django's dummy cache: every viewer reads the cluster itself);
  shared:   the Redis cache (RLark's setting): one read per job per refresh interval.

Prints, per configuration: requests to the cluster per wall-clock refresh interval (pods,
events; a round that takes longer than the interval spans several intervals), page
answers per second and p50/p95 of one fragment. Target: shared <= 1 pods and 1 events
request per interval. The scratch database is dropped at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import percentile, scratch_database, setup_django

NAMESPACE = "rl-gpu-a"
JOB = "watched-run"


def _setup(sim: Any) -> Any:
    """The team, user, cluster row, job and run record; the Job running on the simulator."""
    from django.contrib.auth import get_user_model

    from clusters import k8s
    from clusters.credentials import encrypt
    from clusters.models import Cluster
    from clusters.simulator.testing import job_body, task_body
    from jobs.models import Job, JobState, RunRecord
    from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

    team = Team.objects.create(slug="bench", name="bench")
    user = get_user_model().objects.create_user("watcher", password=None)
    Membership.objects.create(team=team, user=user, role=MemberRole.MAINTAINER)
    Cluster.objects.create(name="gpu-a", namespace=NAMESPACE, api_url=sim.cluster_url("gpu-a"),
                           token_encrypted=encrypt(sim.fleet.cluster("gpu-a").token or ""))
    job = Job.objects.create(team=team, name=JOB, created_by=user)
    RunRecord.objects.create(team=team, job=job, job_name=JOB, cluster="gpu-a",
                             namespace=NAMESPACE, manifest_yaml="{}", manifest_sha256="0" * 64,
                             frozen_by=user, state=JobState.RUNNING)
    head = task_body("actor", replicas=1, selector={"rlinf.io/pool": "a100-head"}, gpus=8,
                     head=True)
    workers = task_body("rollout", replicas=4, selector={"rlinf.io/pool": "a100-a"}, gpus=8)
    for task in (head, workers):
        task["template"]["metadata"] = {"labels": {"rlinf.io/job": JOB}}
    k8s.create_job(credentials=sim.credentials("gpu-a"), namespace=NAMESPACE,
                   body=job_body(JOB, tasks=[head, workers]))
    sim.tick()
    return user


def _round(clients: list[Any], url: str, pool: ThreadPoolExecutor) -> list[float]:
    from django.db import connection

    def one(client: Any) -> float:
        started = time.perf_counter()
        answer = client.get(url)
        assert answer.status_code == 200, answer.status_code
        elapsed = time.perf_counter() - started
        connection.close()  # pool threads must not keep the scratch database open
        return elapsed

    return list(pool.map(one, clients))


def _run(sim: Any, user: Any, *, viewers: int, interval: float, rounds: int) -> dict[str, Any]:
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse

    from tests.cache_support import OBSERVE_PREFIX, clear_prefix

    if "LOCATION" in settings.CACHES["default"]:
        clear_prefix(OBSERVE_PREFIX)  # the job's snapshot from an earlier run, not the db
    clients = []
    for _ in range(viewers):
        client = Client()
        client.force_login(user)
        clients.append(client)
    url = reverse("jobs:job-live", args=[JOB])
    before = len(sim.requests("gpu-a"))
    durations: list[float] = []
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        for _ in range(rounds):
            round_start = time.perf_counter()
            durations += _round(clients, url, pool)
            time.sleep(max(0.0, interval - (time.perf_counter() - round_start)))
    elapsed = time.perf_counter() - started
    seen = sim.requests("gpu-a")[before:]
    intervals = elapsed / interval  # wall-clock refresh intervals the run lasted
    return {
        "pods": sum(1 for r in seen if r["path"].endswith("/pods")) / intervals,
        "events": sum(1 for r in seen if r["path"].endswith("/events")) / intervals,
        "per_second": len(durations) / elapsed,
        "p50": percentile(durations, 0.5) * 1000,
        "p95": percentile(durations, 0.95) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django.test.utils import override_settings

    from clusters.simulator.testing import DEMO_FLEET_PATH, run_simulator

    settings.ALLOWED_HOSTS = ["*"]
    shared = settings.CACHES
    dummy = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    with scratch_database("rlark_bench_watchers"), run_simulator(DEMO_FLEET_PATH) as sim:
        user = _setup(sim)
        print(f"{options.viewers} viewers of one running job (1 + 4 pods), refresh every "
              f"{options.interval:g} s, {options.rounds} intervals")
        print(f"{'configuration':<34}{'pods req/interval':>18}{'events req/interval':>21}"
              f"{'answers/s':>11}{'p50 ms':>9}{'p95 ms':>9}")
        for label, caches_setting in (("baseline (no shared cache)", dummy),
                                      ("shared (Redis cache, RLark)", shared)):
            with override_settings(CACHES=caches_setting, RLARK_OBSERVE_REFRESH=options.interval):
                figures = _run(sim, user, viewers=options.viewers, interval=options.interval,
                               rounds=options.rounds)
            print(f"{label:<34}{figures['pods']:>18.1f}{figures['events']:>21.1f}"
                  f"{figures['per_second']:>11.1f}{figures['p50']:>9.1f}{figures['p95']:>9.1f}")


if __name__ == "__main__":
    main()
