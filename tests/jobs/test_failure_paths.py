"""Concurrency and failure paths of a run: concurrent cancels, and submit with the broker down."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import AttemptOutcome, Job, JobState, RunRecord
from jobs.records.submission import job_submit, stalled_run_record_ids, submit_attempt
from jobs.tasks import submit_run_record
from rlark_site.celery import app as celery_app
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import register_fleet, submittable_job

CLUSTER = "gpu-a"
UNREACHABLE_BROKER = "redis://127.0.0.1:9/0"  # the discard port: nothing listens there
CANCELS = 6


@pytest.fixture(autouse=True)
def quick_calls(settings: Any) -> None:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0


def deletes(simulator: Any, name: str) -> list[dict[str, Any]]:
    return [r for r in simulator.requests(CLUSTER)
            if r["method"] == "DELETE" and r["path"].endswith(f"/jobs/{name}")]


@pytest.mark.django_db(transaction=True)
def test_concurrent_cancels_delete_once_record_once_and_answer_409(
    demo_simulator: Any, team: Team, owner: Any, admin_user: Any,
    api_client_for: Callable[[Any], APIClient], monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    monkeypatch.setattr("jobs.records.submission.enqueue_submission", sent.append)
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user)
    record = job_submit(job=job, user=owner)
    assert sent == [record.pk]
    assert submit_attempt(run_record_id=record.pk).outcome == AttemptOutcome.CREATED
    clients = [api_client_for(owner) for _ in range(CANCELS)]
    start = threading.Barrier(CANCELS)
    codes: list[int] = []

    def cancel(client: APIClient) -> None:
        try:
            start.wait()
            codes.append(client.post(f"/api/v1/jobs/{job.name}/cancel/").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=cancel, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(codes) == [200] + [409] * (CANCELS - 1)
    assert len(deletes(demo_simulator, job.name)) == 1
    assert list(record.status_changes.values_list("phase", flat=True)) == ["Cancelled"]
    assert RunRecord.objects.get(pk=record.pk).state == JobState.CANCELLED


def forget_broker_connections() -> None:
    """Make the app open its pools anew from `broker_url` (what Celery does after a fork)."""
    celery_app._after_fork()


@pytest.fixture
def broker_down() -> Iterator[None]:
    """The Celery app publishing to an address where no broker listens."""
    working = celery_app.conf.broker_url
    celery_app.conf.broker_url = UNREACHABLE_BROKER
    forget_broker_connections()
    try:
        yield
    finally:
        celery_app.conf.broker_url = working
        forget_broker_connections()


@pytest.mark.django_db
def test_submit_with_the_broker_down_answers_202_and_the_beat_resumes_it(
    demo_simulator: Any, team: Team, owner: Any, admin_user: Any, broker_down: None,
    api_client_for: Callable[[Any], APIClient], django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client_for(owner).post(f"/api/v1/jobs/{job.name}/submit/")
    assert response.status_code == 202, response.content
    assert response.json() == {"state": "queued", "run_record": job.name}
    assert "in on_commit()" in caplog.text  # the send failed and was logged, not raised
    record = RunRecord.objects.get(job_name=job.name)
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED
    assert demo_simulator.created_bodies(CLUSTER) == []

    later = timezone.now() + timedelta(minutes=5)
    assert stalled_run_record_ids(now=later) == [record.pk]  # what the beat sends again
    assert submit_run_record.apply(args=[record.pk]).get() == AttemptOutcome.CREATED
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
