"""The data migrations of the jobs app, checked on rows written in the shape before them.

Migrating the whole schema back and forward is the dearest thing a test here does (minutes on
a loaded machine), so the tests of this module share one trip: the module goes back ONCE to the
earliest state any of them needs (jobs 0006), each test walks forward (or back) from wherever
the previous one left the schema to the state it starts from, and the module goes forward to
the leaf once at the end. Each test still migrates to its own starting point first, so it runs
alone (``-k``) or in any order; walking there is a no-op when the schema already is there.

- the run record becomes the one owner of a run's lifecycle (0007): rows in the old shape
  (state on both models) are carried over, and back again on a round trip;
- deployment parameters get a confirmation (0011): every existing record becomes pending,
  asked for by its author when it was last changed (so the admin queue orders it).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models.signals import post_migrate
from django.utils import timezone

from rlark_site.foundation.audit.indexes import ensure_lookup_indexes

LIFECYCLE_BEFORE = [("jobs", "0006_audit_no_truncate")]
LIFECYCLE_AFTER = [("jobs", "0007_run_record_owns_lifecycle")]
CONFIRMATION_BEFORE = [("jobs", "0010_launch_list_image")]
CONFIRMATION_AFTER = [("jobs", "0011_deployment_parameters_confirmation")]
EARLIEST = LIFECYCLE_BEFORE
LIFECYCLE = ("state", "cluster", "namespace", "submitted_at", "pending_since",
             "pending_flagged", "status_reason", "status_message", "status_checked_at")

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(target: list[tuple[str, str]]) -> Any:
    """Migrate the jobs app to `target`; the historical apps at that point.

    One executor per call (its loader reads which migrations are applied when it is built);
    when the schema is already at `target` nothing is migrated."""
    executor = MigrationExecutor(connection)
    if not executor.migration_plan(target):
        return executor.loader.project_state(target).apps
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


@pytest.fixture(scope="module")
def schema_trip(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Back to the earliest state once for the module; forward to the leaf once at the end,
    and the tables emptied, as every transactional test leaves them.

    Between the tests the schema is a historical one, and the flush after each test runs the
    post_migrate receivers: the audit's lookup indexes want the leaf's event tables, so that
    receiver waits for the leaf (the final flush runs it)."""
    pghistory = django_apps.get_app_config("pghistory")
    with django_db_blocker.unblock():
        migrate(EARLIEST)
    post_migrate.disconnect(ensure_lookup_indexes, sender=pghistory)
    try:
        yield
    finally:
        post_migrate.connect(ensure_lookup_indexes, sender=pghistory)
        with django_db_blocker.unblock():
            executor = MigrationExecutor(connection)
            executor.migrate([key for key in executor.loader.graph.leaf_nodes()
                              if key[0] == "jobs"])
            call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def lifecycle_apps(schema_trip: None) -> Any:
    return migrate(LIFECYCLE_BEFORE)


@pytest.fixture
def confirmation_apps(schema_trip: None) -> Any:
    return migrate(CONFIRMATION_BEFORE)


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


def test_rows_are_carried_over_and_back(lifecycle_apps: Any) -> None:
    old_apps = lifecycle_apps
    now = timezone.now().replace(microsecond=0)
    before = old_rows(old_apps, now)
    submission_before = dict(
        old_apps.get_model("jobs", "RunRecord").objects.values_list("job_name", "submission_state")
    )

    new_apps = migrate(LIFECYCLE_AFTER)
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

    back = migrate(LIFECYCLE_BEFORE)
    OldJob, OldRecord = back.get_model("jobs", "Job"), back.get_model("jobs", "RunRecord")
    assert {job.name: {f: getattr(job, f) for f in LIFECYCLE} for job in OldJob.objects.all()} \
        == before
    assert dict(OldRecord.objects.values_list("job_name", "submission_state")) \
        == submission_before


def test_existing_records_become_pending_asked_by_their_author(confirmation_apps: Any) -> None:
    old_apps = confirmation_apps
    team = old_apps.get_model("tenancy", "Team").objects.create(slug="t", name="T")
    user = old_apps.get_model("auth", "User").objects.create(username="author")
    old = old_apps.get_model("jobs", "DeploymentParameters").objects.create(
        team=team, title="placement", created_by=user,
        roles=[{"role": "Actor", "cluster": "gpu-a", "selector": {"a": "b"}, "gpus": 8}],
    )
    new_apps = migrate(CONFIRMATION_AFTER)
    row = new_apps.get_model("jobs", "DeploymentParameters").objects.get(pk=old.pk)
    assert row.confirmation_state == "pending"
    assert row.confirmation_requested_by_id == user.pk
    assert row.confirmation_requested_at == old.updated_at
    assert row.confirmed_content == {} and row.confirmation_decided_by_id is None
    assert row.roles == old.roles
