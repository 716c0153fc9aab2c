"""Submit, cancel, first-run check, run record, clone and diff through the API (SPEC 12),
with the simulator as the cluster."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from clusters.k8s import list_jobs
from jobs.core.render import dump_yaml
from jobs.models import (
    FirstRunCheck,
    Job,
    JobState,
    RunRecord,
    StatusChange,
    SubmissionState,
)
from jobs.records.status import sync_submitted_jobs
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import register_fleet, submittable_job

pytestmark = pytest.mark.django_db

CLUSTER = "gpu-a"
NAMESPACE = "rl-gpu-a"


@pytest.fixture(autouse=True)
def quick_calls(settings: Any) -> None:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0


@pytest.fixture
def api(api_client_for: Callable[[Any], APIClient], owner: Any) -> APIClient:
    return api_client_for(owner)


@pytest.fixture
def outsider_api(api_client_for: Callable[[Any], APIClient], outsider: Any) -> APIClient:
    return api_client_for(outsider)


@pytest.fixture
def job(team: Team, owner: Any, admin_user: Any, demo_simulator: Any) -> Job:
    register_fleet(demo_simulator)
    return submittable_job(team=team, owner=owner, admin=admin_user)


def submit(api: APIClient, name: str, capture: Any) -> RunRecord:
    with capture(execute=False) as callbacks:
        response = api.post(f"/api/v1/jobs/{name}/submit/")
    assert response.status_code == 202, response.json()
    assert response.json() == {"state": "queued", "run_record": name}
    assert len(callbacks) == 1
    return RunRecord.objects.get(job_name=name)


@pytest.fixture
def submitted(job: Job, api: APIClient, django_capture_on_commit_callbacks: Any) -> RunRecord:
    record = submit(api, job.name, django_capture_on_commit_callbacks)
    submit_run_record.apply(args=[record.pk])
    return record


def running(record: RunRecord, sim: Any) -> None:
    sync_submitted_jobs()
    sim.tick()
    sync_submitted_jobs()
    assert Job.objects.get(pk=record.job_id).state == JobState.RUNNING


# --- submit -----------------------------------------------------------------------------------


def test_submit_answers_422_with_findings_while_an_error_remains(job: Job, api: APIClient) -> None:
    Job.objects.filter(pk=job.pk).update(launch_list=None)
    response = api.post(f"/api/v1/jobs/{job.name}/submit/")
    assert response.status_code == 422
    assert "launch_list.missing" in {f["code"] for f in response.json()["findings"]}
    assert not RunRecord.objects.exists()
    job.refresh_from_db()
    assert job.state == JobState.DRAFT


def test_a_submitted_job_cannot_be_submitted_again(submitted: RunRecord, api: APIClient) -> None:
    response = api.post(f"/api/v1/jobs/{submitted.job_name}/submit/")
    assert response.status_code == 409
    assert RunRecord.objects.count() == 1


def test_submit_freezes_the_records_and_the_verifications(
    job: Job, api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    record = submit(api, job.name, django_capture_on_commit_callbacks)
    assert record.launch_list_snapshot["id"] == job.launch_list_id
    assert record.launch_list_snapshot["expected_signals"][0]["within_minutes"] == 20
    assert record.deployment_parameters_snapshot["launch_list"] == job.launch_list_id
    assert {v["state"] for v in record.verifications_snapshot} == {"approved"}
    assert len(record.verifications_snapshot) == 2
    assert (record.cluster, record.namespace) == (CLUSTER, NAMESPACE)
    assert hashlib.sha256(record.manifest_yaml.encode()).hexdigest() == record.manifest_sha256


def test_another_teams_job_cannot_be_submitted(job: Job, outsider_api: APIClient) -> None:
    assert outsider_api.post(f"/api/v1/jobs/{job.name}/submit/").status_code == 404
    assert not RunRecord.objects.exists()


# --- the run record ---------------------------------------------------------------------------


def test_the_run_record_returns_the_chain_in_order_with_the_received_yamls_hash(
    submitted: RunRecord, api: APIClient, demo_simulator: Any
) -> None:
    running(submitted, demo_simulator)
    response = api.get(f"/api/v1/run-records/{submitted.job_name}/")
    assert response.status_code == 200
    chain = response.json()
    assert list(chain) == [
        "job",
        "launch_list",
        "deployment_parameters",
        "verifications",
        "manifest",
        "submission",
        "status_history",
        "first_run_checks",
        "progress",
        "cause",
        "gpu",
        "gpu_hours",
        "audit_events",
    ]
    (received,) = demo_simulator.created_bodies(CLUSTER)
    sent_hash = hashlib.sha256(dump_yaml(received["body"]).encode()).hexdigest()
    assert chain["manifest"]["sha256"] == sent_hash
    assert [c["phase"] for c in chain["status_history"]] == ["Pending", "Running"]
    assert [a["outcome"] for a in chain["submission"]["attempts"]] == ["created"]
    models = {event["model"] for event in chain["audit_events"]}
    assert {
        "jobs.Job",
        "jobs.Role",
        "jobs.RunRecord",
        "jobs.SubmissionAttempt",
        "jobs.StatusChange",
        "jobs.LaunchList",
        "jobs.DeploymentParameters",
    } <= models
    times = [event["at"] for event in chain["audit_events"]]
    assert times == sorted(times)


def test_the_audit_trail_of_a_job_covers_its_run_record_in_a_bounded_number_of_queries(
    submitted: RunRecord, api: APIClient, demo_simulator: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    running(submitted, demo_simulator)
    with CaptureQueriesContext(connection) as trail_queries:
        trail = api.get("/api/v1/audit-events/", {"job": submitted.job_name, "limit": "500"})
    assert trail.status_code == 200
    models = {event["model"] for event in trail.json()["results"]}
    assert {"jobs.Job", "jobs.Role", "jobs.RunRecord", "jobs.SubmissionAttempt",
            "jobs.StatusChange", "jobs.LaunchList", "jobs.DeploymentParameters"} <= models
    # the API token, the job with its run record, what the trail covers (roles, attempts,
    # status changes, checks: one query whatever the number of each), the page (positions
    # and rows in one statement: the trail spans few tables)
    sql = [query["sql"] for query in trail_queries.captured_queries]
    assert len(sql) == 4, sql
    assert sum('FROM "jobs_job"' in one and '"jobs_runrecord"' in one for one in sql) == 1
    assert not any(one.startswith('SELECT "jobs_runrecord"') for one in sql)
    covers = [r"\bjobs_submissionattempt\b", r"\bjobs_statuschange\b", r"\bjobs_roleevent\b"]
    assert sum(all(re.search(table, one) for table in covers) for one in sql) == 1


@pytest.mark.parametrize("changes", [0, 25])
def test_the_run_record_is_read_in_a_fixed_number_of_queries(
    submitted: RunRecord, api: APIClient, demo_simulator: Any, changes: int,
    django_assert_max_num_queries: Any,
) -> None:
    """Token, record, its three lists with what the audit trail covers (one query), the audit
    events (positions and rows with their actors, one statement: the trail spans few
    tables); then the run's GPU-hours (SPEC 16): its row, pods, status history, stall episodes
    and roles' GPUs, one statement each."""
    running(submitted, demo_simulator)
    StatusChange.objects.bulk_create(
        StatusChange(run_record=submitted, phase="Running", reason=f"r{n}") for n in range(changes)
    )
    with django_assert_max_num_queries(9):
        chain = api.get(f"/api/v1/run-records/{submitted.job_name}/").json()
    assert len(chain["status_history"]) == 2 + changes
    assert {"jobs.Role", "jobs.StatusChange"} <= {e["model"] for e in chain["audit_events"]}


