"""RLark scaled out: two web processes, two Celery workers and one beat on one PostgreSQL and
one Redis, as separate processes (as in production), against the fleet simulator over HTTP.

Every cluster is asked to poll several times at once (on top of beat's own polls) and every
submission message is sent three times, so the two workers race for both. Proven: no cluster
is polled twice at once (each cluster's node listings form whole, uninterrupted page chains
in the simulator's request log), no Job is created twice (the simulator counts creates), and
a session opened on one web process is valid on the other. Every wait is bounded; every
process started here is stopped at the end.
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from clusters.inventory.services import cluster_poll_request
from clusters.models import Node
from clusters.simulator.testing import DEMO_FLEET_PATH, start_simulator_process
from jobs.models import RunRecord, SubmissionState
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import PASSWORD
from tests.jobs.records_support import register_fleet, submittable_job
from tests.jobs.test_worker_crash import child_database_conninfo, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
JOBS = 4
POLLS_PER_CLUSTER = 4
PAGE_SIZE = 4
LATENCY_MS = 60
NODE_LIST = "/api/v1/nodes"
CHILD_ENV = {
    "RLARK_INVENTORY_PAGE_SIZE": str(PAGE_SIZE),
    "RLARK_INVENTORY_POLL_INTERVAL": "2",
    "RLARK_INVENTORY_DUE_CHECK": "1",  # beat's looks for due clusters (5 s by default)
    "RLARK_STATUS_POLL_INTERVAL": "3",
    "RLARK_SUBMIT_RETRY_BASE": "0",
    "RLARK_BEAT_LOCK_TTL": "5",
    "RLARK_WEB_WORKERS": "1",
    "RLARK_WEB_THREADS": "2",
    "RLARK_WEB_ACCESS_LOG": "",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """The RLark processes of one test, each in its own process group, logs in `log_dir`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ, **CHILD_ENV,
            "DATABASE_URL": child_database_conninfo(),
            "REDIS_URL": settings.CELERY_BROKER_URL,
        }

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("wb")
        process = subprocess.Popen([sys.executable, "-m", *args], cwd=REPO, env=self.env,
                                   stdout=log, stderr=log, start_new_session=True)
        self.started.append(process)
        return process

    def web(self, name: str) -> str:
        """Start a web process; its URL (`answering` waits until it answers)."""
        port = free_port()
        self.start(name, "gunicorn", "-c", "python:rlark_site.gunicorn_conf",
                   "--bind", f"127.0.0.1:{port}")
        return f"http://127.0.0.1:{port}"

    @staticmethod
    def answering(*urls: str) -> None:
        for url in urls:
            wait_for(f"{url} to answer", lambda url=url: _answers(f"{url}/health/live"),
                     timeout=60)

    def worker(self, name: str) -> None:
        self.start(name, "celery", "-A", "rlark_site", "worker", "--loglevel=INFO",
                   "--concurrency=2", "--without-gossip", "--without-mingle",
                   "-n", f"{name}@%h")

    def beat(self) -> None:
        self.start("beat", "celery", "-A", "rlark_site", "beat", "--loglevel=INFO",
                   "--schedule", str(self.log_dir / "beat-schedule"))

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.flushdb()
    started = Processes(tmp_path)
    try:
        yield started
    finally:
        started.stop_all()
        broker.flushdb()
        broker.close()


@pytest.fixture
def simulator() -> Iterator[Any]:
    handle = start_simulator_process(DEMO_FLEET_PATH, port=0)
    try:
        yield handle
    finally:
        handle.stop()


def node_list_chains(requests_log: list[dict[str, Any]]) -> list[int]:
    """Lengths of the node-list page chains in a cluster's request log, in order: a chain
    starts with a request without `continue` and runs until the next such request."""
    chains: list[int] = []
    for entry in requests_log:
        if entry["method"] != "GET" or not entry["path"].endswith(NODE_LIST):
            continue
        if "continue" in entry["query"]:
            chains[-1] += 1
        else:
            chains.append(1)
    return chains


def give_password(user: Any) -> None:
    """A password the child processes can check: this process hashes with MD5 for speed
    (tests/conftest.py), which production settings do not accept."""
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, "scale-out-salt", iterations=1000)
    user.save(update_fields=["password"])


def signed_in_session(web: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{web}/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    response = session.post(
        f"{web}/login/", timeout=10, allow_redirects=False,
        data={"username": "owner", "password": PASSWORD,
              "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{web}/login/"},
    )
    assert response.status_code == 302, response.text[:500]
    return session


def signed_in_on(web: str, session: requests.Session) -> bool:
    response = session.get(f"{web}/jobs/", timeout=10, allow_redirects=False)
    return response.status_code == 200


def settled(records: list[RunRecord]) -> Callable[[], bool]:
    def check() -> bool:
        stored = RunRecord.objects.filter(pk__in=[r.pk for r in records])
        return all(r.submission_state == SubmissionState.SUBMITTED for r in stored)

    return check


def test_two_webs_two_workers_and_a_beat_share_the_work_without_doing_it_twice(
    team: Team, owner: Any, admin_user: Any, simulator: Any, processes: Processes
) -> None:
    clusters = register_fleet(simulator)
    give_password(owner)
    jobs = [submittable_job(team=team, owner=owner, admin=admin_user, name=f"scale-{i}")
            for i in range(JOBS)]
    for cluster in clusters:
        simulator.set_faults(cluster.name, latency_ms=LATENCY_MS)
    # Every process starts at once (their start-ups overlap); the webs are waited for before
    # they are used, the workers and beat take the messages once they are up.
    webs = [processes.web("web-1"), processes.web("web-2")]
    processes.worker("worker-1")
    processes.worker("worker-2")
    processes.beat()
    processes.answering(*webs)

    records = [job_submit(job=job, user=owner) for job in jobs]
    for record in records:  # duplicate messages: both workers may take one
        submit_run_record.delay(record.pk)
        submit_run_record.delay(record.pk)
    for cluster in clusters:
        for _ in range(POLLS_PER_CLUSTER):
            cluster_poll_request(cluster=cluster)

    one, two = signed_in_session(webs[0]), signed_in_session(webs[1])
    assert signed_in_on(webs[1], one) and signed_in_on(webs[0], two)
    wait_for("every submission to settle", settled(records), timeout=120)
    pages = {c.name: math.ceil(Node.objects.filter(cluster=c).count() / PAGE_SIZE)
             for c in clusters}
    wait_for("two whole polls of every cluster", lambda: all(
        node_list_chains(simulator.requests(c.name)).count(pages[c.name]) >= 2 for c in clusters
    ), timeout=120)
    processes.stop_all()

    created = [body for c in clusters for body in simulator.created_bodies(c.name)]
    assert sorted(b["body"]["metadata"]["name"] for b in created if b["code"] == 201) == sorted(
        r.job_name for r in records
    )
    for cluster in clusters:  # the last poll may have been cut short by the stop
        *whole, last = node_list_chains(simulator.requests(cluster.name))
        assert set(whole) == {pages[cluster.name]} and last <= pages[cluster.name]
