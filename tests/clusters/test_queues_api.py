"""`GET clusters/{name}/queues/` and the cluster page's Admission section (SPEC 15): each
ClusterQueue's quota per flavor and resource (nominal, borrowing limit, used) as the last poll
read it, and the share of the teams the reader may see; another team's slug answers 404."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from clusters.kueue import ClusterQueueView, LocalQueueView, ResourceQuota
from clusters.models import Cluster, KueueQueues
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db

ApiFor = Callable[[Any], APIClient]


@pytest.fixture
def kueue_cluster(team: Team, other_team: Team) -> Cluster:
    cluster = Cluster.objects.create(
        name="gpu-k", namespace="rl-k", api_url="https://k:6443", admission="kueue",
        kueue_queues={"vision-rl": "vision-q", "nlp-rl": "nlp-q"})
    queues = [
        ClusterQueueView("vision-cq", cohort="research", admitted_workloads=1, quotas=(
            ResourceQuota("a100", "nvidia.com/gpu", "8", borrowing_limit="4", used="8",
                          reserved="8"),
            ResourceQuota("a100", "cpu", "64", used="16", reserved="16"))),
        ClusterQueueView("nlp-cq", cohort="research", pending_workloads=2, quotas=(
            ResourceQuota("a100", "nvidia.com/gpu", "8"),)),
    ]
    local = [
        LocalQueueView("rl-k", "vision-q", "vision-cq", admitted_workloads=1,
                       usage=(("a100", "nvidia.com/gpu", "8"), ("a100", "cpu", "16"))),
        LocalQueueView("rl-k", "nlp-q", "nlp-cq", pending_workloads=2),
    ]
    KueueQueues.objects.create(cluster=cluster, cluster_queues=[q.as_dict() for q in queues],
                               local_queues=[q.as_dict() for q in local],
                               read_at="2026-12-01T10:00:00Z")
    return cluster


def test_every_cluster_queue_with_its_quota_per_flavor_and_resource(
        kueue_cluster: Cluster, member: Any, api_client_for: ApiFor) -> None:
    body = api_client_for(member).get("/api/v1/clusters/gpu-k/queues/").json()
    assert (body["cluster"], body["admission"], body["error"]) == ("gpu-k", "kueue", "")
    assert body["as_of"].startswith("2026-12-01T10:00:00")
    vision = next(q for q in body["cluster_queues"] if q["name"] == "vision-cq")
    gpu = next(r for r in vision["resources"] if r["resource"] == "nvidia.com/gpu")
    assert gpu == {"flavor": "a100", "resource": "nvidia.com/gpu", "nominal": "8",
                   "borrowing_limit": "4", "lending_limit": None, "used": "8", "reserved": "8",
                   "borrowed": "0", "potential": "12"}
    assert [q["name"] for q in body["cluster_queues"]] == ["vision-cq", "nlp-cq"]


def test_a_member_sees_the_share_of_their_own_team_only(
        kueue_cluster: Cluster, member: Any, api_client_for: ApiFor) -> None:
    (row,) = api_client_for(member).get("/api/v1/clusters/gpu-k/queues/").json()["teams"]
    assert (row["team"], row["local_queue"], row["namespace"], row["cluster_queue"]) == (
        "vision-rl", "vision-q", "rl-k", "vision-cq")
    assert row["found"] is True
    gpu = next(u for u in row["usage"] if u["resource"] == "nvidia.com/gpu")
    assert (gpu["used"], gpu["nominal"], gpu["share_percent"]) == ("8", "8", 100.0)


def test_an_admin_sees_every_mapped_team(kueue_cluster: Cluster, admin_user: Any,
                                         api_client_for: ApiFor) -> None:
    body = api_client_for(admin_user).get("/api/v1/clusters/gpu-k/queues/").json()
    assert [row["team"] for row in body["teams"]] == ["nlp-rl", "vision-rl"]


def test_one_of_your_teams_by_slug_and_another_teams_slug_is_404(
        kueue_cluster: Cluster, member: Any, api_client_for: ApiFor) -> None:
    client = api_client_for(member)
    mine = client.get("/api/v1/clusters/gpu-k/queues/?team=vision-rl")
    assert [row["team"] for row in mine.json()["teams"]] == ["vision-rl"]
    for slug in ("nlp-rl", "no-such-team", "x" * 300):
        response = client.get(f"/api/v1/clusters/gpu-k/queues/?team={slug}")
        assert response.status_code == 404
        assert "nlp-q" not in response.content.decode()


def test_a_mapped_queue_missing_from_the_cluster_is_shown_as_such(
        kueue_cluster: Cluster, member: Any, api_client_for: ApiFor) -> None:
    Cluster.objects.filter(pk=kueue_cluster.pk).update(kueue_queues={"vision-rl": "gone-q"})
    (row,) = api_client_for(member).get("/api/v1/clusters/gpu-k/queues/").json()["teams"]
    assert (row["local_queue"], row["found"], row["cluster_queue"]) == ("gone-q", False, None)


def test_a_cluster_without_kueue_has_no_queues(member: Any, api_client_for: ApiFor) -> None:
    Cluster.objects.create(name="gpu-n", namespace="rl", api_url="https://n:6443")
    body = api_client_for(member).get("/api/v1/clusters/gpu-n/queues/").json()
    assert (body["admission"], body["cluster_queues"], body["teams"], body["as_of"]) == (
        "none", [], [], None)


def test_an_unknown_cluster_is_404_and_anonymous_is_refused(
        member: Any, api_client_for: ApiFor) -> None:
    assert api_client_for(member).get("/api/v1/clusters/nope/queues/").status_code == 404
    assert APIClient().get("/api/v1/clusters/nope/queues/").status_code in (401, 403)


def test_the_cluster_page_shows_the_queues_and_the_teams_share(
        kueue_cluster: Cluster, member: Any) -> None:
    web = Client()
    web.force_login(member)
    page = web.get("/clusters/cluster/gpu-k/").content.decode()
    assert "vision-cq" in page and "nlp-cq" in page
    assert "nvidia.com/gpu@a100: 8 / 8 (100.0 %)" in page
    assert "nlp-q" not in page  # another team's LocalQueue
