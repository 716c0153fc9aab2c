"""GET run-records/{name}/ and GET audit-events/?job={name}: the same JSON as plain ORM reads of
the same rows give (the oracle below reads each list on its own, as the views once did), with
attempts, status changes (two at one instant), first-run checks, a deleted role and a record
whose snapshots name other records than the job links today."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from jobs.core.progress import progress_settings
from jobs.models import (
    FirstRunCheck,
    Job,
    JobState,
    LaunchList,
    PodAttempt,
    Role,
    RunRecord,
    StallEpisode,
    StatusChange,
    SubmissionAttempt,
)
from jobs.records.selectors import AUDIT_EVENTS_IN_CHAIN, events_as_dicts
from jobs.records.serializers import audit_events_data
from rlark_site.foundation.audit.selectors import audit_events
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import run_record_for, submittable_job
from tests.query_bounds import bounded_queries

pytestmark = pytest.mark.django_db


@pytest.fixture
def record(team: Team, owner: Any, admin_user: Any) -> RunRecord:
    load_fleet_rows()
    job = submittable_job(team=team, owner=owner, admin=admin_user, name="pinned-run")
    gone = Role.objects.create(job=job, position=7, name="Gone")
    gone.delete()
    first_list = job.launch_list_id
    job.launch_list = LaunchList.objects.create(team=team, title="later", created_by=owner)
    job.save(update_fields=["launch_list"])
    record = run_record_for(
        job, state=JobState.RUNNING, launch_list_snapshot={"id": first_list, "title": "first"},
        deployment_parameters_snapshot={"id": job.deployment_parameters_id, "roles": []},
        verifications_snapshot=[{"id": 1, "state": "approved"}],
        findings_snapshot=[{"code": "x", "severity": "warning"}],
        remote_uid="uid-1", submitted_at=timezone.now(), failure_message="",
    )
    now = timezone.now()
    SubmissionAttempt.objects.create(run_record=record, number=2, task_id="t2",
                                     outcome="created", http_status=201, message="ok",
                                     finished_at=now)
    SubmissionAttempt.objects.create(run_record=record, number=1, task_id="t1",
                                     outcome="failed", http_status=None, message="timeout")
    same = StatusChange.objects.create(run_record=record, phase="Pending", reason="Unschedulable")
    StatusChange.objects.create(run_record=record, phase="Running", message="up")
    StatusChange.objects.filter(pk=same.pk).update(observed_at=now - timedelta(minutes=5))
    StatusChange.objects.create(run_record=record, phase="Pending", reason="again")
    StatusChange.objects.filter(run_record=record, reason="again").update(
        observed_at=now - timedelta(minutes=5))
    FirstRunCheck.objects.create(run_record=record, observed=False, evidence="none",
                                 notes="n", troubleshooting={"logs": "yes", "gpu": "no"},
                                 checked_by=owner)
    FirstRunCheck.objects.create(run_record=record, observed=True, evidence="reward 0.4",
                                 checked_by=admin_user)
    RunRecord.objects.filter(pk=record.pk).update(manifest_yaml="kind: Job\n",
                                                   manifest_sha256="ab" * 32)
    return RunRecord.objects.get(pk=record.pk)


def oracle_refs(job: Job, record: RunRecord) -> list[tuple[str, Any]]:
    """What a run's audit trail covers, read list by list."""
    from django.apps import apps

    role_ids = set(apps.get_model("jobs", "RoleEvent").objects.filter(job_id=job.pk)
                   .values_list("pgh_obj_id", flat=True))
    role_ids |= set(Role.objects.filter(job_id=job.pk).values_list("pk", flat=True))
    refs: list[tuple[str, Any]] = [("jobs.Job", job.pk), ("jobs.RunRecord", record.pk)]
    refs += [("jobs.Role", str(pk)) for pk in sorted(role_ids)]
    for label, model in (("jobs.SubmissionAttempt", SubmissionAttempt),
                         ("jobs.StatusChange", StatusChange),
                         ("jobs.FirstRunCheck", FirstRunCheck)):
        refs += [(label, pk) for pk in model.objects.filter(run_record=record)
                 .values_list("pk", flat=True)]
    refs += [("jobs.LaunchList", pk) for pk in
             {job.launch_list_id, record.launch_list_snapshot["id"]}]
    refs += [("jobs.DeploymentParameters", pk) for pk in
             {job.deployment_parameters_id, record.deployment_parameters_snapshot["id"]}]
    return refs


