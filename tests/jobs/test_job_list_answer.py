"""The job list API's answer (GET /api/v1/jobs/) is JobSummarySerializer's, byte for byte.

The list renders its rows without DRF's per-field machinery; JobSummarySerializer stays the
definition of a row (and the schema's), so every answer here is compared with what the
serializer gives for the same jobs, read in full, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.http import QueryDict
from django.test import override_settings
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from jobs.drafts.forms import JobListForm
from jobs.drafts.selectors import JobListQuery, job_search
from jobs.drafts.serializers import JobSummarySerializer
from jobs.models import Job, JobState, RunProgress
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import make_user
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
MOMENT = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _job(team: Team, creator: Any, name: str, *, age: int, **fields: Any) -> Job:
    job = Job.objects.create(team=team, created_by=creator, name=name, **fields)
    Job.objects.filter(pk=job.pk).update(created_at=MOMENT - timedelta(days=age, seconds=age),
                                         updated_at=MOMENT - timedelta(seconds=age))
    return job


@pytest.fixture
def jobs(team: Team, owner: Any, member: Any, other_team: Team, outsider: Any) -> None:
    """Drafts and runs in every shape a row can take, plus another team's job."""
    _job(team, owner, "ppo-math-7b", age=1, task_type="rl", wizard_step=3)
    _job(team, member, "odd name/ü+%~:@!$&'()*,;=", age=2, task_type="custom")
    exact = _job(team, owner, "whole-second", age=3)
    Job.objects.filter(pk=exact.pk).update(updated_at=MOMENT.replace(microsecond=0))
    running = _job(team, member, "running-run", age=4, wizard_step=5)
    run_record_for(running, state=JobState.RUNNING, submitted_at=MOMENT)
    queued = _job(team, owner, "queued-run", age=5)
    run_record_for(queued, state=JobState.QUEUED)
    failed = _job(team, owner, "failed-run", age=6)
    run_record_for(failed, state=JobState.SUBMIT_FAILED,
                   submitted_at=MOMENT - timedelta(hours=1))
    waiting = _job(team, owner, "waiting-run", age=8)
    run_record_for(waiting, state=JobState.PENDING, pending_flagged=True,
                   pending_since=MOMENT - timedelta(hours=2), pending=PENDING_FACTS)
    stepping = _job(team, member, "stepping-run", age=9)
    RunProgress.objects.create(
        run_record=run_record_for(stepping, state=JobState.RUNNING, submitted_at=MOMENT),
        pod="stepping-run-head-0", step=1200, total=5000, last_step_at=MOMENT)
    _job(other_team, outsider, "theirs", age=7)


PENDING_FACTS = {"since": "2026-03-04T03:06:07Z", "source": "scheduler", "roles": [
    {"role": "Rollout", "workers": 4, "waiting": 2, "message": "0/3 nodes are available",
     "short": [{"cluster": "gpu-a", "node": "a-node-03", "resource": "nvidia.com/gpu",
                "free": "4", "allocatable": "8", "needed": "8"}]}]}


def _expected(response: Any, user: Any, query: JobListQuery, *, offset: int = 0,
              limit: int = 50) -> bytes:
    """The answer as the generic serializer renders it, for the page the response shows."""
    request = response.wsgi_request
    every = job_search(user, query)
    page = list(every[offset:offset + limit])
    data = response.json()
    rows = [JobSummarySerializer(job, context={"request": request}).data for job in page]
    return JSONRenderer().render({"count": every.count(), "next": data["next"],
                                  "previous": data["previous"], "results": rows})


@pytest.fixture
def api(api_client_for: Callable[[Any], APIClient], owner: Any) -> APIClient:
    return api_client_for(owner)


@pytest.mark.parametrize("sort", ["-updated", "updated", "created", "name", "-name", "state"])
def test_each_order_answers_the_serializers_rows(
    jobs: None, api: APIClient, owner: Any, sort: str
) -> None:
    response = api.get(JOBS, {"sort": sort})
    assert response.status_code == 200
    assert response.content == _expected(response, owner, JobListQuery(sort=sort))
    assert len(response.json()["results"]) == 8


def test_a_page_and_filters_answer_the_serializers_rows(
    jobs: None, api: APIClient, owner: Any
) -> None:
    response = api.get(JOBS, {"limit": "2", "offset": "1", "sort": "name"})
    assert response.content == _expected(response, owner, JobListQuery(sort="name"),
                                          offset=1, limit=2)
    assert response.json()["next"] and response.json()["previous"]
    response = api.get(JOBS, {"state": "running", "team": "vision-rl"})
    assert response.content == _expected(response, owner, JobListQuery(state="running"))


