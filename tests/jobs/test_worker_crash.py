"""A real Celery worker killed (SIGKILL) in the middle of a submission loses nothing.

Everything here is a separate process, as in production: the fleet simulator (with latency,
so the kill lands while the create call is in flight), and `celery -A rlark_site worker`
against this test database and a Redis database of its own. After the kill the claim's lease
expires, the beat's resume task sends the submission again and a fresh worker finishes it:
exactly one Job exists and the run record says what happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection
from psycopg.conninfo import make_conninfo

from clusters.k8s import list_jobs
from clusters.simulator.testing import DEMO_FLEET_PATH, start_simulator_process
from jobs.models import AttemptOutcome, JobState, RunRecord, SubmissionAttempt, SubmissionState
from jobs.records.submission import job_submit, stalled_run_record_ids
from jobs.tasks import resume_stalled_submissions
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import register_fleet, submittable_job

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "gpu-a"
NAMESPACE = "rl-gpu-a"
LATENCY_MS = 1500
# Worker settings: calls may take the latency (twice over), the lease lapses soon after a
# crash: it is at least 2 x RLARK_KUBE_TIMEOUT + 1 s (jobs/records/conf.py), here 7 s.
WORKER_ENV = {
    "RLARK_KUBE_TIMEOUT": "3",
    "RLARK_SUBMIT_LEASE": "3",
    "RLARK_SUBMIT_RETRY_BASE": "0",
    "RLARK_VISIBILITY_TIMEOUT": "3600",
}
WAIT_SECONDS = 90.0


def wait_for(what: str, check: Callable[[], Any], timeout: float = WAIT_SECONDS) -> Any:
    """Poll `check` until it returns something truthy (a synchronisation, not an assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def create_in_flight(simulator: Any) -> bool:
    """Whether the cluster received a Job create (it may still be waiting out the latency)."""
    return any(entry["method"] == "POST" and entry["path"].endswith(f"/namespaces/{NAMESPACE}/jobs")
               for entry in simulator.requests(CLUSTER))


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    """This engineer's Redis database, emptied before and after (no stray messages)."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def simulator() -> Iterator[Any]:
    handle = start_simulator_process(DEMO_FLEET_PATH, port=0)
    try:
        yield handle
    finally:
        handle.stop()


def child_database_conninfo() -> str:
    """How a child process reaches pytest-django's `test_<db>` database."""
    db = connection.settings_dict
    parts = {
        "host": db["HOST"],
        "port": db["PORT"],
        "user": db["USER"],
        "password": db["PASSWORD"],
        "dbname": db["NAME"],
    }
    return make_conninfo("", **{key: value for key, value in parts.items() if value})


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    env = {
        **os.environ,
        **WORKER_ENV,
        "DATABASE_URL": child_database_conninfo(),
        "REDIS_URL": settings.CELERY_BROKER_URL,
    }

    def start(label: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"worker-{label}.log").open("wb")
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "rlark_site",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"crash-{label}-{uuid.uuid4().hex[:8]}@%h",
        ]
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_a_worker_killed_mid_submission_loses_nothing(
    team: Team,
    owner: Any,
    admin_user: Any,
    broker: redis.Redis,
    simulator: Any,
    start_worker: Callable[[str], subprocess.Popen[bytes]],
) -> None:
    register_fleet(simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user)
    simulator.set_faults(CLUSTER, latency_ms=LATENCY_MS)
    first = start_worker("first")
    record = job_submit(job=job, user=owner)  # commits at once: the message goes out now

    wait_for(
        "the first attempt",
        lambda: SubmissionAttempt.objects.filter(
            run_record=record, outcome=AttemptOutcome.IN_PROGRESS
        ).exists(),
    )
    # Killed once the create request reached the simulator (logged on arrival, then held for
    # the latency): a fixed pause here lost the race on a loaded machine (the worker had not
    # sent it yet, so no create ever happened).
    wait_for("the create request to reach the simulator", lambda: create_in_flight(simulator))
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.SUBMITTING

    start_worker("second")  # starts up while the lease runs out
    wait_for("the create the dead worker sent", lambda: simulator.created_bodies(CLUSTER))
    wait_for("the lease to expire", lambda: record.pk in stalled_run_record_ids())
    assert resume_stalled_submissions.apply().get() == 1

    def settled() -> bool:
        record.refresh_from_db()
        return record.submission_state in (SubmissionState.SUBMITTED, SubmissionState.FAILED)

    wait_for("the second worker to settle the record", settled)
    simulator.clear_faults(CLUSTER)
    remote = list_jobs(credentials=simulator.credentials(CLUSTER), namespace=NAMESPACE)
    assert [item["metadata"]["name"] for item in remote] == [record.job_name]
    assert [c["code"] for c in simulator.created_bodies(CLUSTER)] == [201]
    assert record.submission_state == SubmissionState.SUBMITTED
    assert record.remote_uid == remote[0]["metadata"]["uid"]
    outcomes = list(record.attempts.order_by("number").values_list("outcome", "http_status"))
    assert outcomes == [
        (AttemptOutcome.TRANSIENT_ERROR, None),
        (AttemptOutcome.ALREADY_EXISTS, 200),
    ]
    assert "Interrupted" in record.attempts.get(number=1).message
    assert RunRecord.objects.get(pk=record.pk).job.state == JobState.PENDING
