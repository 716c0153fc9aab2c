"""An admin's confirmation of deployment parameters: each state change, staleness after a job
or record change, the submission gate, the API's permissions, the admin queue page and the
navigation's count (real rows, real services)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.context import evaluate
from jobs.drafts.services import job_update
from jobs.models import ConfirmationState, DeploymentParameters, Job
from jobs.records.confirmation import (
    confirmation_confirm,
    confirmation_reject,
    confirmation_request,
    confirmation_status,
)
from jobs.records.services import deployment_parameters_fill_from_job, deployment_parameters_update
from jobs.records.submission import job_submit
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import submittable_job

pytestmark = pytest.mark.django_db
PARAMS = "/api/v1/deployment-parameters/"


@pytest.fixture
def job(team: Team, owner: Any, admin_user: Any) -> Job:
    """A draft without errors but its deployment parameters: filled from it, still pending."""
    load_fleet_rows()
    draft = submittable_job(team=team, owner=owner, admin=admin_user, confirm=False)
    deployment_parameters_fill_from_job(parameters=draft.deployment_parameters, job=draft,
                                        user=owner)
    return Job.objects.get(pk=draft.pk)


def codes(job: Job) -> list[str]:
    return [f.code for f in evaluate(Job.objects.get(pk=job.pk)).findings]


def parameters_of(job: Job) -> DeploymentParameters:
    return DeploymentParameters.objects.get(pk=job.deployment_parameters_id)


def requested(job: Job, owner: Any) -> DeploymentParameters:
    return confirmation_request(parameters=parameters_of(job), user=owner, job=job)


def _roles(job: Job, **gpus: int) -> list[dict[str, Any]]:
    fields = ("name", "cluster", "selector", "gpus", "devices", "cpu", "memory", "image",
              "image_digest", "prepare_script", "env", "mounts")
    roles = []
    for role in job.roles.order_by("position"):
        body = {field: getattr(role, field) for field in fields}
        roles.append({**body, "gpus": gpus.get(role.name, role.gpus)})
    return roles


# --- state changes ----------------------------------------------------------------------------


def test_filled_pending_parameters_block_only_as_unconfirmed(job: Job) -> None:
    assert parameters_of(job).confirmation_state == ConfirmationState.PENDING
    assert [c for c in codes(job) if c.startswith("deployment_parameters.")] == [
        "deployment_parameters.unconfirmed"]


def test_an_admin_confirms_and_the_job_has_no_finding_left(
    job: Job, owner: Any, admin_user: Any
) -> None:
    record = requested(job, owner)
    decided = confirmation_confirm(parameters_id=record.pk, admin=admin_user, note="racks ok")
    assert decided.confirmation_state == ConfirmationState.CONFIRMED
    assert decided.confirmation_decided_by == admin_user
    assert decided.confirmation_note == "racks ok"
    assert decided.confirmed_content["job_name"] == job.name
    assert decided.confirmed_content["job"]["roles"][0]["gpus"] == 8
    assert len(decided.confirmed_fingerprint) == 64
    assert codes(job) == []


def test_a_rejection_needs_a_note_and_keeps_the_job_blocked(
    job: Job, owner: Any, admin_user: Any
) -> None:
    record = requested(job, owner)
    with pytest.raises(ApplicationError) as refused:
        confirmation_reject(parameters_id=record.pk, admin=admin_user, note="  ")
    assert refused.value.status_code == 400
    confirmation_reject(parameters_id=record.pk, admin=admin_user, note="wrong pool")
    [finding] = [f for f in evaluate(job).findings if f.code == "deployment_parameters.unconfirmed"]
    assert finding.detail["state"] == "rejected" and "wrong pool" in finding.message


def test_only_a_pending_record_is_decided_once(job: Job, owner: Any, admin_user: Any) -> None:
    record = requested(job, owner)
    confirmation_confirm(parameters_id=record.pk, admin=admin_user)
    with pytest.raises(ApplicationError) as second:
        confirmation_reject(parameters_id=record.pk, admin=admin_user, note="late")
    assert second.value.status_code == 409
    assert second.value.extra["decided_by"] == admin_user.username


def test_a_member_cannot_decide(job: Job, owner: Any) -> None:
    with pytest.raises(ApplicationError) as refused:
        confirmation_confirm(parameters_id=job.deployment_parameters_id, admin=owner)
    assert refused.value.status_code == 403


def test_a_job_change_makes_the_confirmation_stale_with_the_reason(
    job: Job, owner: Any, admin_user: Any
) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    job_update(job=job, user=owner, partial=True, data={"roles": _roles(job, Actor=4)})
    found = codes(job)
    assert "deployment_parameters.confirmation_stale" in found
    assert "deployment_parameters.gpus_mismatch" in found
    status = confirmation_status(parameters_of(job))
    assert status.state == "stale" and status.stored_state == "confirmed"
    assert status.reasons == ["role Actor's GPUs changed in the job"]


def test_a_record_change_stores_the_stale_state_and_its_reasons(
    job: Job, owner: Any, admin_user: Any
) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    record = parameters_of(job)
    deployment_parameters_update(parameters=record, user=owner,
                                 fields={"storage_notes": "checkpoints on NVMe now"})
    record.refresh_from_db()
    assert record.confirmation_state == ConfirmationState.STALE
    assert record.confirmation_stale_reasons == [
        {"part": "record", "role": None, "field": "storage_notes"}]
    assert record.confirmation_stale_at is not None
    assert "deployment_parameters.confirmation_stale" in codes(job)


def test_a_title_change_is_not_a_change_of_what_was_confirmed(
    job: Job, owner: Any, admin_user: Any
) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    deployment_parameters_update(parameters=parameters_of(job), user=owner,
                                 fields={"title": "renamed"})
    assert parameters_of(job).confirmation_state == ConfirmationState.CONFIRMED
    assert codes(job) == []


def test_a_stale_record_is_requested_again_and_confirmed_again(
    job: Job, owner: Any, admin_user: Any
) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    job_update(job=job, user=owner, partial=True, data={"roles": _roles(job, Actor=4)})
    job = Job.objects.get(pk=job.pk)
    deployment_parameters_fill_from_job(parameters=parameters_of(job), job=job, user=owner)
    assert parameters_of(job).confirmation_state == ConfirmationState.STALE
    record = requested(job, owner)
    assert record.confirmation_state == ConfirmationState.PENDING
    confirmation_confirm(parameters_id=record.pk, admin=admin_user)
    assert codes(job) == []


def test_a_current_confirmation_is_not_requested_again(
    job: Job, owner: Any, admin_user: Any
) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    with pytest.raises(ApplicationError) as refused:
        requested(job, owner)
    assert refused.value.status_code == 409


def test_a_changed_fingerprint_refuses_the_confirmation(
    job: Job, owner: Any, admin_user: Any
) -> None:
    record = requested(job, owner)
    seen = confirmation_status(record).fingerprint
    deployment_parameters_update(parameters=record, user=owner, fields={"network_notes": "x"})
    with pytest.raises(ApplicationError) as refused:
        confirmation_confirm(parameters_id=record.pk, admin=admin_user,
                             expected_fingerprint=seen)
    assert refused.value.status_code == 409
    assert parameters_of(job).confirmation_state == ConfirmationState.PENDING


def test_each_transition_is_audited_with_its_actor(job: Job, owner: Any, admin_user: Any) -> None:
    record = requested(job, owner)
    confirmation_confirm(parameters_id=record.pk, admin=admin_user)
    events = list(record.events.order_by("pgh_id").values_list(  # type: ignore[attr-defined]
        "confirmation_state", "pgh_context__metadata"))
    assert events[-1][0] == "confirmed"
    assert events[-1][1]["user"] == admin_user.pk
    assert events[-1][1]["transition"] == "confirmation confirmed"
    assert events[-2][1]["transition"] == "confirmation requested"


# --- the gate -------------------------------------------------------------------------------


def test_submission_waits_for_the_confirmation(
    job: Job, owner: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with pytest.raises(ApplicationError) as refused:
        job_submit(job=job, user=owner)
    assert refused.value.status_code == 422
    assert "deployment_parameters.unconfirmed" in {
        f["code"] for f in refused.value.extra["findings"]}
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    with django_capture_on_commit_callbacks(execute=False):
        record = job_submit(job=Job.objects.get(pk=job.pk), user=owner)
    assert record.deployment_parameters_snapshot["confirmation"]["state"] == "confirmed"
    assert record.deployment_parameters_snapshot["confirmation"]["decided_by"] == "platform-admin"


# --- API ------------------------------------------------------------------------------------


@pytest.fixture
def clients(api_client_for: Callable[[Any], APIClient], owner: Any, outsider: Any,
            admin_user: Any) -> dict[str, APIClient]:
    return {"owner": api_client_for(owner), "outsider": api_client_for(outsider),
            "admin": api_client_for(admin_user)}


def test_the_api_request_confirm_flow(job: Job, clients: dict[str, APIClient]) -> None:
    pk = job.deployment_parameters_id
    asked = clients["owner"].post(f"{PARAMS}{pk}/request-confirmation/",
                                  {"job": job.name, "note": "please"}, format="json")
    assert asked.status_code == 200, asked.json()
    body = asked.json()["confirmation"]
    assert (body["state"], body["job"], body["requested_by"], body["request_note"]) == (
        "pending", job.name, "owner", "please")
    queue = clients["admin"].get(f"{PARAMS}queue/")
    assert queue.status_code == 200 and [r["id"] for r in queue.json()["results"]] == [pk]
    confirmed = clients["admin"].post(f"{PARAMS}{pk}/confirm/",
                                      {"note": "ok", "fingerprint": body["fingerprint"]},
                                      format="json")
    assert confirmed.status_code == 200, confirmed.json()
    assert confirmed.json()["confirmation"]["state"] == "confirmed"
    assert confirmed.json()["confirmation"]["decided_by"] == "platform-admin"
    again = clients["admin"].post(f"{PARAMS}{pk}/reject/", {"note": "no"}, format="json")
    assert again.status_code == 409


def test_members_cannot_decide_and_outsiders_do_not_see(
    job: Job, clients: dict[str, APIClient]
) -> None:
    pk = job.deployment_parameters_id
    for action in ("confirm", "reject"):
        answer = clients["owner"].post(f"{PARAMS}{pk}/{action}/", {"note": "x"}, format="json")
        assert answer.status_code == 403
    assert clients["owner"].get(f"{PARAMS}queue/").status_code == 403
    outsider = clients["outsider"].post(f"{PARAMS}{pk}/request-confirmation/", {},
                                        format="json")
    assert outsider.status_code == 404
    assert clients["outsider"].get(f"{PARAMS}{pk}/").status_code == 404
    assert parameters_of(job).confirmation_decided_by is None


def test_an_api_rejection_needs_a_note_and_a_missing_record_is_404(
    job: Job, clients: dict[str, APIClient]
) -> None:
    pk = job.deployment_parameters_id
    assert clients["admin"].post(f"{PARAMS}{pk}/reject/", {"note": ""},
                                 format="json").status_code == 400
    assert clients["admin"].post(f"{PARAMS}999999/confirm/", {},
                                 format="json").status_code == 404
    rejected = clients["admin"].post(f"{PARAMS}{pk}/reject/", {"note": "wrong pool"},
                                     format="json")
    assert rejected.json()["confirmation"]["state"] == "rejected"
    assert rejected.json()["confirmation"]["note"] == "wrong pool"


def test_requesting_for_a_job_that_does_not_use_the_record_is_refused(
    job: Job, team: Team, owner: Any, clients: dict[str, APIClient]
) -> None:
    other = DeploymentParameters.objects.create(team=team, title="other", created_by=owner)
    answer = clients["owner"].post(f"{PARAMS}{other.pk}/request-confirmation/",
                                   {"job": job.name}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "job"


def test_the_api_shows_a_job_change_as_stale(
    job: Job, owner: Any, admin_user: Any, clients: dict[str, APIClient]
) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    job_update(job=job, user=owner, partial=True, data={"roles": _roles(job, Rollout=1)})
    body = clients["owner"].get(f"{PARAMS}{job.deployment_parameters_id}/").json()
    assert body["confirmation"]["state"] == "stale"
    assert body["confirmation"]["changes"] == [{"part": "job", "role": "Rollout",
                                                "field": "gpus"}]


# --- pages ----------------------------------------------------------------------------------


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_queue_confirms_and_counts(job: Job, owner: Any, admin_user: Any) -> None:
    requested(job, owner)
    admin = logged_in(admin_user)
    html = admin.get("/clusters/verifications/queue/").content.decode()
    assert 'id="tab-parameters"' in html
    page = admin.get("/jobs/deployment-parameters/queue/").content.decode()
    assert f'id="parameters-{job.deployment_parameters_id}"' in page
    assert job.name in page
    assert 'id="nav-pending"' in page
    status = confirmation_status(parameters_of(job))
    answer = admin.post(f"/jobs/deployment-parameters/queue/{job.deployment_parameters_id}/decide/",
                        {"decision": "confirm", "note": "", "fingerprint": status.fingerprint})
    assert answer.status_code == 302
    assert parameters_of(job).confirmation_state == ConfirmationState.CONFIRMED
    assert logged_in(owner).get("/jobs/deployment-parameters/queue/").status_code == 403


def test_the_navigation_counts_pending_confirmations(job: Job, admin_user: Any) -> None:
    html = logged_in(admin_user).get("/jobs/").content.decode()
    pending = DeploymentParameters.objects.filter(confirmation_state="pending").count()
    assert pending == 1
    assert 'id="nav-pending"' in html
    assert f">{pending}</span>" in html


def test_a_member_requests_confirmation_from_the_record_page(job: Job, owner: Any,
                                                             admin_user: Any) -> None:
    confirmation_confirm(parameters_id=requested(job, owner).pk, admin=admin_user)
    job_update(job=job, user=owner, partial=True, data={"roles": _roles(job, Actor=4)})
    client = logged_in(owner)
    url = f"/jobs/deployment-parameters/{job.deployment_parameters_id}/"
    html = client.get(url).content.decode()
    assert "role Actor&#x27;s GPUs changed in the job" in html
    client.post(f"{url}request-confirmation/", {"job": job.name})
    assert parameters_of(job).confirmation_state == ConfirmationState.PENDING


def _pending_job(team: Team, owner: Any, admin_user: Any, name: str) -> Job:
    draft = submittable_job(team=team, owner=owner, admin=admin_user, name=name, confirm=False)
    deployment_parameters_fill_from_job(parameters=draft.deployment_parameters, job=draft,
                                        user=owner)
    job = Job.objects.get(pk=draft.pk)
    requested(job, owner)
    return job


def _queue_queries(client: Client) -> tuple[int, str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        answer = client.get("/jobs/deployment-parameters/queue/")
    assert answer.status_code == 200
    return len(queries), answer.content.decode()


def test_the_parameters_queue_reads_a_page_in_queries_that_do_not_grow_with_its_records(
    job: Job, team: Team, owner: Any, admin_user: Any
) -> None:
    """Each record's status and the findings its job has about it, for a page of records, in
    the queries of one (`confirmation_statuses`, `parameters_findings_of`); the findings are
    the ones the job's own evaluation gives."""
    requested(job, owner)
    admin = logged_in(admin_user)
    one, _page = _queue_queries(admin)
    jobs = [job, *(_pending_job(team, owner, admin_user, f"ppo-run-{i}") for i in range(4))]
    # One job drifts from its record after the request: its panel shows the mismatch.
    job_update(job=jobs[2], user=owner, partial=True, data={"roles": _roles(jobs[2], Rollout=1)})
    many, page = _queue_queries(admin)
    assert page.count('class="card parameters"') == 5
    assert many == one
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for each in jobs:
        expected = [c for c in codes(each) if c.startswith("deployment_parameters.")
                    and c not in ("deployment_parameters.unconfirmed",
                                  "deployment_parameters.confirmation_stale")]
        panel = page.split(f'id="parameters-{each.deployment_parameters_id}"')[1].split(
            "</article>")[0]
        assert [c.split('"')[0] for c in panel.split('data-code="')[1:]] == expected
    assert "deployment_parameters.gpus_mismatch" in codes(jobs[2])


