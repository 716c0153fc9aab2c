"""The record pages: launch lists, deployment parameters, the job page, run records."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from jobs.drafts.services import job_update
from jobs.models import DeploymentParameters, FirstRunCheck, Job, JobState, LaunchList, RunRecord
from jobs.records.checklist import CHECKLIST
from jobs.records.services import run_record_clone
from jobs.records.status import sync_submitted_jobs
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.factories import confirmed_parameters
from tests.jobs.records_support import POOL_SELECTOR, register_fleet, submittable_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quick_calls(settings: Any) -> None:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0


@pytest.fixture
def owner_web(client: Client, owner: Any) -> Client:
    client.force_login(owner)
    return client


@pytest.fixture
def stranger(outsider: Any) -> Client:
    other = Client()
    other.force_login(outsider)
    return other


def page(client: Client, url: str, **params: Any) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def submitted(
    sim: Any, team: Team, owner: Any, admin: Any, capture: Any, **options: Any
) -> RunRecord:
    register_fleet(sim)
    job = submittable_job(team=team, owner=owner, admin=admin, **options)
    with capture(execute=False):
        record = job_submit(job=job, user=owner)
    submit_run_record.apply(args=[record.pk])
    return record


# --- launch lists and deployment parameters ---------------------------------------------------


def test_a_launch_list_is_created_and_edited_in_pages(owner_web: Client, team: Team) -> None:
    assert "no launch lists yet" in page(owner_web, "/jobs/launch-lists/")
    response = owner_web.post(
        "/jobs/launch-lists/new/",
        {
            "title": "PPO first run",
            "entry": "python -m rlinf.train",
            "expected_signals": "reward mean | Head Task log | 20\nfirst checkpoint | /mnt/ckpt |",
        },
    )
    launch_list = LaunchList.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/launch-lists/{launch_list.pk}/"
    assert launch_list.team == team
    assert launch_list.expected_signals == [
        {"signal": "reward mean", "where": "Head Task log", "within_minutes": 20},
        {"signal": "first checkpoint", "where": "/mnt/ckpt", "within_minutes": None},
    ]
    edit = page(owner_web, f"/jobs/launch-lists/{launch_list.pk}/")
    assert "reward mean | Head Task log | 20" in edit
    assert "PPO first run" in page(owner_web, "/jobs/launch-lists/")


def test_a_malformed_signal_line_is_shown_next_to_the_field(owner_web: Client) -> None:
    response = owner_web.post(
        "/jobs/launch-lists/new/",
        {
            "title": "t",
            "expected_signals": "reward | log | soon",
        },
    )
    assert response.status_code == 200
    assert "Line 1: minutes must be a whole number above 0." in response.content.decode()
    assert not LaunchList.objects.exists()


@pytest.mark.parametrize("line", ["reward mean in the log", "reward mean |  | 20", " | log"])
def test_a_signal_line_without_what_and_where_is_refused(owner_web: Client, line: str) -> None:
    response = owner_web.post("/jobs/launch-lists/new/", {"title": "t", "expected_signals": line})
    assert response.status_code == 200
    assert "Line 1: write “what | where | minutes” (what and where are required" in (
        response.content.decode())
    assert not LaunchList.objects.exists()


def test_deployment_parameters_take_yaml_roles_and_link_the_launch_list(
    owner_web: Client, team: Team, owner: Any
) -> None:
    launch_list = LaunchList.objects.create(team=team, title="ll", created_by=owner)
    response = owner_web.post(
        "/jobs/deployment-parameters/new/",
        {
            "title": "placement",
            "launch_list": launch_list.pk,
            "roles": "- role: Actor\n  cluster: gpu-a\n"
            "  selector: {kubernetes.io/hostname: a-head-01}\n  gpus: 8\n",
        },
    )
    assert response.status_code == 302
    params = DeploymentParameters.objects.get()
    assert params.launch_list == launch_list
    assert params.roles[0]["selector"] == {"kubernetes.io/hostname": "a-head-01"}
    listing = page(owner_web, "/jobs/deployment-parameters/")
    assert "placement" in listing and "ll" in listing


def test_broken_yaml_roles_are_reported_not_saved(owner_web: Client) -> None:
    response = owner_web.post(
        "/jobs/deployment-parameters/new/",
        {
            "title": "p",
            "roles": "- role: Actor\n  gpus: [",
        },
    )
    assert response.status_code == 200
    assert "Not valid YAML" in response.content.decode()
    assert not DeploymentParameters.objects.exists()


def test_fill_from_job_draft_in_the_page(
    owner_web: Client, team: Team, owner: Any, admin_user: Any, demo_simulator: Any
) -> None:
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user)
    params = DeploymentParameters.objects.create(team=team, title="empty", created_by=owner)
    response = owner_web.post(f"/jobs/deployment-parameters/{params.pk}/fill/", {"job": job.name})
    assert response.status_code == 302
    params.refresh_from_db()
    assert [r["role"] for r in params.roles] == ["Actor", "Rollout"]
    assert params.verifications.count() == 2
    assert "a-head-01" in page(owner_web, f"/jobs/deployment-parameters/{params.pk}/")


def test_another_teams_records_answer_404_in_pages(
    stranger: Client, team: Team, owner: Any
) -> None:
    launch_list = LaunchList.objects.create(team=team, title="secret list", created_by=owner)
    params = DeploymentParameters.objects.create(team=team, title="secret params", created_by=owner)
    assert stranger.get(f"/jobs/launch-lists/{launch_list.pk}/").status_code == 404
    assert stranger.post(f"/jobs/launch-lists/{launch_list.pk}/", {"title": "x"}).status_code == 404
    assert stranger.get(f"/jobs/deployment-parameters/{params.pk}/").status_code == 404
    assert (
        stranger.post(f"/jobs/deployment-parameters/{params.pk}/fill/", {"job": "x"}).status_code
        == 404
    )
    assert "secret list" not in page(stranger, "/jobs/launch-lists/")
    assert "secret params" not in page(stranger, "/jobs/deployment-parameters/")


# --- the job page -----------------------------------------------------------------------------


def test_the_job_page_shows_the_pending_flag_with_the_reason(
    owner_web: Client,
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
    settings.RLARK_PENDING_DEADLINE = 0
    sync_submitted_jobs()
    html = page(owner_web, f"/jobs/job/{record.job_name}/")
    assert "Pending too long" in html
    assert "Unschedulable" in html
    assert "needs 12 ready node(s)" in html
    assert "Cancel job" in html
    assert "has not been seen Running yet" in html


def test_the_first_run_check_form_stores_a_no_with_the_checklist(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    sync_submitted_jobs()
    demo_simulator.tick()
    sync_submitted_jobs()
    html = page(owner_web, f"/jobs/job/{record.job_name}/")
    assert "first rollout batch with reward mean" in html
    assert "First-run troubleshooting checklist" in html
    response = owner_web.post(
        f"/jobs/job/{record.job_name}/first-run-check/",
        {
            "observed": "no",
            "evidence": "nothing in the log",
            "answer__cluster_check.warning": "problem",
            "note__cluster_check.warning": "only the head joined",
            "answer__run_script.cd": "ok",
        },
    )
    assert response.status_code == 302
    check = FirstRunCheck.objects.get()
    assert check.observed is False
    assert check.troubleshooting["cluster_check.warning"] == {
        "answer": "problem",
        "note": "only the head joined",
    }
    assert check.troubleshooting["run_script.cd"]["answer"] == "ok"
    assert check.troubleshooting["image.tools"]["answer"] == "unchecked"
    after = page(owner_web, f"/jobs/job/{record.job_name}/")
    assert "signal NOT observed" in after
    assert "only the head joined" in after
    _answers_in_the_forms_order(after)
    _answers_in_the_forms_order(page(owner_web, f"/jobs/records/{record.job_name}/"))


def _answers_in_the_forms_order(html: str) -> None:
    """The stored answers read in the checklist's order, whatever order JSON kept them in."""
    positions = [html.rindex(str(escape(item.question))) for item in CHECKLIST]
    assert positions == sorted(positions)


