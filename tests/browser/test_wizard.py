"""The create-job wizard in a real browser: a team member builds an RL job on the demo fleet.

One journey per language does several checks on the way (the suite stays fast):
from an empty browser to the YAML preview; the live node count follows the conditions;
a cross-cluster label shows the foreign nodes; a Header role matching two nodes shows
``header.replicas`` on step 2 and blocks submit; back from step 4 to step 1 and forward
again loses nothing; a new page resumes the draft from the job list; once fixed, the job
is submitted and listed. Screenshots of every step go to ``test-artifacts/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from playwright.sync_api import Page, expect

from clusters.models import Cluster, NetworkDomain, Node, Verification
from clusters.verifications.services import verification_approve, verification_request
from jobs.drafts.services import ssh_key_create
from jobs.models import DeploymentParameters, Job, JobState, LaunchList
from rlark_site.foundation.tenancy.models import Team
from tests.browser.conftest import assert_accessible, choose_language, login
from tests.conftest import PASSWORD
from tests.factories import confirmed_parameters, load_fleet_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
IMAGE = "registry.example.com/rlinf/rlinf@sha256:" + "ab" * 32
ACTOR = {"kubernetes.io/hostname": "a-head-01", "rlinf.io/pool": "a100-head"}
ROLLOUT = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}
ENVIRONMENT = {"rlinf.io/pool": "env-c"}


def _second_head_node() -> None:
    """A second node in the head pool: the pool alone now matches two nodes."""
    cluster = Cluster.objects.get(name="gpu-a")
    Node.objects.create(
        cluster=cluster, name="a-head-02", namespace=cluster.namespace, gpu=8,
        labels={"kubernetes.io/hostname": "a-head-02", "topology.rlinf.io/cluster": "gpu-a",
                "rlinf.io/pool": "a100-head", "rlinf.io/zone": "zone-1"},
        devices={"rlinf.io/rdma": 4},
    )


def _approve(team: Team, owner: Any, admin: Any, cluster: str, selector: dict[str, str],
             *, header: bool = False) -> None:
    verification = verification_request(
        team=team, user=owner, cluster=Cluster.objects.get(name=cluster), selector=selector,
        for_header_role=header,
    )
    verification_approve(verification_id=verification.pk, admin=admin, note="checked")


@pytest.fixture
def world(team: Team, owner: Any, member: Any, admin_user: Any) -> dict[str, Any]:
    """The demo fleet, the admin's approvals for the final selectors, the team's records."""
    load_fleet_rows()
    _second_head_node()
    _approve(team, owner, admin_user, "gpu-a", ACTOR, header=True)
    _approve(team, owner, admin_user, "gpu-a", ROLLOUT)
    _approve(team, owner, admin_user, "cpu-c", ENVIRONMENT)
    domain = NetworkDomain.objects.create(name="rl-mesh")
    domain.clusters.set(Cluster.objects.filter(name__in=["gpu-a", "cpu-c"]))
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    ssh_key_create(team=team, user=owner, name="alice-laptop", public_key=f"{line} alice@laptop")
    launch_list = LaunchList.objects.create(team=team, title="PPO math inputs", created_by=owner)
    parameters = DeploymentParameters.objects.create(
        team=team, title="PPO math placement", created_by=owner, launch_list=launch_list)
    return {"member": member, "launch_list": launch_list, "parameters": parameters,
            "admin": admin_user}


class Journey:
    """The steps of the journey, addressed by ids and values so any language can run it."""

    def __init__(self, page: Page, live_server: Any, lang: str) -> None:
        self.page = page
        self.base = live_server.url
        self.lang = lang
        ARTIFACTS.mkdir(exist_ok=True)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(ARTIFACTS / f"wizard-{self.lang}-{name}.png"),
                             full_page=True)
        assert_accessible(self.page, f"wizard-{self.lang}-{name}")  # axe-core, each step

    def go(self, button: str, url_part: str) -> None:
        with self.page.expect_navigation(url=f"**{url_part}"):
            self.page.click(button)

    def choose_cluster(self, index: int, cluster: str) -> None:
        with self.page.expect_navigation():
            self.page.select_option(f"#f-roles-{index}-cluster", cluster)

    def choose_label(self, key: str, value: str) -> None:
        self.page.select_option(f'select[data-label-key="{key}"]', f"{key}={value}")

    def count(self, index: int) -> Any:
        return expect(self.page.locator(f"#role-{index}-count"))


def _step_1(j: Journey) -> None:
    page = j.page
    j.go("#create-job", "/jobs/wizard/new/")
    expect(page.locator("html")).to_have_attribute("lang", j.lang)
    if j.lang == "zh-hans":
        expect(page.locator("#step-title")).to_have_text("第一步：角色和资源")
        expect(page.locator("#wizard-next")).to_have_text("下一步")
    for role in ("Actor", "Rollout", "Environment"):
        expect(page.locator(f'input[name="role_name"][value="{role}"]')).to_have_count(1)
    page.fill("#f-name", "ppo-math-7b")
    expect(page.locator("#name-available")).to_be_visible()
    page.check("#header-0")
    j.shot("1-roles")
    j.go("#wizard-next", "/jobs/wizard/ppo-math-7b/step-2/")


def _step_2_actor(j: Journey) -> None:
    page = j.page
    j.choose_cluster(0, "gpu-a")
    j.count(0).to_have_text("0")
    j.choose_label("rlinf.io/pool", "a100-head")
    j.count(0).to_have_text("2")
    expect(page.locator("#f-roles-0-selector-findings")).to_contain_text("header.replicas")
    if j.lang == "zh-hans":
        expect(page.locator("#f-roles-0-selector-findings")).to_contain_text(
            "Header 角色的选择器必须恰好匹配 1 个节点；当前匹配到 2 个。")
    expect(page.locator("#role-0-verification-state")).to_have_attribute("data-state", "")
    # A selector that already fails the automated checks is not sent to the admins.
    page.click("#role-0-request-verification")
    refusal = page.locator("#role-0-verification .finding.error")
    expect(refusal).to_contain_text(
        "Header 角色的选择器必须恰好匹配 1 个节点；当前匹配到 2 个。" if j.lang == "zh-hans"
        else "The Header role's selector must match exactly 1 node; it matches 2.")
    expect(page.locator("#role-0-verification-state")).to_have_attribute("data-state", "")
    j.shot("2-actor-request-refused")
    page.fill("#f-roles-0-gpus", "8")
    page.fill("#f-roles-0-image", IMAGE)
    # Every field's findings follow the form before it is saved.
    page.fill("#f-roles-0-cpu-limit", "eight")
    page.press("#f-roles-0-cpu-limit", "Tab")
    expect(page.locator("#f-roles-0-cpu-limit-findings")).to_contain_text("resources.invalid")
    page.fill("#f-roles-0-cpu-limit", "")
    page.press("#f-roles-0-cpu-limit", "Tab")
    expect(page.locator("#f-roles-0-cpu-limit-findings")).to_be_empty()
    j.shot("2-actor")
    j.go("#wizard-next", "step-2/?role=1")


def _step_2_rollout_and_environment(j: Journey) -> None:
    page = j.page
    j.choose_cluster(1, "gpu-a")
    j.choose_label("rlinf.io/gpu-model", "a100")
    j.count(1).to_have_text("17")
    expect(page.locator("#role-1-live tr.foreign")).to_have_count(4)
    expect(page.locator("#role-1-live tr.foreign").first).to_contain_text("b-node-13")
    expect(page.locator("#role-1-foreign")).to_be_visible()
    if j.lang == "zh-hans":
        expect(page.locator("#role-1-foreign")).to_have_text("有 4 个匹配节点不在集群 gpu-a 中。")
    j.shot("2-rollout-foreign")
    j.choose_label("topology.rlinf.io/cluster", "gpu-a")
    j.count(1).to_have_text("13")
    expect(page.locator("#role-1-live tr.foreign")).to_have_count(0)
    page.fill("#f-roles-1-gpus", "8")
    page.fill("#f-roles-1-image", IMAGE)
    j.go("#wizard-next", "step-2/?role=2")
    j.choose_cluster(2, "cpu-c")
    j.choose_label("rlinf.io/pool", "env-c")
    j.count(2).to_have_text("10")
    page.fill("#f-roles-2-image", IMAGE)
    j.shot("2-environment")
    j.go("#wizard-next", "/step-3/")


def _step_3(j: Journey, world: dict[str, Any]) -> None:
    page = j.page
    expect(page.locator("#header-role-0")).to_be_checked()
    page.select_option("#f-network_domain", "rl-mesh")
    page.check('input[name="ssh_keys"][value="alice-laptop"]')
    expect(page.locator("#f-run_script-findings")).to_contain_text("run_script.empty")
    page.fill("#f-run_script", "cd /workspace/rlinf\npython -m rlinf.train --config ppo.yaml")
    # The findings follow the form before it is saved.
    expect(page.locator("#f-run_script-findings")).to_be_empty()
    page.fill("#f-tensorboard_log_dir", "/mnt/ckpt/tb")
    page.select_option("#f-launch_list", str(world["launch_list"].pk))
    page.select_option("#f-deployment_parameters", str(world["parameters"].pk))
    j.shot("3-common")
    j.go("#wizard-next", "/step-4/")


def _step_4_blocked(j: Journey) -> str:
    page = j.page
    expect(page.locator("#yaml")).to_contain_text("name: ppo-math-7b")
    expect(page.locator("#yaml")).to_contain_text("head: true")
    expect(page.locator("#findings")).to_contain_text("header.replicas")
    expect(page.locator("#wizard-submit")).to_be_disabled()
    if j.lang == "zh-hans":
        expect(page.locator("#findings-title")).to_have_text("检查结果")
        expect(page.locator("#submit-blocked")).to_have_text("没有错误级别的检查结果后才能提交。")
    j.shot("4-review-blocked")
    return page.locator("#manifest-sha").inner_text()


def _back_and_forth(j: Journey, sha: str) -> None:
    """Step 4 → step 1 → forward again: every value is still there."""
    page = j.page
    j.go("#wizard-step-1", "/step-1/")
    expect(page.locator("#f-name")).to_have_value("ppo-math-7b")
    expect(page.locator("#header-0")).to_be_checked()
    expect(page.locator('input[name="role_name"]')).to_have_count(3)
    j.go("#wizard-next", "/step-2/")
    expect(page.locator("#f-roles-0-cluster")).to_have_value("gpu-a")
    expect(page.locator('select[data-label-key="rlinf.io/pool"]')).to_have_value(
        "rlinf.io/pool=a100-head")
    expect(page.locator("#f-roles-0-gpus")).to_have_value("8")
    expect(page.locator("#f-roles-0-image")).to_have_value(IMAGE)
    j.go("#wizard-step-4", "/step-4/")
    expect(page.locator("#manifest-sha")).to_have_text(sha)


def _resume_in_a_new_page(j: Journey, sha: str) -> None:
    """A fresh page (same browser session) finds the draft in the list and continues it."""
    j.page.close()
    j.page = j.page.context.new_page()
    j.page.goto(f"{j.base}/jobs/")
    row = j.page.locator('tr[data-job="ppo-math-7b"]')
    expect(row.locator(".badge")).to_have_class("badge draft")
    j.go('tr[data-job="ppo-math-7b"] a.button', "/step-4/")
    expect(j.page.locator("#manifest-sha")).to_have_text(sha)


def _fix_header_and_submit(j: Journey, world: dict[str, Any]) -> None:
    page = j.page
    j.go('#findings li:has(code:text-is("header.replicas")) a', "step-2/#f-roles-0-selector")
    j.choose_label("kubernetes.io/hostname", "a-head-01")
    j.count(0).to_have_text("1")
    expect(page.locator("#f-roles-0-selector-findings")).not_to_contain_text("header.replicas")
    j.go("#wizard-step-4", "/step-4/")
    # The last blocker: deployment parameters a platform admin confirmed for this job (the
    # queue side of it is test_parameters_confirmation.py's journey).
    expect(page.locator("#findings")).to_contain_text("deployment_parameters.unconfirmed")
    expect(page.locator("#wizard-submit")).to_be_disabled()
    confirmed_parameters(Job.objects.get(name="ppo-math-7b"), admin=world["admin"],
                         user=world["member"])
    page.reload()
    expect(page.locator("#wizard-submit")).to_be_enabled()
    # Every role's approved verification is a ✓ in every language (states compared, not labels).
    for index in range(3):
        verification = page.locator(f"#task-{index}-verification")
        expect(verification).to_have_attribute("data-ok", "true")
        expect(verification.locator(".ok")).to_have_text("✓")
        if j.lang == "zh-hans":
            expect(verification).to_contain_text("已批准")
    j.shot("4-review-ready")
    j.go("#wizard-submit", "/jobs/")
    row = page.locator('tr[data-job="ppo-math-7b"]')
    expect(row.locator(".badge")).to_have_class("badge queued")
    if j.lang == "zh-hans":
        expect(row.locator(".badge")).to_have_text("已排队")
        expect(page.locator(".messages")).to_contain_text("任务 ppo-math-7b 已提交。")
    j.shot("5-job-list")


def _run_journey(page: Page, live_server: Any, world: dict[str, Any], lang: str) -> None:
    login(page, live_server, world["member"].username, PASSWORD)
    if lang != "en":
        choose_language(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)
    journey = Journey(page, live_server, lang)
    _step_1(journey)
    _step_2_actor(journey)
    _step_2_rollout_and_environment(journey)
    _step_3(journey, world)
    sha = _step_4_blocked(journey)
    _back_and_forth(journey, sha)
    _resume_in_a_new_page(journey, sha)
    _fix_header_and_submit(journey, world)
    job = Job.objects.get(name="ppo-math-7b")
    assert job.state == JobState.QUEUED
    assert [r.name for r in job.roles.all()] == ["Actor", "Rollout", "Environment"]
    assert dict(map(tuple, job.roles.get(position=0).selector)) == ACTOR
    # The refused request for the two-node head pool left no row for the admins.
    assert not Verification.objects.filter(selector={"rlinf.io/pool": "a100-head"}).exists()


def test_a_member_creates_an_rl_job_in_english(
    page: Page, live_server: Any, world: dict[str, Any]
) -> None:
    _run_journey(page, live_server, world, "en")


def test_the_same_journey_in_simplified_chinese(
    page: Page, live_server: Any, world: dict[str, Any]
) -> None:
    _run_journey(page, live_server, world, "zh-hans")
