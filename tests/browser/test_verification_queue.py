"""The admin verification queue in a real browser: an admin approves a request with a note
without leaving the page, and the requester sees it approved."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from clusters.models import Cluster, Verification, VerificationState
from clusters.verifications.services import verification_request
from tests.browser.conftest import assert_accessible, assets_loaded, login, logout, screenshot
from tests.factories import load_fleet_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def requested(team: Any, member: Any) -> Verification:
    load_fleet_rows()
    return verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="gpu-a"),
        selector={"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"},
        requested_gpu=8, requested_host_paths=["/data/models"], note="PPO actor pool",
    )


def test_an_admin_approves_from_the_queue_and_the_requester_sees_it(
    page: Page, live_server: Any, requested: Verification, member: Any, admin_user: Any,
) -> None:
    login(page, live_server, admin_user)
    page.goto(f"{live_server.url}/clusters/verifications/queue/")
    assert assets_loaded(page)
    panel = page.locator(f"#verification-{requested.pk}")
    expect(panel).to_have_attribute("data-state", "pending")
    expect(panel).to_contain_text("topology.rlinf.io/cluster=gpu-a")
    expect(panel).to_contain_text("/data/models")
    screenshot(page, "verification-queue-1-pending")
    assert_accessible(page, "verification-queue-1-pending")

    panel.get_by_label("/data/models").check()
    panel.locator("textarea[name=note]").fill("Racks a100-a checked; /data/models present.")
    queue_url = page.url
    panel.get_by_role("button", name="Approve").click()
    decided = page.locator(f"#verification-{requested.pk}")
    expect(decided).to_have_attribute("data-state", "approved")
    expect(decided).to_contain_text("Racks a100-a checked")
    expect(decided.locator("form")).to_have_count(0)
    assert page.url == queue_url  # swapped in place, no navigation
    screenshot(page, "verification-queue-2-approved")
    assert_accessible(page, "verification-queue-2-approved")
    requested.refresh_from_db()
    assert requested.state == VerificationState.APPROVED
    assert requested.confirmed_host_paths == ["/data/models"]

    logout(page)
    login(page, live_server, member)
    page.goto(f"{live_server.url}/clusters/verifications/")
    assert assets_loaded(page)
    row = page.locator(f"#request-{requested.pk}")
    expect(row).to_have_attribute("data-state", "approved")
    expect(row).to_contain_text("Racks a100-a checked")
    expect(row).to_contain_text(admin_user.username)
    screenshot(page, "verification-queue-3-requester-sees-approval")
    assert_accessible(page, "verification-queue-3-requester-sees-approval")
