"""The cluster page's Kueue queues (SPEC 15: the Admission section, each ClusterQueue's quota
per flavor and resource and the share of the reader's teams) checked by axe-core in a real
browser, in English and Chinese, as a member (their team's share) and as the platform admin
(every mapped team): no serious or critical violation. Every violation found, any impact, is
written to `test-artifacts/axe-<language>-cluster-kueue-*.txt`."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from clusters.models import Cluster
from tests.browser.conftest import assert_accessible, choose_language, login
from tests.clusters.test_queues_api import kueue_cluster  # noqa: F401 (the fixture)
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(("lang", "admission"), [("en", "Admission"), ("zh-hans", "准入")])
def test_the_cluster_page_s_kueue_queues_have_no_serious_or_critical_violation(
        page: Page, live_server: Any, kueue_cluster: Cluster,  # noqa: F811
        member: Any, admin_user: Any, lang: str, admission: str) -> None:
    for user, who in ((member, "member"), (admin_user, "admin")):
        page.context.clear_cookies()
        login(page, live_server, user.username, PASSWORD)
        if lang != "en":
            choose_language(page, lang)
        page.goto(f"{live_server.url}/clusters/cluster/{kueue_cluster.name}/")
        expect(page.locator("h2#admission")).to_have_text(admission)
        section = page.locator("section[aria-labelledby=admission]")
        expect(section).to_contain_text("vision-cq")
        expect(section).to_contain_text("vision-q")
        if who == "admin":
            expect(section).to_contain_text("nlp-q")
        assert_accessible(page, f"{lang}-cluster-kueue-{who}")
