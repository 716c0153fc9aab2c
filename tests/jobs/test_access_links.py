"""Access links: a platform admin sets a cluster's TensorBoard / Ray dashboard URL templates
and shell command template (page and API, audited); members see them filled in for their
job's head pod on the job page and in the pods answer, and the kubectl commands where none
is set."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from django.test import Client
from django.urls import reverse
from pghistory.models import Events

from clusters.models import Cluster
from jobs.models import RunRecord
from jobs.observe.access import access_entries
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE

pytestmark = pytest.mark.django_db

TENSORBOARD = "https://tb.example.com/{namespace}/{job}?logdir={log_dir}"
RAY = "https://{job}-ray.apps.example.com/#/pods/{pod}"
SHELL = "ssh -t jump.example.com kubectl -n {namespace} exec -it {pod} -c {task} -- bash"
TEMPLATES = {"tensorboard_url_template": TENSORBOARD, "ray_dashboard_url_template": RAY,
             "exec_command_template": SHELL}


@pytest.fixture(autouse=True)
def fresh_cache(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 60.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def edit_form(cluster: Cluster, **changes: str) -> dict[str, str]:
    return {"namespace": cluster.namespace, "api_url": cluster.api_url, "enabled": "on",
            **changes}


def test_an_admin_sets_the_templates_on_the_cluster_page_audited(
    running: RunRecord, admin_user: Any
) -> None:
    cluster = Cluster.objects.get(name=CLUSTER)
    web = signed_in(admin_user)
    answer = web.post(reverse("clusters:edit", args=[CLUSTER]), edit_form(cluster, **TEMPLATES))
    assert answer.status_code == 302
    cluster.refresh_from_db()
    assert {field: getattr(cluster, field) for field in TEMPLATES} == TEMPLATES
    changes = [event for event in Events.objects.filter(
        pgh_model="clusters.ClusterEvent", pgh_label="update", pgh_obj_id=str(cluster.pk))
        if event.pgh_data["exec_command_template"] == SHELL]
    assert [event.pgh_context["user"] for event in changes] == [admin_user.pk]
    detail = web.get(reverse("clusters:detail", args=[CLUSTER])).content.decode()
    assert "tb.example.com/{namespace}/{job}?logdir={log_dir}" in detail
    form = web.get(reverse("clusters:edit", args=[CLUSTER])).content.decode()
    assert 'value="ssh -t jump.example.com kubectl -n {namespace}' in form


def test_the_page_refuses_bad_templates_and_keeps_the_old_ones(
    running: RunRecord, admin_user: Any
) -> None:
    cluster = Cluster.objects.get(name=CLUSTER)
    Cluster.objects.filter(pk=cluster.pk).update(exec_command_template=SHELL)
    answer = signed_in(admin_user).post(reverse("clusters:edit", args=[CLUSTER]), edit_form(
        cluster, tensorboard_url_template="javascript:alert(1)//{pod}",
        exec_command_template="ssh jump 'kubectl exec {pod}'"))
    page = answer.content.decode()
    assert answer.status_code == 200
    assert "Start the URL with http:// or https://." in page
    assert "Put placeholders outside quotes" in page
    cluster.refresh_from_db()
    assert (cluster.tensorboard_url_template, cluster.exec_command_template) == ("", SHELL)


def test_only_admins_edit_the_templates(running: RunRecord, member: Any, owner: Any,
                                        admin_user: Any, api_client_for: Any) -> None:
    cluster = Cluster.objects.get(name=CLUSTER)
    url = reverse("api:cluster-detail", args=[CLUSTER])
    for user in (member, owner):
        assert api_client_for(user).patch(url, TEMPLATES, format="json").status_code == 403
        page = signed_in(user).post(reverse("clusters:edit", args=[CLUSTER]),
                                    edit_form(cluster, **TEMPLATES))
        assert page.status_code == 403
    cluster.refresh_from_db()
    assert cluster.exec_command_template == ""
    admin = api_client_for(admin_user)
    bad = admin.patch(url, {"ray_dashboard_url_template": "https://x/{secret}"}, format="json")
    assert bad.status_code == 400 and "ray_dashboard_url_template" in str(bad.json())
    saved = admin.patch(url, TEMPLATES, format="json")
    assert saved.status_code == 200
    assert {field: saved.json()[field] for field in TEMPLATES} == TEMPLATES
    read = api_client_for(member).get(url).json()
    assert read["exec_command_template"] == SHELL


def test_members_see_the_links_filled_in_on_the_page_and_in_the_api(
    running: RunRecord, member: Any, api_client_for: Any
) -> None:
    Cluster.objects.filter(name=CLUSTER).update(**TEMPLATES)
    answer = api_client_for(member).get(reverse("api:job-pods", args=["ppo-run"])).json()
    access = {entry["name"]: entry for entry in answer["access"]}
    assert access["tensorboard"] == {
        "name": "tensorboard", "title": "TensorBoard", "kind": "link", "configured": True,
        "value": f"https://tb.example.com/{NAMESPACE}/ppo-run?logdir="}
    assert access["ray_dashboard"]["value"] == (
        f"https://ppo-run-ray.apps.example.com/#/pods/{HEAD_POD}")
    assert access["shell"] == {
        "name": "shell", "title": "Shell in the head pod", "kind": "command", "configured": True,
        "value": f"ssh -t jump.example.com kubectl -n {NAMESPACE} exec -it {HEAD_POD} "
                 "-c actor -- bash"}
    page = signed_in(member).get(reverse("jobs:job-live", args=["ppo-run"])).content.decode()
    assert f'href="https://ppo-run-ray.apps.example.com/#/pods/{HEAD_POD}"' in page
    assert f"kubectl -n {NAMESPACE} exec -it {HEAD_POD} -c actor -- bash</code>" in page
    assert "port-forward" not in page


def test_without_templates_the_kubectl_commands_are_shown(
    running: RunRecord, member: Any, api_client_for: Any
) -> None:
    Cluster.objects.filter(name=CLUSTER).update(tensorboard_url_template=TENSORBOARD)
    answer = api_client_for(member).get(reverse("api:job-pods", args=["ppo-run"])).json()
    access = {entry["name"]: (entry["kind"], entry["value"], entry["configured"])
              for entry in answer["access"]}
    assert access == {
        "tensorboard": ("link", f"https://tb.example.com/{NAMESPACE}/ppo-run?logdir=", True),
        "ray_dashboard": ("command",
                          f"kubectl -n {NAMESPACE} port-forward {HEAD_POD} 8265:8265", False),
        "shell": ("command", f"kubectl -n {NAMESPACE} exec -it {HEAD_POD} -c main -- bash",
                  False),
    }
    page = signed_in(member).get(reverse("jobs:job-live", args=["ppo-run"])).content.decode()
    assert f"kubectl -n {NAMESPACE} port-forward {HEAD_POD} 8265:8265" in page
    assert "with the cluster's kubeconfig context" in page


def test_a_hostile_log_dir_stays_inside_its_value(running: RunRecord) -> None:
    """The log directory is free text: it is URL-encoded into the link, shell-quoted into the
    command, and escaped on the page."""
    hostile = "/tb/x?a=1#\"><script>alert(1)</script>' ; rm -rf ~ #"
    manifest = yaml.safe_load(running.manifest_yaml)
    manifest["spec"]["tensorboard"] = {"logDir": hostile}
    record = RunRecord(team=running.team, job_name=running.job_name, cluster=CLUSTER,
                       namespace=NAMESPACE, manifest_yaml=yaml.safe_dump(manifest))
    cluster = Cluster(name=CLUSTER, tensorboard_url_template=TENSORBOARD,
                      exec_command_template="ssh jump ls {log_dir} && echo {job}")
    entries = {entry.name: entry for entry in access_entries(record, cluster)}
    url = urlsplit(entries["tensorboard"].value)
    assert (url.netloc, url.fragment) == ("tb.example.com", "")
    assert unquote(url.query.removeprefix("logdir=")) == hostile
    assert shlex.split(entries["shell"].value) == [
        "ssh", "jump", "ls", hostile, "&&", "echo", "ppo-run"]


def test_outsiders_see_no_links(running: RunRecord, outsider: Any,
                                api_client_for: Any) -> None:
    Cluster.objects.filter(name=CLUSTER).update(**TEMPLATES)
    assert api_client_for(outsider).get(
        reverse("api:job-pods", args=["ppo-run"])).status_code == 404
    assert signed_in(outsider).get(
        reverse("jobs:job-live", args=["ppo-run"])).status_code == 404
