from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster, Node, Verification, VerificationState
from clusters.verifications.services import (
    verification_approve,
    verification_request,
    verifications_follow_inventory,
)
from tests.factories import load_fleet_rows, stored_request

pytestmark = pytest.mark.django_db

A100_IN_A = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}
QUEUE = "/clusters/verifications/queue/"
TEAM_PAGE = "/clusters/verifications/"


@pytest.fixture(autouse=True)
def demo_inventory() -> None:
    load_fleet_rows()


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def pending(team: Any, user: Any, selector: dict[str, str] = A100_IN_A,
            **kwargs: Any) -> Verification:
    return verification_request(team=team, user=user, cluster=Cluster.objects.get(name="gpu-a"),
                                selector=selector, **kwargs)


def decide_url(verification: Verification) -> str:
    return reverse("clusters:queue-decide", args=[verification.pk])


def test_the_url_names_navigation_expects_exist() -> None:
    assert reverse("clusters:verifications") == TEAM_PAGE
    assert reverse("clusters:queue") == QUEUE


@pytest.mark.parametrize("who", ["member", "owner", "outsider"])
def test_the_queue_is_forbidden_to_non_admins(request: Any, team: Any, member: Any,
                                              who: str) -> None:
    """Admin-only routes answer 403 everywhere
    (rlark_site.foundation.tenancy.access.require_platform_admin); tenant-owned objects keep
    answering 404."""
    pending(team, member)
    user = request.getfixturevalue(who)
    assert logged_in(user).get(QUEUE).status_code == 403


def test_deciding_is_forbidden_to_non_admins(team: Any, member: Any, owner: Any) -> None:
    verification = pending(team, member)
    response = logged_in(owner).post(decide_url(verification),
                                     {"decision": "approve", "note": "mine"})
    assert response.status_code == 403
    verification.refresh_from_db()
    assert verification.state == VerificationState.PENDING


def test_the_queue_lists_pending_oldest_first_with_the_automated_result(
    team: Any, member: Any, other_team: Any, outsider: Any, admin_user: Any,
) -> None:
    # Rows written directly: the request service refuses selectors failing these checks.
    first = stored_request(team=team, user=member, cluster="gpu-a",
                           selector={"rlinf.io/gpu-model": "a100"}, requested_gpu=8,
                           requested_host_paths=["/data/models"])
    second = stored_request(team=other_team, user=outsider, cluster="gpu-a", selector=A100_IN_A,
                            for_header_role=True)
    page = logged_in(admin_user).get(QUEUE).content.decode()
    assert page.index(f'id="verification-{first.pk}"') < page.index(
        f'id="verification-{second.pk}"'
    )
    assert 'data-code="selector.cross_cluster"' in page
    assert 'data-code="header.replicas"' in page
    assert "b-node-13" in page and "rl-gpu-b" in page
    assert "/data/models" in page
    assert "topology.rlinf.io/cluster=gpu-a" in page  # second's confining condition


def test_the_queue_filters_by_cluster_team_and_state(
    team: Any, member: Any, other_team: Any, outsider: Any, admin_user: Any,
) -> None:
    mine = pending(team, member)
    theirs = verification_request(team=other_team, user=outsider,
                                  cluster=Cluster.objects.get(name="cpu-c"),
                                  selector={"rlinf.io/pool": "env-c"})
    client = logged_in(admin_user)
    by_cluster = client.get(QUEUE, {"cluster": "cpu-c"}).content.decode()
    assert f"verification-{theirs.pk}" in by_cluster and f"verification-{mine.pk}" not in by_cluster
    by_team = client.get(QUEUE, {"team": "vision-rl"}).content.decode()
    assert f"verification-{mine.pk}" in by_team and f"verification-{theirs.pk}" not in by_team
    approved = client.get(QUEUE, {"state": "approved"}).content.decode()
    assert "verification-" not in approved