def test_another_team_gets_404_and_a_platform_admin_reads_the_record(
    submitted: RunRecord,
    outsider_api: APIClient,
    admin_user: Any,
    api_client_for: Callable[[Any], APIClient],
) -> None:
    path = f"/api/v1/run-records/{submitted.job_name}/"
    assert outsider_api.get(path).status_code == 404
    assert outsider_api.get("/api/v1/run-records/").json()["results"] == []
    assert api_client_for(admin_user).get(path).status_code == 200


# --- cancel -----------------------------------------------------------------------------------


def test_cancel_deletes_the_job_from_its_cluster_and_keeps_the_record(
    submitted: RunRecord, api: APIClient, demo_simulator: Any
) -> None:
    response = api.post(f"/api/v1/jobs/{submitted.job_name}/cancel/")
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    assert list_jobs(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE) == []
    submitted.refresh_from_db()
    assert submitted.cancelled_at is not None
    assert submitted.submission_state == SubmissionState.SUBMITTED
    assert Job.objects.get(pk=submitted.job_id).state == JobState.CANCELLED
    assert submitted.status_changes.get().phase == "Cancelled"
    assert api.post(f"/api/v1/jobs/{submitted.job_name}/cancel/").status_code == 409
    assert api.get(f"/api/v1/run-records/{submitted.job_name}/").status_code == 200


