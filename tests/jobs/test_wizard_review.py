"""Wizard steps 3 and 4: common configuration, the exact YAML, the checklist and submission."""

from __future__ import annotations

import html as htmllib
import re
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from clusters.models import Cluster, Node
from jobs.context import evaluate
from jobs.core.render import build_manifest
from jobs.drafts.services import job_create, ssh_key_create
from jobs.models import Job, JobState, LaunchList, RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import submittable_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db: None) -> list[Cluster]:
    return load_fleet_rows()


@pytest.fixture
def web(client: Client, member: Any) -> Client:
    client.force_login(member)
    return client


def url(name: str, number: int) -> str:
    return reverse("jobs:wizard-step", kwargs={"name": name, "step": number})


def public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def shown_yaml(page: str) -> str:
    """The text of the highlighted YAML block, as a browser would copy it."""
    block = re.search(r'<pre class="yaml" id="yaml"[^>]*>(.*?)</pre>', page, re.S)
    assert block is not None
    return htmllib.unescape(re.sub(r"<[^>]+>", "", block.group(1)))


def test_step_3_saves_the_common_configuration(
    web: Client, team: Team, member: Any, fleet: Any
) -> None:
    job_create(team=team, user=member, data={"name": "common-run"})
    ssh_key_create(team=team, user=member, name="alice-laptop", public_key=public_key())
    launch_list = LaunchList.objects.create(team=team, title="ppo inputs", created_by=member)
    page = web.get(url("common-run", 3)).content.decode()
    assert 'value="alice-laptop"' in page and ">ppo inputs</option>" in page
    response = web.post(url("common-run", 3), {
        "header_role": "Rollout", "network_domain": "", "ssh_keys": ["alice-laptop"],
        "run_script": "cd /workspace\r\npython train.py\r\n", "tensorboard_log_dir": "/mnt/tb",
        "launch_list": str(launch_list.pk), "deployment_parameters": "", "goto": "next",
    })
    assert response["Location"] == url("common-run", 4)
    job = Job.objects.get(name="common-run")
    assert job.header_role == "Rollout" and job.ssh_key_names == ["alice-laptop"]
    assert job.run_script == "cd /workspace\npython train.py\n"
    assert job.launch_list == launch_list and job.tensorboard_log_dir == "/mnt/tb"
    assert job.wizard_step == 4


def test_step_3_reads_the_team_s_ssh_keys_once_for_the_list_and_the_engine(
    web: Client, team: Team, member: Any, other_team: Team, outsider: Any
) -> None:
    job_create(team=team, user=member, data={"name": "keyed",
                                             "ssh_keys": ["alice-laptop", "gone-key"]})
    ssh_key_create(team=team, user=member, name="alice-laptop", public_key=public_key())
    ssh_key_create(team=other_team, user=outsider, name="gone-key", public_key=public_key())
    with CaptureQueriesContext(connection) as queries:
        page = web.get(url("keyed", 3)).content.decode()
    assert len([q for q in queries.captured_queries if '"jobs_sshkey"' in q["sql"]]) == 1
    assert 'value="alice-laptop" id="ssh-key-0" checked' in page  # the team's key, chosen
    assert 'value="gone-key" id="ssh-key-unknown-0" checked' in page  # another team's name
    assert "ssh_key.unknown" in page.split('id="f-ssh_keys-findings"')[1][:600]


def test_step_3_without_keys_links_to_the_ssh_key_page(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "no-keys"})
    page = web.get(url("no-keys", 3)).content.decode()
    assert f'href="{reverse("jobs:ssh-keys")}"' in page
    assert "run_script.empty" in page.split('id="f-run_script-findings"')[1][:400]


def test_another_teams_launch_list_is_refused_keeping_the_input(
    web: Client, team: Team, member: Any, other_team: Team, outsider: Any
) -> None:
    job_create(team=team, user=member, data={"name": "sneaky"})
    theirs = LaunchList.objects.create(team=other_team, title="theirs", created_by=outsider)
    response = web.post(url("sneaky", 3), {
        "header_role": "Actor", "run_script": "cd /w && python x.py",
        "launch_list": str(theirs.pk), "goto": "next",
    })
    page = response.content.decode()
    assert response.status_code == 400
    assert ">cd /w &amp;&amp; python x.py</textarea>" in page
    assert 'id="f-launch_list-findings" class="field-findings"><p class="finding error">' in page
    assert Job.objects.get(name="sneaky").launch_list is None


def _live_findings(page: str, field: str) -> str:
    opened = f'<div id="f-{field}-findings" class="field-findings" hx-swap-oob="true">'
    assert page.count(opened) == 1, field
    return page.split(opened)[1].split("</div>")[0]


