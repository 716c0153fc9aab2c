"""One run's GPU-hours (SPEC 16 "per run") on its run record (API and page) and in the job
detail API: the same rule and figures as `GET usage/?group_by=job` (jobs.core.usage through
jobs.usage.selectors), on stored timelines worked out by hand (tests/jobs/test_usage_api.py's
runs), idle only when Prometheus is configured, null for a job never submitted."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.drafts.services import job_create
from jobs.models import GpuIdleEpisode, JobState, RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.test_usage_api import WINDOW, h, runs  # noqa: F401 (runs: the fixture)
from tests.jobs.usage_support import at, stored_run

pytestmark = pytest.mark.django_db
ApiFor = Callable[[Any], APIClient]

STALLING = {"productive": h(280), "stalled": h(160), "failed": 0.0, "pending_partial": h(40),
            "reserved": 8.0, "idle": None, "idle_measured": False}
FAILING = {"productive": h(320), "stalled": 0.0, "failed": h(26), "pending_partial": 0.0,
           "reserved": h(346), "idle": None, "idle_measured": False}


def _hours(body: dict[str, Any]) -> dict[str, Any]:
    return dict(body["gpu_hours"])


@pytest.mark.parametrize(("name", "expected"), [("stalling", STALLING), ("failing", FAILING)])
def test_the_run_record_and_the_job_detail_answer_the_run_s_gpu_hours(
        runs: None, member: Any, api_client_for: ApiFor,  # noqa: F811
        name: str, expected: dict[str, Any]) -> None:
    api = api_client_for(member)
    record = api.get(f"/api/v1/run-records/{name}/")
    assert record.status_code == 200, record.content
    assert _hours(record.json()) == expected
    detail = api.get(f"/api/v1/jobs/{name}/")
    assert detail.status_code == 200, detail.content
    assert _hours(detail.json()) == expected
    # The same figures as the usage report's row of the run: one rule.
    usage = api.get(f"/api/v1/usage/?{WINDOW}&group_by=job").json()
    (row,) = [g for g in usage["groups"] if g["key"] == name]
    assert {k: row[k] for k in ("productive", "stalled", "failed", "pending_partial",
                                "reserved", "idle")} == {
        k: v for k, v in expected.items() if k != "idle_measured"}


def test_idle_is_counted_when_prometheus_is_configured(
        runs: None, member: Any, settings: Any, api_client_for: ApiFor) -> None:  # noqa: F811
    """The stalling run's 8 GPUs were idle 15-30 by its episode: 8 x 15 GPU-minutes, the split
    unchanged."""
    GpuIdleEpisode.objects.create(
        run_record=RunRecord.objects.get(job_name="stalling"), number=1, started_at=at(15),
        detected_at=at(16), last_idle_at=at(30), ended_at=at(31), threshold=0.05,
        window_seconds=900, gpus=8, idle_seconds=900, idle_gpu_seconds=7200)
    settings.RLARK_PROMETHEUS_URL = "http://127.0.0.1:9/"  # read only by the status pass
    api = api_client_for(member)
    for url in ("/api/v1/run-records/stalling/", "/api/v1/jobs/stalling/"):
        assert _hours(api.get(url).json()) == {**STALLING, "idle": h(120), "idle_measured": True}
    assert _hours(api.get("/api/v1/jobs/failing/").json())["idle"] == 0.0


def test_a_job_never_submitted_has_no_gpu_hours(team: Team, member: Any,
                                                api_client_for: ApiFor) -> None:
    job_create(team=team, user=member, data={"name": "only-a-draft"})
    body = api_client_for(member).get("/api/v1/jobs/only-a-draft/").json()
    assert "gpu_hours" in body and body["gpu_hours"] is None


def _cells(page: str) -> dict[str, str]:
    block = re.search(r'<div class="card" id="run-gpu-hours"[^>]*>(.*?)</table>', page, re.S)
    assert block is not None, "the GPU-hours block"
    return dict(re.findall(r'<td class="num" data-category="([a-z_]+)">([^<]*)</td>',
                           block.group(1)))


@pytest.mark.parametrize(("language", "words"), [
    ("en", ["GPU-hours", "Reserved", "productive", "stalled", "failed", "partially started",
            "RLark reads GPU idleness only when Prometheus is configured"]),
    ("zh-hans", ["GPU 小时"]),
])
@pytest.mark.parametrize("url", ["/jobs/records/stalling/", "/jobs/job/stalling/"])
def test_the_run_record_and_job_pages_show_the_block(
        runs: None, client: Client, member: Any, settings: Any,  # noqa: F811
        language: str, words: list[str], url: str) -> None:
    client.force_login(member)
    response = client.get(url, HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 200
    page = response.content.decode()
    assert _cells(page) == {"reserved": "8.0", "productive": "4.667", "stalled": "2.667",
                            "failed": "0.0", "pending_partial": "0.667"}
    for word in words:
        assert word in page
    if language != "en":
        assert "partially started" not in page and "Reserved" not in page
    assert page.count('id="run-gpu-hours"') == 1
    settings.RLARK_PROMETHEUS_URL = "http://127.0.0.1:9/"
    page = client.get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert _cells(page)["idle"] == "0.0"



@pytest.mark.parametrize(("language", "words"), [
    ("en", "No GPU-hours so far: no pod of this run has held a GPU."),
    ("zh-hans", "暂无 GPU 小时：本次运行还没有 Pod 占用过 GPU。"),
])
@pytest.mark.parametrize("url", ["/jobs/records/waiting/", "/jobs/job/waiting/"])
def test_a_run_that_never_had_a_pod_says_so_instead_of_zero_hours(
        team: Team, owner: Any, member: Any, client: Client, api_client_for: ApiFor,
        language: str, words: str, url: str) -> None:
    """Submitted, still Pending, no pod yet: the API answers its zeros (nothing counted), the
    pages say there is no usage yet instead of a table of 0.0."""
    stored_run(team=team, user=owner, name="waiting", roles={"Actor": 8}, pods=[],
               phases=[(0, "Pending")], state=JobState.PENDING)
    assert _hours(api_client_for(member).get("/api/v1/run-records/waiting/").json())[
        "reserved"] == 0.0
    client.force_login(member)
    page = client.get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert 'id="run-gpu-hours"' not in page and 'data-category="reserved"' not in page
    assert 'id="run-gpu-hours-none"' in page and words in page
