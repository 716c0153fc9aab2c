"""Watching a run in a real browser, in both languages: submit from the wizard's review, the
job page follows the run to Running without a reload (the live state polling), a pod's log
opens in the page, and the first signal found in the Head Task's log (a line appended through
the simulator's control endpoint, matched by the launch list's pattern) pre-fills the
first-run check. Celery runs eagerly in the live server; the status sync and the signal scan
(beat's work) are called from the test while the page polls. Screenshots: test-artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app
from playwright.sync_api import Page, expect

from jobs.models import Job, JobState
from jobs.observe.signals import scan_first_signals
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.conftest import PASSWORD
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.records_support import register_fleet, submittable_job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIGNAL = "first rollout batch with reward mean"
LINE = "step 1 reward mean=0.125"
WAIT = 30_000  # ms: a poll every second, on a busy machine


@pytest.fixture(autouse=True)
def eager(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 1.0
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    clear_prefix(OBSERVE_PREFIX)
    yield
    current_app.conf.task_always_eager = before
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def ready(demo_simulator: Any, team: Team, owner: Any, admin_user: Any) -> Job:
    """A submittable draft whose launch list expects a signal with a pattern."""
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user)
    launch_list = job.launch_list
    assert launch_list is not None
    launch_list.expected_signals = [{"signal": SIGNAL, "where": "head log",
                                     "within_minutes": 10,
                                     "pattern": r"/reward mean=-?\d+\.\d+/"}]
    launch_list.save(update_fields=["expected_signals"])
    return job


def _journey(page: Page, live_server: Any, sim: Any, owner: Any, job: Job, lang: str) -> None:
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.goto(f"{live_server.url}/jobs/wizard/{job.name}/step-4/")
    expect(page.locator("#wizard-submit")).to_be_enabled()
    with page.expect_navigation():
        page.click("#wizard-submit")  # the submission task runs (eagerly) after commit
    page.goto(f"{live_server.url}/jobs/job/{job.name}/")
    state = page.locator(f"#state-{job.name}")
    expect(state).to_have_attribute("data-state", JobState.PENDING)
    screenshot(page, f"observe-{lang}-1-pending")
    assert_accessible(page, f"observe-{lang}-1-pending")

    # The cluster starts the Job; the status sync (beat's work) records it. The page, never
    # reloaded (the marker survives), follows through its state polling.
    page.evaluate("() => { window.rlarkNotReloaded = true; }")
    sim.tick()
    sync_submitted_jobs()
    expect(state).to_have_attribute("data-state", JobState.RUNNING, timeout=WAIT)
    assert page.evaluate("() => window.rlarkNotReloaded === true")
    if lang == "zh-hans":
        expect(state).to_contain_text("运行中")

    # The live pods fragment lists the head pod; its log opens in the page (#pod-log, outside
    # the polled #job-live; the page is not left). The fragment re-renders every second: a
    # refresh landing during the click must not lose it (the region holds still while pressed,
    # tests/browser/test_observe_live_clicks.py pins each way a click was lost).
    head = page.locator(f'#job-live tr[data-pod="{HEAD_POD}"]')
    expect(head).to_be_visible(timeout=WAIT)
    head.locator("a[hx-get]").click()
    panel = page.locator("#pod-log #pod-log-panel")
    expect(panel.locator("h3")).to_contain_text(HEAD_POD, timeout=WAIT)
    expect(panel.locator("pre.log")).to_contain_text("rlark: task actor replica 0", timeout=WAIT)
    assert page.evaluate("() => window.rlarkNotReloaded === true")
    screenshot(page, f"observe-{lang}-2-running-log")
    assert_accessible(page, f"observe-{lang}-2-running-log")

    # The signal line appears in the head pod's log; the scan (a beat task) finds it, and the
    # first-run check is pre-filled with the evidence.
    sim.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, [LINE])
    assert scan_first_signals() == 1
    page.reload()
    watch = page.locator('[data-signal-state="seen"]')
    expect(watch).to_contain_text(LINE)
    if lang == "zh-hans":
        expect(watch).to_contain_text("已出现")
    expect(page.locator('form.frc input[name="observed"][value="yes"]')).to_be_checked()
    evidence = page.locator('form.frc textarea[name="evidence"]').input_value()
    assert LINE in evidence and HEAD_POD in evidence
    assert ("所在行" if lang == "zh-hans" else "line:") in evidence
    watch.locator("a[hx-get]").click()
    expect(page.locator("#pod-log-panel mark")).to_have_text(LINE, timeout=WAIT)
    screenshot(page, f"observe-{lang}-3-first-signal")
    assert_accessible(page, f"observe-{lang}-3-first-signal")


def test_watching_a_run_to_its_first_signal_in_english(
    page: Page, live_server: Any, demo_simulator: Any, owner: Any, ready: Job
) -> None:
    _journey(page, live_server, demo_simulator, owner, ready, "en")


def test_watching_a_run_to_its_first_signal_in_chinese(
    page: Page, live_server: Any, demo_simulator: Any, owner: Any, ready: Job
) -> None:
    _journey(page, live_server, demo_simulator, owner, ready, "zh-hans")
