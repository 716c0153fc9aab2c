"""Status sync against the simulator: phase history, Pending deadline, vanished Jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job, JobState, RunRecord
from jobs.records.status import sync_submitted_jobs
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record, sync_cluster_status
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import POOL_SELECTOR, register_fleet, submittable_job

pytestmark = pytest.mark.django_db

CLUSTER = "gpu-a"
NAMESPACE = "rl-gpu-a"


@pytest.fixture(autouse=True)
def quick_calls(settings: Any) -> None:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0


def submitted(
    sim: Any, team: Team, owner: Any, admin: Any, capture: Any, **options: Any
) -> RunRecord:
    register_fleet(sim)
    job = submittable_job(team=team, owner=owner, admin=admin, **options)
    with capture(execute=False):
        record = job_submit(job=job, user=owner)
    submit_run_record.apply(args=[record.pk])
    return record


def phases(record: RunRecord) -> list[str]:
    return list(record.status_changes.order_by("observed_at", "id").values_list("phase", flat=True))


def run_of(record: RunRecord) -> RunRecord:
    """The record as stored now: it owns the run's state, flag and reason."""
    return RunRecord.objects.get(pk=record.pk)


def test_pending_running_succeeded_is_recorded_once_each(
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    sync_submitted_jobs()
    sync_submitted_jobs()
    assert phases(record) == ["Pending"]
    assert run_of(record).state == JobState.PENDING
    demo_simulator.tick()
    sync_submitted_jobs()
    assert phases(record) == ["Pending", "Running"]
    assert run_of(record).state == JobState.RUNNING
    demo_simulator.set_job_phase(
        CLUSTER,
        NAMESPACE,
        record.job_name,
        "Succeeded",
        reason="Completed",
        message="run script exited 0",
    )
    assert sync_cluster_status.apply(args=[CLUSTER]).get()["changed"] == 1
    assert phases(record) == ["Pending", "Running", "Succeeded"]
    run = run_of(record)
    assert run.state == JobState.SUCCEEDED
    assert Job.objects.get(pk=record.job_id).state == JobState.SUCCEEDED  # derived
    assert (run.status_reason, run.status_message) == ("Completed", "run script exited 0")
    assert sync_submitted_jobs().checked == 0  # finished jobs are not polled again


def test_a_job_held_pending_is_flagged_after_the_deadline_with_the_reason(
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(
        demo_simulator,
        team,
        owner,
        admin_user,
        django_capture_on_commit_callbacks,
        worker_selector=POOL_SELECTOR,
    )
    demo_simulator.tick()
    settings.RLARK_PENDING_DEADLINE = 3600
    sync_submitted_jobs()
    run = run_of(record)
    assert run.state == JobState.PENDING
    assert run.pending_flagged is False
    assert run.status_reason == "Unschedulable"
    assert "needs 12 ready node(s)" in run.status_message
    settings.RLARK_PENDING_DEADLINE = 0
    report = sync_submitted_jobs()
    assert report.flagged == 1
    assert run_of(record).pending_flagged is True
    change = record.status_changes.get()
    assert (change.phase, change.reason) == ("Pending", "Unschedulable")


def test_leaving_pending_clears_the_flag(
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.RLARK_PENDING_DEADLINE = 0
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    sync_submitted_jobs()
    assert run_of(record).pending_flagged is True
    demo_simulator.tick()
    sync_submitted_jobs()
    run = run_of(record)
    assert (run.state, run.pending_flagged) == (JobState.RUNNING, False)


def test_a_job_deleted_outside_rlark_is_recorded_as_gone(
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from clusters.k8s import delete_job

    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    delete_job(
        credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE, name=record.job_name
    )
    sync_submitted_jobs()
    assert phases(record) == ["Gone"]
    assert run_of(record).state == JobState.FAILED


def test_an_unreachable_cluster_changes_nothing_and_is_counted(
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")
    report = sync_submitted_jobs()
    assert (report.checked, report.changed, report.unreachable) == (0, 0, 1)
    assert phases(record) == []
    sync_submitted_jobs()
    assert phases(record) == ["Pending"]


def test_a_change_is_recorded_as_observed_at_the_pass_s_moment(
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A pass run for a given `now` records its changes at that moment, as its check."""
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    earlier = timezone.now() - timedelta(minutes=5)
    sync_submitted_jobs(now=earlier)
    demo_simulator.tick()
    later = timezone.now() + timedelta(minutes=5)
    sync_submitted_jobs(now=later)
    changes = list(record.status_changes.order_by("observed_at", "id").values_list(
        "phase", "observed_at"))
    assert changes == [("Pending", earlier), ("Running", later)]
    assert run_of(record).status_checked_at == later
