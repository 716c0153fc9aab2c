"""Wizard step 2 shows the role's pre-flight verdict live (SPEC 15), in a real browser and in
both languages: beside the matched-node count, the verdict changes as the GPUs per worker are
typed (fits now, will queue once more GPUs are asked than the node has free, never fits above
its allocatable), without saving. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from clusters.models import Cluster, ClusterState, Node, NodeOccupancy
from jobs.drafts.services import job_create
from jobs.models import Job
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import choose_language, login, screenshot
from tests.conftest import PASSWORD
from tests.factories import load_fleet_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LABELS = {
    "en": {"fits_now": "Fits now", "will_queue": "Will queue", "never_fits": "Never fits"},
    "zh-hans": {"fits_now": "现在可运行", "will_queue": "将排队等待", "never_fits": "永远无法运行"},
}


@pytest.fixture
def draft(team: Team, member: Any) -> Job:
    """A draft whose Actor is on gpu-a's a-head-01 (8 GPUs, 4 of them held by other pods, as
    an occupancy pass counted them)."""
    load_fleet_rows()
    now = timezone.now()
    Node.objects.filter(name="a-head-01").update(gpu=8, cpu_milli=64_000,
                                                 memory_bytes=512 << 30, pods=110)
    node = Node.objects.get(name="a-head-01")
    NodeOccupancy.objects.create(node=node, cluster=node.cluster, changed_at=now,
                                 requested={"nvidia.com/gpu": "4", "pods": "1"})
    Cluster.objects.filter(pk=node.cluster_id).update(occupancy_as_of=now,
                                                      state=ClusterState.OK)
    return job_create(team=team, user=member, data={
        "name": "cap-run", "header_role": "Actor", "roles": [
            {"name": "Actor", "cluster": "gpu-a", "gpus": 2,
             "selector": {"kubernetes.io/hostname": "a-head-01"}}]})


def _journey(page: Page, live_server: Any, member: Any, lang: str) -> None:
    login(page, live_server, member.username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    page.goto(f"{live_server.url}/jobs/wizard/cap-run/step-2/")
    verdict = page.locator("#role-0-capacity")
    expect(verdict).to_have_attribute("data-verdict", "fits_now")
    expect(verdict).to_contain_text(LABELS[lang]["fits_now"])
    gpus = page.locator("#f-roles-0-gpus")
    gpus.fill("8")
    expect(verdict).to_have_attribute("data-verdict", "will_queue")
    expect(verdict).to_contain_text(LABELS[lang]["will_queue"])
    expect(verdict).to_contain_text("a-head-01")
    screenshot(page, f"wizard-capacity-{lang}-will-queue")
    gpus.fill("16")
    expect(verdict).to_have_attribute("data-verdict", "never_fits")
    expect(verdict).to_contain_text(LABELS[lang]["never_fits"])
    gpus.fill("4")
    expect(verdict).to_have_attribute("data-verdict", "fits_now")
    screenshot(page, f"wizard-capacity-{lang}-fits-now")
    assert Job.objects.get(name="cap-run").roles.get(position=0).gpus == 2  # nothing saved


def test_the_verdict_changes_live_in_english(
    page: Page, live_server: Any, member: Any, draft: Job
) -> None:
    _journey(page, live_server, member, "en")


def test_the_verdict_changes_live_in_chinese(
    page: Page, live_server: Any, member: Any, draft: Job
) -> None:
    _journey(page, live_server, member, "zh-hans")