def test_step_3_findings_follow_the_form_without_saving(
    web: Client, team: Team, member: Any, other_team: Team, outsider: Any
) -> None:
    job_create(team=team, user=member, data={"name": "live-common", "run_script": "python x.py"})
    live = reverse("jobs:wizard-common-findings", kwargs={"name": "live-common"})
    page = web.post(live, {"header_role": "Actor", "run_script": "",
                           "ssh_keys": ["nobody"]}).content.decode()
    assert "run_script.empty" in _live_findings(page, "run_script")
    assert "ssh_key.unknown" in _live_findings(page, "ssh_keys")
    assert _live_findings(page, "tensorboard_log_dir") == ""
    fixed = web.post(live, {"header_role": "Actor", "run_script": "cd /w && python x.py"})
    assert "run_script.empty" not in _live_findings(fixed.content.decode(), "run_script")
    # An update would refuse another team's record: so does the live answer, on that field.
    theirs = LaunchList.objects.create(team=other_team, title="theirs", created_by=outsider)
    refused = web.post(live, {"run_script": "x", "launch_list": str(theirs.pk)}).content.decode()
    assert "not found" in _live_findings(refused, "launch_list")
    job = Job.objects.get(name="live-common")
    assert (job.run_script, job.ssh_key_names, job.launch_list) == ("python x.py", [], None)


def _step_badge(page: str, number: int) -> str:
    button = page.split(f'id="wizard-step-{number}"')[1].split("</button>")[0]
    return button.split('class="badge error">')[1].split("<")[0] if "badge error" in button else ""


@pytest.mark.parametrize("jobs", [1, 30])
def test_step_3_live_counts_follow_the_form_in_bounded_queries(
    web: Client, team: Team, member: Any, jobs: int, django_assert_max_num_queries: Any
) -> None:
    for n in range(jobs):
        job_create(team=team, user=member, data={"name": f"other-{n:02d}"})
    job_create(team=team, user=member, data={"name": "counted", "run_script": "python x.py"})
    live = reverse("jobs:wizard-common-findings", kwargs={"name": "counted"})
    with django_assert_max_num_queries(20):
        empty = web.post(live, {"header_role": "Actor", "run_script": "",
                                "tensorboard_log_dir": "tb"}).content.decode()
    assert 'id="wizard-steps" aria-label="Wizard steps" hx-swap-oob="true"' in empty
    before = int(_step_badge(empty, 3).split()[0])
    fixed = web.post(live, {"header_role": "Actor", "run_script": "python x.py",
                            "tensorboard_log_dir": "/mnt/tb"}).content.decode()
    after = _step_badge(fixed, 3)
    assert (int(after.split()[0]) if after else 0) == before - 2
    assert _live_findings(fixed, "tensorboard_log_dir") == ""


def test_step_3_checks_the_replicas_of_the_role_chosen_as_header_there(
    web: Client, fleet: list[Cluster], team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={
        "name": "header-switch", "task_type": "custom", "header_role": "Head", "roles": [
            {"name": "Head", "cluster": "gpu-a",
             "selector": {"kubernetes.io/hostname": "a-head-01"}},
            {"name": "Pool", "cluster": "cpu-c", "selector": {"rlinf.io/pool": "env-c"}},
        ]})
    live = reverse("jobs:wizard-common-findings", kwargs={"name": "header-switch"})
    fine = web.post(live, {"header_role": "Head", "run_script": "x"}).content.decode()
    assert "header.replicas" not in _live_findings(fine, "header_role")
    switched = web.post(live, {"header_role": "Pool", "run_script": "x"}).content.decode()
    assert "header.replicas" in _live_findings(switched, "header_role")
    assert "it matches 10." in _live_findings(switched, "header_role")
    page = web.get(url("header-switch", 3)).content.decode()
    assert "header.replicas" not in page.split('id="f-header_role-findings"')[1].split("</div>")[0]


def test_step_3_live_findings_are_for_drafts_of_the_team_only(
    client: Client, outsider: Any, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "private-common"})
    client.force_login(outsider)
    live = reverse("jobs:wizard-common-findings", kwargs={"name": "private-common"})
    assert client.post(live, {"run_script": ""}).status_code == 404
    assert client.get(live).status_code == 405


def test_step_4_shows_the_exact_yaml_and_offers_it_as_a_download(
    web: Client, team: Team, owner: Any, admin_user: Any, fleet: Any
) -> None:
    job = submittable_job(team=team, owner=owner, admin=admin_user, name="ready-run")
    expected = evaluate(job)
    manifest = build_manifest(expected.spec, expected.ctx)
    page = web.get(url("ready-run", 4)).content.decode()
    assert shown_yaml(page) == manifest.yaml
    assert manifest.sha256 in page
    download = web.get(reverse("jobs:wizard-manifest", kwargs={"name": "ready-run"}))
    assert download["Content-Disposition"] == 'attachment; filename="ready-run.yaml"'
    assert download.content.decode() == manifest.yaml
    assert 'class="y-key">apiVersion</span>' in page


