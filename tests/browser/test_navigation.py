"""The navigation in a real browser, at 1,280 × 800 and at a 390 × 844 phone, in English and
Chinese, for a team member and a platform admin: the bar is one line (element boxes measured),
nothing in it is clipped (the language buttons' text is whole), each group opens from the
keyboard and Escape closes it with the focus back on its button, and every entry is reachable.
Without JavaScript the groups still open. Screenshots: `test-artifacts/nav-*.png`."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory
from django.urls import reverse
from playwright.sync_api import Browser, Page, expect

from rlark_site.navigation import nav_links
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

# The bar's own items (brand, each group's button, the account button, the Menu button when
# shown): their boxes, and whether any text inside the header is cut (scrollWidth > clientWidth)
BAR = """() => {
  const shown = el => el.getClientRects().length > 0;
  const box = el => { const r = el.getBoundingClientRect();
    return {id: el.id || el.className, top: r.top, bottom: r.bottom, left: r.left,
            right: r.right, height: r.height}; };
  const items = [...document.querySelectorAll(
    "header.top > a.brand, header.top > .menu-button, .nav-groups > li > details > summary, "
    + "#nav-account > summary")].filter(shown);
  const texts = [...document.querySelectorAll(
    "header.top summary, header.top a, header.top button")].filter(shown);
  const cut = el => el.scrollWidth > el.clientWidth + 1
    || el.getBoundingClientRect().right > window.innerWidth;
  const summary = document.querySelector("header.top summary") || document.body;
  return {items: items.map(box), header: box(document.querySelector("header.top")),
          cut: texts.filter(cut).map(el => el.textContent.trim()),
          lineHeight: parseFloat(getComputedStyle(summary).lineHeight)};
}"""


def expected_urls(user: Any) -> set[str]:
    request = RequestFactory().get("/")
    request.user = user
    nav = nav_links(request)
    return ({link["url"] for group in nav["nav_groups"] for link in group["links"]}
            | {link["url"] for link in nav["account_links"]})


def group_ids(page: Page) -> list[str]:
    return page.eval_on_selector_all("details[data-nav-group]", "all => all.map(d => d.id)")


def assert_one_line(page: Page) -> None:
    bar = page.evaluate(BAR)
    assert bar["cut"] == [], bar["cut"]
    items = bar["items"]
    assert len(items) >= 2
    middle = [(item["top"] + item["bottom"]) / 2 for item in items]
    assert max(middle) - min(middle) <= 4, items  # one row
    for item in items:  # no button's label wraps onto a second line
        assert item["height"] < 2 * bar["lineHeight"], item
    assert bar["header"]["height"] < 3 * bar["lineHeight"], bar["header"]
    lefts = [item["left"] for item in items]
    assert lefts == sorted(lefts)


def open_with_keyboard(page: Page, group: str) -> None:
    summary = page.locator(f"#{group}-button")
    summary.focus()
    expect(summary).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(f"#{group}")).to_have_attribute("open", "")
    expect(summary).to_have_attribute("aria-expanded", "true")
    expect(summary).to_have_attribute("aria-controls", f"{group}-menu")


def close_with_escape(page: Page, group: str) -> None:
    page.keyboard.press("Escape")
    summary = page.locator(f"#{group}-button")
    expect(page.locator(f"#{group}")).not_to_have_attribute("open", "")
    expect(summary).to_have_attribute("aria-expanded", "false")
    expect(summary).to_be_focused()


def walk_the_groups(page: Page, name: str) -> set[str]:
    """Open every group from the keyboard, Tab into it, close it with Escape; the URLs of the
    entries seen (visible, whole, inside the viewport)."""
    reached: set[str] = set()
    width = page.viewport_size["width"] if page.viewport_size else 0
    groups = group_ids(page)
    for group in groups:
        open_with_keyboard(page, group)
        links = page.locator(f"#{group}-menu a")
        for index in range(links.count()):
            link = links.nth(index)
            expect(link).to_be_visible()
            box = link.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1
            assert link.evaluate("a => a.scrollWidth <= a.clientWidth + 1"), link.inner_text()
            reached.add(str(link.get_attribute("href")))
        if links.count():
            page.keyboard.press("Tab")  # into the open group: its first entry
            expect(links.first).to_be_focused()
        if group == "nav-account":
            for button in page.locator("#nav-account-menu form.language button").all():
                expect(button).to_be_visible()
                assert button.evaluate("b => b.scrollWidth <= b.clientWidth + 1")
        screenshot(page, f"{name}-{group}")
        if group in ("nav-account", groups[0]):  # axe-core on the bar with a menu open
            assert_accessible(page, f"{name}-{group}")
        close_with_escape(page, group)
    return reached


def _session(page: Page, live_server: Any, user: Any, lang: str) -> None:
    page.set_viewport_size(DESKTOP)
    login(page, live_server, user.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_the_bar_fits_and_every_group_opens_from_the_keyboard(
    page: Page, live_server: Any, member: Any, admin_user: Any, lang: str
) -> None:
    for user, who in ((member, "member"), (admin_user, "admin")):
        _session(page, live_server, user, lang)
        for size, width in ((DESKTOP, "1280"), (PHONE, "390")):
            page.set_viewport_size(size)
            page.goto(f"{live_server.url}/jobs/")
            name = f"nav-{lang}-{width}-{who}"
            menu = page.locator("#nav-menu-button")
            if size is PHONE:
                expect(menu).to_be_visible()
                expect(page.locator("#nav-bar")).to_be_hidden()
                assert_one_line(page)  # the brand and the Menu button
                menu.focus()
                page.keyboard.press("Enter")
                expect(menu).to_have_attribute("aria-expanded", "true")
                expect(page.locator("#nav-bar")).to_be_visible()
            else:
                expect(menu).to_be_hidden()
                assert_one_line(page)
            screenshot(page, name)
            assert_accessible(page, name)
            groups = group_ids(page)
            assert ("nav-admin" in groups) == (who == "admin")
            assert walk_the_groups(page, name) == expected_urls(user)
            if size is PHONE:  # Escape on the opened menu closes it, the focus on Menu
                page.keyboard.press("Escape")
                expect(menu).to_have_attribute("aria-expanded", "false")
                expect(page.locator("#nav-bar")).to_be_hidden()
                expect(menu).to_be_focused()
        page.context.clear_cookies()


def test_one_group_at_a_time_a_click_elsewhere_closes_it_and_the_page_is_marked(
    page: Page, live_server: Any, member: Any
) -> None:
    _session(page, live_server, member, "en")
    page.goto(f"{live_server.url}/jobs/launch-lists/")
    expect(page.locator("#nav-records-button")).to_have_attribute("aria-current", "true")
    page.click("#nav-records-button")
    current = page.locator('#nav-records-menu a[aria-current="page"]')
    expect(current).to_have_text("Launch lists")
    page.click("#nav-fleet-button")
    expect(page.locator("#nav-fleet")).to_have_attribute("open", "")
    expect(page.locator("#nav-records")).not_to_have_attribute("open", "")
    page.locator("main").click(position={"x": 5, "y": 5})
    expect(page.locator("#nav-fleet")).not_to_have_attribute("open", "")
    # Tab past a group's last entry closes it
    open_with_keyboard(page, "nav-help")
    for _ in range(page.locator("#nav-help-menu a").count() + 1):
        page.keyboard.press("Tab")
    expect(page.locator("#nav-help")).not_to_have_attribute("open", "")
    # Escape closes an open group even when the focus was lost (nothing has it): the focus
    # goes back to the group's button
    open_with_keyboard(page, "nav-help")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    assert page.evaluate("() => document.activeElement === document.body")
    close_with_escape(page, "nav-help")
    # every entry leads to its page, marked there as the current one
    for href in sorted(expected_urls(member)):
        group = page.locator(f'details[data-nav-group]:has(a[href="{href}"])')
        group.locator("summary").click()
        with page.expect_navigation():
            group.locator(f'a[href="{href}"]').click()
        assert page.url == f"{live_server.url}{href}"
        if href == reverse("swagger-ui"):  # the API's interactive docs: not a portal page
            page.go_back()
            continue
        assert page.locator(f'header.top a[href="{href}"]').get_attribute("aria-current") \
            == "page"


def test_without_javascript_the_groups_still_open(browser: Browser, live_server: Any,
                                                  member: Any) -> None:
    context = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    page = context.new_page()
    try:
        login(page, live_server, member.username, PASSWORD)
        page.goto(f"{live_server.url}/jobs/")
        page.click("#nav-records-button")
        expect(page.locator("#nav-records-menu a").first).to_be_visible()
        page.set_viewport_size(PHONE)  # no Menu button: the groups are shown
        expect(page.locator("#nav-menu-button")).to_be_hidden()
        expect(page.locator("#nav-jobs-button")).to_be_visible()
        page.click("#nav-account-button")
        with page.expect_navigation():
            page.click("#nav-account-menu form.language button[value='zh-hans']")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        screenshot(page, "nav-nojs-390")
        # No axe-core here: it runs as JavaScript in the page, which this context forbids (its
        # evaluate never returns, so the run hung). The same bar is checked by axe with
        # JavaScript on at 1,280 and 390 px in the tests above.
    finally:
        context.close()
