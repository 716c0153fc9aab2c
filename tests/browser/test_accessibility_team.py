"""The team pages and the notification preferences in a real browser, in English and Chinese,
checked by axe-core (no violation of impact serious or critical): the list of one's teams, a
team's page as its owner (members, the webhook form), and one's notification preferences, saved
once (the page comes back with them kept)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_team_and_preferences_pages_have_no_serious_or_critical_violation(
    page: Page, live_server: Any, owner: Any, member: Any, team: Team, lang: str,
) -> None:
    base = live_server.url
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)

    page.goto(f"{base}/teams/")
    expect(page.locator(f'main a[href$="/teams/{team.slug}/"]').first).to_be_visible()
    assert_accessible(page, f"{lang}-team-list")
    page.goto(f"{base}/teams/{team.slug}/")
    expect(page.locator("main h1")).to_contain_text(team.name)
    expect(page.locator("main")).to_contain_text(member.username)
    assert_accessible(page, f"{lang}-team-page")

    page.goto(f"{base}/account/notifications/")
    form = page.locator("#notification-preferences")
    expect(form).to_be_visible()
    assert_accessible(page, f"{lang}-notification-preferences")
    with page.expect_navigation():
        form.locator("button[type=submit]").first.click()
    expect(page.locator("#notification-preferences")).to_be_visible()
    assert_accessible(page, f"{lang}-notification-preferences-saved")
