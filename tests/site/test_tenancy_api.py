from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from rlark_site.foundation.tenancy.models import Membership, Team
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db


def test_token_endpoint_gives_a_token_that_authenticates(owner) -> None:
    client = APIClient()
    response = client.post("/api/v1/auth/token/", {"username": "owner", "password": PASSWORD},
                           format="json")
    assert response.status_code == 201
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/v1/teams/").status_code == 200


def test_wrong_password_is_a_clear_400(owner) -> None:
    response = APIClient().post("/api/v1/auth/token/", {"username": "owner", "password": "x"},
                                format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == "Wrong username or password."


def test_api_without_credentials_is_refused(team) -> None:
    response = APIClient().get("/api/v1/teams/")
    assert response.status_code in (401, 403)


def test_members_see_only_their_teams(api_client_for, owner, outsider, team, other_team) -> None:
    slugs = [t["slug"] for t in api_client_for(owner).get("/api/v1/teams/").json()["results"]]
    assert slugs == ["vision-rl"]


def test_another_teams_members_answer_404(api_client_for, owner, outsider, other_team) -> None:
    client = api_client_for(owner)
    assert client.get("/api/v1/teams/nlp-rl/members/").status_code == 404
    response = client.post("/api/v1/teams/nlp-rl/members/", {"username": "x", "password": "y"},
                           format="json")
    assert response.status_code == 404
    assert not Membership.objects.filter(user__username="x").exists()


def test_a_maintainer_adds_an_existing_account(api_client_for, owner, team) -> None:
    make_user("dora")
    response = api_client_for(owner).post(
        "/api/v1/teams/vision-rl/members/", {"username": "dora", "role": "member"}, format="json")
    assert response.status_code == 201
    assert response.json() == {"username": "dora", "role": "member",
                               "created_at": response.json()["created_at"]}
    assert Membership.objects.get(user__username="dora").team == team


def test_a_plain_member_cannot_add_members(api_client_for, member) -> None:
    response = api_client_for(member).post(
        "/api/v1/teams/vision-rl/members/", {"username": "eve", "password": "pw-12345"},
        format="json")
    assert response.status_code == 403


def test_a_new_user_needs_a_password(api_client_for, admin_user, team) -> None:
    response = api_client_for(admin_user).post("/api/v1/teams/vision-rl/members/",
                                               {"username": "nopass"}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == "A new user needs a password."
    assert response.json()["field"] == "password"


def test_only_admins_create_teams(api_client_for, owner, admin_user) -> None:
    assert api_client_for(owner).post("/api/v1/teams/", {"slug": "x", "name": "X"},
                                      format="json").status_code == 403
    created = api_client_for(admin_user).post("/api/v1/teams/", {"slug": "x", "name": "X"},
                                              format="json")
    assert created.status_code == 201
    duplicate = api_client_for(admin_user).post("/api/v1/teams/", {"slug": "x", "name": "X"},
                                                format="json")
    assert duplicate.status_code == 400
    assert Team.objects.filter(slug="x").count() == 1


def test_bad_json_is_a_400_with_a_clear_message(api_client_for, admin_user) -> None:
    client = api_client_for(admin_user)
    response = client.generic("POST", "/api/v1/teams/", '{"slug": "x", "name": ',
                              content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Malformed request body: JSON parse error")


def test_deeply_nested_json_is_a_400_not_a_500(api_client_for, admin_user) -> None:
    body = "[" * 100_000 + "]" * 100_000
    response = api_client_for(admin_user).generic(
        "POST", "/api/v1/teams/", body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]


def test_api_errors_speak_the_clients_language(api_client_for, owner, other_team) -> None:
    response = api_client_for(owner).get(
        "/api/v1/teams/nlp-rl/members/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 404
    assert response.json()["detail"] == "团队不存在。"
