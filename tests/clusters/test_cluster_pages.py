"""The cluster pages and the node browser: everyone reads, admins manage, secrets stay hidden."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.credentials import decrypt
from clusters.inventory.services import poll_cluster
from clusters.models import Cluster, ClusterState, Node
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

TOKEN = "page-sekret-token-51c2a"
CA_BODY = "MIIBpageSekretCA77aa"
CA = f"-----BEGIN CERTIFICATE-----\n{CA_BODY}\n-----END CERTIFICATE-----\n"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_web(admin_user: Any) -> Client:
    return signed_in(admin_user)


@pytest.fixture
def member_web(member: Any) -> Client:
    return signed_in(member)


def cluster_pages(name: str) -> list[str]:
    return [
        reverse("clusters:list"), reverse("clusters:detail", args=[name]),
        reverse("clusters:edit", args=[name]), reverse("clusters:add"),
        reverse("clusters:nodes"), f"{reverse('clusters:nodes')}?cluster={name}",
    ]


def test_pages_need_a_login() -> None:
    response = Client().get(reverse("clusters:list"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_the_list_shows_state_polls_counts_generation_and_errors(member_web: Client) -> None:
    load_fleet_rows()
    Cluster.objects.filter(name="gpu-b").update(
        state=ClusterState.STALE, last_error="ServerError: 500 InternalError: boom"
    )
    Node.objects.filter(name="a-node-01").update(gone=True)
    page = member_web.get(reverse("clusters:list")).content.decode()
    assert 'class="badge stale"' in page and 'class="badge ok"' in page
    assert "ServerError: 500 InternalError: boom" in page
    assert "16</a> / 15 / 1" in page
    assert reverse("clusters:detail", args=["gpu-a"]) in page


def test_members_see_no_admin_controls(member_web: Client) -> None:
    load_fleet_rows()
    page = member_web.get(reverse("clusters:list")).content.decode()
    assert reverse("clusters:add") not in page
    assert reverse("clusters:poll", args=["gpu-a"]) not in page


def test_admins_see_add_poll_and_enable_controls(admin_web: Client) -> None:
    load_fleet_rows()
    page = admin_web.get(reverse("clusters:list")).content.decode()
    assert reverse("clusters:add") in page
    assert reverse("clusters:poll", args=["gpu-a"]) in page
    assert reverse("clusters:enabled", args=["gpu-a"]) in page


def test_members_cannot_open_the_add_or_edit_forms(member_web: Client) -> None:
    load_fleet_rows()
    assert member_web.get(reverse("clusters:add")).status_code == 403
    assert member_web.get(reverse("clusters:edit", args=["gpu-a"])).status_code == 403


def test_members_cannot_add_edit_poll_or_disable(member_web: Client) -> None:
    load_fleet_rows()
    add = member_web.post(reverse("clusters:add"), {
        "name": "gpu-z", "namespace": "rl-z", "api_url": "https://k.example.com",
    })
    assert add.status_code == 403
    assert member_web.post(reverse("clusters:edit", args=["gpu-a"]), {}).status_code == 403
    assert member_web.post(reverse("clusters:poll", args=["gpu-a"])).status_code == 403
    assert member_web.post(
        reverse("clusters:enabled", args=["gpu-a"]), {"enabled": "0"}
    ).status_code == 403
    assert not Cluster.objects.filter(name="gpu-z").exists()
    assert Cluster.objects.get(name="gpu-a").enabled is True


def test_an_admin_adds_a_cluster_with_credentials(admin_web: Client) -> None:
    response = admin_web.post(reverse("clusters:add"), {
        "name": "gpu-z", "namespace": "rl-gpu-z", "api_url": "https://k8s.example.com:6443",
        "token": TOKEN, "ca_cert": CA, "verify_tls": "on", "enabled": "on",
    })
    assert response.status_code == 302
    cluster = Cluster.objects.get(name="gpu-z")
    assert (decrypt(cluster.token_encrypted), decrypt(cluster.ca_cert_encrypted)) == (TOKEN, CA)
    assert (cluster.verify_tls, cluster.enabled) == (True, True)


def test_the_add_form_shows_service_errors_without_echoing_secrets(admin_web: Client) -> None:
    response = admin_web.post(reverse("clusters:add"), {
        "name": "gpu-z", "namespace": "rl-gpu-z", "api_url": "not a url",
        "token": TOKEN, "ca_cert": CA,
    })
    page = response.content.decode()
    assert response.status_code == 200
    assert "Enter the API server&#x27;s http(s) URL" in page
    assert TOKEN not in page and CA_BODY not in page


def test_editing_with_blank_credentials_keeps_them(admin_web: Client) -> None:
    admin_web.post(reverse("clusters:add"), {
        "name": "gpu-z", "namespace": "rl-gpu-z", "api_url": "https://k8s.example.com",
        "token": TOKEN, "ca_cert": CA, "enabled": "on",
    })
    admin_web.post(reverse("clusters:edit", args=["gpu-z"]), {
        "namespace": "rl-other", "api_url": "https://k8s.example.com", "token": "",
        "ca_cert": "", "enabled": "on",
    })
    cluster = Cluster.objects.get(name="gpu-z")
    assert cluster.namespace == "rl-other"
    assert (decrypt(cluster.token_encrypted), decrypt(cluster.ca_cert_encrypted)) == (TOKEN, CA)


def test_editing_can_remove_a_credential(admin_web: Client) -> None:
    admin_web.post(reverse("clusters:add"), {
        "name": "gpu-z", "namespace": "rl-gpu-z", "api_url": "https://k8s.example.com",
        "token": TOKEN, "enabled": "on",
    })
    admin_web.post(reverse("clusters:edit", args=["gpu-z"]), {
        "namespace": "rl-gpu-z", "api_url": "https://k8s.example.com", "clear_token": "on",
        "enabled": "on",
    })
    assert Cluster.objects.get(name="gpu-z").token_encrypted == ""


def test_an_admin_disables_and_enables_polling(admin_web: Client) -> None:
    load_fleet_rows()
    admin_web.post(reverse("clusters:enabled", args=["gpu-a"]), {"enabled": "0"})
    cluster = Cluster.objects.get(name="gpu-a")
    assert (cluster.enabled, cluster.state) == (False, ClusterState.DISABLED)
    admin_web.post(reverse("clusters:enabled", args=["gpu-a"]), {"enabled": "1"})
    cluster.refresh_from_db()
    assert (cluster.enabled, cluster.state) == (True, ClusterState.OK)


def test_poll_now_queues_a_poll_on_commit(
    admin_web: Client, django_capture_on_commit_callbacks: Any,
) -> None:
    load_fleet_rows()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_web.post(reverse("clusters:poll", args=["gpu-a"]))
    assert response.status_code == 302
    assert len(callbacks) == 1


def test_poll_now_with_htmx_answers_a_fragment(
    admin_web: Client, django_capture_on_commit_callbacks: Any,
) -> None:
    load_fleet_rows()
    with django_capture_on_commit_callbacks(execute=False):
        response = admin_web.post(reverse("clusters:poll", args=["gpu-a"]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "A poll of gpu-a is queued." in response.content.decode()


def test_a_redirect_never_leaves_the_site(admin_web: Client) -> None:
    load_fleet_rows()
    response = admin_web.post(
        reverse("clusters:enabled", args=["gpu-a"]),
        {"enabled": "0", "next": "https://evil.example.com/"},
    )
    assert response["Location"] == reverse("clusters:list")


def test_the_detail_page_shows_storage_jobs_and_no_secret(admin_web: Client) -> None:
    load_fleet_rows()
    page = admin_web.get(reverse("clusters:detail", args=["gpu-a"])).content.decode()
    assert "s3-fuse" in page and "local-nvme" in page
    assert "rl-gpu-a" in page


def test_an_unknown_cluster_page_is_404(member_web: Client) -> None:
    assert member_web.get(reverse("clusters:detail", args=["nowhere"])).status_code == 404


def test_a_secret_sent_through_the_api_appears_on_no_page(
    admin_user: Any, admin_web: Client, api_client_for: Callable[[Any], APIClient],
) -> None:
    api = api_client_for(admin_user)
    created = api.post("/api/v1/clusters/", {
        "name": "gpu-z", "namespace": "rl-gpu-z", "api_url": "http://127.0.0.1:9/gpu-z",
        "token": TOKEN, "ca_cert": CA,
    }, format="json")
    assert created.status_code == 201
    poll_cluster(cluster_id=Cluster.objects.get(name="gpu-z").id)
    stored = Cluster.objects.get(name="gpu-z")
    assert stored.state == ClusterState.STALE
    for path in cluster_pages("gpu-z"):
        response = admin_web.get(path)
        assert response.status_code == 200, path
        page = response.content.decode()
        assert TOKEN not in page, path
        assert CA_BODY not in page, path
        assert stored.token_encrypted not in page and stored.ca_cert_encrypted not in page


def test_the_node_browser_lists_every_cluster(member_web: Client) -> None:
    load_fleet_rows()
    response = member_web.get(reverse("clusters:nodes"))
    assert response.context["page"].paginator.count == 47
    page = response.content.decode()
    assert "a-node-01" in page and "rlinf.io/gpu-model=a100" in page


def test_the_node_browser_filters_by_cluster_and_labels(member_web: Client) -> None:
    load_fleet_rows()
    response = member_web.get(reverse("clusters:nodes"), {
        "cluster": "gpu-b", "selector": "rlinf.io/gpu-model=a100",
    })
    nodes = list(response.context["page"])
    assert len(nodes) == 4
    assert {n.cluster.name for n in nodes} == {"gpu-b"}


def test_the_node_browser_explains_a_bad_condition(member_web: Client) -> None:
    load_fleet_rows()
    response = member_web.get(reverse("clusters:nodes"), {"selector": "zone=a, pool"})
    page = response.content.decode()
    assert response.context["page"].paginator.count == 0
    assert "&#x27;pool&#x27; is not a key=value condition." in page
    assert 'role="alert"' in page


def test_the_node_browser_shows_gone_nodes_only_when_asked(member_web: Client) -> None:
    load_fleet_rows()
    Node.objects.filter(name="a-node-01").update(gone=True)
    selector = {"selector": "kubernetes.io/hostname=a-node-01"}
    without = member_web.get(reverse("clusters:nodes"), selector)
    assert without.context["page"].paginator.count == 0
    with_gone = member_web.get(reverse("clusters:nodes"), {**selector, "include_gone": "on"})
    assert with_gone.context["page"].paginator.count == 1
    assert 'class="badge stale">gone' in with_gone.content.decode()


def test_the_node_browser_shows_missing_gpus_as_unknown(member_web: Client) -> None:
    load_fleet_rows()
    Node.objects.filter(name="a-node-01").update(gpu=None)
    page = member_web.get(
        reverse("clusters:nodes"), {"selector": "kubernetes.io/hostname=a-node-01"}
    ).content.decode()
    assert 'title="not reported">—' in page


def test_a_poll_a_few_seconds_ago_reads_just_now_never_0_minutes(member_web: Client) -> None:
    load_fleet_rows()
    now = timezone.now()
    Cluster.objects.filter(name="gpu-a").update(last_polled_at=now, last_success_at=now)
    Cluster.objects.filter(name="gpu-b").update(
        last_polled_at=now - timedelta(minutes=3), last_success_at=now - timedelta(minutes=3))
    page = member_web.get(reverse("clusters:list")).content.decode()
    assert "0\xa0minutes" not in page and "0 minutes" not in page
    assert "just now" in page
    assert "3\xa0minutes ago" in page
    chinese = member_web.get(reverse("clusters:list"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "刚刚" in chinese.content.decode()
