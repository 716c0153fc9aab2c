"""Accounts, logins and API tokens: only platform admins create accounts (password validators
apply), maintainers add existing accounts, every change is audited without secrets, logins lock
per username (never per address), tokens are named, expiring, revocable and stored hashed."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from pghistory.models import Events
from rest_framework.test import APIClient

from rlark_site.foundation.tenancy.models import ApiToken, Membership
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db

MEMBERS = "/api/v1/teams/vision-rl/members/"
TOKEN = "/api/v1/auth/token/"
TOKENS = "/api/v1/auth/tokens/"


# Accounts ---------------------------------------------------------------------------------------


def test_a_maintainer_cannot_create_an_account(api_client_for, owner) -> None:
    response = api_client_for(owner).post(
        MEMBERS, {"username": "mallory", "password": "a-Strong-pass-42"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "username"
    assert not Membership.objects.filter(user__username="mallory").exists()


def test_a_maintainer_cannot_pull_a_platform_admin_into_the_team(api_client_for, owner,
                                                                  admin_user) -> None:
    response = api_client_for(owner).post(MEMBERS, {"username": admin_user.username},
                                          format="json")
    assert response.status_code == 400
    assert not Membership.objects.filter(user=admin_user).exists()


def test_a_maintainer_changes_a_role(api_client_for, owner, member) -> None:
    response = api_client_for(owner).post(MEMBERS, {"username": "member", "role": "maintainer"},
                                          format="json")
    assert response.status_code == 201
    assert Membership.objects.get(user=member).role == "maintainer"


def test_a_password_for_an_existing_account_is_refused(api_client_for, admin_user,
                                                       member) -> None:
    response = api_client_for(admin_user).post(
        MEMBERS, {"username": "member", "password": "another-Strong-pass-42"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "password"
    member.refresh_from_db()
    assert member.check_password(PASSWORD)


@pytest.mark.parametrize("password", ["a", "12345678901234", "password123", "carla-rl"])
def test_an_admin_creates_accounts_only_with_valid_passwords(api_client_for, admin_user, team,
                                                             password: str) -> None:
    response = api_client_for(admin_user).post(
        MEMBERS, {"username": "carla-rl", "password": password}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "password"
    assert response.json()["errors"]["password"]


def test_an_admin_creates_an_account(api_client_for, admin_user, team) -> None:
    response = api_client_for(admin_user).post(
        MEMBERS, {"username": "carla", "password": "tide-Pool-Ladder-9"}, format="json")
    assert response.status_code == 201
    assert Membership.objects.get(user__username="carla").team == team


def test_an_invalid_username_is_a_400_not_a_500(api_client_for, admin_user, team) -> None:
    response = api_client_for(admin_user).post(
        MEMBERS, {"username": "bad name!", "password": "tide-Pool-Ladder-9"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "username"


def test_the_command_creates_accounts_with_the_validators(team, monkeypatch) -> None:
    monkeypatch.setenv("RLARK_NEW_PASSWORD", "a")
    with pytest.raises(CommandError, match="password"):
        call_command("create_account", "dan")
    monkeypatch.setenv("RLARK_NEW_PASSWORD", "tide-Pool-Ladder-9")
    call_command("create_account", "dan", "--team", "vision-rl", "--role", "maintainer")
    assert Membership.objects.get(user__username="dan").role == "maintainer"


def _events(model: str) -> list[Events]:
    return list(Events.objects.filter(pgh_obj_model=model).order_by("pgh_created_at"))


def test_account_membership_and_token_changes_are_audited_without_secrets(
    api_client_for, admin_user, team
) -> None:
    admin = api_client_for(admin_user)
    admin.post(MEMBERS, {"username": "erin", "password": "tide-Pool-Ladder-9"}, format="json")
    user_events = _events("tenancy.AuditedUser")
    created = [e for e in user_events if e.pgh_data["username"] == "erin"]
    assert created[0].pgh_label == "insert"
    assert created[0].pgh_context["user"] == admin_user.pk
    assert all("password" not in e.pgh_data for e in user_events)
    membership = _events("tenancy.Membership")[-1]
    assert membership.pgh_context["user"] == admin_user.pk

    new = APIClient().post(TOKEN, {"username": "erin", "password": "tide-Pool-Ladder-9",
                                   "name": "ci"}, format="json").json()
    token_events = _events("tenancy.ApiToken")
    assert token_events[-1].pgh_data["name"] == "ci"
    assert "digest" not in token_events[-1].pgh_data
    assert new["token"] not in str([e.pgh_data for e in token_events])


# Tokens -----------------------------------------------------------------------------------------


def test_a_token_is_named_expiring_and_stored_only_as_a_hash(owner) -> None:
    response = APIClient().post(TOKEN, {"username": "owner", "password": PASSWORD,
                                        "name": "laptop", "expires_in_days": 7}, format="json")
    assert response.status_code == 201
    body = response.json()
    token = ApiToken.objects.get(pk=body["id"])
    assert token.name == "laptop"
    assert timedelta(days=6) < token.expiry - timezone.now() <= timedelta(days=7)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tenancy_apitoken WHERE digest = %s OR "
                       "token_key = %s", [body["token"], body["token"]])
        assert cursor.fetchone()[0] == 0
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    assert client.get("/api/v1/teams/").status_code == 200


def test_an_expired_token_is_refused(owner) -> None:
    _token, secret = ApiToken.objects.create(user=owner, expiry=timedelta(days=1), name="old")
    ApiToken.objects.filter(user=owner).update(expiry=timezone.now() - timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/v1/teams/").status_code == 401


def test_owners_list_create_and_revoke_their_tokens(api_client_for, owner, member) -> None:
    client = api_client_for(owner)
    created = client.post(TOKENS, {"name": "ci", "expires_in_days": 30}, format="json")
    assert created.status_code == 201
    listed = client.get(TOKENS).json()["results"]
    assert {t["name"] for t in listed} == {"tests", "ci"}
    assert all("token" not in t and "digest" not in t for t in listed)
    other = api_client_for(member)
    assert other.delete(f"{TOKENS}{created.json()['id']}/").status_code == 404
    assert client.delete(f"{TOKENS}{created.json()['id']}/").status_code == 204
    revoked = APIClient()
    revoked.credentials(HTTP_AUTHORIZATION=f"Token {created.json()['token']}")
    assert revoked.get("/api/v1/teams/").status_code == 401


def test_a_token_lifetime_is_bounded(api_client_for, owner) -> None:
    response = api_client_for(owner).post(TOKENS, {"name": "x", "expires_in_days": 100_000},
                                          format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "expires_in_days"


def test_the_tokens_page_shows_a_new_secret_once_and_revokes(client: Client, owner) -> None:
    client.force_login(owner)
    page = client.post("/account/tokens/", {"name": "notebook", "expires_in_days": "5"})
    assert page.status_code == 200
    secret = page.context["new_secret"]
    assert secret in page.content.decode()
    token = ApiToken.objects.get(user=owner, name="notebook")
    listing = client.get("/account/tokens/").content.decode()
    assert "notebook" in listing and secret not in listing
    client.post(f"/account/tokens/{token.pk}/revoke/")
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_the_admin_never_sees_a_secret_or_its_digest(client: Client, owner) -> None:
    superuser = make_user("root", is_staff=True)
    superuser.is_superuser = True
    superuser.save()
    token, secret = ApiToken.objects.create(user=owner, expiry=timedelta(days=1), name="ci")
    client.force_login(superuser)
    for url in ("/django-admin/tenancy/apitoken/",
                f"/django-admin/tenancy/apitoken/{token.pk}/change/"):
        page = client.get(url)
        assert page.status_code == 200
        assert secret not in page.content.decode()
        assert token.digest not in page.content.decode()
    assert client.get("/django-admin/tenancy/apitoken/add/").status_code == 403


# Logins -----------------------------------------------------------------------------------------


def _fail_logins(client: Client, username: str, times: int, *, ip: str = "10.0.0.1") -> None:
    for _ in range(times):
        client.post("/login/", {"username": username, "password": "wrong"}, REMOTE_ADDR=ip)


@override_settings(AXES_FAILURE_LIMIT=3)
def test_repeated_failures_lock_the_account_with_a_clear_message(owner) -> None:
    client = Client()
    _fail_logins(client, "owner", 3)
    page = client.post("/login/", {"username": "owner", "password": PASSWORD},
                       REMOTE_ADDR="10.0.0.1")
    assert page.status_code == 429
    assert "Too many failed logins for this account" in page.content.decode()
    elsewhere = Client().post("/login/", {"username": "owner", "password": PASSWORD},
                              REMOTE_ADDR="10.9.9.9")
    assert elsewhere.status_code == 429


@override_settings(AXES_FAILURE_LIMIT=3)
def test_one_persons_typos_do_not_lock_out_others_behind_the_same_proxy(owner, member) -> None:
    _fail_logins(Client(), "owner", 5)
    response = Client().post("/login/", {"username": "member", "password": PASSWORD},
                             REMOTE_ADDR="10.0.0.1")
    assert response.status_code == 302


@override_settings(AXES_FAILURE_LIMIT=3)
def test_the_token_endpoint_locks_too_and_answers_the_error_shape(owner) -> None:
    client = APIClient()
    for _ in range(3):
        client.post(TOKEN, {"username": "owner", "password": "wrong"}, format="json")
    response = client.post(TOKEN, {"username": "owner", "password": PASSWORD}, format="json")
    assert response.status_code == 429
    assert "Too many failed logins" in response.json()["detail"]


@override_settings(AXES_FAILURE_LIMIT=3)
def test_an_admin_unlocks_an_account(owner) -> None:
    _fail_logins(Client(), "owner", 3)
    superuser = make_user("root", is_staff=True)
    superuser.is_superuser = True
    superuser.save()
    admin = Client()
    admin.force_login(superuser)
    attempt = AccessAttempt.objects.get(username="owner")
    assert admin.get("/django-admin/axes/accessattempt/").status_code == 200
    admin.post(f"/django-admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})
    response = Client().post("/login/", {"username": "owner", "password": PASSWORD},
                             REMOTE_ADDR="10.0.0.1")
    assert response.status_code == 302


@override_settings(AXES_FAILURE_LIMIT=100)
def test_the_token_endpoint_is_throttled_per_username(db: Any) -> None:
    username = f"nobody-{uuid.uuid4().hex[:8]}"
    client = APIClient()
    codes = [client.post(TOKEN, {"username": username, "password": "x"}, format="json")
             .status_code for _ in range(11)]
    assert codes[:10] == [400] * 10
    assert codes[10] == 429
    other = client.post(TOKEN, {"username": f"{username}-2", "password": "x"}, format="json")
    assert other.status_code == 400


def test_a_token_request_reads_only_its_own_token_and_user(
    api_client_for, owner, django_assert_max_num_queries
) -> None:
    client = api_client_for(owner)
    for number in range(5):  # other tokens of the user are not read on each request
        ApiToken.objects.create(user=owner, expiry=timedelta(days=1), name=f"other {number}")
    client.get("/api/v1/teams/")
    # The token with its user, then the view's: teams (count, page).
    with django_assert_max_num_queries(3):
        assert client.get("/api/v1/teams/").status_code == 200


def test_expired_tokens_are_not_listed_and_go_when_a_token_is_created(
    api_client_for, owner
) -> None:
    client = api_client_for(owner)
    ApiToken.objects.create(user=owner, expiry=timedelta(days=1), name="old")
    ApiToken.objects.filter(user=owner, name="old").update(
        expiry=timezone.now() - timedelta(seconds=1))
    assert {t["name"] for t in client.get(TOKENS).json()["results"]} == {"tests"}
    assert client.post(TOKENS, {"name": "ci"}, format="json").status_code == 201
    assert set(ApiToken.objects.filter(user=owner).values_list("name", flat=True)) == {
        "tests", "ci"}
