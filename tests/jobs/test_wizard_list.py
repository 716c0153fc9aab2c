"""The job list: the current team's jobs, drafts continue in the wizard, stuck jobs flagged."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.drafts.services import job_create
from jobs.models import Job, JobState
from rlark_site.tenancy.models import Team

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
    assert 'data-job="ours-1"' in html and "owner" in html
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
    Job.objects.filter(pk=job.pk).update(
        state=JobState.PENDING, cluster="gpu-a", namespace="rl-gpu-a",
        submitted_at=timezone.now(), pending_flagged=True,
        status_reason="Unschedulable: 0/17 nodes are available",
    )
    html = web.get(reverse("jobs:list")).content.decode()
    assert 'class="badge pending"' in html
    assert 'data-flag="pending-too-long"' in html
    assert "Pending too long: Unschedulable: 0/17 nodes are available" in html
    assert "Continue (step" not in html


def test_a_submitted_job_links_to_its_run_record(web: Client, team: Team, owner: Any) -> None:
    job = draft(team, owner, "sent-job")
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, cluster="gpu-a")
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
    with django_assert_max_num_queries(12):
        response = web.get(reverse("jobs:list"))
    assert response.status_code == 200
    assert response.content.decode().count("data-job=") == min(jobs, 50)
