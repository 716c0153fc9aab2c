"""The job page's events in a real browser, English and Chinese, at 1,280 × 800: the Warnings
come first, the Normal events are one collapsed disclosure that counts them; opened from the
keyboard it stays open (and focused) across the live region's refreshes, and closed it stays
closed. Screenshots: `test-artifacts/job-page-<language>-*.png`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.models import JobState, RunRecord
from jobs.records.status import sync_submitted_jobs
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.browser.test_observe_live_clicks import NEXT_REFRESH, WAIT
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.conftest import PASSWORD
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SUMMARY = {"en": "25 Normal events in 5 groups", "zh-hans": "25 条 Normal 事件，分为 5 组"}


@pytest.fixture(autouse=True)
def fast_refresh(settings: Any) -> Iterator[None]:
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 1.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def failing(running: RunRecord, demo_simulator: Any) -> RunRecord:
    """The shared running job (5 pods, 25 Normal events) whose head pod's container ended
    OOMKilled: one Warning, the newest event."""
    sync_submitted_jobs()
    running.refresh_from_db()
    assert running.job.state == JobState.RUNNING
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "OOMKilled", "exitCode": 137})
    return running


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_warnings_first_normal_events_collapsed_and_kept_as_the_user_left_them(
    page: Page, live_server: Any, owner: Any, failing: RunRecord, lang: str
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.goto(f"{live_server.url}/jobs/job/{failing.job_name}/")
    warnings = page.locator("#job-live table.events.warnings")
    expect(warnings).to_contain_text("OOMKilled", timeout=WAIT)
    toggle = page.locator("#normal-events-toggle")
    expect(toggle).to_have_text(SUMMARY[lang])
    normal = page.locator("#normal-events table.events.normal")
    expect(normal).to_be_hidden()  # collapsed by default
    warning_box, toggle_box = warnings.bounding_box(), toggle.bounding_box()
    assert warning_box is not None and toggle_box is not None
    assert warning_box["y"] + warning_box["height"] <= toggle_box["y"]  # Warnings first
    screenshot(page, f"job-page-{lang}-1-collapsed")
    assert_accessible(page, f"job-page-{lang}-1-collapsed")

    toggle.focus()
    page.keyboard.press("Enter")
    expect(normal).to_be_visible()
    expect(normal.locator("tbody tr")).to_have_count(5)
    before = page.locator("#job-live").element_handle()
    page.evaluate(NEXT_REFRESH)  # the region is re-rendered by its poll
    assert before.evaluate("element => !element.isConnected")
    expect(page.locator("#normal-events")).to_have_attribute("open", "")
    expect(normal).to_be_visible()
    expect(page.locator("#normal-events-toggle")).to_be_focused()  # htmx gives it back (id)
    screenshot(page, f"job-page-{lang}-2-normal-open")
    assert_accessible(page, f"job-page-{lang}-2-normal-open")

    page.keyboard.press("Enter")  # closed again: it stays closed
    expect(normal).to_be_hidden()
    page.evaluate(NEXT_REFRESH)
    expect(page.locator("#normal-events")).not_to_have_attribute("open", "")
    expect(page.locator("#normal-events-toggle")).to_have_text(SUMMARY[lang])


# Opens the Normal events in the same task as the poll's answer arrives, just before it is
# swapped in (capture on window runs before any listener of the page): as a user's Enter or
# click landing right then. The details' toggle event comes a task later, after the swap.
OPEN_AS_THE_ANSWER_ARRIVES = """() => new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error("no answer of #job-live's poll came")), 30000);
  window.addEventListener("htmx:beforeSwap", function opened(event) {
    if (!event.detail.target || event.detail.target.id !== "job-live") return;
    window.removeEventListener("htmx:beforeSwap", opened, true);
    document.getElementById("normal-events").open = true;
    setTimeout(resolve, 0);
  }, true);
})"""


def test_opened_right_before_a_refresh_it_stays_open(
    page: Page, live_server: Any, owner: Any, failing: RunRecord
) -> None:
    login(page, live_server, owner.username, PASSWORD)
    page.goto(f"{live_server.url}/jobs/job/{failing.job_name}/")
    expect(page.locator("#normal-events-toggle")).to_be_visible(timeout=WAIT)
    before = page.locator("#job-live").element_handle()
    page.evaluate(OPEN_AS_THE_ANSWER_ARRIVES)
    assert before.evaluate("element => !element.isConnected")  # it was re-rendered
    expect(page.locator("#normal-events")).to_have_attribute("open", "")
    expect(page.locator("#normal-events table.events.normal")).to_be_visible()
