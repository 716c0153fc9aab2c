"""The job list in a real browser, in both languages: filters, pages that keep them, deleting
a draft. Screenshots go to test-artifacts/."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.drafts.services import job_create
from jobs.models import Job, JobState
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.conftest import PASSWORD
from tests.jobs.records_support import run_record_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def jobs(team: Team, owner: Any, member: Any) -> None:
    for n in range(60):
        job_create(team=team, user=owner, data={"name": f"sweep-{n:02d}", "task_type": "rl"})
    job_create(team=team, user=member, data={
        "name": "abandoned-draft", "task_type": "custom",
        "roles": [{"name": "Env", "cluster": "cpu-c"}]})
    stuck = job_create(team=team, user=owner, data={"name": "stuck-run", "task_type": "rl"})
    run_record_for(stuck, state=JobState.PENDING, pending_flagged=True,
                   status_reason="Unschedulable")


def _journey(page: Page, live_server: Any, member: Any, lang: str) -> None:
    login(page, live_server, member.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.goto(f"{live_server.url}/jobs/")
    expect(page.locator("#job-list tbody tr")).to_have_count(50)
    # Pending flag filter: one job.
    page.check("#id_pending")
    with page.expect_navigation():
        page.click("#apply-filters")
    expect(page.locator("#job-list tbody tr")).to_have_count(1)
    expect(page.locator('tr[data-job="stuck-run"]')).to_be_visible()
    screenshot(page, f"job-list-{lang}-pending-filter")
    assert_accessible(page, f"job-list-{lang}-pending-filter")
    # Search, state and sort; the next page keeps them.
    page.goto(f"{live_server.url}/jobs/?q=sweep&state=draft&sort=name")
    expect(page.locator("#job-list tbody tr").first).to_have_attribute("data-job", "sweep-00")
    with page.expect_navigation():
        page.click("#page-next")
    expect(page.locator("#id_q")).to_have_value("sweep")
    expect(page.locator("#id_state")).to_have_value("draft")
    expect(page.locator("#job-list tbody tr")).to_have_count(10)
    expect(page.locator("#job-list tbody tr").first).to_have_attribute("data-job", "sweep-50")
    if lang == "zh-hans":
        expect(page.locator("#job-count")).to_have_text("60 个任务")
    # Creator filter, then delete the draft (confirmed), the filters kept.
    page.goto(f"{live_server.url}/jobs/?creator={member.username}")
    expect(page.locator("#job-list tbody tr")).to_have_count(1)
    screenshot(page, f"job-list-{lang}-creator-filter")
    assert_accessible(page, f"job-list-{lang}-creator-filter")
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click("#delete-abandoned-draft")
    expect(page.locator(".messages")).to_be_visible()
    if lang == "zh-hans":
        expect(page.locator(".messages")).to_contain_text("草稿 abandoned-draft 已删除")
    expect(page.locator("#no-match")).to_be_visible()
    expect(page.locator("#id_creator")).to_have_value(member.username)
    screenshot(page, f"job-list-{lang}-after-delete")
    assert not Job.objects.filter(name="abandoned-draft").exists()


def test_job_list_filters_and_deleting_a_draft_in_english(
    page: Page, live_server: Any, member: Any, jobs: None
) -> None:
    _journey(page, live_server, member, "en")


def test_job_list_filters_and_deleting_a_draft_in_chinese(
    page: Page, live_server: Any, member: Any, jobs: None
) -> None:
    _journey(page, live_server, member, "zh-hans")