def test_an_htmx_approval_swaps_the_panel_to_its_decided_state(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = pending(team, member, requested_host_paths=["/data/models"])
    response = logged_in(admin_user).post(
        decide_url(verification),
        {"decision": "approve", "note": "racks checked", "confirm_host_paths": ["/data/models"]},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    panel = response.content.decode()
    assert panel.lstrip().startswith(f'<article class="card verification" id="verification-'
                                     f'{verification.pk}" data-state="approved"')
    assert "racks checked" in panel and "<form" not in panel
    verification.refresh_from_db()
    assert verification.state == VerificationState.APPROVED
    assert verification.confirmed_host_paths == ["/data/models"]


def test_a_late_decision_shows_who_won_on_the_panel(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = pending(team, member)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="first")
    response = logged_in(admin_user).post(
        decide_url(verification), {"decision": "reject", "note": "second"},
        HTTP_HX_REQUEST="true",
    )
    panel = response.content.decode()
    assert 'role="alert"' in panel and 'data-state="approved"' in panel
    verification.refresh_from_db()
    assert verification.decision_note == "first"


def test_a_rejection_without_a_note_keeps_the_form(team: Any, member: Any,
                                                   admin_user: Any) -> None:
    verification = pending(team, member)
    panel = logged_in(admin_user).post(
        decide_url(verification), {"decision": "reject", "note": ""}, HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'role="alert"' in panel and "<form" in panel


def test_without_htmx_a_decision_redirects_to_the_queue(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = pending(team, member)
    response = logged_in(admin_user).post(decide_url(verification),
                                          {"decision": "reject", "note": "wrong pool"})
    assert response.status_code == 302 and response["Location"].startswith(QUEUE)
    verification.refresh_from_db()
    assert verification.state == VerificationState.REJECTED


def test_stale_approvals_show_in_the_queue_with_the_drift(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = pending(team, member)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    Node.objects.filter(name="a-node-05").update(gone=True)
    verifications_follow_inventory(cluster=Cluster.objects.get(name="gpu-a"))
    page = logged_in(admin_user).get(QUEUE).content.decode()
    assert f'id="verification-{verification.pk}" data-state="stale"' in page
    assert "No longer matched" in page and "gpu-a/a-node-05" in page


def test_a_team_member_requests_and_sees_only_their_teams_requests(
    team: Any, member: Any, other_team: Any, outsider: Any,
) -> None:
    theirs = verification_request(team=other_team, user=outsider,
                                  cluster=Cluster.objects.get(name="gpu-a"), selector=A100_IN_A)
    client = logged_in(member)
    response = client.post(TEAM_PAGE, {
        "cluster": "gpu-a", "conditions": "topology.rlinf.io/cluster=gpu-a\nrlinf.io/pool=a100-a",
        "requested_gpu": "8", "requested_devices": "rlinf.io/rdma=2",
        "requested_host_paths": "/data/models\n/data/ckpt", "note": "ppo run",
    })
    assert response.status_code == 302
    mine = Verification.objects.get(team=team)
    assert mine.selector == {"topology.rlinf.io/cluster": "gpu-a", "rlinf.io/pool": "a100-a"}
    assert (mine.requested_gpu, mine.requested_devices) == (8, {"rlinf.io/rdma": 2})
    assert mine.requested_host_paths == ["/data/ckpt", "/data/models"]
    page = client.get(TEAM_PAGE).content.decode()
    assert f'id="request-{mine.pk}"' in page and f'id="request-{theirs.pk}"' not in page


def test_the_request_form_shows_selector_problems(team: Any, member: Any) -> None:
    response = logged_in(member).post(TEAM_PAGE, {
        "cluster": "gpu-a", "conditions": "rlinf.io/pool=a\nrlinf.io/pool=b",
    })
    assert response.status_code == 200
    assert "appears 2 times" in response.content.decode()
    assert not Verification.objects.exists()


def test_the_team_page_shows_the_outcome(team: Any, member: Any, admin_user: Any) -> None:
    verification = pending(team, member)
    verification_approve(verification_id=verification.pk, admin=admin_user,
                         note="placement ok")
    page = logged_in(member).get(TEAM_PAGE).content.decode()
    assert f'id="request-{verification.pk}" data-state="approved"' in page
    assert "placement ok" in page and admin_user.username in page


def test_pages_need_login() -> None:
    assert Client().get(TEAM_PAGE).status_code == 302
    assert Client().get(QUEUE).status_code == 302


def test_a_request_for_a_failing_selector_is_refused_with_its_findings_and_the_input_kept(
    team: Any, member: Any,
) -> None:
    response = logged_in(member).post(TEAM_PAGE, {
        "cluster": "gpu-a", "conditions": "rlinf.io/gpu-model=a100", "requested_gpu": "4",
        "note": "keep this note",
    })
    assert response.status_code == 200
    page = response.content.decode()
    assert "This selector fails the automated checks" in page
    assert 'data-code="selector.cross_cluster"' in page
    assert 'data-code="selector.no_cluster_label"' in page
    assert "gpu-b/rl-gpu-b/b-node-13" in page  # the foreign nodes, named
    assert "rlinf.io/gpu-model=a100</textarea>" in page and "keep this note</textarea>" in page
    assert not Verification.objects.exists()


def test_the_refusal_is_shown_in_chinese(team: Any, member: Any) -> None:
    response = logged_in(member).post(
        TEAM_PAGE, {"cluster": "gpu-a", "conditions": "rlinf.io/pool=no-such-pool"},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    )
    page = response.content.decode()
    assert "该节点选择器未通过自动检查" in page
    assert 'data-code="selector.no_match"' in page
    assert not Verification.objects.exists()


def test_a_cached_panel_follows_the_inventory_the_decision_and_the_language(
    team: Any, member: Any, admin_user: Any, private_cache: None,
) -> None:
    """Panels are cached under what their result is computed from: a hit reads no snapshot
    summary, and anything that changes the result (a poll moving a generation, an approval
    turning stale, the language) renders it again."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = pending(team, member)
    stored_request(team=team, user=member, cluster="gpu-a", selector={"rlinf.io/gpu-model": "a100"})
    client = logged_in(admin_user)
    def without_tokens(html: str) -> str:
        return re.sub(r"[A-Za-z0-9]{64}", "", html)  # the CSRF token differs on every page

    with CaptureQueriesContext(connection) as cold:
        page = client.get(QUEUE).content.decode()
    with CaptureQueriesContext(connection) as warm:
        assert without_tokens(client.get(QUEUE).content.decode()) == without_tokens(page)
    assert len(cold) - len(warm) == 1  # the summaries, read only for panels to render
    differs = "Today's inventory matches a different set of nodes than this snapshot."
    assert differs not in page

    verification_approve(verification_id=first.pk, admin=admin_user, note="ok")
    gpu_a = Cluster.objects.get(name="gpu-a")
    Node.objects.create(cluster=gpu_a, name="a-node-new", namespace=gpu_a.namespace,
                        labels=dict(A100_IN_A), gpu=8)
    Cluster.objects.filter(pk=gpu_a.pk).update(generation=gpu_a.generation + 1)  # as a poll
    page = client.get(QUEUE).content.decode()
    assert f'id="verification-{first.pk}"' not in page and page.count(differs) == 1

    verifications_follow_inventory(cluster=Cluster.objects.get(name="gpu-a"))
    page = client.get(QUEUE).content.decode()
    stale = page.split(f'id="verification-{first.pk}" data-state="stale"')[1].split("</article>")[0]
    assert "Now also matched" in stale and differs in stale
    chinese = client.get(QUEUE, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "当前 Node 清单匹配到的节点与此快照不同。" in chinese and differs not in chinese


def test_a_cached_panel_follows_a_change_to_the_request_and_to_the_names_it_shows(
    team: Any, member: Any, admin_user: Any, private_cache: None,
) -> None:
    verification = pending(team, member, note="PPO actor pool")
    client = logged_in(admin_user)
    assert "PPO actor pool" in client.get(QUEUE).content.decode()
    Verification.objects.filter(pk=verification.pk).update(
        request_note="PPO critic pool", requested_for_job="ppo-7b")
    team.name = "Vision RL (renamed)"
    team.save(update_fields=["name"])
    member.username = "member-renamed"
    member.save(update_fields=["username"])
    page = client.get(QUEUE).content.decode()
    panel = page.split(f'id="verification-{verification.pk}"')[1].split("</article>")[0]
    assert "PPO critic pool" in panel and "PPO actor pool" not in panel
    assert "ppo-7b" in panel and "Vision RL (renamed)" in panel and "member-renamed" in panel


def test_a_cached_panel_carries_the_csrf_token_of_its_page(
    team: Any, member: Any, admin_user: Any, private_cache: None,
) -> None:
    """Panels are cached without a token; each page writes its own into their forms, and a
    decision posted with it passes the CSRF check."""
    verification = pending(team, member)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    def panel_token() -> str:
        page = client.get(QUEUE).content.decode()
        panel = page.split(f'id="verification-{verification.pk}"')[1].split("</article>")[0]
        found = re.search(r'name="csrfmiddlewaretoken" value="([A-Za-z0-9]{64})"', panel)
        assert found is not None
        return found.group(1)

    first, second = panel_token(), panel_token()  # the second page's panel is the cached one
    assert first != second
    refused = client.post(decide_url(verification), {"decision": "reject", "note": "no"})
    assert refused.status_code == 403
    decided = client.post(decide_url(verification),
                          {"decision": "reject", "note": "no", "csrfmiddlewaretoken": second})
    assert decided.status_code == 302
    verification.refresh_from_db()
    assert verification.state == VerificationState.REJECTED


def test_the_cached_filter_follows_the_teams_the_choice_and_the_language(
    team: Any, member: Any, admin_user: Any, private_cache: None,
) -> None:
    from rlark_site.foundation.tenancy.models import Team

    client = logged_in(admin_user)
    assert "Late Team" not in client.get(QUEUE).content.decode()
    Team.objects.create(slug="late-team", name="Late Team")
    assert '<option value="late-team">Late Team</option>' in client.get(QUEUE).content.decode()
    chosen = client.get(QUEUE, {"team": "late-team"}).content.decode()
    assert '<option value="late-team" selected>Late Team</option>' in chosen
    chinese = client.get(QUEUE, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert ">状态:</label>" in chinese and ">State:</label>" not in chinese


def test_the_queue_reads_of_teams_clusters_and_users_only_their_names(
    team: Any, member: Any, admin_user: Any, private_cache: None,
) -> None:
    """A page's rows come without the clusters' credentials and the users' password hashes
    (a third of the columns it read), and showing the panels loads nothing more of them."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    verification = pending(team, member)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    client = logged_in(admin_user)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(QUEUE, {"state": "all"}).content.decode()
    rows = [q["sql"] for q in queries.captured_queries
            if q["sql"].startswith('SELECT "clusters_verification"."id"')]
    assert len(rows) == 2  # the page, then the snapshot summaries of the panels to render
    assert not [sql for sql in rows if "token_encrypted" in sql or '"password"' in sql]
    assert member.username in page and admin_user.username in page and team.name in page
