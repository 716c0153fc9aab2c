"""`/metrics`: protected by a bearer token, and carrying RLark's own figures, read from
PostgreSQL and Redis at scrape time (so every web pod answers the same)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from clusters.metrics import record_poll
from clusters.models import Node, Verification, VerificationState
from jobs.metrics import record_submission
from jobs.models import Job, JobState, RunRecord
from rlark_site.foundation import metrics
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import run_record_for

TOKEN = "scrape-me"
QUEUE = "metrics-test-queue"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(autouse=True)
def clean_redis() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)

    def clean() -> None:
        for key in client.scan_iter(f"{metrics.PREFIX}*"):
            client.delete(key)
        client.delete(QUEUE)

    clean()
    yield client
    clean()


def scrape(client: Client, **headers: str) -> Any:
    with override_settings(RLARK_METRICS_TOKEN=TOKEN, RLARK_QUEUES=(QUEUE,)):
        return client.get("/metrics", **headers)


def samples(client: Client) -> Samples:
    response = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    found: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_are_off_while_no_token_is_set(db: None, client: Client) -> None:
    with override_settings(RLARK_METRICS_TOKEN=""):
        assert client.get("/metrics").status_code == 404


@pytest.mark.parametrize("header", ["", "Bearer wrong", f"Token {TOKEN}", TOKEN])
def test_a_missing_or_wrong_token_is_refused(db: None, client: Client, header: str) -> None:
    response = scrape(client, HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_nodes_per_cluster_and_last_success_come_from_the_inventory(
    db: None, client: Client,
) -> None:
    clusters = load_fleet_rows()
    gpu_a = next(c for c in clusters if c.name == "gpu-a")
    present = Node.objects.filter(cluster=gpu_a).count()
    Node.objects.filter(id__in=Node.objects.filter(cluster=gpu_a).values("id")[:1]).update(
        gone=True)
    found = samples(client)
    assert found[("rlark_cluster_nodes", (("cluster", "gpu-a"),))] == present - 1
    assert found[("rlark_cluster_last_successful_poll_timestamp_seconds",
                  (("cluster", "gpu-a"),))] == pytest.approx(gpu_a.last_success_at.timestamp())


def test_polls_are_counted_and_timed_per_cluster_and_outcome(db: None, client: Client) -> None:
    record_poll(cluster="gpu-a", outcome="ok", seconds=0.3)
    record_poll(cluster="gpu-a", outcome="ok", seconds=4.0)
    record_poll(cluster="gpu-b", outcome="failed", seconds=10.0)
    found = samples(client)
    assert found[("rlark_inventory_polls_total", (("cluster", "gpu-a"), ("outcome", "ok")))] == 2
    assert found[("rlark_inventory_polls_total",
                  (("cluster", "gpu-b"), ("outcome", "failed")))] == 1
    a = (("cluster", "gpu-a"),)
    assert found[("rlark_inventory_poll_duration_seconds_count", a)] == 2
    assert found[("rlark_inventory_poll_duration_seconds_sum", a)] == pytest.approx(4.3)
    assert found[("rlark_inventory_poll_duration_seconds_bucket", (*a, ("le", "0.5")))] == 1
    assert found[("rlark_inventory_poll_duration_seconds_bucket", (*a, ("le", "5.0")))] == 2
    assert found[("rlark_inventory_poll_duration_seconds_bucket", (*a, ("le", "+Inf")))] == 2


def test_the_verification_queue_length_and_oldest_age(
    db: None, client: Client, team: Team, owner: Any,
) -> None:
    (cluster, *_) = load_fleet_rows()
    for state, age in ((VerificationState.PENDING, 120), (VerificationState.PENDING, 30),
                       (VerificationState.APPROVED, 900)):
        verification = Verification.objects.create(
            team=team, cluster=cluster, selector={"a": "1"}, selector_key=f"a=1,{age}",
            requested_by=owner, state=state)
        Verification.objects.filter(id=verification.id).update(
            created_at=timezone.now() - timedelta(seconds=age))
    found = samples(client)
    assert found[("rlark_verifications_pending", ())] == 2
    assert 120 <= found[("rlark_verification_oldest_pending_age_seconds", ())] < 900


def _job(team: Team, owner: Any, name: str, state: str, checked_ago: float | None) -> Job:
    now = timezone.now()
    job = Job.objects.create(team=team, name=name, created_by=owner)
    if state != JobState.DRAFT:
        checked = None if checked_ago is None else now - timedelta(seconds=checked_ago)
        run_record_for(job, state=state, submitted_at=now, status_checked_at=checked)
    return job


def test_jobs_by_state_and_the_status_sync_lag(
    db: None, client: Client, team: Team, owner: Any,
) -> None:
    _job(team, owner, "a", JobState.RUNNING, 40)
    _job(team, owner, "b", JobState.PENDING, 5)
    _job(team, owner, "c", JobState.SUCCEEDED, 4000)  # finished: no longer followed
    _job(team, owner, "d", JobState.DRAFT, None)
    found = samples(client)
    assert found[("rlark_jobs", (("state", "running"),))] == 1
    assert found[("rlark_jobs", (("state", "succeeded"),))] == 1
    assert found[("rlark_jobs", (("state", "failed"),))] == 0
    assert 40 <= found[("rlark_status_sync_lag_seconds", ())] < 4000


def test_submissions_by_outcome_and_their_latency(
    db: None, client: Client, team: Team, owner: Any,
) -> None:
    job = _job(team, owner, "ppo", JobState.DRAFT, None)
    record = RunRecord.objects.create(
        team=team, job=job, job_name="ppo", cluster="gpu-a", namespace="rl", manifest_yaml="",
        manifest_sha256="0" * 64, frozen_by=owner)
    RunRecord.objects.filter(id=record.id).update(
        submitted_at=record.frozen_at + timedelta(seconds=3))
    record_submission(run_record_id=record.id, outcome="transient_error")
    record_submission(run_record_id=record.id, outcome="created")
    found = samples(client)
    assert found[("rlark_submissions_total", (("outcome", "created"),))] == 1
    assert found[("rlark_submissions_total", (("outcome", "transient_error"),))] == 1
    assert found[("rlark_submission_latency_seconds_count", ())] == 1
    assert found[("rlark_submission_latency_seconds_sum", ())] == pytest.approx(3.0)
    assert found[("rlark_submission_latency_seconds_bucket", (("le", "2.5"),))] == 0
    assert found[("rlark_submission_latency_seconds_bucket", (("le", "5.0"),))] == 1


def test_celery_queue_length_is_read_from_the_broker(
    db: None, client: Client, clean_redis: redis.Redis,
) -> None:
    clean_redis.rpush(QUEUE, "m1", "m2", "m3")
    assert samples(client)[("rlark_celery_queue_length", (("queue", QUEUE),))] == 3


def test_the_routed_queues_are_the_ones_measured() -> None:
    assert set(settings.RLARK_QUEUES) >= {route["queue"]
                                          for route in settings.CELERY_TASK_ROUTES.values()}



def test_busy_and_skipped_polls_are_counted_with_their_outcome(db: None, client: Client) -> None:
    from clusters.models import Cluster
    from clusters.tasks import poll_cluster_task

    clusters = load_fleet_rows()
    busy, disabled = clusters[0], clusters[1]
    Cluster.objects.filter(pk=busy.pk).update(
        poll_lease_until=timezone.now() + timedelta(minutes=5))
    Cluster.objects.filter(pk=disabled.pk).update(enabled=False)
    poll_cluster_task(busy.pk)
    poll_cluster_task(busy.pk)
    poll_cluster_task(disabled.pk)
    poll_cluster_task(10**9)  # deleted before its poll ran
    found = samples(client)
    polls = "rlark_inventory_polls_total"
    assert found[(polls, (("cluster", busy.name), ("outcome", "busy")))] == 2
    assert found[(polls, (("cluster", disabled.name), ("outcome", "skipped")))] == 1
    assert found[(polls, (("cluster", ""), ("outcome", "skipped")))] == 1
    # Not timed: they did not call the cluster.
    assert ("rlark_inventory_poll_duration_seconds_count", (("cluster", busy.name),)) not in found
