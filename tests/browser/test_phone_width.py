"""At a 390 px phone width the run record (and the lookup listing it) and the job page of a
realistic run never scroll sideways (`document.scrollingElement.scrollWidth <= clientWidth`),
in English and Chinese: a 53-character job name (the longest its pod hostnames allow), 7 pods
on the simulator (the Header and 6 workers), their events (a Warning, the Normal ones opened),
steps read by the progress pass, and a cause (the head pod OOMKilled after an NCCL timeout line
in a worker's log; the run failed). Wide tables scroll inside their own box; long names, image
references and scripts wrap; the YAML scrolls in its own box."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app
from playwright.sync_api import Page, expect

from jobs.models import JobState, RunRecord
from jobs.progress.reader import read_cluster_progress
from jobs.records.status import sync_submitted_jobs
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login, screenshot
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.conftest import PASSWORD
from tests.jobs.observe_support import CLUSTER, NAMESPACE
from tests.jobs.records_support import register_fleet, submittable_job
from tests.jobs.test_causes import past_start_lines
from tests.jobs.test_observe_causes_rules import NCCL_TIMEOUT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT = 30_000  # ms
NAME = "grpo-qwen2-7b-math-reasoning-long-context-lr3e-6-s042"  # the longest its pods allow
# Six ready a100 nodes of gpu-a (zone-1): with the Header's node, 7 pods.
ZONE_1 = {"rlinf.io/pool": "a100-a", "rlinf.io/zone": "zone-1",
          "topology.rlinf.io/cluster": "gpu-a"}
HEAD, WORKER = f"{NAME}-actor-0", f"{NAME}-rollout-3"

# The page scrolls sideways, and which elements stick out of the viewport without a box of
# their own that scrolls (or clips) them.
OVERFLOW = """() => {
  const root = document.scrollingElement, width = root.clientWidth, out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.right <= width + 1 || box.width === 0) continue;
    let clipped = false;
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") { clipped = true; break; }
    }
    if (!clipped) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
      + (typeof el.className === "string" && el.className.trim()
         ? "." + el.className.trim().split(/\\s+/).join(".") : ""));
  }
  return {scroll: root.scrollWidth, width, out: out.slice(0, 12)};
}"""


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
def failed_run(demo_simulator: Any, team: Team, owner: Any, admin_user: Any,
               django_capture_on_commit_callbacks: Any) -> RunRecord:
    """The long-named 7-pod run: started, its steps read, then failed on an NCCL timeout."""
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user, name=NAME,
                          worker_selector=ZONE_1)
    with django_capture_on_commit_callbacks(execute=False):
        record = job_submit(job=job, user=owner)
    submit_run_record.apply(args=[record.pk])
    demo_simulator.tick()
    record.refresh_from_db()
    record.launch_list_snapshot["progress"] = {"pattern": "", "stall_after_seconds": 60,
                                               "cancel_after_stalled_seconds": None}
    record.save(update_fields=["launch_list_snapshot"])
    sync_submitted_jobs()
    assert RunRecord.objects.get(pk=record.pk).job.state == JobState.RUNNING
    demo_simulator.set_progress(CLUSTER, NAMESPACE, NAME, step_seconds=0.1)
    past_start_lines(demo_simulator, HEAD, WORKER)
    read_cluster_progress(cluster=CLUSTER)
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, WORKER, [
        "rollout step 41 done", NCCL_TIMEOUT, "Traceback (most recent call last):"])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD, phase="Failed",
                             terminated={"reason": "OOMKilled", "exitCode": 137})
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, NAME, "Failed")
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()
    record.refresh_from_db()
    assert record.state == JobState.FAILED and record.cause.get("tag")
    assert record.pod_attempts.values("pod_name").distinct().count() == 7
    return record


def _fits(page: Page, name: str) -> None:
    found = page.evaluate(OVERFLOW)
    if found["scroll"] > found["width"] or found["out"]:
        screenshot(page, name)
    assert found["scroll"] <= found["width"] and not found["out"], found


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_at_390_px_the_run_record_and_the_job_page_do_not_scroll_sideways(
        page: Page, live_server: Any, owner: Any, failed_run: RunRecord, lang: str) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, live_server, owner.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    base = live_server.url

    page.goto(f"{base}/jobs/records/{NAME}/")
    expect(page.locator("#run-cause")).to_have_attribute("data-tag", failed_run.cause["tag"])
    expect(page.locator("pre.yaml:not(.log)")).to_be_visible()
    expect(page.locator("#job-progress svg.progress-chart")).to_be_visible(timeout=WAIT)
    expect(page.locator("table.attempts")).to_be_visible(timeout=WAIT)
    _fits(page, f"390px-run-record-{lang}")
    assert_accessible(page, f"{lang}-390px-run-record")

    page.goto(f"{base}/jobs/records/?name={NAME[:20]}")  # the lookup's list of matches
    expect(page.locator("main table")).to_contain_text(NAME)
    _fits(page, f"390px-run-record-lookup-{lang}")
    assert_accessible(page, f"{lang}-390px-run-record-lookup")

    page.goto(f"{base}/jobs/job/{NAME}/")
    expect(page.locator("#run-cause")).to_have_attribute("data-tag", failed_run.cause["tag"])
    expect(page.locator("#job-live table.events.warnings")).to_be_visible(timeout=WAIT)
    page.click("#normal-events-toggle")
    expect(page.locator("#normal-events table.events.normal")).to_be_visible()
    expect(page.locator("#job-progress svg.progress-chart")).to_be_visible(timeout=WAIT)
    _fits(page, f"390px-job-page-{lang}")
    assert_accessible(page, f"{lang}-390px-job-page-long")