def oracle_chain(record: RunRecord) -> Any:
    job = Job.objects.get(pk=record.job_id)
    attempts = SubmissionAttempt.objects.filter(run_record=record).order_by("number")
    changes = StatusChange.objects.filter(run_record=record).order_by("observed_at", "id")
    checks = FirstRunCheck.objects.filter(run_record=record).order_by("checked_at", "id")
    events = audit_events(objects=oracle_refs(job, record)).page(
        AUDIT_EVENTS_IN_CHAIN, oldest_first=True)
    chain = {
        "job": {
            "name": job.name, "team": record.team.slug, "state": record.state,
            "cluster": record.cluster, "namespace": record.namespace,
            "submitted_at": record.submitted_at, "pending_since": record.pending_since,
            "pending_flagged": record.pending_flagged, "status_reason": record.status_reason,
            "status_message": record.status_message,
        },
        "launch_list": record.launch_list_snapshot,
        "deployment_parameters": record.deployment_parameters_snapshot,
        "verifications": record.verifications_snapshot,
        "manifest": {
            "yaml": record.manifest_yaml, "sha256": record.manifest_sha256,
            "frozen_at": record.frozen_at, "frozen_by": record.frozen_by.get_username(),
            "findings_accepted": record.findings_snapshot,
        },
        "submission": {
            "state": record.submission_state, "submitted_at": record.submitted_at,
            "remote_uid": record.remote_uid, "failure_message": record.failure_message,
            "cancelled_at": record.cancelled_at,
            "capture_incomplete": record.capture_incomplete,
            "attempts": [{
                "number": a.number, "task_id": a.task_id, "outcome": a.outcome,
                "http_status": a.http_status, "message": a.message,
                "started_at": a.started_at, "finished_at": a.finished_at,
            } for a in attempts],
        },
        "status_history": [{"phase": c.phase, "reason": c.reason, "message": c.message,
                            "observed_at": c.observed_at} for c in changes],
        "first_run_checks": [{
            "observed": c.observed, "evidence": c.evidence, "notes": c.notes,
            "troubleshooting": c.troubleshooting, "checked_by": c.checked_by.get_username(),
            "checked_at": c.checked_at,
        } for c in checks],
        "progress": {  # nothing read from the Head Task's log yet: the launch list's settings
            "step": None, "total": None, "percent": None, "first_step_at": None,
            "last_step_at": None, "steps_per_hour": None, "eta": None, "stalled": False,
            "stalled_since": None, "points": [], "restarts": 0,
            **progress_settings(record.launch_list_snapshot.get("progress")).as_dict(),
            "episodes": [],
        },
        "cause": record.cause or None,  # SPEC 16: none found yet
        "gpu": {  # SPEC 16: Prometheus is not configured in the tests' settings
            "utilization": None, "tensor_active": None, "as_of": None, "idle": None,
            "idle_since": None, "metric": None, "reason_code": "not_configured",
            "reason": "Prometheus is not configured (RLARK_PROMETHEUS_URL)", "checked_at": None,
            "gpus": 0, "pods": [], "window_seconds": 900, "threshold": 0.05,
            "observed_seconds": 0.0, "idle_seconds": 0.0, "idle_gpu_seconds": 0.0,
            "episodes": [],
        },
        # SPEC 16 per run: no pod of this run was ever bound, so nothing is held yet.
        "gpu_hours": {"productive": 0.0, "stalled": 0.0, "failed": 0.0, "pending_partial": 0.0,
                      "reserved": 0.0, "idle": None, "idle_measured": False},
        "audit_events": events_as_dicts(events),
    }
    return json.loads(JSONRenderer().render(chain))


