"""The job list: the current team's jobs, drafts continue in the wizard, stuck jobs flagged."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pghistory.models import Events

from jobs.drafts.services import job_create
from jobs.models import Job, JobState, RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def web(client: Client, member: Any) -> Client:
    client.force_login(member)
    return client


def draft(team: Team, user: Any, name: str, **data: Any) -> Job:
    return job_create(team=team, user=user, data={"name": name, **data})


def test_the_list_requires_login(client: Client) -> None:
    response = client.get(reverse("jobs:list"))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_home_page_leads_to_the_job_list(web: Client) -> None:
    assert web.get("/")["Location"] == reverse("jobs:list")


def test_the_list_shows_the_teams_jobs_only(
    web: Client, team: Team, owner: Any, other_team: Team, outsider: Any
) -> None:
    draft(team, owner, "ours-1")
    draft(other_team, outsider, "theirs-1")
    html = web.get(reverse("jobs:list")).content.decode()
    row = re.search(r'<tr [^>]*data-job="ours-1">.*?</tr>', html, re.S)
    assert row is not None and "<td>owner</td>" in row.group(0)  # who created it
    assert "theirs-1" not in html
    assert f'href="{reverse("jobs:wizard-new")}"' in html


def test_a_draft_continues_at_its_saved_step(web: Client, team: Team, owner: Any) -> None:
    draft(team, owner, "resume-me", wizard_step=3)
    html = web.get(reverse("jobs:list")).content.decode()
    continue_url = reverse("jobs:wizard-step", kwargs={"name": "resume-me", "step": 3})
    assert f'href="{continue_url}"' in html
    assert "Continue (step 3)" in html
    assert reverse("jobs:wizard", kwargs={"name": "resume-me"}) != continue_url
    resume = web.get(reverse("jobs:wizard", kwargs={"name": "resume-me"}))
    assert resume["Location"] == continue_url


def test_a_draft_lists_the_clusters_of_its_roles(web: Client, team: Team, owner: Any) -> None:
    draft(team, owner, "placed", task_type="custom", roles=[
        {"name": "Actor", "cluster": "gpu-b"}, {"name": "Env", "cluster": "cpu-c"},
    ])
    html = web.get(reverse("jobs:list")).content.decode()
    assert "cpu-c, gpu-b" in html


def test_a_job_pending_too_long_is_flagged_with_its_reason(
    web: Client, team: Team, owner: Any
) -> None:
    job = draft(team, owner, "stuck-job")
    run_record_for(
        job, state=JobState.PENDING, submitted_at=timezone.now(), pending_flagged=True,
        status_reason="Unschedulable: 0/17 nodes are available",
    )
    html = web.get(reverse("jobs:list")).content.decode()
    assert 'class="badge pending"' in html
    assert 'data-flag="pending-too-long"' in html
    assert "Pending too long: Unschedulable: 0/17 nodes are available" in html
    assert "Continue (step" not in html


def test_a_submitted_job_links_to_its_run_record(web: Client, team: Team, owner: Any) -> None:
    job = draft(team, owner, "sent-job")
    run_record_for(job, state=JobState.RUNNING)
    html = web.get(reverse("jobs:list")).content.decode()
    assert f'href="{reverse("jobs:run-record", kwargs={"name": "sent-job"})}">Run record' in html
    assert f'href="{reverse("jobs:job-detail", kwargs={"name": "sent-job"})}">sent-job' in html
    assert reverse("jobs:wizard-step", kwargs={"name": "sent-job", "step": 1}) not in html


@pytest.mark.parametrize("jobs", [2, 60])
def test_the_list_loads_in_a_bounded_number_of_queries(
    web: Client, team: Team, owner: Any, jobs: int, django_assert_max_num_queries: Any
) -> None:
    for n in range(jobs):
        draft(team, owner, f"job-{n:03d}", task_type="rl")
    # session, user, teams (x3), count, page, roles, creators, clusters, session save (+2)
    with django_assert_max_num_queries(14):
        response = web.get(reverse("jobs:list"))
    assert response.status_code == 200
    assert response.content.decode().count("data-job=") == min(jobs, 50)


def _bulk_jobs(team: Team, owner: Any, count: int) -> None:
    """`count` jobs: odd ones Pending on gpu-a (every tenth of those flagged), even ones drafts."""
    jobs = Job.objects.bulk_create([
        Job(team=team, created_by=owner, name=f"bulk-{n:05d}", task_type="rl")
        for n in range(count)
    ], batch_size=2000)
    RunRecord.objects.bulk_create([
        RunRecord(team=team, job=job, job_name=job.name, cluster="gpu-a", namespace="rl-gpu-a",
                  manifest_yaml="", manifest_sha256="", frozen_by=owner, state=JobState.PENDING,
                  pending_flagged=n % 20 == 1)
        for n, job in enumerate(jobs) if n % 2
    ], batch_size=2000)


FILTERS = {"q": "bulk-0", "state": "pending", "cluster": "gpu-a", "creator": "owner",
           "pending": "on", "sort": "name"}


def test_the_filtered_list_and_api_stay_bounded_at_10000_jobs(
    web: Client, team: Team, owner: Any, member: Any, api_client_for: Any,
    django_assert_max_num_queries: Any,
) -> None:
    _bulk_jobs(team, owner, 10_000)
    with django_assert_max_num_queries(14):
        response = web.get(reverse("jobs:list"), {**FILTERS, "page": "2"})
    html = response.content.decode()
    # bulk-00001, -00021, ... below bulk-09999: 500 flagged jobs, 50 a page, sorted by name
    assert "500 jobs" in html and "Page 2 of 10" in html
    assert html.index('data-job="bulk-01001"') < html.index('data-job="bulk-01021"')
    assert 'data-job="bulk-00981"' not in html
    api = api_client_for(member)
    with django_assert_max_num_queries(8):
        body = api.get("/api/v1/jobs/", {**FILTERS, "offset": "50", "limit": "50"}).json()
    assert body["count"] == 500
    assert body["results"][0]["name"] == "bulk-01001"


def test_each_filter_narrows_the_list(web: Client, team: Team, owner: Any, member: Any) -> None:
    _bulk_jobs(team, owner, 40)
    draft(team, member, "mine-on-cpu", task_type="custom",
          roles=[{"name": "A", "cluster": "cpu-c"}])

    def names(**params: str) -> set[str]:
        html = web.get(reverse("jobs:list"), params).content.decode()
        return {part.split('"')[0] for part in html.split('data-job="')[1:]}

    assert names(q="CPU") == {"mine-on-cpu"}
    assert names(creator="member") == {"mine-on-cpu"}
    assert names(cluster="cpu-c") == {"mine-on-cpu"}
    assert len(names(state="pending")) == 20 and len(names(state="draft")) == 21
    assert names(pending="on") == {"bulk-00001", "bulk-00021"}
    assert names(cluster="gpu-a", state="draft") == set()
    html = web.get(reverse("jobs:list"), {"sort": "name"}).content.decode()
    assert html.index('data-job="bulk-00000"') < html.index('data-job="mine-on-cpu"')
    assert "No job matches these filters." in web.get(
        reverse("jobs:list"), {"q": "nothing-like-this"}).content.decode()


def test_pages_keep_the_filters(web: Client, team: Team, owner: Any) -> None:
    _bulk_jobs(team, owner, 300)
    html = web.get(reverse("jobs:list"), {"state": "pending", "sort": "name"}).content.decode()
    assert 'id="page-next" href="?state=pending&amp;sort=name&amp;page=2"' in html
    second = web.get(reverse("jobs:list"), {"state": "pending", "sort": "name", "page": "2"})
    assert 'data-job="bulk-00101"' in second.content.decode()
    assert 'id="page-previous" href="?state=pending&amp;sort=name&amp;page=1"' in (
        second.content.decode())


def test_a_member_of_several_teams_picks_the_team(
    web: Client, team: Team, other_team: Team, owner: Any, outsider: Any, member: Any
) -> None:
    other_team.memberships.create(user=member)
    draft(team, owner, "vision-job")
    draft(other_team, outsider, "nlp-job")
    html = web.get(reverse("jobs:list"), {"team": other_team.slug}).content.decode()
    assert 'data-job="nlp-job"' in html and 'data-job="vision-job"' not in html
    assert web.get("/api/v1/jobs/", {"team": other_team.slug}).json()["count"] == 1


def test_a_malformed_api_query_is_refused(web: Client) -> None:
    response = web.get("/api/v1/jobs/", {"state": "sleeping"})
    assert response.status_code == 400
    assert "state" in response.json()["detail"]


def test_a_draft_is_deleted_from_the_list_audited_and_its_name_freed(
    web: Client, team: Team, owner: Any, member: Any
) -> None:
    job = draft(team, owner, "abandoned")
    response = web.post(reverse("jobs:wizard-delete", kwargs={"name": "abandoned"}),
                        {"next": "/jobs/?q=aband"})
    assert response.status_code == 302 and response["Location"] == "/jobs/?q=aband"
    assert not Job.objects.filter(name="abandoned").exists()
    deleted = Events.objects.get(pgh_obj_model="jobs.Job", pgh_obj_id=str(job.pk),
                                 pgh_label="delete")
    assert deleted.pgh_context["user"] == member.pk
    assert draft(team, member, "abandoned").name == "abandoned"  # the name is free again


def test_only_drafts_are_deleted_and_only_the_teams(
    web: Client, team: Team, owner: Any, other_team: Team, outsider: Any
) -> None:
    sent = draft(team, owner, "sent-job")
    run_record_for(sent, state=JobState.PENDING)
    theirs = draft(other_team, outsider, "their-draft")
    response = web.post(reverse("jobs:wizard-delete", kwargs={"name": "sent-job"}), follow=True)
    assert "only drafts can be changed or deleted" in response.content.decode()
    assert Job.objects.filter(pk=sent.pk).exists()
    assert web.post(reverse("jobs:wizard-delete", kwargs={"name": theirs.name})).status_code == 404
    assert Job.objects.filter(pk=theirs.pk).exists()
    html = web.get(reverse("jobs:list")).content.decode()
    assert 'id="delete-sent-job"' not in html
