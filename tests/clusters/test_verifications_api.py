from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from clusters.models import Verification, VerificationState
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

Client = Callable[[Any], APIClient]
A100_IN_A = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}
MATCHES = "/api/v1/selector-matches/"
VERIFICATIONS = "/api/v1/verifications/"


@pytest.fixture(autouse=True)
def demo_inventory() -> None:
    load_fleet_rows()


def create(client: APIClient, **body: Any) -> Any:
    return client.post(VERIFICATIONS, {"cluster": "gpu-a", "selector": A100_IN_A, **body},
                       format="json")


def test_selector_matches_report_foreign_nodes_with_namespaces(
    member: Any, api_client_for: Client,
) -> None:
    response = api_client_for(member).post(
        MATCHES, {"cluster": "gpu-a", "selector": {"rlinf.io/gpu-model": "a100"}}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 17 and body["confined"] is False
    assert body["nodes"][0] == {"cluster": "gpu-a", "name": "a-head-01",
                                "namespace": "rl-gpu-a", "ready": True, "gpu": 8}
    assert body["foreign_nodes"] == [
        {"cluster": "gpu-b", "name": f"b-node-{i}", "namespace": "rl-gpu-b"}
        for i in range(13, 17)
    ]
    assert body["confining_conditions"] == []
    assert (body["gpu_max"], body["devices_max"]) == (4, {"rlinf.io/rdma": 2})


def test_selector_matches_name_the_confining_condition(
    member: Any, api_client_for: Client,
) -> None:
    body = api_client_for(member).post(
        MATCHES, {"cluster": "gpu-a", "selector": A100_IN_A}, format="json"
    ).json()
    assert (body["count"], body["confined"], body["foreign_nodes"]) == (13, True, [])
    assert body["confining_conditions"] == [
        {"key": "topology.rlinf.io/cluster", "value": "gpu-a"}
    ]
    assert (body["gpu_max"], body["devices_max"]) == (8, {"rlinf.io/rdma": 4})


def test_selector_matches_accept_typed_text(member: Any, api_client_for: Client) -> None:
    body = api_client_for(member).post(
        MATCHES, {"cluster": "cpu-c", "selector": "rlinf.io/pool = env-c\n"}, format="json"
    ).json()
    assert body["count"] == 10 and body["confined"] is True


@pytest.mark.parametrize(
    ("selector", "codes"),
    [
        ({"bad key!": "a100"}, ["selector.syntax"]),
        ({"rlinf.io/pool": "v" * 64}, ["selector.syntax"]),
        ("rlinf.io/pool=a100-a\nrlinf.io/pool=a100-b", ["selector.duplicate_key"]),
        ([["rlinf.io/pool", "a"], ["rlinf.io/pool", "b"]], ["selector.duplicate_key"]),
        ({}, ["selector.empty"]),
        ("", ["selector.empty"]),
        ("just-a-word", ["selector.syntax"]),
    ],
)
def test_bad_selectors_answer_400_with_findings(
    member: Any, api_client_for: Client, selector: Any, codes: list[str],
) -> None:
    response = api_client_for(member).post(
        MATCHES, {"cluster": "gpu-a", "selector": selector}, format="json"
    )
    assert response.status_code == 400
    findings = response.json()["findings"]
    assert [f["code"] for f in findings] == codes
    assert all(set(f) >= {"code", "severity", "field", "message", "detail"} for f in findings)
    assert all(f["severity"] == "error" and f["field"] == "selector" for f in findings)


def test_a_64_character_value_is_named_in_the_finding(member: Any, api_client_for: Client) -> None:
    finding = api_client_for(member).post(
        MATCHES, {"cluster": "gpu-a", "selector": {"rlinf.io/pool": "v" * 64}}, format="json"
    ).json()["findings"][0]
    assert finding["detail"]["part"] == "value"
    assert finding["detail"]["key"] == "rlinf.io/pool"


def test_an_unknown_cluster_answers_400(member: Any, api_client_for: Client) -> None:
    response = api_client_for(member).post(
        MATCHES, {"cluster": "nope", "selector": A100_IN_A}, format="json"
    )
    assert response.status_code == 400 and response.json()["field"] == "cluster"


def test_selector_matches_need_authentication() -> None:
    assert APIClient().post(MATCHES, {}, format="json").status_code in (401, 403)


def test_a_member_requests_a_verification_and_sees_the_automated_result(
    team: Any, member: Any, api_client_for: Client,
) -> None:
    response = create(api_client_for(member), requested_gpu=8,
                      requested_host_paths=["/data/models"], note="for ppo")
    assert response.status_code == 201
    body = response.json()
    assert (body["team"], body["cluster"], body["state"]) == ("vision-rl", "gpu-a", "pending")
    assert body["reused"] is False and body["count"] == 13
    assert body["requested_by"] == "member" and body["request_note"] == "for ppo"
    assert body["result"]["confined"] is True
    assert [c["code"] for c in body["result"]["checks"]] == ["mount.host_path.unconfirmed"]


def test_a_request_names_the_job_and_role_that_asked_and_the_queue_shows_them(
    member: Any, admin_user: Any, api_client_for: Client, client: Any,
) -> None:
    body = create(api_client_for(member), job="ppo-math-7b", role="Rollout").json()
    assert (body["requested_for_job"], body["requested_for_role"]) == ("ppo-math-7b", "Rollout")
    client.force_login(admin_user)
    queue = client.get("/clusters/verifications/queue/").content.decode()
    assert ('Asked for job <strong class="mono">ppo-math-7b</strong>, role '
            "<strong>Rollout</strong>.") in queue


def test_an_identical_request_is_reused_and_says_so(member: Any, api_client_for: Client) -> None:
    client = api_client_for(member)
    first = create(client).json()
    again = create(client, selector="topology.rlinf.io/cluster=gpu-a,rlinf.io/gpu-model=a100")
    assert again.status_code == 200
    assert again.json()["reused"] is True and again.json()["id"] == first["id"]
    assert again.json()["message"]


def test_a_bad_selector_in_a_request_answers_400(member: Any, api_client_for: Client) -> None:
    response = create(api_client_for(member), selector={"rlinf.io/pool": "v" * 64})
    assert response.status_code == 400
    assert response.json()["findings"][0]["code"] == "selector.syntax"


def test_a_user_in_two_teams_must_say_which(
    team: Any, other_team: Any, member: Any, api_client_for: Client,
) -> None:
    from rlark_site.foundation.tenancy.models import Membership

    Membership.objects.create(team=other_team, user=member)
    client = api_client_for(member)
    assert create(client).status_code == 400
    assert create(client, team="nlp-rl").json()["team"] == "nlp-rl"


def test_requesting_for_another_team_answers_404(
    team: Any, outsider: Any, api_client_for: Client,
) -> None:
    assert create(api_client_for(outsider), team="vision-rl").status_code == 404


def test_a_request_for_a_failing_selector_answers_422_with_its_findings(
    member: Any, api_client_for: Client,
) -> None:
    response = create(api_client_for(member), selector={"rlinf.io/gpu-model": "a100"},
                      for_header_role=True)
    assert response.status_code == 422
    body = response.json()
    assert "fails the automated checks" in body["detail"]
    assert [(f["code"], f["field"]) for f in body["findings"]] == [
        ("header.replicas", "for_header_role"),
        ("selector.cross_cluster", "selector"),
        ("selector.no_cluster_label", "selector"),
    ]
    assert body["findings"][1]["detail"]["cluster"] == "gpu-a"
    assert not Verification.objects.exists()


def test_a_failing_selector_for_another_team_still_answers_404_without_findings(
    team: Any, outsider: Any, api_client_for: Client,
) -> None:
    response = create(api_client_for(outsider), team="vision-rl",
                      selector={"rlinf.io/gpu-model": "a100"})
    assert response.status_code == 404
    assert "findings" not in response.json()


def test_the_schema_documents_the_refusal(admin_user: Any, api_client_for: Client) -> None:
    schema = api_client_for(admin_user).get("/api/schema/?format=json").json()
    refusal = schema["paths"]["/api/v1/verifications/"]["post"]["responses"]["422"]
    assert refusal["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }


def test_teams_list_their_own_and_admins_list_all_with_filters(
    team: Any, member: Any, outsider: Any, admin_user: Any, api_client_for: Client,
) -> None:
    mine = create(api_client_for(member)).json()
    theirs = create(api_client_for(outsider), selector={"rlinf.io/pool": "env-c"},
                    cluster="cpu-c").json()
    listed = api_client_for(member).get(VERIFICATIONS).json()
    assert [v["id"] for v in listed["results"]] == [mine["id"]]
    admin = api_client_for(admin_user)
    assert [v["id"] for v in admin.get(VERIFICATIONS).json()["results"]] == [
        mine["id"], theirs["id"]
    ]
    pending = admin.get(VERIFICATIONS, {"state": "pending", "cluster": "cpu-c"}).json()
    assert [v["id"] for v in pending["results"]] == [theirs["id"]]
    assert admin.get(VERIFICATIONS, {"team": "vision-rl"}).json()["count"] == 1
    assert admin.get(VERIFICATIONS, {"state": "approved"}).json()["count"] == 0
    assert admin.get(VERIFICATIONS, {"state": "bogus"}).status_code == 400


def test_another_teams_request_answers_404(
    team: Any, member: Any, outsider: Any, api_client_for: Client,
) -> None:
    created = create(api_client_for(member)).json()
    url = f"{VERIFICATIONS}{created['id']}/"
    assert api_client_for(outsider).get(url).status_code == 404
    assert api_client_for(member).get(url).status_code == 200
    assert api_client_for(member).get(f"{VERIFICATIONS}999999/").status_code == 404


def test_an_admin_approves_with_confirmations(
    member: Any, admin_user: Any, api_client_for: Client,
) -> None:
    created = create(api_client_for(member), requested_host_paths=["/data/models"]).json()
    response = api_client_for(admin_user).post(
        f"{VERIFICATIONS}{created['id']}/approve/",
        {"note": "checked", "confirm_gpu": 8, "confirm_host_paths": ["/data/models"]},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["decided_by"], body["decision_note"]) == (
        "approved", "platform-admin", "checked"
    )
    assert body["confirmed_gpu"] == 8 and body["confirmed_host_paths"] == ["/data/models"]
    assert body["result"]["checks"] == []
    assert api_client_for(member).get(f"{VERIFICATIONS}{created['id']}/").json()["state"] == (
        "approved"
    )


def test_members_cannot_approve_or_reject(
    team: Any, member: Any, owner: Any, api_client_for: Client,
) -> None:
    created = create(api_client_for(member)).json()
    for path in ("approve", "reject"):
        response = api_client_for(owner).post(
            f"{VERIFICATIONS}{created['id']}/{path}/", {"note": "mine"}, format="json"
        )
        assert response.status_code == 403
    assert Verification.objects.get().state == VerificationState.PENDING


def test_a_second_decision_answers_409(
    member: Any, admin_user: Any, api_client_for: Client,
) -> None:
    created = create(api_client_for(member)).json()
    admin = api_client_for(admin_user)
    assert admin.post(f"{VERIFICATIONS}{created['id']}/reject/", {"note": "wrong pool"},
                      format="json").status_code == 200
    late = admin.post(f"{VERIFICATIONS}{created['id']}/approve/", {"note": ""}, format="json")
    assert late.status_code == 409
    assert late.json()["state"] == "rejected"


def test_reject_needs_a_note(member: Any, admin_user: Any, api_client_for: Client) -> None:
    created = create(api_client_for(member)).json()
    response = api_client_for(admin_user).post(
        f"{VERIFICATIONS}{created['id']}/reject/", {}, format="json"
    )
    assert response.status_code == 400
    assert Verification.objects.get().state == VerificationState.PENDING


def test_the_schema_describes_the_endpoints(admin_user: Any, api_client_for: Client) -> None:
    schema = api_client_for(admin_user).get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/v1/selector-matches/", "/api/v1/verifications/",
                 "/api/v1/verifications/{verification_id}/approve/"):
        assert path in schema["paths"]
