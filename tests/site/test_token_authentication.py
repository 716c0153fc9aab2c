"""API token authentication reads a token's candidates as knox does, from SQL compiled once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from knox.crypto import hash_token
from rest_framework.test import APIClient

from rlark_site.foundation.tenancy.authentication import _candidate_query, tokens_with_key
from rlark_site.foundation.tenancy.models import ApiToken
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

TEAMS = "/api/v1/teams/"


def _fields(obj: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if k != "_state"}


def _client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_the_candidates_are_the_orms_with_their_users(
    owner: Any, member: Any, django_assert_num_queries: Any
) -> None:
    first, _ = ApiToken.objects.create(user=owner, expiry=timedelta(days=1), name="one")
    second, _ = ApiToken.objects.create(user=member, expiry=None, name="two")
    ApiToken.objects.filter(pk=second.pk).update(token_key=first.token_key)  # a shared prefix
    assert _candidate_query() is not None
    with django_assert_num_queries(1):
        read = sorted(tokens_with_key(first.token_key), key=lambda t: t.pk)
        users = [token.user for token in read]
    orm = sorted(ApiToken.objects.filter(token_key=first.token_key).select_related("user"),
                 key=lambda t: t.pk)
    assert [_fields(t) for t in read] == [_fields(t) for t in orm]
    assert [_fields(u) for u in users] == [_fields(t.user) for t in orm]
    assert all(not t._state.adding and t._state.db == "default" for t in [*read, *users])
    assert tokens_with_key("rlark_unknown00") == []


def test_of_two_tokens_sharing_a_prefix_each_authenticates_its_own_user(
    owner: Any, member: Any
) -> None:
    first, first_secret = ApiToken.objects.create(user=owner, expiry=None, name="one")
    second, _ = ApiToken.objects.create(user=member, expiry=None, name="two")
    # a second secret that starts like the first (the 15 characters knox looks tokens up by)
    second_secret = first_secret[:15] + "ab" * ((len(first_secret) - 15) // 2)
    ApiToken.objects.filter(pk=second.pk).update(token_key=first.token_key,
                                                 digest=hash_token(second_secret))
    wrong = first_secret[:15] + "cd" * ((len(first_secret) - 15) // 2)
    assert _client(first_secret).get(TEAMS).wsgi_request.user == owner
    assert _client(second_secret).get(TEAMS).wsgi_request.user == member
    assert _client(wrong).get(TEAMS).status_code == 401


def test_refused_tokens(owner: Any) -> None:
    _token, expired = ApiToken.objects.create(user=owner, expiry=timedelta(days=1), name="old")
    ApiToken.objects.filter(name="old").update(expiry=timezone.now() - timedelta(seconds=1))
    assert _client(expired).get(TEAMS).status_code == 401
    assert not ApiToken.objects.filter(name="old").exists()  # deleted when presented
    idle = make_user("idle")
    _token, inactive = ApiToken.objects.create(user=idle, expiry=None, name="idle")
    idle.is_active = False
    idle.save(update_fields=["is_active"])
    response = _client(inactive).get(TEAMS)
    assert response.status_code == 401
    assert response.json() == {"detail": "User inactive or deleted."}
    assert _client("rlark_" + "zz" * 32).get(TEAMS).json() == {"detail": "Invalid token."}
