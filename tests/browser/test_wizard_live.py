"""Live feedback in a real browser, in both languages: an error typed into a row that was never
saved shows beside the row with its red border and the counts on the step and role tabs, and
clears (finding, border, counts) once fixed, without saving; the role errors of a new draft show
before its first save and clear as the form is corrected. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.drafts.services import job_create
from jobs.models import Job
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import choose_language, login, screenshot
from tests.conftest import PASSWORD
from tests.factories import load_fleet_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RED = "rgb(180, 35, 24)"  # --err
GREY = "rgb(217, 222, 231)"  # --line
ZH = {
    "header.missing": "请选择 Header 角色。",
    "env.name.reserved": "RLINF_NODE_RANK 由 RLark 的启动脚本设置；请换一个名称。",
}


@pytest.fixture
def draft(team: Team, member: Any) -> Job:
    """A draft whose Actor is placed (gpu-a, one head node) with no env, mounts or devices."""
    load_fleet_rows()
    return job_create(team=team, user=member, data={
        "name": "live-run", "header_role": "Actor", "roles": [
            {"name": "Actor", "cluster": "gpu-a",
             "selector": {"kubernetes.io/hostname": "a-head-01"}},
            {"name": "Rollout"}, {"name": "Environment"}]})


def _badge(page: Page, selector: str) -> Any:
    return page.locator(f"{selector} .badge.error")


def _count(page: Page, selector: str) -> int:
    badge = _badge(page, selector)
    return int(badge.inner_text().split()[0]) if badge.count() else 0


def _new_draft(page: Page, base: str, lang: str) -> None:
    """Step 1 of a job never saved: its role errors show, then clear as the form is fixed."""
    page.goto(f"{base}/jobs/wizard/new/")
    findings = page.locator("#f-header_role-findings")
    expect(findings).to_contain_text("header.missing")
    if lang == "zh-hans":
        expect(findings).to_contain_text(ZH["header.missing"])
    expect(page.locator("#header-0")).to_have_attribute("aria-invalid", "true")
    before = _count(page, "#wizard-step-1")
    assert before >= 1
    page.fill("#f-roles-1-name", "bad name")
    expect(page.locator("#f-roles-1-name-findings")).to_contain_text("role.name.invalid")
    expect(page.locator("#f-roles-1-name")).to_have_css("border-color", RED)
    expect(_badge(page, "#wizard-step-1")).to_contain_text(str(before + 1))
    screenshot(page, f"wizard-live-{lang}-1-new-draft-errors")
    page.fill("#f-roles-1-name", "Rollout")
    page.check("#header-0")
    expect(page.locator("#f-roles-1-name-findings")).to_be_empty()
    expect(page.locator("#f-header_role-findings")).to_be_empty()
    expect(page.locator("#f-roles-1-name")).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#header-0")).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-roles-1-name")).to_have_css("border-color", GREY)
    expect(_badge(page, "#wizard-step-1")).to_have_count(0 if before == 1 else 1)
    screenshot(page, f"wizard-live-{lang}-1-new-draft-fixed")
    assert not Job.objects.filter(name="").exists() and Job.objects.count() == 1


def _unsaved_row(page: Page, base: str, lang: str) -> None:
    """A reserved name typed into the second blank env row (the first left blank)."""
    page.goto(f"{base}/jobs/wizard/live-run/step-2/")
    name = page.locator("#f-roles-0-env-1-name")
    findings = page.locator("#f-roles-0-env-1-name-findings")
    expect(findings).to_be_empty()
    tab, step = _count(page, "#role-tab-0"), _count(page, "#wizard-step-2")
    name.fill("RLINF_NODE_RANK")
    page.fill("#f-roles-0-env-1-value", "3")
    expect(findings).to_contain_text("env.name.reserved")
    if lang == "zh-hans":
        expect(findings).to_contain_text(ZH["env.name.reserved"])
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_have_css("border-color", RED)
    expect(_badge(page, "#role-tab-0")).to_have_text(str(tab + 1))
    expect(_badge(page, "#wizard-step-2")).to_contain_text(str(step + 1))
    # A mount at /tmp in a blank row, too.
    page.fill("#f-roles-0-mounts-0-source", "/data")
    page.fill("#f-roles-0-mounts-0-target", "/tmp")
    target = page.locator("#f-roles-0-mounts-0-target-findings")
    expect(target).to_contain_text("mount.target.shadows")
    # One answer brings the findings and the counts: the badge already counts the mount.
    assert _count(page, "#role-tab-0") >= tab + 2
    # A row added with the button (never rendered by the server): a relative RAY_TEMP_DIR.
    page.click("#role-0-add-env")
    added = page.locator("#f-roles-0-env-3-value")
    expect(page.locator("#f-roles-0-env-3-name")).to_be_focused()
    page.fill("#f-roles-0-env-3-name", "RAY_TEMP_DIR")
    added.fill("ray-tmp")
    expect(page.locator("#f-roles-0-env-3-value-findings")).to_contain_text("env.ray_temp_dir")
    expect(added).to_have_css("border-color", RED)
    screenshot(page, f"wizard-live-{lang}-2-unsaved-row-errors")
    # Fixed: finding, border and counts clear, nothing saved.
    name.fill("RLINF_HOME_DIR")
    added.fill("/mnt/ray-tmp")
    page.fill("#f-roles-0-mounts-0-target", "/mnt/data")
    expect(findings).to_be_empty()
    expect(page.locator("#f-roles-0-env-3-value-findings")).to_be_empty()
    expect(added).to_have_css("border-color", GREY)
    expect(target).not_to_contain_text("mount.target.shadows")
    # The host directory still awaits an admin's confirmation; emptying the row drops it.
    page.fill("#f-roles-0-mounts-0-source", "")
    page.fill("#f-roles-0-mounts-0-target", "")
    expect(page.locator("#f-roles-0-mounts-0-source-findings")).to_be_empty()
    expect(target).to_be_empty()
    expect(name).not_to_have_attribute("aria-invalid", "true")
    expect(name).to_have_css("border-color", GREY)
    if tab:
        expect(_badge(page, "#role-tab-0")).to_have_text(str(tab))
    else:
        expect(_badge(page, "#role-tab-0")).to_have_count(0)
    expect(_badge(page, "#wizard-step-2")).to_contain_text(str(step))
    screenshot(page, f"wizard-live-{lang}-2-unsaved-row-fixed")
    actor = Job.objects.get(name="live-run").roles.get(position=0)
    assert actor.env == [] and actor.mounts == []
    # Saving keeps what was typed, the added row included, and the count is the live one.
    with page.expect_navigation():
        page.click("#wizard-save")
    expect(page.locator("#f-roles-0-env-1-value")).to_have_value("/mnt/ray-tmp")  # compacted
    assert _count(page, "#role-tab-0") == tab
    actor.refresh_from_db()
    assert [e["name"] for e in actor.env] == ["RLINF_HOME_DIR", "RAY_TEMP_DIR"]


def _journey(page: Page, live_server: Any, member: Any, lang: str) -> None:
    login(page, live_server, member.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)
    _new_draft(page, live_server.url, lang)
    _unsaved_row(page, live_server.url, lang)


def test_errors_clear_live_in_english(
    page: Page, live_server: Any, member: Any, draft: Job
) -> None:
    _journey(page, live_server, member, "en")


def test_errors_clear_live_in_chinese(
    page: Page, live_server: Any, member: Any, draft: Job
) -> None:
    _journey(page, live_server, member, "zh-hans")
