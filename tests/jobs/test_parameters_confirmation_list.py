"""The deployment-parameters list page and list API show the effective confirmation state
(stale once the confirmed job changed), through `confirmation_status`, in bounded queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from jobs.drafts.services import job_update
from jobs.models import ConfirmationState, DeploymentParameters, Job
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import submittable_job
from tests.jobs.test_parameters_confirmation import _roles

pytestmark = pytest.mark.django_db
PARAMS = "/api/v1/deployment-parameters/"
PAGE = "/jobs/deployment-parameters/"


@pytest.fixture
def job(team: Team, owner: Any, admin_user: Any) -> Job:
    """A draft whose deployment parameters an admin confirmed for it."""
    load_fleet_rows()
    return submittable_job(team=team, owner=owner, admin=admin_user, confirm=True)


def _logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _cell(html: str, pk: int) -> str:
    row = html.split(f'href="/jobs/deployment-parameters/{pk}/"', 1)[1].split("</tr>", 1)[0]
    return row.split('class="confirmation"', 1)[1]


@pytest.mark.parametrize(("language", "words"), [("en", ">stale<"), ("zh-hans", ">已过期<")])
def test_the_list_page_shows_a_job_change_as_stale(job: Job, owner: Any, language: str,
                                                   words: str) -> None:
    pk = job.deployment_parameters_id
    client = _logged_in(owner)
    before = client.get(PAGE, HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert 'data-state="confirmed"' in _cell(before, pk)
    job_update(job=job, user=owner, partial=True, data={"roles": _roles(job, Actor=4)})
    assert DeploymentParameters.objects.get(pk=pk).confirmation_state == \
        ConfirmationState.CONFIRMED  # stored: the change is the job's
    answer = client.get(PAGE, HTTP_ACCEPT_LANGUAGE=language)
    assert answer.status_code == 200
    cell = _cell(answer.content.decode(), pk)
    assert 'data-state="stale"' in cell and words in cell


def test_the_list_api_shows_a_job_change_as_stale(
    job: Job, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    client = api_client_for(owner)
    [before] = client.get(PARAMS).json()["results"]
    assert before["confirmation"]["state"] == "confirmed"
    job_update(job=job, user=owner, partial=True, data={"roles": _roles(job, Rollout=1)})
    [body] = client.get(PARAMS).json()["results"]
    detail = client.get(f"{PARAMS}{job.deployment_parameters_id}/").json()
    assert body["confirmation"]["state"] == "stale" == detail["confirmation"]["state"]
    assert body["confirmation"]["stored_state"] == "confirmed"
    assert body["confirmation"]["changes"] == detail["confirmation"]["changes"] == [
        {"part": "job", "role": "Rollout", "field": "gpus"}]


def test_the_lists_read_a_bounded_number_of_queries(
    job: Job, team: Team, owner: Any, admin_user: Any,
    api_client_for: Callable[[Any], APIClient], django_assert_max_num_queries: Any,
) -> None:
    page, api = _logged_in(owner), api_client_for(owner)
    with CaptureQueriesContext(connection) as one_page:
        assert page.get(PAGE).status_code == 200
    with CaptureQueriesContext(connection) as one_api:
        assert len(api.get(PARAMS).json()["results"]) == 1
    for number in range(19):
        submittable_job(team=team, owner=owner, admin=admin_user, name=f"ppo-run-{number}")
    assert DeploymentParameters.objects.exclude(confirmation_job=None).count() == 20
    with django_assert_max_num_queries(len(one_page)):
        html = page.get(PAGE).content.decode()
    assert html.count('data-state="confirmed"') == 20
    with django_assert_max_num_queries(len(one_api)):
        results = api.get(PARAMS).json()["results"]
    assert [r["confirmation"]["state"] for r in results] == ["confirmed"] * 20
