"""On a large fleet, match answers, verification answers and the admin queue carry complete
counts per cluster and a bounded, pageable list of nodes; the stored snapshot stays complete.

The fleet (4 clusters x 1,200 nodes) is bulk-inserted; every broad answer below would list
4,800 nodes if it listed them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.test import Client
from rest_framework.test import APIClient

from clusters.matching import NODES_PAGE_DEFAULT, NODES_PAGE_MAX
from clusters.models import Cluster, Node, Verification
from clusters.signals import inventory_changed
from clusters.verifications.views import PANEL_NODES, PANEL_NOT_READY
from tests.factories import bulk_fleet, stored_request

pytestmark = pytest.mark.django_db

ApiClient = Callable[[Any], APIClient]
CLUSTERS, PER_CLUSTER, NOT_READY_EVERY = 4, 1200, 50
TOTAL = CLUSTERS * PER_CLUSTER
BROAD = {"rlinf.io/pool": "big"}
MATCHES = "/api/v1/selector-matches/"
VERIFICATIONS = "/api/v1/verifications/"
# Far below what listing every node takes (about 90 bytes a node).
ANSWER_BYTES_MAX = 40_000


@pytest.fixture(autouse=True)
def fleet(db: None) -> None:
    bulk_fleet(CLUSTERS, PER_CLUSTER, not_ready_every=NOT_READY_EVERY)


def expected_per_cluster() -> list[dict[str, Any]]:
    ready = PER_CLUSTER - PER_CLUSTER // NOT_READY_EVERY
    return [{"cluster": f"big-{i:02d}", "count": PER_CLUSTER, "ready": ready}
            for i in range(CLUSTERS)]


def match(client: APIClient, **extra: Any) -> Any:
    return client.post(MATCHES, {"cluster": "big-00", "selector": BROAD, **extra}, format="json")


def request_broad(client: APIClient) -> Any:
    return client.post(VERIFICATIONS, {"cluster": "big-00", "selector": BROAD}, format="json")


def stored_broad(team: Any, member: Any) -> dict[str, Any]:
    """A pending request for the broad selector, written directly (the request service refuses
    it: its matches lie in four clusters), as the queue and the snapshot pages meet it."""
    verification = stored_request(team=team, user=member, cluster="big-00", selector=BROAD)
    return {"id": verification.pk}


def test_a_broad_match_counts_every_node_and_lists_one_page(
    member: Any, api_client_for: ApiClient
) -> None:
    response = match(api_client_for(member))
    body = response.json()
    assert len(response.content) < ANSWER_BYTES_MAX
    assert (body["count"], body["per_cluster"]) == (TOTAL, expected_per_cluster())
    assert len(body["nodes"]) == NODES_PAGE_DEFAULT
    assert body["nodes_next_offset"] == NODES_PAGE_DEFAULT
    assert (body["foreign_count"], len(body["foreign_nodes"])) == (
        TOTAL - PER_CLUSTER, NODES_PAGE_DEFAULT
    )
    assert body["foreign_nodes"][0]["cluster"] == "big-01"


def test_the_match_pages_through_every_node(member: Any, api_client_for: ApiClient) -> None:
    client = api_client_for(member)
    second = match(client, nodes_offset=50, nodes_limit=50).json()["nodes"]
    last = match(client, nodes_offset=TOTAL - 10, nodes_limit=NODES_PAGE_MAX).json()
    assert second[0]["name"] == "big-00-node-00051"
    assert [n["name"] for n in last["nodes"]][-1] == f"big-{CLUSTERS - 1:02d}-node-01200"
    assert (len(last["nodes"]), last["nodes_next_offset"]) == (10, None)


def test_a_page_larger_than_the_maximum_is_refused(member: Any, api_client_for: ApiClient) -> None:
    response = match(api_client_for(member), nodes_limit=NODES_PAGE_MAX + 1)
    assert response.status_code == 400


def test_a_broad_request_is_refused_with_a_bounded_answer(
    member: Any, api_client_for: ApiClient
) -> None:
    response = request_broad(api_client_for(member))
    body = response.json()
    assert response.status_code == 422
    assert len(response.content) < ANSWER_BYTES_MAX
    cross = next(f for f in body["findings"] if f["code"] == "selector.cross_cluster")
    assert cross["detail"]["count"] == TOTAL - PER_CLUSTER
    assert len(cross["detail"]["nodes"]) == 50
    assert not Verification.objects.exists()


def test_a_verification_answer_is_bounded_and_its_snapshot_complete(
    team: Any, member: Any, api_client_for: ApiClient
) -> None:
    created = stored_broad(team, member)
    response = api_client_for(member).get(f"{VERIFICATIONS}{created['id']}/")
    body = response.json()
    assert response.status_code == 200
    assert len(response.content) < ANSWER_BYTES_MAX
    assert (body["count"], body["per_cluster"]) == (TOTAL, expected_per_cluster())
    assert (len(body["matches"]), body["matches_next_offset"]) == (
        NODES_PAGE_DEFAULT, NODES_PAGE_DEFAULT
    )
    cross = next(c for c in body["result"]["checks"] if c["code"] == "selector.cross_cluster")
    assert cross["detail"]["count"] == TOTAL - PER_CLUSTER
    assert len(cross["detail"]["nodes"]) == len(body["result"]["foreign_nodes"]) == 50
    assert len(Verification.objects.get(pk=body["id"]).matches) == TOTAL


def test_the_verification_detail_pages_through_its_snapshot(
    team: Any, member: Any, api_client_for: ApiClient
) -> None:
    client = api_client_for(member)
    created = stored_broad(team, member)
    page = client.get(
        f"{VERIFICATIONS}{created['id']}/", {"nodes_offset": TOTAL - 15, "nodes_limit": 20}
    ).json()
    stored = Verification.objects.get(pk=created["id"]).matches
    assert page["matches"] == stored[TOTAL - 15:]
    assert page["matches_next_offset"] is None


def test_the_verification_list_stays_small(
    team: Any, member: Any, api_client_for: ApiClient
) -> None:
    client = api_client_for(member)
    stored_broad(team, member)
    response = client.get(VERIFICATIONS)
    assert len(response.content) < ANSWER_BYTES_MAX
    assert response.json()["results"][0]["count"] == TOTAL


def test_the_admin_queue_shows_counts_and_a_few_nodes(
    team: Any, member: Any, admin_user: Any, client: Client
) -> None:
    created = stored_broad(team, member)
    client.force_login(admin_user)
    page = client.get("/clusters/verifications/queue/")
    html = page.content.decode()
    assert page.status_code == 200
    assert len(page.content) < 40_000
    assert html.count('<td class="mono">big-') == PANEL_NODES.limit  # the panel's first nodes
    assert html.count('class="finding warning not-ready"') == PANEL_NOT_READY  # the first ones
    assert f"<td>big-03</td><td>{PER_CLUSTER}</td>" in html
    assert f'href="/clusters/verifications/{created["id"]}/nodes/"' in html  # every node, paged


def test_the_snapshot_pages_list_every_node_once(
    team: Any, member: Any, client: Client
) -> None:
    created = stored_broad(team, member)
    client.force_login(member)
    seen: list[str] = []
    for number in range(1, TOTAL // 200 + 1):
        html = client.get(
            f"/clusters/verifications/{created['id']}/nodes/", {"page": number}
        ).content.decode()
        seen += [part.split("<")[0] for part in html.split('<td class="mono">big-')[1:]]
    assert len(seen) == len(set(seen)) == TOTAL


def test_another_teams_snapshot_pages_are_not_found(
    team: Any, member: Any, outsider: Any, client: Client
) -> None:
    created = stored_broad(team, member)
    client.force_login(outsider)
    assert client.get(f"/clusters/verifications/{created['id']}/nodes/").status_code == 404


def test_a_repeated_match_is_answered_from_the_cache_until_the_inventory_changes(
    member: Any, api_client_for: ApiClient, django_assert_max_num_queries: Any
) -> None:
    client = api_client_for(member)
    first = match(client).json()
    # Token, cluster and the fleet's version: no node is read again.
    with django_assert_max_num_queries(4):
        assert match(client).json() == first
    Node.objects.filter(name="big-00-node-00002").update(ready=False)
    assert match(client).json() == first  # readiness moves no generation ...
    inventory_changed.send(sender=Cluster, cluster=Cluster.objects.get(name="big-00"),
                           generation=1)  # ... but a committed poll announces it
    ready = match(client).json()["per_cluster"][0]["ready"]
    assert ready == first["per_cluster"][0]["ready"] - 1
    Node.objects.filter(name="big-01-node-00001").update(labels={"rlinf.io/pool": "small"})
    Cluster.objects.filter(name="big-01").update(generation=F("generation") + 1)
    assert match(client).json()["count"] == TOTAL - 1


def test_the_admin_queue_reads_no_snapshot_and_its_queries_do_not_grow_with_requests(
    team: Any, member: Any, admin_user: Any, client: Client,
    django_assert_max_num_queries: Any, private_cache: None,
) -> None:
    stored_broad(team, member)
    client.force_login(admin_user)
    sql: list[str] = []

    def record(execute: Any, statement: str, *args: Any) -> Any:
        sql.append(statement)
        return execute(statement, *args)

    with connection.execute_wrapper(record):
        page = client.get("/clusters/verifications/queue/")
    assert page.status_code == 200
    assert sql
    assert not [q for q in sql if "jsonb_array_elements" in q or "jsonb_path_query_array" in q]
    for cluster in range(1, CLUSTERS):  # three more requests (same selector, other clusters)
        stored_request(team=team, user=member, cluster=f"big-{cluster:02d}", selector=BROAD)
    with django_assert_max_num_queries(len(sql)):
        html = client.get("/clusters/verifications/queue/").content.decode()
    assert html.count('<article class="card verification"') == CLUSTERS


def test_snapshots_kept_before_previews_show_the_same_nodes(
    team: Any, member: Any, admin_user: Any, client: Client
) -> None:
    stored_broad(team, member)
    client.force_login(admin_user)

    def queue() -> str:  # without the per-request CSRF tokens
        html = client.get("/clusters/verifications/queue/").content.decode()
        return re.sub(r"[A-Za-z0-9]{64}", "token", html)

    with_previews = queue()
    verification = Verification.objects.get()
    for name in ("first_nodes", "first_outside", "first_not_ready"):
        verification.match_summary.pop(name)
    verification.save(update_fields=["match_summary"])
    assert queue() == with_previews
    assert with_previews.count('class="finding warning not-ready"') == PANEL_NOT_READY