def test_a_job_without_errors_is_submitted_and_listed(
    web: Client, team: Team, owner: Any, admin_user: Any, fleet: Any
) -> None:
    submittable_job(team=team, owner=owner, admin=admin_user, name="ready-run")
    page = web.get(url("ready-run", 4)).content.decode()
    assert "No findings: the job is ready to submit." in page
    assert 'id="wizard-submit" formaction="/jobs/wizard/ready-run/submit/">' in page
    assert "verification on record: approved, 1 node(s) in its snapshot" in page
    assert "Head Task replicas exactly 1" in page
    response = web.post(reverse("jobs:wizard-submit", kwargs={"name": "ready-run"}),
                        follow=True)
    assert response.redirect_chain[-1][0] == reverse("jobs:list")
    listed = response.content.decode()
    assert "Job ready-run was submitted." in listed and 'data-job="ready-run"' in listed
    job = Job.objects.get(name="ready-run")
    assert job.state == JobState.QUEUED and RunRecord.objects.filter(job=job).exists()
    assert web.get(url("ready-run", 2)).status_code == 302


def test_submit_is_disabled_and_refused_while_errors_remain(
    web: Client, team: Team, member: Any, fleet: Any
) -> None:
    job_create(team=team, user=member, data={"name": "broken-run", "header_role": "Actor"})
    page = web.get(url("broken-run", 4)).content.decode()
    assert 'formaction="/jobs/wizard/broken-run/submit/" disabled' in page
    response = web.post(reverse("jobs:wizard-submit", kwargs={"name": "broken-run"}),
                        follow=True)
    assert response.redirect_chain[-1][0] == url("broken-run", 4)
    assert "fix them before submitting" in response.content.decode()
    assert Job.objects.get(name="broken-run").state == JobState.DRAFT


def test_findings_are_grouped_by_role_and_link_to_their_field(
    web: Client, team: Team, member: Any, fleet: Any
) -> None:
    job_create(team=team, user=member, data={
        "name": "linked", "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor"}, {"name": "Rollout", "gpus": -1}],
    })
    page = web.get(url("linked", 4)).content.decode()
    findings = page.split('id="findings"')[1]
    assert "<h3>Job</h3>" in findings and "<h3>Role Rollout</h3>" in findings
    assert findings.index("<h3>Role Actor</h3>") < findings.index("<h3>Role Rollout</h3>")
    assert 'href="/jobs/wizard/linked/step-2/?role=1#f-roles-1-gpus"' in findings
    assert 'href="/jobs/wizard/linked/step-2/#f-roles-0-image"' in findings
    assert 'href="/jobs/wizard/linked/step-3/#f-run_script"' in findings
    role_page = web.get("/jobs/wizard/linked/step-2/?role=1").content.decode()
    assert 'id="f-roles-1-gpus"' in role_page


def test_different_images_ask_for_the_compatibility_confirmation(
    web: Client, team: Team, member: Any, fleet: Any
) -> None:
    digest = "@sha256:" + "c" * 64
    job_create(team=team, user=member, data={
        "name": "mixed", "task_type": "custom", "header_role": "A",
        "roles": [{"name": "A", "image": "reg.example.com/a" + digest},
                  {"name": "B", "image": "reg.example.com/b" + digest}],
    })
    page = web.get(url("mixed", 4)).content.decode()
    assert 'name="image_compatibility_confirmed"' in page and "image.mixed" in page
    assert 'aria-describedby="f-image_compatibility_confirmed-findings"' in page
    assert "image.mixed" in page.split('id="f-image_compatibility_confirmed-findings"')[1][:400]
    web.post(url("mixed", 4), {"compatibility_shown": "1",
                                "image_compatibility_confirmed": "1", "goto": "stay"})
    assert Job.objects.get(name="mixed").image_compatibility_confirmed is True
    assert "image.mixed" not in web.get(url("mixed", 4)).content.decode()


@pytest.mark.parametrize(("jobs", "nodes"), [(1, 0), (30, 300)])
def test_steps_3_and_4_are_bounded_in_queries(
    web: Client, team: Team, owner: Any, admin_user: Any, fleet: Any, jobs: int, nodes: int,
    django_assert_max_num_queries: Any,
) -> None:
    for n in range(jobs):
        job_create(team=team, user=owner, data={"name": f"filler-{n:03d}"})
    cpu_c = Cluster.objects.get(name="cpu-c")
    Node.objects.bulk_create(
        Node(cluster=cpu_c, name=f"extra-{n:04d}", namespace=cpu_c.namespace,
             labels={"kubernetes.io/hostname": f"extra-{n:04d}", "rlinf.io/pool": "env-c"})
        for n in range(nodes)
    )
    submittable_job(team=team, owner=owner, admin=admin_user, name="ready-run")
    # Two roles: the context builder spends up to two queries per distinct selector; step 3
    # reads the team's SSH keys once for its list and the engine.
    with django_assert_max_num_queries(23):
        assert web.get(url("ready-run", 3)).status_code == 200
    with django_assert_max_num_queries(17):
        assert web.get(url("ready-run", 4)).status_code == 200
    with django_assert_max_num_queries(32):
        response = web.post(url("ready-run", 3), {
            "header_role": "Actor", "run_script": "cd /w && python t.py", "goto": "next"})
    assert response.status_code == 302