def test_the_answer_is_the_same_in_chinese_and_another_time_zone(
    jobs: None, api: APIClient, owner: Any
) -> None:
    with override_settings(TIME_ZONE="Asia/Shanghai"):
        response = api.get(JOBS, HTTP_ACCEPT_LANGUAGE="zh-hans")
        assert response.content == _expected(response, owner, JobListQuery())
    assert '+08:00"' in response.content.decode()
    rows = {row["name"]: row for row in response.json()["results"]}
    assert rows["running-run"]["state"] == "running"
    assert rows["running-run"]["submitted_at"] == "2026-03-04T13:06:07.891011+08:00"
    assert rows["ppo-math-7b"]["submitted_at"] is None


def test_a_row_reads_as_documented(jobs: None, api: APIClient) -> None:
    rows = {row["name"]: row for row in api.get(JOBS).json()["results"]}
    assert rows["running-run"] == {
        "name": "running-run", "team": "vision-rl", "task_type": "rl", "state": "running",
        "wizard_step": 5, "created_by": "member", "created_at": "2026-02-28T05:06:03.891011Z",
        "updated_at": "2026-03-04T05:06:03.891011Z", "submitted_at": "2026-03-04T05:06:07.891011Z",
        "stalled": False, "pending": None, "pending_flagged": False,
        "progress": {"step": None, "total": None},
        "url": "http://testserver/api/v1/jobs/running-run/",
    }
    assert rows["whole-second"]["updated_at"] == "2026-03-04T05:06:07Z"
    assert rows["odd name/ü+%~:@!$&'()*,;="]["url"] == (
        "http://testserver/api/v1/jobs/odd%20name%2F%C3%BC+%25~:@!$&'()*,;=/")
    assert "theirs" not in rows


def test_a_row_shows_the_pending_summary_flag_and_progress(jobs: None, api: APIClient) -> None:
    """The detail's `pending` since/summary and `progress` step/total, and the list's flag."""
    rows = {row["name"]: row for row in api.get(JOBS).json()["results"]}
    waiting = rows["waiting-run"]
    assert waiting["state"] == "pending" and waiting["pending_flagged"] is True
    assert waiting["pending"] == {
        "since": "2026-03-04T03:06:07Z",
        "summary": "Rollout: 2 of 4 workers wait for GPUs: a-node-03 has 4 of 8 free, 8 needed."}
    assert waiting["progress"] == {"step": None, "total": None}
    stepping = rows["stepping-run"]
    assert stepping["progress"] == {"step": 1200, "total": 5000}
    assert stepping["pending"] is None and stepping["pending_flagged"] is False
    assert rows["queued-run"]["pending"] is None  # only a Pending run says why it waits
    zh = {row["name"]: row for row in api.get(JOBS, HTTP_ACCEPT_LANGUAGE="zh-hans").json()[
        "results"]}
    assert zh["waiting-run"]["pending"]["summary"] != waiting["pending"]["summary"]


def test_a_page_costs_three_queries(
    team: Team, api: APIClient, django_assert_num_queries: Callable[..., Any]
) -> None:
    """The token, the count and the page, however many jobs and runs the page shows."""
    creators = [make_user(f"creator-{i}", team=team) for i in range(3)]
    for i in range(12):
        job = _job(team, creators[i % 3], f"job-{i:02d}", age=i)
        if i % 4 == 1:
            RunProgress.objects.create(pod="head-0", step=i, total=100, run_record=run_record_for(
                job, state=JobState.RUNNING, submitted_at=MOMENT))
        elif i % 4 == 3:
            run_record_for(job, state=JobState.PENDING, pending=PENDING_FACTS,
                           pending_flagged=i > 6)
    with django_assert_num_queries(3) as queries:
        rows = api.get(JOBS).json()["results"]
    assert len(rows) == 12
    assert sum(row["pending"] is not None for row in rows) == 3
    assert sum(row["progress"]["step"] is not None for row in rows) == 3
    (count,) = [q["sql"] for q in queries.captured_queries if "COUNT(*)" in q["sql"]]
    assert "auth_user" not in count and "jobs_runrecord" not in count  # what a row shows only


def test_a_list_without_a_query_string_is_the_forms_default_query() -> None:
    """The view skips the form when there is no query string: the form's answer then."""
    form = JobListForm(QueryDict())
    assert form.is_valid()
    assert form.query() == JobListQuery()
    assert not form.cleaned_data["team"]
