"""The migration that makes the run record the one owner of a run's lifecycle.

Migrate back, write rows in the old shape (state on both models), migrate forward and
compare; then migrate back again and compare with what was written first (a round trip).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.migrating import migrate, migrated_to

BEFORE = [("jobs", "0006_audit_no_truncate")]
AFTER = [("jobs", "0007_run_record_owns_lifecycle")]
LIFECYCLE = ("state", "cluster", "namespace", "submitted_at", "pending_since",
             "pending_flagged", "status_reason", "status_message", "status_checked_at")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def old_apps() -> Iterator[Any]:
    with migrated_to(BEFORE) as apps:
        yield apps


def old_job(apps: Any, team: Any, user: Any, name: str, **fields: Any) -> Any:
    return apps.get_model("jobs", "Job").objects.create(
        team=team, name=name, created_by=user, **fields
    )


def old_record(apps: Any, job: Any, *, submission_state: str, **fields: Any) -> Any:
    return apps.get_model("jobs", "RunRecord").objects.create(
        team=job.team, job=job, job_name=job.name, cluster=job.cluster or "gpu-a",
        namespace=job.namespace or "rl-gpu-a", manifest_yaml="kind: Job\n",
        manifest_sha256="0" * 64, frozen_by=job.created_by, submission_state=submission_state,
        **fields,
    )


def old_rows(apps: Any, now: datetime) -> dict[str, dict[str, Any]]:
    """One job in every lifecycle position, old shape; {name: its Job's lifecycle fields}."""
    team = apps.get_model("tenancy", "Team").objects.create(slug="t", name="T")
    user = apps.get_model("auth", "User").objects.create(username="u")
    placed = {"cluster": "gpu-a", "namespace": "rl-gpu-a"}
    old_job(apps, team, user, "draft-job")
    running = old_job(apps, team, user, "running-job", state="running", submitted_at=now,
                      status_reason="Started", status_message="all tasks up", **placed)
    old_record(apps, running, submission_state="submitted", submitted_at=now, remote_uid="u1")
    stuck = old_job(apps, team, user, "stuck-job", state="pending", submitted_at=now,
                    pending_since=now - timedelta(hours=1), pending_flagged=True,
                    status_reason="Unschedulable", status_checked_at=now, **placed)
    old_record(apps, stuck, submission_state="submitted", submitted_at=now)
    cancelled = old_job(apps, team, user, "cancelled-job", state="cancelled", **placed)
    old_record(apps, cancelled, submission_state="queued", cancelled_at=now)
    refused = old_job(apps, team, user, "refused-job", state="submit_failed", **placed)
    old_record(apps, refused, submission_state="failed", failure_message="422 Invalid")
    queued = old_job(apps, team, user, "queued-job", state="queued", **placed)
    old_record(apps, queued, submission_state="queued")
    Job = apps.get_model("jobs", "Job")
    return {job.name: {f: getattr(job, f) for f in LIFECYCLE} for job in Job.objects.all()}


def test_rows_are_carried_over_and_back(old_apps: Any) -> None:
    now = timezone.now().replace(microsecond=0)
    before = old_rows(old_apps, now)
    submission_before = dict(
        old_apps.get_model("jobs", "RunRecord").objects.values_list("job_name", "submission_state")
    )

    new_apps = migrate(AFTER)
    Job, RunRecord = new_apps.get_model("jobs", "Job"), new_apps.get_model("jobs", "RunRecord")
    assert Job.objects.count() == len(before)
    assert not RunRecord.objects.filter(job__name="draft-job").exists()
    runs = {run.job_name: run for run in RunRecord.objects.all()}
    assert {name: run.state for name, run in runs.items()} == {
        "running-job": "running", "stuck-job": "pending", "cancelled-job": "cancelled",
        "refused-job": "submit_failed", "queued-job": "queued",
    }
    for name, run in runs.items():
        assert {f: getattr(run, f) for f in LIFECYCLE} == before[name], name
    assert runs["running-job"].remote_uid == "u1"

    back = migrate(BEFORE)
    OldJob, OldRecord = back.get_model("jobs", "Job"), back.get_model("jobs", "RunRecord")
    assert {job.name: {f: getattr(job, f) for f in LIFECYCLE} for job in OldJob.objects.all()} \
        == before
    assert dict(OldRecord.objects.values_list("job_name", "submission_state")) \
        == submission_before
