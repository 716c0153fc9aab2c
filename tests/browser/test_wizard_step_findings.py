"""An error without a field in a real browser: the start scripts of nine roles that together
exceed what a Kubernetes object holds (`manifest.too_large`) are announced at the top of step 3
(the error summary, role="alert", before the first field), in English and Chinese, with no
serious or critical axe-core violation; step 4 still lists the finding and links to step 3."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.drafts.services import job_create
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BIG = "echo " + "x" * 120_000 + "\n"
WORDS = {"en": "The start scripts add up to", "zh-hans": "启动脚本"}


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_the_step_that_owns_a_fieldless_error_announces_it_at_the_top(
        page: Page, live_server: Any, team: Team, member: Any, lang: str) -> None:
    job_create(team=team, user=member, data={
        "name": "big-scripts", "task_type": "custom", "header_role": "Env0",
        "roles": [{"name": f"Env{i}", "prepare_script": BIG} for i in range(9)],
        "run_script": "python train.py"})
    login(page, live_server, member.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.goto(f"{live_server.url}/jobs/wizard/big-scripts/step-3/")
    summary = page.locator('#step-findings[role="alert"]')
    expect(summary).to_be_visible()
    expect(summary.locator("p.finding.error")).to_contain_text(WORDS[lang])
    expect(summary.locator("code")).to_have_text("manifest.too_large")
    # Above the form's first field.
    first_field = page.locator("#wizard-form select, #wizard-form input:visible").first
    summary_box, field_box = summary.bounding_box(), first_field.bounding_box()
    assert summary_box is not None and field_box is not None
    assert summary_box["y"] < field_box["y"]
    assert_accessible(page, f"{lang}-wizard-step-3-fieldless")

    page.goto(f"{live_server.url}/jobs/wizard/big-scripts/step-4/")
    link = page.locator("#findings a", has_text=WORDS[lang])
    expect(link).to_have_attribute("href", "/jobs/wizard/big-scripts/step-3/")
    link.click()
    expect(page.locator('#step-findings[role="alert"]')).to_contain_text("manifest.too_large")
