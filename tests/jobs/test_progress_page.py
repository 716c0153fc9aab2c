"""The Training progress region of the job page and the run record, and the job list's stalled
badge and filter, from what the progress pass stored; another team's record answers 404."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job, JobState, RunProgress, RunRecord, StallEpisode
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def record(team: Team, owner: Any) -> RunRecord:
    job = Job.objects.create(team=team, name="ppo-run", created_by=owner)
    run = RunRecord.objects.create(
        team=team, job=job, job_name=job.name, cluster="gpu-a", namespace="rl-gpu-a",
        manifest_yaml="", manifest_sha256="", frozen_by=owner, state=JobState.RUNNING,
        launch_list_snapshot={"progress": {"pattern": "", "stall_after_seconds": 600,
                                           "cancel_after_stalled_seconds": None}})
    now = timezone.now()
    start = int((now - timedelta(hours=1)).timestamp() * 1000)
    RunProgress.objects.create(
        run_record=run, pod="ppo-run-actor-0", step=240, total=1000,
        first_step_at=now - timedelta(hours=1), last_step_at=now - timedelta(minutes=20),
        points=[[start, 1], [start + 1_800_000, 120], [start + 2_400_000, 240]])
    return run


def client_for(user: Any, language: str = "en") -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(user)
    return client


def test_the_region_draws_the_chart_with_its_text_alternative(record: RunRecord,
                                                              owner: Any) -> None:
    page = client_for(owner).get("/jobs/records/ppo-run/progress/").content.decode()
    assert 'data-step="240"' in page and 'role="img"' in page and 'data-points="3"' in page
    assert "Step 240 of 1000 (24.0 %)" in page and "steps per hour" in page
    assert "hx-trigger=\"every" in page  # live while Running
    assert 'id="stalled-badge"' not in page


def test_a_stall_shows_its_badge_in_both_languages_and_in_the_list(record: RunRecord,
                                                                   owner: Any) -> None:
    since = timezone.now() - timedelta(minutes=10)
    StallEpisode.objects.create(run_record=record, number=1, started_at=since,
                                last_progress_at=since - timedelta(minutes=10),
                                detected_at=since, step=240, stall_after_seconds=600)
    english = client_for(owner).get("/jobs/records/ppo-run/progress/").content.decode()
    assert 'id="stalled-badge"' in english and "Stalled since" in english
    chinese = client_for(owner, "zh-hans").get("/jobs/records/ppo-run/progress/")
    assert "停滞" in chinese.content.decode() and "第 240 步" in chinese.content.decode()
    listed = client_for(owner).get("/jobs/", {"stalled": "on"}).content.decode()
    assert 'data-job="ppo-run"' in listed and "data-stalled" in listed


def test_the_stalled_filter_leaves_out_advancing_runs(record: RunRecord, owner: Any) -> None:
    listed = client_for(owner).get("/jobs/", {"stalled": "on"}).content.decode()
    assert 'data-job="ppo-run"' not in listed


def test_another_teams_record_answers_404(record: RunRecord, outsider: Any) -> None:
    assert client_for(outsider).get("/jobs/records/ppo-run/progress/").status_code == 404
