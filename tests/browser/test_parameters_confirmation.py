"""Deployment parameters confirmed by a platform admin, in a real browser, in English and in
Simplified Chinese: a member's draft is blocked on step 4 by its unconfirmed parameters; the
member fills them from the job and asks for confirmation; a platform admin confirms them in
the admin queue's "Deployment parameters" tab (the panel updates in place); the member's
step 4 then submits. axe-core checks the queue pending, decided in place and in its confirmed
list (no serious or critical violation). Screenshots go to
``test-artifacts/parameters-<lang>-*.png``."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from jobs.models import ConfirmationState, DeploymentParameters, Job, JobState
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import (
    assert_accessible,
    assets_loaded,
    choose_language,
    login,
    screenshot,
)
from tests.factories import load_fleet_rows
from tests.jobs.records_support import submittable_job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NAME = "ppo-confirm"
TEXT = {
    "en": {"pending": "waiting for an admin's confirmation", "tab": "Deployment parameters",
           "confirmed": "confirmed by an admin",
           "exact": "The parameters describe the job exactly."},
    "zh-hans": {"pending": "等待管理员确认", "tab": "部署参数", "confirmed": "已由管理员确认",
                "exact": "这些参数与作业完全一致。"},
}


@pytest.fixture
def draft(team: Team, member: Any, admin_user: Any) -> Job:
    """A draft whose verifications are approved; its deployment parameters are empty, pending."""
    load_fleet_rows()
    return submittable_job(team=team, owner=member, admin=admin_user, name=NAME, confirm=False)


def _language(page: Page, lang: str) -> None:
    if lang != "en":
        choose_language(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)


def _member_blocked_then_asks(page: Page, base: str, draft: Job, lang: str) -> None:
    page.goto(f"{base}/jobs/wizard/{NAME}/step-4/")
    expect(page.locator("#wizard-submit")).to_be_disabled()
    expect(page.locator("#findings")).to_contain_text("deployment_parameters.unconfirmed")
    expect(page.locator("#findings")).to_contain_text("deployment_parameters.role_missing")
    screenshot(page, f"parameters-{lang}-1-step4-blocked")
    page.goto(f"{base}/jobs/deployment-parameters/{draft.deployment_parameters_id}/")
    assert assets_loaded(page)
    expect(page.locator("#confirmation-state")).to_have_text(TEXT[lang]["pending"])
    page.select_option("#id_job", NAME)
    with page.expect_navigation():
        page.click("form[action$='/fill/'] button[type=submit]")
    page.select_option("#confirm-job", NAME)
    page.fill("#confirm-note", "PPO on the a100 head node")
    with page.expect_navigation():
        page.click("#request-confirmation")
    expect(page.locator("#confirmation")).to_contain_text(NAME)
    screenshot(page, f"parameters-{lang}-2-requested")


def _admin_confirms(browser: Browser, live_server: Any, draft: Job, admin: Any,
                    lang: str) -> None:
    """A second browser (its own session): the platform admin works the queue."""
    base = live_server.url
    context = browser.new_context()
    page = context.new_page()
    try:
        login(page, live_server, admin)
        _language(page, lang)
        page.goto(f"{base}/clusters/verifications/queue/")
        expect(page.locator("#tab-parameters")).to_contain_text(TEXT[lang]["tab"])
        expect(page.locator("#tab-parameters .badge")).to_have_text("1")
        with page.expect_navigation():
            page.click("#tab-parameters")
        panel = page.locator(f"#parameters-{draft.deployment_parameters_id}")
        expect(panel).to_have_attribute("data-state", "pending")
        expect(panel).to_contain_text(NAME)
        expect(panel).to_contain_text("PPO on the a100 head node")
        expect(panel.locator(".finding.ok")).to_have_text(TEXT[lang]["exact"])
        panel.locator("textarea[name=note]").fill("Head node and CPU pool checked.")
        screenshot(page, f"parameters-{lang}-3-queue-pending")
        assert_accessible(page, f"{lang}-parameters-queue-pending")
        url = page.url
        panel.locator("button[value=confirm]").click()  # htmx: the panel updates in place
        expect(panel).to_have_attribute("data-state", "confirmed")
        expect(panel).to_contain_text(TEXT[lang]["confirmed"])
        expect(panel.locator("form")).to_have_count(0)
        assert page.url == url
        assert_accessible(page, f"{lang}-parameters-queue-decided-in-place")
        page.reload()  # the pending list no longer holds it
        expect(page.locator(f"#parameters-{draft.deployment_parameters_id}")).to_have_count(0)
        page.goto(f"{base}/jobs/deployment-parameters/queue/?state=confirmed")
        decided = page.locator(f"#parameters-{draft.deployment_parameters_id}")
        expect(decided).to_have_attribute("data-state", "confirmed")
        expect(decided).to_contain_text(TEXT[lang]["confirmed"])
        expect(decided).to_contain_text("Head node and CPU pool checked.")
        expect(decided.locator("form")).to_have_count(0)
        screenshot(page, f"parameters-{lang}-4-queue-confirmed")
        assert_accessible(page, f"{lang}-parameters-queue-confirmed")
    finally:
        context.close()


def _member_submits(page: Page, base: str, lang: str) -> None:
    page.goto(f"{base}/jobs/wizard/{NAME}/step-4/")
    expect(page.locator("#findings")).not_to_contain_text("deployment_parameters.")
    expect(page.locator("#wizard-submit")).to_be_enabled()
    screenshot(page, f"parameters-{lang}-5-step4-ready")
    with page.expect_navigation(url="**/jobs/"):
        page.click("#wizard-submit")
    expect(page.locator(f'tr[data-job="{NAME}"] .badge')).to_have_class("badge queued")


def _journey(page: Page, browser: Browser, live_server: Any, draft: Job, member: Any,
             admin: Any, lang: str) -> None:
    login(page, live_server, member)
    _language(page, lang)
    _member_blocked_then_asks(page, live_server.url, draft, lang)
    _admin_confirms(browser, live_server, draft, admin, lang)
    _member_submits(page, live_server.url, lang)
    parameters = DeploymentParameters.objects.get(pk=draft.deployment_parameters_id)
    assert parameters.confirmation_state == ConfirmationState.CONFIRMED
    assert parameters.confirmation_decided_by == admin
    assert Job.objects.get(name=NAME).state == JobState.QUEUED


def test_an_admin_confirms_the_parameters_and_the_member_submits(
    page: Page, browser: Browser, live_server: Any, draft: Job, member: Any, admin_user: Any
) -> None:
    _journey(page, browser, live_server, draft, member, admin_user, "en")


def test_the_same_confirmation_in_simplified_chinese(
    page: Page, browser: Browser, live_server: Any, draft: Job, member: Any, admin_user: Any
) -> None:
    _journey(page, browser, live_server, draft, member, admin_user, "zh-hans")
