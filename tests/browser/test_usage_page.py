"""The team usage page in a real browser, in both languages: reached from the navigation
(Records → GPU-hours), the window and grouping chosen with the form, the stacked chart and the
tables showing the hand-computed figures, a bad window refused with the form kept, and the CSV
downloaded. Screenshots: test-artifacts/."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.models import JobState
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.conftest import PASSWORD
from tests.jobs.usage_support import stored_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def runs(team: Team, owner: Any, member: Any) -> None:
    # 8 GPUs: bound at 0, Running at 5, stalled 20-40, succeeded at 60 -> 8.0 GPU-hours
    # (partial 0.667, productive 4.667, stalled 2.667); 2 GPUs for 30 min, failed at 30 -> 1.0.
    stored_run(team=team, user=owner, name="stalling", roles={"Actor": 8},
               pods=[("actor", 0, 0, 60, "Succeeded")],
               phases=[(0, "Pending"), (5, "Running"), (60, "Succeeded")], stalls=[(20, 40)])
    stored_run(team=team, user=member, name="failing", roles={"Actor": 2},
               pods=[("actor", 0, 0, 30, "Failed")], phases=[(0, "Running"), (30, "Failed")],
               state=JobState.FAILED)


@pytest.mark.parametrize("lang, title, per_job, download", [
    ("en", "GPU-hours", "job", "Download CSV"), ("zh-hans", "GPU 小时", "作业", "下载 CSV"),
])
def test_the_usage_page_from_the_navigation_to_the_csv(
        page: Page, live_server: Any, runs: None, owner: Any, lang: str, title: str,
        per_job: str, download: str) -> None:
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.click("#nav-records-button")
    with page.expect_navigation():
        page.click("#nav-records-menu a[href='/jobs/usage/']")
    expect(page.locator("h1")).to_have_text(title)

    page.fill("#id_from", "2026-11-09")
    page.fill("#id_to", "2026-11-01")
    with page.expect_navigation():
        page.click("#usage-filters button[type=submit]")
    expect(page.locator("#usage-error")).to_be_visible()
    expect(page.locator("#id_from")).to_have_value("2026-11-09")  # the form is kept
    assert_accessible(page, f"{lang}-usage-page-refused")

    page.fill("#id_from", "2026-11-01")
    page.fill("#id_to", "2026-11-30")
    page.select_option("#id_group_by", label=per_job)
    with page.expect_navigation():
        page.click("#usage-filters button[type=submit]")
    report = page.locator("#usage-report")
    expect(report).to_have_attribute("data-reserved", "9.0")
    chart = page.locator("#usage-chart svg.usage-chart")
    expect(chart).to_have_attribute("data-bars", "2")
    expect(chart.locator("rect[data-layer='stalled']")).to_have_count(1)
    rows = page.locator("#usage-groups tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("stalling")
    expect(rows.nth(0)).to_contain_text("2.667")
    screenshot(page, f"usage-page-{lang}")
    assert_accessible(page, f"{lang}-usage-page")

    link = page.locator("#usage-csv")
    expect(link).to_have_text(download)
    with page.expect_download() as info:
        link.click()
    saved = info.value
    assert saved.suggested_filename == "gpu-hours-vision-rl-2026-11-01-2026-12-01.csv"
    table = list(csv.reader(io.StringIO(open(saved.path(), encoding="utf-8").read())))
    assert table[0][:5] == ["job", "team", "user", "state", "reserved_gpu_hours"]
    assert [row[0] for row in table[1:]] == ["stalling", "failing", "total"]
    assert table[-1][4] == "9.0"
