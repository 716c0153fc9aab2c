"""`GET auth/me/`: who the caller is (the CLI's `whoami`), never the token's secret."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from rlark_site.foundation.tenancy.models import ApiToken, MemberRole, Membership, Team

pytestmark = pytest.mark.django_db


def test_me_names_the_user_the_teams_and_the_token_in_use(owner: Any,
                                                          other_team: Team) -> None:
    Membership.objects.create(team=other_team, user=owner, role=MemberRole.MEMBER)
    token, secret = ApiToken.objects.create(user=owner, expiry=timedelta(days=2), name="laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    answer = client.get("/api/v1/auth/me/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["username"] == "owner" and body["is_platform_admin"] is False
    assert body["teams"] == [{"slug": "nlp-rl", "name": "NLP RL", "role": "member"},
                             {"slug": "vision-rl", "name": "Vision RL", "role": "maintainer"}]
    assert body["token"]["name"] == "laptop" and body["token"]["id"] == token.pk
    assert secret not in answer.content.decode()
    assert answer["X-RLark-API-Version"]


def test_me_in_a_browser_session_has_no_token_and_anonymous_is_401(admin_user: Any) -> None:
    client = APIClient()
    assert client.get("/api/v1/auth/me/").status_code == 401
    client.force_login(admin_user)
    body = client.get("/api/v1/auth/me/").json()
    assert body["is_platform_admin"] is True and body["teams"] == [] and body["token"] is None
