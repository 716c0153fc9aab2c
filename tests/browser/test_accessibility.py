"""Accessibility checked by axe-core (the copy shipped in `axe-playwright-python`, injected by
Playwright) in a real browser, in English and Chinese: the job list, the wizard's four steps, the
job page of a run on the simulator (pods, a Warning, the Normal events opened, a pod's log, the
first-run checklist), its run record, the nodes page and the platform admin's verification
queue (test_navigation.py checks the bar with its menus open). At a 390 px phone width the
job page's wide tables scroll inside their own box, never the page. Every violation found, any
impact, is written to
`test-artifacts/axe-<language>-<page>.txt`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from clusters.models import Cluster, Verification
from clusters.verifications.services import verification_request
from jobs.models import Job, JobState, RunRecord
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, axe_violations, choose_language, login
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.conftest import PASSWORD
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.records_support import submittable_job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT = 30_000  # ms

# The elements wider than the viewport that make the page itself scroll sideways (an element
# inside a box that scrolls on its own does not count).
PAGE_OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll("main *")) {
    const box = el.getBoundingClientRect();
    if (box.right <= width + 1 || box.width === 0) continue;
    let clipped = false;
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") { clipped = true; break; }
    }
    if (!clipped) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
                           + (el.className && typeof el.className === "string"
                              ? "." + el.className.trim().split(/\\s+/).join(".") : ""));
  }
  return {scroll: document.documentElement.scrollWidth, width, out: out.slice(0, 12)};
}"""


@pytest.fixture(autouse=True)
def fast_refresh(settings: Any) -> Iterator[None]:
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 1.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def world(running: RunRecord, demo_simulator: Any, team: Team, owner: Any, member: Any,
          admin_user: Any) -> dict[str, Any]:
    """The shared running job (5 pods, Normal events) with a Warning (its head pod ended
    OOMKilled), a draft to walk the wizard with, and a request waiting in the admin's queue."""
    sync_submitted_jobs()
    running.refresh_from_db()
    assert running.job.state == JobState.RUNNING
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "OOMKilled", "exitCode": 137})
    pending = verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="gpu-a"),
        selector={"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"},
        requested_gpu=8, requested_host_paths=["/data/models"], note="PPO actor pool")
    draft = submittable_job(team=team, owner=owner, admin=admin_user, name="draft-run")
    return {"record": running, "pending": pending, "draft": draft}


def _list_and_wizard(page: Page, base: str, record: RunRecord, draft: Job, lang: str) -> None:
    page.goto(f"{base}/jobs/")
    expect(page.locator(f'tr[data-job="{record.job_name}"]')).to_be_visible()
    assert_accessible(page, f"{lang}-job-list")
    for step in (1, 2, 3, 4):
        page.goto(f"{base}/jobs/wizard/{draft.name}/step-{step}/")
        expect(page.locator("main h2").first).to_be_visible()
        assert_accessible(page, f"{lang}-wizard-step-{step}")


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_the_main_pages_have_no_serious_or_critical_violation(
    page: Page, browser: Browser, live_server: Any, owner: Any, admin_user: Any,
    world: dict[str, Any], lang: str,
) -> None:
    base, record = live_server.url, world["record"]
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)
    _list_and_wizard(page, base, record, world["draft"], lang)

    page.goto(f"{base}/jobs/job/{record.job_name}/")
    expect(page.locator(f'#job-live tr[data-pod="{HEAD_POD}"]')).to_be_visible(timeout=WAIT)
    expect(page.locator("#job-live table.events.warnings")).to_contain_text("OOMKilled")
    assert_accessible(page, f"{lang}-job-page")
    page.click("#normal-events-toggle")
    expect(page.locator("#normal-events table.events.normal")).to_be_visible()
    page.locator(f'#job-live tr[data-pod="{HEAD_POD}"] a[hx-get]').click()
    expect(page.locator("#pod-log #pod-log-panel pre.log")).to_be_visible(timeout=WAIT)
    page.check('form.frc input[name="observed"][value="no"]')  # the checklist shows
    expect(page.locator("form.frc fieldset.checklist")).to_be_visible()
    assert_accessible(page, f"{lang}-job-page-checklist")

    page.goto(f"{base}/jobs/records/{record.job_name}/")
    expect(page.locator("pre.yaml")).to_be_visible()
    assert_accessible(page, f"{lang}-run-record")

    page.goto(f"{base}/clusters/nodes/")
    expect(page.locator("main table").first).to_be_visible()
    assert_accessible(page, f"{lang}-nodes")

    admin = browser.new_context().new_page()
    try:
        login(admin, live_server, admin_user.username, PASSWORD)
        if lang != "en":
            choose_language(admin, lang)
        pending: Verification = world["pending"]
        admin.goto(f"{base}/clusters/verifications/queue/")
        expect(admin.locator(f"#verification-{pending.pk}")).to_have_attribute(
            "data-state", "pending")
        assert_accessible(admin, f"{lang}-verification-queue")
        admin.goto(f"{base}/clusters/nodes/")
        expect(admin.locator("main table").first).to_be_visible()
        assert_accessible(admin, f"{lang}-nodes-admin")
    finally:
        admin.context.close()


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_at_390_px_the_job_page_scrolls_its_tables_not_the_page(
    page: Page, live_server: Any, owner: Any, world: dict[str, Any], lang: str,
) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    record = world["record"]
    page.goto(f"{live_server.url}/jobs/job/{record.job_name}/")
    expect(page.locator("#job-live table.events.warnings")).to_be_visible(timeout=WAIT)
    page.click("#normal-events-toggle")
    expect(page.locator("#normal-events table.events.normal")).to_be_visible()
    expect(page.locator("#pod-attempts-list table.attempts")).to_be_visible(timeout=WAIT)
    found = page.evaluate(PAGE_OVERFLOW)
    assert found["scroll"] <= found["width"] and not found["out"], found
    assert_accessible(page, f"{lang}-390px-job-page")


def test_the_check_finds_a_violation(page: Page) -> None:
    """The helper is not blind: an unlabelled input and grey-on-white text are reported."""
    page.set_content('<!doctype html><html lang="en"><head><title>t</title></head><body><main>'
                     '<input type="text" name="q"><p style="color:#bbb">faint</p></main></body>'
                     '</html>')
    ids = {v["id"] for v in axe_violations(page)}
    assert {"label", "color-contrast"} <= ids
    with pytest.raises(AssertionError, match="label"):
        assert_accessible(page)