def test_cancel_before_the_task_ran_means_the_task_creates_nothing(
    job: Job, api: APIClient, demo_simulator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    record = submit(api, job.name, django_capture_on_commit_callbacks)
    assert api.post(f"/api/v1/jobs/{job.name}/cancel/").status_code == 200
    assert submit_run_record.apply(args=[record.pk]).get() == "skipped"
    assert demo_simulator.created_bodies(CLUSTER) == []
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_a_job_already_gone_from_its_cluster_cancels_fine(
    submitted: RunRecord, api: APIClient, demo_simulator: Any
) -> None:
    from clusters.k8s import delete_job

    delete_job(
        credentials=demo_simulator.credentials(CLUSTER),
        namespace=NAMESPACE,
        name=submitted.job_name,
    )
    assert api.post(f"/api/v1/jobs/{submitted.job_name}/cancel/").status_code == 200


def test_another_team_cannot_cancel(
    submitted: RunRecord, outsider_api: APIClient, demo_simulator: Any
) -> None:
    assert outsider_api.post(f"/api/v1/jobs/{submitted.job_name}/cancel/").status_code == 404
    assert len(list_jobs(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE)) == 1


# --- first-run check --------------------------------------------------------------------------


def test_the_first_run_check_waits_for_running(submitted: RunRecord, api: APIClient) -> None:
    response = api.post(
        f"/api/v1/jobs/{submitted.job_name}/first-run-check/", {"observed": True}, format="json"
    )
    assert response.status_code == 409
    assert not FirstRunCheck.objects.exists()


def test_an_observed_signal_is_stored_with_who_and_when(
    submitted: RunRecord, api: APIClient, owner: Any, demo_simulator: Any
) -> None:
    running(submitted, demo_simulator)
    response = api.post(
        f"/api/v1/jobs/{submitted.job_name}/first-run-check/",
        {
            "observed": True,
            "evidence": "reward_mean=0.12 at step 1",
            "notes": "as expected",
        },
        format="json",
    )
    assert response.status_code == 201
    check = FirstRunCheck.objects.get()
    assert (check.observed, check.evidence, check.checked_by) == (
        True,
        "reward_mean=0.12 at step 1",
        owner,
    )
    assert check.troubleshooting == {}
    listing = api.get(f"/api/v1/jobs/{submitted.job_name}/first-run-check/").json()
    assert listing["checks"][0]["checked_by"] == "owner"
    assert listing["expected_signals"][0]["where"] == "Head Task log"


def test_a_missing_signal_stores_the_troubleshooting_answers(
    submitted: RunRecord, api: APIClient, demo_simulator: Any
) -> None:
    running(submitted, demo_simulator)
    checklist = api.get(f"/api/v1/jobs/{submitted.job_name}/first-run-check/").json()
    codes = [item["code"] for item in checklist["checklist"]]
    assert {
        "image.tools",
        "prepare.before_ray",
        "run_script.cd",
        "head.one_replica",
        "cluster_check.warning",
        "mounts.shadowing",
    } <= set(codes)
    response = api.post(
        f"/api/v1/jobs/{submitted.job_name}/first-run-check/",
        {
            "observed": False,
            "evidence": "no reward line after 30 min",
            "troubleshooting": {
                "cluster_check.warning": {"answer": "problem", "note": "2 of 5 nodes joined"},
                "run_script.cd": {"answer": "ok"},
            },
        },
        format="json",
    )
    assert response.status_code == 201
    check = FirstRunCheck.objects.get()
    assert check.troubleshooting == {
        "cluster_check.warning": {"answer": "problem", "note": "2 of 5 nodes joined"},
        "run_script.cd": {"answer": "ok", "note": ""},
    }


def test_an_unknown_checklist_item_is_refused(
    submitted: RunRecord, api: APIClient, demo_simulator: Any
) -> None:
    running(submitted, demo_simulator)
    response = api.post(
        f"/api/v1/jobs/{submitted.job_name}/first-run-check/",
        {
            "observed": False,
            "troubleshooting": {"vibes": {"answer": "ok"}},
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "troubleshooting"


def test_another_team_cannot_record_a_first_run_check(
    submitted: RunRecord, outsider_api: APIClient, demo_simulator: Any
) -> None:
    running(submitted, demo_simulator)
    response = outsider_api.post(
        f"/api/v1/jobs/{submitted.job_name}/first-run-check/", {"observed": True}, format="json"
    )
    assert response.status_code == 404


# --- clone and diff ---------------------------------------------------------------------------


def test_clone_makes_a_new_draft_with_the_roles_and_common_configuration(
    submitted: RunRecord, api: APIClient
) -> None:
    response = api.post(
        f"/api/v1/run-records/{submitted.job_name}/clone/", {"name": "ppo-run-2"}, format="json"
    )
    assert response.status_code == 201
    assert response.json() == {"name": "ppo-run-2", "state": "draft"}
    source, clone = Job.objects.get(pk=submitted.job_id), Job.objects.get(name="ppo-run-2")
    fields = (
        "task_type",
        "header_role",
        "run_script",
        "team_id",
        "launch_list_id",
        "deployment_parameters_id",
    )
    assert [getattr(clone, f) for f in fields] == [getattr(source, f) for f in fields]
    roles = ("name", "cluster", "selector", "gpus", "image", "prepare_script")
    assert list(clone.roles.values_list(*roles)) == list(source.roles.values_list(*roles))
    taken = api.post(
        f"/api/v1/run-records/{submitted.job_name}/clone/", {"name": "ppo-run-2"}, format="json"
    )
    assert taken.status_code == 400


def test_another_team_cannot_clone(submitted: RunRecord, outsider_api: APIClient) -> None:
    response = outsider_api.post(
        f"/api/v1/run-records/{submitted.job_name}/clone/", {"name": "stolen"}, format="json"
    )
    assert response.status_code == 404
    assert not Job.objects.filter(name="stolen").exists()


def test_the_diff_of_two_run_records_shows_the_changed_lines(
    submitted: RunRecord, api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    api.post(
        f"/api/v1/run-records/{submitted.job_name}/clone/", {"name": "ppo-run-2"}, format="json"
    )
    api.patch("/api/v1/jobs/ppo-run-2/", {"run_script": "cd /w && python train.py"}, format="json")
    submit(api, "ppo-run-2", django_capture_on_commit_callbacks)
    response = api.get("/api/v1/run-records/ppo-run-2/diff/", {"against": submitted.job_name})
    assert response.status_code == 200
    diff = response.json()["diff"]
    assert diff.startswith(f"--- {submitted.job_name} (")
    assert "-  name: ppo-run\n" in diff
    assert "+  name: ppo-run-2\n" in diff


def test_a_diff_against_another_teams_record_answers_404(
    submitted: RunRecord, outsider_api: APIClient, api: APIClient
) -> None:
    assert (
        outsider_api.get(
            f"/api/v1/run-records/{submitted.job_name}/diff/", {"against": submitted.job_name}
        ).status_code
        == 404
    )
    assert (
        api.get(
            f"/api/v1/run-records/{submitted.job_name}/diff/", {"against": "nobody"}
        ).status_code
        == 404
    )