def test_the_run_record_answers_what_the_rows_say(
    record: RunRecord, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    response = api_client_for(owner).get(f"/api/v1/run-records/{record.job_name}/")
    assert response.status_code == 200
    answer = response.json()
    expected = oracle_chain(record)
    assert json.dumps(answer) == json.dumps(expected)  # key order too
    assert [c["reason"] for c in answer["status_history"]][:2] == ["Unschedulable", "again"]
    assert [a["number"] for a in answer["submission"]["attempts"]] == [1, 2]
    models = {event["model"] for event in answer["audit_events"]}
    assert {"jobs.Role", "jobs.SubmissionAttempt", "jobs.StatusChange", "jobs.FirstRunCheck",
            "jobs.LaunchList", "jobs.DeploymentParameters", "jobs.RunRecord"} <= models
    gone = [e for e in answer["audit_events"] if e["model"] == "jobs.Role"
            and e["data"].get("name") == "Gone"]
    assert gone, "a deleted role stays in the trail"


def test_the_audit_lookup_of_a_job_answers_what_the_rows_say(
    record: RunRecord, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    api = api_client_for(owner)
    job = Job.objects.get(pk=record.job_id)
    expected = audit_events_data(events_as_dicts(
        audit_events(objects=oracle_refs(job, record)).page(500)))
    response = api.get("/api/v1/audit-events/", {"job": record.job_name, "limit": "500"})
    assert response.status_code == 200
    assert json.dumps(response.json()["results"]) == json.dumps(
        json.loads(JSONRenderer().render(expected)))
    page = api.get("/api/v1/audit-events/", {"job": record.job_name, "limit": "3"}).json()
    assert page["results"] == response.json()["results"][:3] and page["next"]


def test_a_draft_without_a_run_record_has_a_trail_too(
    team: Team, owner: Any, admin_user: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    load_fleet_rows()
    job = submittable_job(team=team, owner=owner, admin=admin_user, name="draft-only")
    refs: list[tuple[str, Any]] = [("jobs.Job", job.pk)]
    refs += [("jobs.Role", str(pk)) for pk in job.roles.values_list("pk", flat=True)]
    refs += [("jobs.LaunchList", job.launch_list_id),
             ("jobs.DeploymentParameters", job.deployment_parameters_id)]
    expected = audit_events_data(events_as_dicts(audit_events(objects=refs).page(500)))
    response = api_client_for(owner).get("/api/v1/audit-events/",
                                         {"job": "draft-only", "limit": "500"})
    assert json.dumps(response.json()["results"]) == json.dumps(
        json.loads(JSONRenderer().render(expected)))


def test_the_answers_take_a_fixed_number_of_queries_whatever_the_lists_hold(
    record: RunRecord, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    """The record: the token, the record (or the job with its record), its lists with what the
    trail covers in one statement and the audit page (4), then its GPU-hours (SPEC 16, by
    `jobs.usage.selectors`' rule): the run's row and its pods, status history, stall
    episodes and roles' GPUs, one statement each (5; a sixth, GPU idle episodes, only with
    Prometheus configured). The audit lookup: 4."""
    api = api_client_for(owner)
    StatusChange.objects.bulk_create(
        StatusChange(run_record=record, phase="Running", reason=f"r{n}") for n in range(30))
    now = timezone.now()
    PodAttempt.objects.bulk_create(
        PodAttempt(run_record=record, task="actor", replica=n, pod_name=f"pinned-run-actor-{n}",
                   pod_uid=f"uid-{n}", phase="Running", pod_created_at=now,
                   started_at=now, captured_at=now) for n in range(12))
    StallEpisode.objects.bulk_create(
        StallEpisode(run_record=record, number=n, started_at=now, last_progress_at=now,
                     detected_at=now, stall_after_seconds=60, ended_at=now, end="recovered")
        for n in range(1, 8))
    with bounded_queries(exact=True)(9):
        assert api.get(f"/api/v1/run-records/{record.job_name}/").status_code == 200
    with bounded_queries(exact=True)(4):
        assert api.get("/api/v1/audit-events/", {"job": record.job_name}).status_code == 200
