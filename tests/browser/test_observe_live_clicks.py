"""A click inside the job page's live pods (`#job-live`, re-rendered by its poll) is never lost,
in a real browser: a refresh that arrives while the log link is pressed does not eat the
click, a link clicked in the first moment after a refresh already works (it is not a plain
link that leaves the page), and a link focused from the keyboard keeps its focus across a
refresh. A followed log re-renders its lines only, never the form being used. Each waits for
a real poll answer of the page (no forced timing); before the fix each failed every time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.models import JobState, RunRecord
from jobs.records.status import sync_submitted_jobs
from tests.browser.conftest import login
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.conftest import PASSWORD
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HEAD_LINE = "rlark: task actor replica 0"
WAIT = 30_000  # ms: a poll every second, on a busy machine

# Resolves once the next answer of a region's poll (default #job-live) is about to be swapped
# in, in the task after that answer was handled (the swap, or the choice not to, is done).
NEXT_REFRESH = """region => new Promise((resolve, reject) => {
  const id = region || "job-live";
  setTimeout(() => reject(new Error(`no answer of #${id}'s poll came`)), 30000);
  document.addEventListener("htmx:beforeSwap", function seen(event) {
    if (!event.detail.target || event.detail.target.id !== id) return;
    document.removeEventListener("htmx:beforeSwap", seen);
    setTimeout(resolve, 0);
  });
})"""

# Clicks the head pod's log link in the first task after a refresh of #job-live was swapped in,
# as a user's click arriving at that moment would.
CLICK_RIGHT_AFTER_A_REFRESH = """pod => new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error("no answer of #job-live's poll came")), 30000);
  document.addEventListener("htmx:afterSwap", function swapped(event) {
    if (!event.detail.target || event.detail.target.id !== "job-live") return;
    document.removeEventListener("htmx:afterSwap", swapped);
    setTimeout(() => {
      document.querySelector(`#job-live tr[data-pod="${pod}"] a[hx-get]`).click();
      resolve();
    }, 0);
  });
})"""


@pytest.fixture(autouse=True)
def fast_refresh(settings: Any) -> Iterator[None]:
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 1.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def running(running: RunRecord) -> RunRecord:
    """The shared running job (tests/conftest.py), with its Running state recorded."""
    record = running
    sync_submitted_jobs()
    record.refresh_from_db()
    assert record.job.state == JobState.RUNNING
    return record


def _job_page(page: Page, live_server: Any, owner: Any, record: RunRecord) -> None:
    login(page, live_server, owner.username, PASSWORD)
    page.goto(f"{live_server.url}/jobs/job/{record.job_name}/")
    expect(page.locator(f'#job-live tr[data-pod="{HEAD_POD}"] a[hx-get]')).to_be_visible(
        timeout=WAIT)


def _log_shows(page: Page, pod: str, text: str) -> None:
    panel = page.locator("#pod-log #pod-log-panel")
    expect(panel.locator("h3")).to_contain_text(pod, timeout=WAIT)
    expect(panel.locator("pre.log")).to_contain_text(text, timeout=WAIT)


def test_a_refresh_while_the_log_link_is_pressed_does_not_lose_the_click(
    page: Page, live_server: Any, owner: Any, running: RunRecord
) -> None:
    _job_page(page, live_server, owner, running)
    box = page.locator(f'#job-live tr[data-pod="{HEAD_POD}"] a[hx-get]').bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.evaluate(NEXT_REFRESH)  # a poll answer arrives while the button is down
    page.mouse.up()
    _log_shows(page, HEAD_POD, HEAD_LINE)
    # The region was held, not stopped: the next refresh is swapped in once released.
    before = page.locator("#job-live").element_handle()
    page.evaluate(NEXT_REFRESH)
    expect(page.locator("#job-live")).to_be_visible()
    assert before.evaluate("element => !element.isConnected")


def test_text_selected_in_the_live_pods_stays_selected_across_refreshes(
    page: Page, live_server: Any, owner: Any, running: RunRecord
) -> None:
    _job_page(page, live_server, owner, running)
    cell = page.locator(f'#job-live tr[data-pod="{HEAD_POD}"] td.mono').first
    cell.click(click_count=3)  # selects the pod's name, as a user copying it would
    selected = page.evaluate("() => window.getSelection().toString()")
    assert HEAD_POD in selected
    before = page.locator("#job-live").element_handle()
    page.evaluate(NEXT_REFRESH)  # a poll answer arrives while the text is selected
    assert before.evaluate("element => element.isConnected")  # not re-rendered under it
    assert page.evaluate("() => window.getSelection().toString()") == selected
    # Held, not stopped: once the selection is cleared the next refresh is swapped in.
    page.evaluate("() => window.getSelection().removeAllRanges()")
    page.evaluate(NEXT_REFRESH)
    assert before.evaluate("element => !element.isConnected")
    expect(page.locator("#job-live")).to_be_visible()


def test_a_log_link_clicked_right_after_a_refresh_opens_the_log_in_the_page(
    page: Page, live_server: Any, owner: Any, running: RunRecord
) -> None:
    _job_page(page, live_server, owner, running)
    url = page.url
    page.evaluate("() => { window.rlarkNotReloaded = true; }")
    page.evaluate(CLICK_RIGHT_AFTER_A_REFRESH, HEAD_POD)
    _log_shows(page, HEAD_POD, HEAD_LINE)
    assert page.url == url
    assert page.evaluate("() => window.rlarkNotReloaded === true")


def test_a_log_link_focused_from_the_keyboard_keeps_its_focus_across_a_refresh(
    page: Page, live_server: Any, owner: Any, running: RunRecord
) -> None:
    _job_page(page, live_server, owner, running)
    link = page.locator(f'#job-live tr[data-pod="{HEAD_POD}"] a[hx-get]')
    link.focus()
    before = link.element_handle()
    page.evaluate(NEXT_REFRESH)
    assert before.evaluate("element => !element.isConnected")  # the row was re-rendered
    expect(link).to_be_focused()
    page.keyboard.press("Enter")
    _log_shows(page, HEAD_POD, HEAD_LINE)


def test_a_followed_log_refreshes_its_lines_and_leaves_the_form_alone(
    page: Page, live_server: Any, demo_simulator: Any, owner: Any, running: RunRecord
) -> None:
    _job_page(page, live_server, owner, running)
    page.locator(f'#job-live tr[data-pod="{HEAD_POD}"] a[hx-get]').click()
    _log_shows(page, HEAD_POD, HEAD_LINE)
    page.locator('#pod-log-panel input[name="follow"]').check()
    expect(page.locator("#pod-log-lines[hx-get]")).to_have_attribute(
        "hx-get", re.compile(r"follow=1"))
    form = page.locator("#pod-log-panel form").element_handle()
    page.locator('#pod-log-panel input[name="tail"]').fill("77")  # typed, not yet sent
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, ["step 7 reward mean=0.5"])
    clear_prefix(OBSERVE_PREFIX)  # the shared read of this log is not kept for the interval
    lines = page.locator("#pod-log-lines").element_handle()
    page.evaluate(NEXT_REFRESH, "pod-log-lines")
    assert lines.evaluate("element => !element.isConnected")  # the lines were re-rendered
    expect(page.locator("#pod-log-lines pre.log")).to_contain_text("step 7 reward mean=0.5",
                                                                   timeout=WAIT)
    assert form.evaluate("element => element.isConnected")  # the form was not
    expect(page.locator('#pod-log-panel input[name="tail"]')).to_have_value("77")