def test_the_parameters_queue_decides_in_place_with_htmx(
    job: Job, owner: Any, admin_user: Any
) -> None:
    """With htmx the decision answers the record's panel re-rendered (no redirect): decided,
    or with the error and the note kept; the form targets its own panel."""
    record = requested(job, owner)
    admin = logged_in(admin_user)
    page = admin.get("/jobs/deployment-parameters/queue/").content.decode()
    decide = f"/jobs/deployment-parameters/queue/{record.pk}/decide/"
    assert f'hx-post="{decide}" hx-target="#parameters-{record.pk}" hx-swap="outerHTML"' in page

    refused = admin.post(decide, {"decision": "reject", "note": "  "}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 200
    html = refused.content.decode()
    assert html.lstrip().startswith(f'<article class="card parameters" id="parameters-{record.pk}"')
    assert 'role="alert"' in html and "Say why the deployment parameters are rejected." in html
    assert 'name="decision" value="confirm"' in html  # still pending: the form is still there
    assert parameters_of(job).confirmation_state == ConfirmationState.PENDING

    status = confirmation_status(parameters_of(job))
    answer = admin.post(decide, {"decision": "confirm", "note": "racks ok",
                                 "fingerprint": status.fingerprint}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    html = answer.content.decode()
    assert f'id="parameters-{record.pk}" data-state="confirmed"' in html
    assert "racks ok" in html and "<form" not in html and "<html" not in html
    assert parameters_of(job).confirmation_state == ConfirmationState.CONFIRMED


def test_the_parameters_queue_without_javascript_still_posts_and_redirects_with_the_error(
    job: Job, owner: Any, admin_user: Any
) -> None:
    record = requested(job, owner)
    admin = logged_in(admin_user)
    answer = admin.post(f"/jobs/deployment-parameters/queue/{record.pk}/decide/",
                        {"decision": "reject", "note": ""}, follow=True)
    assert answer.redirect_chain[-1][0].endswith(f"#parameters-{record.pk}")
    assert "Say why the deployment parameters are rejected." in answer.content.decode()
    assert parameters_of(job).confirmation_state == ConfirmationState.PENDING
