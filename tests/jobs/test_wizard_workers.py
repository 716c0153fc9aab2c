"""Wizard step 2: one tab per role, live global matches, findings beside fields, verification."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from clusters.models import Cluster, ClusterLabel, Node, Verification
from clusters.verifications.services import (
    verification_approve,
    verification_reject,
    verification_request,
)
from jobs.core.images import IMAGE_PLACEHOLDER
from jobs.drafts.services import job_create
from jobs.models import Job
from jobs.wizard.selectors import cluster_choices, cluster_offer
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

HEAD = {"kubernetes.io/hostname": "a-head-01", "topology.rlinf.io/cluster": "gpu-a"}


@pytest.fixture
def fleet(db: None) -> list[Cluster]:
    return load_fleet_rows()


@pytest.fixture
def web(client: Client, member: Any) -> Client:
    client.force_login(member)
    return client


@pytest.fixture
def job(team: Team, member: Any, fleet: list[Cluster]) -> Job:
    return job_create(team=team, user=member, data={"name": "ppo-run", "header_role": "Actor"})


def step2(role: int | None = None) -> str:
    url = reverse("jobs:wizard-step", kwargs={"name": "ppo-run", "step": 2})
    return url if role is None else f"{url}?role={role}"


def matches(index: int = 0) -> str:
    return reverse("jobs:wizard-matches", kwargs={"name": "ppo-run", "index": index})


def role_post(role: int = 0, **fields: Any) -> dict[str, Any]:
    return {"role": str(role), "goto": "stay", **fields}


def add_nodes(cluster: str, count: int) -> None:
    """Extra nodes of `cluster` (each with its own hostname label), to grow the inventory."""
    row = Cluster.objects.get(name=cluster)
    Node.objects.bulk_create(
        Node(cluster=row, name=f"bulk-{n:04d}", namespace=row.namespace, gpu=8,
             labels={"kubernetes.io/hostname": f"bulk-{n:04d}", "rlinf.io/pool": "bulk",
                     "topology.rlinf.io/cluster": cluster},
             devices={"rlinf.io/rdma": 4})
        for n in range(count)
    )


def test_the_first_role_tab_opens_with_the_header_badge(web: Client, job: Job) -> None:
    html = web.get(step2()).content.decode()
    assert 'name="role" value="0"' in html
    assert 'id="role-tab-0" aria-current="page"' in html
    assert "Step 2: workers of role Actor" in html
    assert "This is the Header role" in html


def test_labels_devices_and_storage_come_from_the_chosen_cluster(
    web: Client, job: Job, team: Team, member: Any
) -> None:
    Node.objects.filter(name="a-node-03").update(gone=True)
    web.post(step2(), role_post(cluster="gpu-a"))
    html = web.get(step2()).content.decode()
    assert 'value="rlinf.io/pool=a100-a"' in html and "a100-a (11 nodes)" in html
    assert 'value="kubernetes.io/hostname=a-head-01"' in html
    assert "a-node-03" not in html.split('id="role-0-live"')[0]
    assert "b-node-01" not in html and "h100" not in html
    assert 'name="device_name" value="rlinf.io/rdma"' in html
    assert "rlinf.io/sim-license" not in html
    assert '<option value="local-nvme">local-nvme</option>' in html
    assert '<option value="ceph-rbd">' not in html


def test_a_role_is_saved_as_typed_and_findings_sit_beside_their_fields(
    web: Client, job: Job
) -> None:
    response = web.post(step2(), role_post(
        cluster="gpu-a", label=["kubernetes.io/hostname=a-head-01"],
        selector_text="topology.rlinf.io/cluster=gpu-a\n", gpus="eight",
        device_name=["rlinf.io/rdma"], device_count=["2"], image=IMAGE_PLACEHOLDER,
        env_name=["HF_HOME", "RLINF_NODE_RANK", ""], env_value=["/mnt/cache", "3", ""],
        mount_kind=["host_path", "object_storage", "host_path"],
        mount_source=["/data/models", "", ""], mount_storage_class=["", "s3-fuse", ""],
        mount_size=["", "10Gi", ""], mount_target=["/mnt/models", "/mnt/ckpt", ""],
        cpu_request="16", cpu_limit="eight", prepare_script="source /opt/venv/bin/activate\r\n",
    ))
    assert response.status_code == 302 and response["Location"] == step2()
    role = Job.objects.get(name="ppo-run").roles.get(position=0)
    assert role.selector == [["kubernetes.io/hostname", "a-head-01"],
                             ["topology.rlinf.io/cluster", "gpu-a"]]
    assert role.gpus == "eight" and role.devices == [["rlinf.io/rdma", 2]]
    assert role.env == [{"name": "HF_HOME", "value": "/mnt/cache"},
                        {"name": "RLINF_NODE_RANK", "value": "3"}]
    assert [m["target"] for m in role.mounts] == ["/mnt/models", "/mnt/ckpt"]
    assert role.mounts[1]["storage_class"] == "s3-fuse"
    assert role.prepare_script == "source /opt/venv/bin/activate\n"
    html = web.get(step2()).content.decode()
    assert 'name="gpus" value="eight" aria-invalid="true" ' \
           'aria-describedby="f-roles-0-gpus-hint f-roles-0-gpus-findings">' in html
    assert html.count(" autofocus") == 1
    assert 'name="selector_text" rows="3" spellcheck="false" aria-invalid="true" ' \
           'aria-describedby="f-roles-0-selector-hint f-roles-0-selector-findings" autofocus' \
           in html
    assert "gpu.invalid" in html.split('id="f-roles-0-gpus-findings"')[1][:400]
    assert "image.placeholder" in html.split('id="f-roles-0-image-findings"')[1][:400]
    assert f'placeholder="{escape(IMAGE_PLACEHOLDER)}"' in html
    assert "env.name.reserved" in html.split('id="f-roles-0-env-1-name-findings"')[1][:400]
    assert "resources.invalid" in html.split('id="f-roles-0-cpu-limit-findings"')[1][:400]
    assert 'value="kubernetes.io/hostname=a-head-01" selected' in html
    assert ">topology.rlinf.io/cluster=gpu-a</textarea>" not in html
    assert 'value="topology.rlinf.io/cluster=gpu-a" selected' in html


def test_a_selector_line_that_is_not_key_value_is_refused_keeping_the_input(
    web: Client, job: Job
) -> None:
    response = web.post(step2(), role_post(cluster="gpu-a", selector_text="rlinf.io/pool",
                                           gpus="4", image="my-image:1.0"))
    html = response.content.decode()
    assert response.status_code == 400
    assert ">rlinf.io/pool</textarea>" in html
    assert 'name="gpus" value="4"' in html and 'value="my-image:1.0"' in html
    assert 'id="f-roles-0-selector" name="selector_text" rows="3" spellcheck="false" ' \
           'aria-invalid="true"' in html
    assert "not understood: rlinf.io/pool" in html
    assert Job.objects.get(name="ppo-run").roles.get(position=0).cluster == ""


def test_the_live_panel_counts_global_matches_and_calls_out_foreign_nodes(
    web: Client, job: Job
) -> None:
    html = web.post(matches(1), {"cluster": "gpu-a", "label": ["rlinf.io/gpu-model=a100"]}
                    ).content.decode()
    assert 'data-count="17"' in html
    assert html.count('<tr class="foreign">') == 4 and "b-node-13" in html
    assert 'id="role-1-foreign"' in html and "4 matched nodes lie outside cluster gpu-a" in html
    assert "selector.cross_cluster" in html
    narrowed = web.post(matches(1), {
        "cluster": "gpu-a", "label": ["rlinf.io/gpu-model=a100"],
        "selector_text": "topology.rlinf.io/cluster=gpu-a"}).content.decode()
    assert 'data-count="13"' in narrowed and 'class="foreign"' not in narrowed
    assert Job.objects.get(name="ppo-run").roles.get(position=1).selector == []


def test_the_header_role_matching_two_nodes_shows_header_replicas(web: Client, job: Job) -> None:
    one = web.post(matches(0), {"cluster": "gpu-a", "label": ["rlinf.io/pool=a100-head"]})
    assert 'data-count="1"' in one.content.decode()
    assert "header.replicas" not in one.content.decode()
    two = web.post(matches(0), {"cluster": "gpu-b", "label": ["rlinf.io/pool=h100-b"],
                                "selector_text": "kubernetes.io/hostname=b-node-01\n"})
    assert 'data-count="1"' in two.content.decode()
    many = web.post(matches(0), {"cluster": "gpu-a", "selector_text": "rlinf.io/pool=cpu-a\n"
                                 "rlinf.io/zone=zone-1\nkubernetes.io/hostname=a-cpu-01"})
    assert 'data-count="1"' in many.content.decode()
    pair = web.post(matches(0), {"cluster": "gpu-b", "label": ["rlinf.io/pool=a100-b"],
                                 "selector_text": "rlinf.io/zone=zone-1"}).content.decode()
    assert 'data-count="4"' in pair
    live = pair.split('id="f-roles-0-selector-findings"')[1].split("</div>")[0]
    assert "header.replicas" in live and "matches 4" in live
    assert Job.objects.get(name="ppo-run").roles.get(position=0).selector == []


def test_the_live_panel_updates_the_gpu_maximum_out_of_band(web: Client, job: Job) -> None:
    html = web.post(matches(0), {"cluster": "gpu-b", "label": ["rlinf.io/pool=a100-b"],
                                 "gpus": "8"}).content.decode()
    assert 'id="f-roles-0-gpus-hint" hx-swap-oob="true">At most 4' in html
    assert "gpu.exceeds_capacity" in html.split('id="f-roles-0-gpus-findings"')[1][:500]
    cpu = web.post(matches(0), {"cluster": "gpu-a", "label": ["rlinf.io/pool=cpu-a"],
                                "gpus": "0"}).content.decode()
    assert "No GPU maximum is known for the matched nodes: keep 0" in cpu


def test_the_live_panel_refreshes_every_field_s_findings_without_saving(
    web: Client, job: Job
) -> None:
    typed = {"cluster": "gpu-a", "label": ["rlinf.io/pool=a100-head"], "gpus": "8",
             "image": IMAGE_PLACEHOLDER, "cpu_request": "16", "cpu_limit": "eight",
             "env_name": ["HF_HOME", "RLINF_NODE_RANK"], "env_value": ["/mnt/cache", "3"]}
    html = web.post(matches(0), typed).content.decode()

    def findings(field: str) -> str:
        opened = f'<div id="f-roles-0-{field}-findings" class="field-findings" hx-swap-oob="true">'
        assert html.count(opened) == 1, field
        return html.split(opened)[1].split("</div>")[0]

    assert "resources.invalid" in findings("cpu-limit")
    assert "image.placeholder" in findings("image")
    assert "env.name.reserved" in findings("env-1-name")
    assert findings("cpu-request") == "" and findings("env-0-name") == ""
    # The selector's findings stay inside the panel (swapped with it), not out of band.
    assert 'id="f-roles-0-selector-findings" class="field-findings">' in html
    assert 'id="f-roles-0-selector-findings" class="field-findings" hx-swap-oob' not in html
    # Nothing was saved: the stored role is still empty.
    assert Job.objects.get(name="ppo-run").roles.get(position=0).image == ""

    fixed = web.post(matches(0), {**typed, "cpu_limit": "32"}).content.decode()
    assert "resources.invalid" not in fixed


def test_requesting_a_verification_saves_the_role_and_shows_the_state(
    web: Client, job: Job, team: Team, admin_user: Any
) -> None:
    url = reverse("jobs:wizard-verification", kwargs={"name": "ppo-run", "index": 0})
    fields = {"cluster": "gpu-a", "selector_text": "kubernetes.io/hostname=a-head-01\n"
              "topology.rlinf.io/cluster=gpu-a", "gpus": "8",
              "mount_kind": ["host_path"], "mount_source": ["/data"], "mount_target": ["/mnt/d"]}
    html = web.post(url, fields).content.decode()
    assert 'data-state="pending"' in html and "Request verification" not in html
    verification = Verification.objects.get()
    assert verification.team == team and verification.for_header_role
    assert verification.selector == HEAD and verification.requested_gpu == 8
    assert verification.requested_host_paths == ["/data"]
    assert Job.objects.get(name="ppo-run").roles.get(position=0).cluster == "gpu-a"
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok",
                         confirm_host_paths=["/data"])
    page = web.get(step2()).content.decode()
    assert 'data-state="approved"' in page and "selector.unverified" not in page


def test_an_unverified_selector_offers_the_request_button(
    web: Client, job: Job, team: Team, owner: Any, admin_user: Any
) -> None:
    web.post(step2(), role_post(cluster="gpu-a", selector_text="kubernetes.io/hostname=a-head-01"
                                "\ntopology.rlinf.io/cluster=gpu-a"))
    html = web.get(step2()).content.decode()
    assert 'id="role-0-request-verification"' in html and "selector.unverified" in html
    rejected = verification_request(team=team, user=owner, cluster=Cluster.objects.get(
        name="gpu-a"), selector=HEAD, for_header_role=True)
    verification_reject(verification_id=rejected.pk, admin=admin_user, note="no")
    again = web.get(step2()).content.decode()
    assert 'data-state="rejected"' in again and 'id="role-0-request-verification"' in again


def test_next_and_back_walk_through_the_role_tabs(web: Client, job: Job) -> None:
    assert web.post(step2(), role_post(0, goto="next"))["Location"] == step2(1)
    assert web.post(step2(), role_post(2, goto="next"))["Location"] == reverse(
        "jobs:wizard-step", kwargs={"name": "ppo-run", "step": 3})
    assert web.post(step2(), role_post(1, goto="back"))["Location"] == step2()
    assert web.post(step2(), role_post(0, goto="back"))["Location"] == reverse(
        "jobs:wizard-step", kwargs={"name": "ppo-run", "step": 1})
    assert web.post(step2(), role_post(0, goto="role-2"))["Location"] == step2(2)
    assert Job.objects.get(name="ppo-run").wizard_step == 2


@pytest.mark.parametrize("extra_nodes", [0, 400])
def test_step_2_is_bounded_in_queries_however_many_nodes(
    web: Client, job: Job, extra_nodes: int, django_assert_max_num_queries: Any
) -> None:
    add_nodes("gpu-a", extra_nodes)
    posted = role_post(cluster="gpu-a", label=["topology.rlinf.io/cluster=gpu-a"],
                       selector_text="rlinf.io/zone=zone-1", gpus="2")
    with django_assert_max_num_queries(40):
        assert web.post(step2(), posted).status_code == 302
    # The draft's evaluation reads the role's cluster once (namespace, storage classes and
    # devices in one query) and the panel's offer reuses it; the name is looked up once; the
    # cluster choices come with the chosen cluster's labels; the page's teams in one query;
    # the pre-flight (SPEC 15) reads every matched node's capacity and occupancy in one more.
    with django_assert_max_num_queries(15):
        page = web.get(step2())
    assert page.status_code == 200
    with django_assert_max_num_queries(12):  # the live panel shows the pre-flight too
        live = web.post(matches(0), posted)
    assert live.status_code == 200


def oob_findings(html: str, field: str) -> str:
    """The out-of-band findings container of `field` (role 0) in a live answer."""
    opened = f'<div id="f-roles-0-{field}-findings" class="field-findings" hx-swap-oob="true">'
    assert html.count(opened) == 1, field
    return html.split(opened)[1].split("</div>")[0]


def badge(html: str, button_id: str) -> str:
    """The error badge of a step button or role tab ('' when it has none)."""
    button = html.split(f'id="{button_id}"')[1].split("</button>")[0]
    return button.split('class="badge error">')[1].split("<")[0] if "badge error" in button else ""


def test_blank_rows_are_numbered_after_the_stored_ones(web: Client, job: Job) -> None:
    web.post(step2(), role_post(cluster="gpu-a", env_name=["HF_HOME"], env_value=["/mnt/hf"],
                                mount_kind=["host_path"], mount_source=["/data"],
                                mount_target=["/mnt/data"]))
    html = web.get(step2()).content.decode()
    for row in range(4):  # one stored, three blank
        assert f'id="f-roles-0-env-{row}-name"' in html
        assert f'id="f-roles-0-env-{row}-value-findings"' in html
    for row in range(3):  # one stored, two blank
        assert f'id="f-roles-0-mounts-{row}-target"' in html
    assert 'id="f-roles-0-devices-0"' in html  # gpu-a offers rlinf.io/rdma, not asked yet
    assert "new-" not in html.split('id="role-title"')[1]


def test_unsaved_rows_get_their_findings_live_at_their_place_on_the_page(
    web: Client, job: Job
) -> None:
    """Rows typed into the blank rows (the first one left blank) get the engine's findings
    beside them, with the step and tab counts, and lose them once fixed; nothing is saved."""
    typed = role_post(
        cluster="gpu-a", label=["rlinf.io/pool=a100-head"], image=IMAGE_PLACEHOLDER,
        env_name=["", "RLINF_NODE_RANK", "RAY_TEMP_DIR"], env_value=["", "3", "ray-tmp"],
        mount_kind=["host_path", "host_path"], mount_source=["", "/data"],
        mount_target=["", "/tmp"], device_name=["rlinf.io/rdma"], device_count=["many"],
    )
    html = web.post(matches(0), typed).content.decode()
    assert oob_findings(html, "env-0-name") == ""
    assert "env.name.reserved" in oob_findings(html, "env-1-name")
    assert "env.ray_temp_dir" in oob_findings(html, "env-2-value")
    assert oob_findings(html, "mounts-0-target") == ""
    assert "mount.target.shadows" in oob_findings(html, "mounts-1-target")
    assert "device." in oob_findings(html, "devices-0")
    assert 'id="wizard-steps" aria-label="Wizard steps" hx-swap-oob="true"' in html
    assert 'id="role-tabs" aria-label="Roles" hx-swap-oob="true"' in html
    errors = int(badge(html, "role-tab-0"))
    others = int(badge(html, "role-tab-1")) + int(badge(html, "role-tab-2"))
    assert errors >= 5 and badge(html, "wizard-step-2") == f"{errors + others} errors"

    fixed = web.post(matches(0), {
        **typed, "env_name": ["", "RLINF_HOME", "RAY_TEMP_DIR"],
        "env_value": ["", "3", "/mnt/ray-tmp"], "mount_target": ["", "/mnt/data"],
        "device_count": ["1"],
    }).content.decode()
    for field in ("env-1-name", "env-2-value", "mounts-1-target", "devices-0"):
        assert oob_findings(fixed, field) == "", field
    assert int(badge(fixed, "role-tab-0") or 0) == errors - 4
    assert badge(fixed, "wizard-step-2") == f"{errors - 4 + others} errors"
    stored = Job.objects.get(name="ppo-run").roles.get(position=0)
    assert stored.env == [] and stored.mounts == [] and stored.devices == []


def test_a_form_refusal_counts_live_too(web: Client, job: Job) -> None:
    html = web.post(matches(0), role_post(cluster="gpu-a", selector_text="no-equals-sign"),
                    ).content.decode()
    selector = html.split('id="f-roles-0-selector-findings" class="field-findings">')[1]
    assert "Write each condition as key=value" in selector.split("</div>")[0]


@pytest.mark.parametrize("rows", [1, 40])
def test_the_live_answer_is_bounded_in_queries_however_many_rows(
    web: Client, job: Job, rows: int, django_assert_max_num_queries: Any
) -> None:
    posted = role_post(cluster="gpu-a", label=["rlinf.io/pool=a100-head"], gpus="2",
                       env_name=[f"VAR_{n}" for n in range(rows)],
                       env_value=["x"] * rows, mount_kind=["host_path"] * rows,
                       mount_source=[f"/data/{n}" for n in range(rows)],
                       mount_target=[f"/mnt/{n}" for n in range(rows)])
    with django_assert_max_num_queries(16):
        assert web.post(matches(0), posted).status_code == 200


def test_rows_added_on_the_page_get_their_own_findings(web: Client, job: Job) -> None:
    """The page's row templates number a copy by its place; a live answer covers every row
    posted, however many were added."""
    page = web.get(step2()).content.decode()
    template = page.split('<template id="role-0-env-template">')[1].split("</template>")[0]
    assert 'id="f-roles-0-env-__ROW__-name"' in template
    assert 'aria-describedby="f-roles-0-env-__ROW__-name-findings"' in template
    assert 'data-add-row="role-0-env-template"' in page
    assert 'id="f-roles-0-mounts-__ROW__-target"' in page
    html = web.post(matches(0), role_post(
        cluster="gpu-a", env_name=["", "", "", "", "RAY_TEMP_DIR"],
        env_value=["", "", "", "", "relative/dir"])).content.decode()
    assert "env.ray_temp_dir" in oob_findings(html, "env-4-value")
    assert oob_findings(html, "env-3-value") == ""


@pytest.mark.parametrize("cluster", ["gpu-a", "cpu-c", "gpu-b", "", "no-such"])
def test_the_cluster_choices_and_the_chosen_cluster_s_labels_are_one_query(
    fleet: list[Cluster], cluster: str, django_assert_num_queries: Any
) -> None:
    Cluster.objects.filter(name="gpu-b").update(enabled=False)  # its labels are not offered
    with django_assert_num_queries(1):
        choices = cluster_choices(cluster)
    enabled = Cluster.objects.filter(enabled=True).order_by("name")
    assert choices.names == list(enabled.values_list("name", flat=True))
    assert "gpu-b" not in choices.names and len(choices.names) > 1
    pairs = ClusterLabel.objects.filter(cluster__name=cluster, cluster__enabled=True).order_by(
        "key", "value")
    expected = [(key, value, count) for key, value, count in pairs.values_list(
        "key", "value", "nodes")]
    got = [(k.key, v.value, v.count) for k in (choices.labels or ()) for v in k.values]
    assert got == expected
    assert (choices.labels is None) == (cluster not in choices.names)
    if cluster in choices.names:
        assert cluster_offer(cluster, labels=choices.labels) == cluster_offer(cluster)


def test_the_live_message_numbers_mounts_from_1_as_the_labels_do(web: Client, job: Job) -> None:
    """Two mounts with one target: the message names the earlier one by its label's number,
    and by its place on the page when a blank row above it was dropped from the body."""
    def duplicate(**rows: list[str]) -> str:
        html = web.post(matches(0), {"cluster": "gpu-a", **rows}).content.decode()
        assert "mount.target.duplicate" in html, html
        return html

    html = duplicate(mount_kind=["host_path", "host_path"], mount_source=["/data", "/data2"],
                     mount_target=["/mnt/d", "/mnt/d"])
    assert escape("Mount 1 already uses target /mnt/d.") in html
    assert "Mount 0 " not in html
    html = duplicate(mount_kind=["host_path", "host_path", "host_path"],
                     mount_source=["", "/data", "/data2"], mount_target=["", "/mnt/d", "/mnt/d"])
    assert escape("Mount 2 already uses target /mnt/d.") in html
    assert "Mount 1 " not in html
