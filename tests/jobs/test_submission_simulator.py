"""Submission through the real gateway against the fleet simulator (real HTTP).

Each test ends by counting the Jobs the cluster holds: a submission, however it went,
leaves at most one Job and a run record whose attempts say what happened.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.db import transaction

from clusters.k8s import create_job, list_jobs
from clusters.models import Cluster
from jobs.models import AttemptOutcome, Job, JobState, RunRecord, SubmissionState
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import register_fleet, submittable_job

pytestmark = pytest.mark.django_db

CLUSTER = "gpu-a"
NAMESPACE = "rl-gpu-a"


@pytest.fixture(autouse=True)
def quick_retries(settings: Any) -> None:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0


@pytest.fixture
def job(team: Team, owner: Any, admin_user: Any, demo_simulator: Any) -> Job:
    register_fleet(demo_simulator)
    return submittable_job(team=team, owner=owner, admin=admin_user)


def freeze(job: Job, user: Any, capture: Any) -> RunRecord:
    """Submit and check the task is queued for after the commit (not run here)."""
    with capture(execute=False) as callbacks:
        record = job_submit(job=job, user=user)
    assert len(callbacks) == 1
    return record


def jobs_on_cluster(sim: Any) -> list[dict[str, Any]]:
    return list_jobs(credentials=sim.credentials(CLUSTER), namespace=NAMESPACE)


def attempts(record: RunRecord) -> list[tuple[str, int | None]]:
    return [(a.outcome, a.http_status) for a in record.attempts.order_by("number")]


def test_submit_creates_one_job_with_the_frozen_yaml(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    assert demo_simulator.created_bodies(CLUSTER) == []
    assert submit_run_record.apply(args=[record.pk]).get() == AttemptOutcome.CREATED
    (create,) = demo_simulator.created_bodies(CLUSTER)
    assert create["code"] == 201
    assert create["namespace"] == NAMESPACE
    assert create["body"] == yaml.safe_load(record.manifest_yaml)
    (remote,) = jobs_on_cluster(demo_simulator)
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.SUBMITTED
    assert record.remote_uid == remote["metadata"]["uid"]
    assert attempts(record) == [(AttemptOutcome.CREATED, 201)]
    job.refresh_from_db()
    assert job.run is not None
    assert (job.state, job.run.cluster, job.run.namespace) == (JobState.PENDING, CLUSTER, NAMESPACE)
    for other in ("gpu-b", "cpu-c"):
        assert demo_simulator.created_bodies(other) == []


def test_nothing_is_queued_when_the_transaction_rolls_back(
    job: Job, owner: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            job_submit(job=job, user=owner)
            raise RuntimeError("abort")
    assert callbacks == []
    assert not RunRecord.objects.exists()
    job.refresh_from_db()
    assert job.state == JobState.DRAFT


def test_the_task_run_twice_creates_one_job(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    submit_run_record.apply(args=[record.pk])
    assert submit_run_record.apply(args=[record.pk]).get() == "skipped"
    assert len(jobs_on_cluster(demo_simulator)) == 1
    assert len(demo_simulator.created_bodies(CLUSTER)) == 1
    assert attempts(record) == [(AttemptOutcome.CREATED, 201)]


def test_a_409_for_our_own_object_is_success(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    earlier = create_job(
        credentials=demo_simulator.credentials(CLUSTER),
        namespace=NAMESPACE,
        body=yaml.safe_load(record.manifest_yaml),
    )
    assert submit_run_record.apply(args=[record.pk]).get() == AttemptOutcome.ALREADY_EXISTS
    assert [c["code"] for c in demo_simulator.created_bodies(CLUSTER)] == [201, 409]
    (remote,) = jobs_on_cluster(demo_simulator)
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.SUBMITTED
    assert record.remote_uid == earlier["metadata"]["uid"] == remote["metadata"]["uid"]
    assert attempts(record) == [(AttemptOutcome.ALREADY_EXISTS, 409)]


def test_a_500_is_retried_and_then_succeeds(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")
    submit_run_record.apply(args=[record.pk])
    assert len(jobs_on_cluster(demo_simulator)) == 1
    assert attempts(record) == [
        (AttemptOutcome.TRANSIENT_ERROR, 500),
        (AttemptOutcome.CREATED, 201),
    ]
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.SUBMITTED


def test_a_timeout_is_retried_and_then_succeeds(
    job: Job,
    owner: Any,
    demo_simulator: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.RLARK_KUBE_TIMEOUT = 2.0
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="timeout", hang_seconds=3.0)
    submit_run_record.apply(args=[record.pk])
    assert len(jobs_on_cluster(demo_simulator)) == 1
    assert attempts(record) == [
        (AttemptOutcome.TRANSIENT_ERROR, None),
        (AttemptOutcome.CREATED, 201),
    ]
    assert "Timeout" in record.attempts.get(number=1).message


def test_a_lost_answer_to_a_create_that_happened_is_not_created_again(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="drop_after")
    submit_run_record.apply(args=[record.pk])
    assert len(demo_simulator.created_bodies(CLUSTER)) == 1
    (remote,) = jobs_on_cluster(demo_simulator)
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.SUBMITTED
    assert record.remote_uid == remote["metadata"]["uid"]
    assert attempts(record) == [
        (AttemptOutcome.TRANSIENT_ERROR, None),
        (AttemptOutcome.ALREADY_EXISTS, 200),
    ]


def test_transient_errors_end_in_failed_after_the_last_attempt(
    job: Job,
    owner: Any,
    demo_simulator: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.RLARK_SUBMIT_MAX_ATTEMPTS = 3
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    demo_simulator.set_faults(CLUSTER, fail_next=10, fail_mode="throttle")
    submit_run_record.apply(args=[record.pk])
    assert attempts(record) == [(AttemptOutcome.TRANSIENT_ERROR, 429)] * 3
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.FAILED
    assert record.failure_message.startswith("Gave up after 3 tries")
    assert "429" in record.failure_message
    job.refresh_from_db()
    assert job.state == JobState.SUBMIT_FAILED
    demo_simulator.clear_faults(CLUSTER)
    assert jobs_on_cluster(demo_simulator) == []


def test_a_foreign_object_with_the_same_name_fails_clearly(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    foreign = yaml.safe_load(record.manifest_yaml)
    foreign["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "someone-else"}
    foreign["metadata"]["annotations"] = {}
    theirs = create_job(
        credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE, body=foreign
    )
    assert submit_run_record.apply(args=[record.pk]).get() == AttemptOutcome.PERMANENT_ERROR
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.FAILED
    assert "was not created by RLark for this run" in record.failure_message
    assert attempts(record) == [(AttemptOutcome.PERMANENT_ERROR, 409)]
    job.refresh_from_db()
    assert job.state == JobState.SUBMIT_FAILED
    (remote,) = jobs_on_cluster(demo_simulator)
    assert remote["metadata"]["uid"] == theirs["metadata"]["uid"]


def test_an_object_of_another_rlark_run_is_foreign_too(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    other_run = yaml.safe_load(record.manifest_yaml)
    other_run["metadata"]["annotations"]["rlark.io/spec-sha256"] = "0" * 64
    create_job(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE, body=other_run)
    submit_run_record.apply(args=[record.pk])
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.FAILED


def test_a_refused_credential_is_a_permanent_failure_with_the_api_message(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from clusters.credentials import encrypt

    Cluster.objects.filter(name=CLUSTER).update(token_encrypted=encrypt("wrong-token"))
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    submit_run_record.apply(args=[record.pk])
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.FAILED
    assert record.failure_message.startswith("401 ")
    assert attempts(record) == [(AttemptOutcome.PERMANENT_ERROR, 401)]
    assert jobs_on_cluster(demo_simulator) == []


def test_a_manifest_the_crd_refuses_fails_with_the_422_message(
    job: Job, owner: Any, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = freeze(job, owner, django_capture_on_commit_callbacks)
    broken = yaml.safe_load(record.manifest_yaml)
    broken["spec"]["tasks"][0]["replicas"] = -1
    RunRecord.objects.filter(pk=record.pk).update(manifest_yaml=yaml.safe_dump(broken))
    submit_run_record.apply(args=[record.pk])
    record.refresh_from_db()
    assert record.submission_state == SubmissionState.FAILED
    assert record.failure_message.startswith("422 Invalid:")
    assert "replicas" in record.failure_message
    assert jobs_on_cluster(demo_simulator) == []
