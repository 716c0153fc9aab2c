"""The progress chart in a real browser, in both languages: the job page's chart advances
without a reload while the progress pass reads the simulator's step lines, then the run is
frozen, a pass past the stall limit shows the stalled badge on the job page and in the job list
(and its filter). The passes (beat's work) are called from the test while the page polls.
Screenshots: test-artifacts/."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.utils import timezone
from playwright.sync_api import Page, expect

from jobs.models import RunRecord
from jobs.progress.reader import read_cluster_progress
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.conftest import PASSWORD
from tests.jobs.observe_support import CLUSTER, NAMESPACE, running_job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

JOB = "ppo-run"


@pytest.fixture(autouse=True)
def eager(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 1.0
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    clear_prefix(OBSERVE_PREFIX)
    yield
    current_app.conf.task_always_eager = before
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def stepping(demo_simulator: Any, team: Team, owner: Any, admin_user: Any,
             django_capture_on_commit_callbacks: Any) -> RunRecord:
    record = running_job(demo_simulator, team=team, owner=owner, admin=admin_user,
                         capture=django_capture_on_commit_callbacks)
    record.launch_list_snapshot["progress"] = {"pattern": "", "stall_after_seconds": 60,
                                               "cancel_after_stalled_seconds": None}
    record.save(update_fields=["launch_list_snapshot"])
    sync_submitted_jobs()
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, step_seconds=0.3)
    return record


def _step(page: Page) -> int:
    text = page.locator("#job-progress").get_attribute("data-step") or ""
    return int(text) if text else 0


def _pass_until(page: Page, condition: Any) -> None:
    """Progress passes until the page shows `condition`: after each pass the region (polling
    every second) gets 1.5 s to show it, looked at every 100 ms."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        read_cluster_progress(cluster=CLUSTER)
        shown_by = time.monotonic() + 1.5
        while time.monotonic() < shown_by:
            if condition():
                return
            page.wait_for_timeout(100)
    raise AssertionError("the page did not show it")


@pytest.mark.parametrize("lang, stalled_word, step_word", [
    ("en", "stalled", "Step"), ("zh-hans", "停滞", "第"),
])
def test_the_chart_advances_live_and_the_stall_shows_its_badge(
        page: Page, live_server: Any, demo_simulator: Any, owner: Any,
        stepping: RunRecord, lang: str, stalled_word: str, step_word: str) -> None:
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.goto(f"{live_server.url}/jobs/job/{JOB}/")
    _pass_until(page, lambda: _step(page) >= 2)
    first = _step(page)
    chart = page.locator("#job-progress svg.progress-chart")
    expect(chart).to_have_attribute("role", "img")
    expect(page.locator("#progress-text")).to_contain_text(step_word)
    _pass_until(page, lambda: _step(page) > first)  # without a reload
    assert int(chart.get_attribute("data-points") or 0) >= 2
    screenshot(page, f"progress-advancing-{lang}")
    assert_accessible(page, f"{lang}-job-page-progress")

    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    read_cluster_progress(cluster=CLUSTER)
    read_cluster_progress(cluster=CLUSTER, now=timezone.now() + timedelta(seconds=120))
    expect(page.locator("#stalled-badge")).to_contain_text(stalled_word, timeout=30_000)
    expect(page.locator("#stalled-note")).to_be_visible()
    screenshot(page, f"progress-stalled-{lang}")
    assert_accessible(page, f"{lang}-job-page-stalled")
    page.goto(f"{live_server.url}/jobs/?stalled=on")
    expect(page.locator(f'tr[data-job="{JOB}"] [data-stalled]')).to_contain_text(stalled_word)