def test_the_run_record_speaks_chinese_for_what_the_worker_stored(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    sync_submitted_jobs()
    assert record.attempts.get().message == "Created on the cluster."
    assert record.status_changes.filter(phase="Pending").exists()
    html = owner_web.get(f"/jobs/records/{record.job_name}/",
                       HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "<td>Created on the cluster.</td>" not in html  # the audit keeps the stored words
    assert "<td>已在集群上创建。</td>" in html
    assert "<td>Pending</td>" not in html
    assert "<td>等待中</td>" in html


def test_cancel_from_the_job_page(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    response = owner_web.post(f"/jobs/job/{record.job_name}/cancel/")
    assert response.status_code == 302
    assert Job.objects.get(pk=record.job_id).state == JobState.CANCELLED
    assert "Cancel job" not in page(owner_web, f"/jobs/job/{record.job_name}/")


def test_the_job_page_of_another_team_answers_404(
    stranger: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    assert stranger.get(f"/jobs/job/{record.job_name}/").status_code == 404
    assert stranger.post(f"/jobs/job/{record.job_name}/cancel/").status_code == 404
    assert (
        stranger.post(
            f"/jobs/job/{record.job_name}/first-run-check/", {"observed": "yes"}
        ).status_code
        == 404
    )
    assert Job.objects.get(pk=record.job_id).state == JobState.PENDING


# --- run records ------------------------------------------------------------------------------


def test_the_run_record_page_shows_the_chain_in_order(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    sync_submitted_jobs()
    html = page(owner_web, f"/jobs/records/{record.job_name}/")
    sections = [
        "1. Launch list",
        "2. Deployment parameters",
        "3. Verifications",
        "4. Final YAML",
        "5. Submission",
        "6. Status history",
        "7. First-run check",
        "8. Audit events",
    ]
    positions = [html.index(section) for section in sections]
    assert positions == sorted(positions)
    assert record.manifest_sha256 in html
    assert "apiVersion: rlinf.io/v1alpha1" in html


def test_the_run_records_audit_groups_events_by_object_with_field_changes(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user)
    first = job.roles.get(position=0)
    job_update(job=job, user=owner, partial=True, data={"roles": [
        {**_body(role), "prepare_script": "source /opt/rl/bin/activate"}
        if role.pk == first.pk else _body(role)
        for role in job.roles.order_by("position")]})
    with django_capture_on_commit_callbacks(execute=False):
        record = job_submit(job=Job.objects.get(pk=job.pk), user=owner)
    html = page(owner_web, f"/jobs/records/{record.job_name}/")
    audit = html[html.index('id="audit"'):]
    assert audit.count(f'data-model="jobs.Role" data-object="{first.pk}"') == 1
    assert "jobs.Role #" in audit and " delete" not in audit
    assert f'<strong>{first.name}</strong>' in audit
    assert ("<strong>prepare_script</strong>: <del>source /opt/venv/bin/activate</del> → "
            "<ins>source /opt/rl/bin/activate</ins>") in audit


def _body(role: Any) -> dict[str, Any]:
    return {field: getattr(role, field) for field in (
        "name", "cluster", "selector", "gpus", "devices", "cpu", "memory", "image",
        "image_digest", "prepare_script", "env", "mounts")}


def test_the_lookup_finds_a_record_by_name(
    owner_web: Client,
    stranger: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    exact = owner_web.get("/jobs/records/", {"name": record.job_name})
    assert exact.status_code == 302
    assert exact["Location"] == f"/jobs/records/{record.job_name}/"
    assert record.job_name in page(owner_web, "/jobs/records/", name="ppo")
    assert record.job_name not in page(stranger, "/jobs/records/", name="ppo")
    assert stranger.get("/jobs/records/", {"name": record.job_name}).status_code == 200
    assert stranger.get(f"/jobs/records/{record.job_name}/").status_code == 404


def test_a_platform_admin_reads_any_run_record(
    client: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    client.force_login(admin_user)
    assert record.manifest_sha256 in page(client, f"/jobs/records/{record.job_name}/")


def test_clone_and_diff_from_the_run_record_page(
    owner_web: Client,
    stranger: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    assert (
        stranger.post(f"/jobs/records/{record.job_name}/clone/", {"name": "stolen"}).status_code
        == 404
    )
    response = owner_web.post(f"/jobs/records/{record.job_name}/clone/", {"name": "ppo-run-2"})
    assert response.status_code == 302
    assert response["Location"] == "/jobs/wizard/ppo-run-2/step-1/"  # not a bare page of "—"
    assert owner_web.get("/jobs/job/ppo-run-2/")["Location"] == "/jobs/wizard/ppo-run-2/"
    clone = Job.objects.get(name="ppo-run-2")
    assert clone.state == JobState.DRAFT
    with django_capture_on_commit_callbacks(execute=False):
        job_submit(job=clone, user=owner)
    html = page(owner_web, "/jobs/records/ppo-run-2/diff/", against=record.job_name, raw="1")
    assert '<span class="del">-  name: ppo-run</span>' in html
    assert '<span class="add">+  name: ppo-run-2</span>' in html
    assert (
        stranger.get("/jobs/records/ppo-run-2/diff/", {"against": record.job_name}).status_code
        == 404
    )


def test_the_diff_of_a_clone_changing_only_gpus_and_the_name_lists_exactly_the_gpu_change(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    clone = run_record_clone(run_record=record, user=owner, name="ppo-run-gpus")
    job_update(job=clone, user=owner, partial=True, data={"roles": [
        {**_body(role), "gpus": 4} if role.name == "Actor" else _body(role)
        for role in clone.roles.order_by("position")]})
    # The parameters now describe 8 GPUs: filled from the clone, confirmed again.
    confirmed_parameters(Job.objects.get(pk=clone.pk), admin=admin_user)
    with django_capture_on_commit_callbacks(execute=False):
        job_submit(job=Job.objects.get(pk=clone.pk), user=owner)
    body = owner_web.get("/api/v1/run-records/ppo-run-gpus/diff/",
                       {"against": record.job_name}).json()
    assert body["changes"] == {"job": [], "roles": [{
        "role": "actor", "change": "changed",
        "fields": [{"field": "gpus", "from": "8", "to": "4", "lines": []}],
    }]}
    assert "-  name: ppo-run" in body["diff"]  # the raw diff still has the name's lines
    html = page(owner_web, "/jobs/records/ppo-run-gpus/diff/", against=record.job_name)
    assert html.count('<tr data-field="') == 1 and '<tr data-field="gpus">' in html
    assert 'id="diff-raw" href="?against=ppo-run&amp;raw=1"' in html
    raw = page(owner_web, "/jobs/records/ppo-run-gpus/diff/", against=record.job_name, raw="1")
    assert '<span class="add">+  name: ppo-run-gpus</span>' in raw


def test_cloning_under_a_taken_name_shows_the_refusal(
    owner_web: Client,
    demo_simulator: Any,
    team: Team,
    owner: Any,
    admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record = submitted(demo_simulator, team, owner, admin_user, django_capture_on_commit_callbacks)
    response = owner_web.post(f"/jobs/records/{record.job_name}/clone/", {"name": record.job_name})
    assert response.status_code == 400
    assert "already taken" in response.content.decode()
