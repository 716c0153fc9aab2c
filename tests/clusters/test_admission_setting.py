"""A cluster's admission (none or Kueue) and its team → LocalQueue map: admins set it through
the clusters API and the admission page, bounded and validated; everyone else reads only their
own teams' entries; every change is audited."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from clusters.kueue import MAX_QUEUE_MAP
from clusters.models import Cluster
from rlark_site.foundation.audit.selectors import audit_events
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db

ApiFor = Callable[[Any], APIClient]


@pytest.fixture
def cluster(db: None) -> Cluster:
    return Cluster.objects.create(name="gpu-k", namespace="rl-gpu-k", api_url="https://k:6443")


def test_a_cluster_admits_without_kueue_by_default(cluster: Cluster, member: Any,
                                                   api_client_for: ApiFor) -> None:
    body = api_client_for(member).get("/api/v1/clusters/gpu-k/").json()
    assert (body["admission"], body["kueue_queues"]) == ("none", {})


def test_an_admin_turns_kueue_on_with_a_queue_per_team(
        cluster: Cluster, team: Team, other_team: Team, admin_user: Any,
        api_client_for: ApiFor) -> None:
    response = api_client_for(admin_user).patch("/api/v1/clusters/gpu-k/", {
        "admission": "kueue", "kueue_queues": {"vision-rl": "vision-queue", "nlp-rl": "nlp-q"},
    }, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["admission"] == "kueue"
    assert response.json()["kueue_queues"] == {"nlp-rl": "nlp-q", "vision-rl": "vision-queue"}
    cluster.refresh_from_db()
    assert cluster.kueue_queues == {"nlp-rl": "nlp-q", "vision-rl": "vision-queue"}


def test_a_member_reads_only_the_entries_of_their_own_teams(
        cluster: Cluster, team: Team, other_team: Team, member: Any,
        api_client_for: ApiFor) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(
        admission="kueue", kueue_queues={"vision-rl": "vision-queue", "nlp-rl": "nlp-q"})
    client = api_client_for(member)
    assert client.get("/api/v1/clusters/gpu-k/").json()["kueue_queues"] == {
        "vision-rl": "vision-queue"}
    listed = client.get("/api/v1/clusters/").json()["results"]
    assert [c["kueue_queues"] for c in listed] == [{"vision-rl": "vision-queue"}]


def test_only_admins_change_the_admission(cluster: Cluster, team: Team, owner: Any,
                                          api_client_for: ApiFor) -> None:
    response = api_client_for(owner).patch("/api/v1/clusters/gpu-k/", {
        "admission": "kueue", "kueue_queues": {"vision-rl": "mine"}}, format="json")
    assert response.status_code == 403
    cluster.refresh_from_db()
    assert (cluster.admission, cluster.kueue_queues) == ("none", {})


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"admission": "volcano"}, "admission", "is not a valid choice"),
    ({"kueue_queues": {"no-such-team": "q"}}, "kueue_queues", "no-such-team is not a team"),
    ({"kueue_queues": {"vision-rl": "Not_A_Label"}}, "kueue_queues", "lower-case letters"),
    ({"kueue_queues": {"vision-rl": ""}}, "kueue_queues", "lower-case letters"),
    ({"kueue_queues": {"vision-rl": "q" * 64}}, "kueue_queues", "Ensure this field has no more"),
    ({"kueue_queues": ["vision-rl", "q"]}, "kueue_queues", "dictionary"),
    ({"kueue_queues": {f"team-{i}": "q" for i in range(MAX_QUEUE_MAP + 1)}}, "kueue_queues",
     f"At most {MAX_QUEUE_MAP} teams"),
])
def test_a_bad_map_is_refused_with_its_reason_and_nothing_is_stored(
        cluster: Cluster, team: Team, admin_user: Any, api_client_for: ApiFor,
        body: dict[str, Any], field: str, words: str) -> None:
    response = api_client_for(admin_user).patch("/api/v1/clusters/gpu-k/", body, format="json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["field"].startswith(field)
    assert words in " ".join(str(m) for texts in answer["errors"].values() for m in texts)
    cluster.refresh_from_db()
    assert (cluster.admission, cluster.kueue_queues) == ("none", {})


def test_a_new_cluster_can_be_registered_with_kueue(team: Team, admin_user: Any,
                                                    api_client_for: ApiFor) -> None:
    response = api_client_for(admin_user).post("/api/v1/clusters/", {
        "name": "gpu-q", "namespace": "rl", "api_url": "https://q:6443",
        "admission": "kueue", "kueue_queues": {"vision-rl": "vq"}}, format="json")
    assert response.status_code == 201, response.json()
    assert Cluster.objects.get(name="gpu-q").kueue_queues == {"vision-rl": "vq"}


def test_the_change_is_audited_with_its_actor(cluster: Cluster, team: Team, admin_user: Any,
                                              api_client_for: ApiFor) -> None:
    api_client_for(admin_user).patch("/api/v1/clusters/gpu-k/", {
        "admission": "kueue", "kueue_queues": {"vision-rl": "vq"}}, format="json")
    (event,) = [e for e in audit_events(objects=[("clusters.Cluster", cluster.pk)])
                if e.pgh_label == "update"]
    assert event.pgh_data["admission"] == "kueue"
    assert event.pgh_data["kueue_queues"] == {"vision-rl": "vq"}
    assert event.pgh_context["user"] == admin_user.pk


def test_an_unchanged_map_writes_no_audit_row(cluster: Cluster, team: Team, admin_user: Any,
                                              api_client_for: ApiFor) -> None:
    client = api_client_for(admin_user)
    body = {"admission": "kueue", "kueue_queues": {"vision-rl": "vq"}}
    client.patch("/api/v1/clusters/gpu-k/", body, format="json")
    client.patch("/api/v1/clusters/gpu-k/", body, format="json")
    updates = [e for e in audit_events(objects=[("clusters.Cluster", cluster.pk)])
               if e.pgh_label == "update"]
    assert len(updates) == 1


# -- the admission page ------------------------------------------------------------------------


def _web(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_admission_page_saves_the_lines(cluster: Cluster, team: Team, other_team: Team,
                                            admin_user: Any) -> None:
    web = _web(admin_user)
    assert web.get("/clusters/cluster/gpu-k/admission/").status_code == 200
    response = web.post("/clusters/cluster/gpu-k/admission/", {
        "admission": "kueue", "kueue_queues": "vision-rl = vq\n\nnlp-rl=nq\n"})
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert (cluster.admission, cluster.kueue_queues) == (
        "kueue", {"nlp-rl": "nq", "vision-rl": "vq"})
    assert "vision-rl=vq" in web.get("/clusters/cluster/gpu-k/admission/").content.decode()


@pytest.mark.parametrize(("lines", "words"), [
    ("vision-rl", "Line 1 is not team=LocalQueue"),
    ("vision-rl=a\nvision-rl=b", "Team vision-rl is mapped twice"),
    ("ghosts=q", "ghosts is not a team"),
    ("vision-rl=UPPER", "lower-case letters"),
])
def test_the_admission_page_shows_what_is_wrong(cluster: Cluster, team: Team, admin_user: Any,
                                                lines: str, words: str) -> None:
    response = _web(admin_user).post("/clusters/cluster/gpu-k/admission/", {
        "admission": "kueue", "kueue_queues": lines})
    assert response.status_code == 200
    assert words in response.content.decode()
    cluster.refresh_from_db()
    assert cluster.admission == "none"


def test_the_admission_page_is_for_platform_admins_only(cluster: Cluster, owner: Any) -> None:
    web = _web(owner)
    assert web.get("/clusters/cluster/gpu-k/admission/").status_code == 403
    assert web.post("/clusters/cluster/gpu-k/admission/", {
        "admission": "kueue", "kueue_queues": ""}).status_code == 403
    cluster.refresh_from_db()
    assert cluster.admission == "none"


def test_the_admission_page_of_an_unknown_cluster_is_404(admin_user: Any) -> None:
    assert _web(admin_user).get("/clusters/cluster/nope/admission/").status_code == 404
