"""API token authentication (django-rest-knox), lean on every request."""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from functools import cache
from hmac import compare_digest
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.settings import CONSTANTS, knox_settings
from rest_framework import exceptions

from rlark_site.foundation.tenancy.models import ApiToken

_INVALID = _("Invalid token.")  # knox's message


@dataclass(frozen=True)
class _CandidateQuery:
    """The SQL of `ApiToken.objects.filter(token_key=...).select_related("user")`, compiled once
    by the ORM, and which of its columns are the token's and which its user's."""

    sql: str
    token_fields: list[str]
    user_fields: list[str]


@cache
def _candidate_query() -> _CandidateQuery | None:
    """None when the rows would need converting (then the ORM reads them every time)."""
    query = ApiToken.objects.filter(token_key="").select_related("user").order_by().query
    compiler = query.get_compiler(DEFAULT_DB_ALIAS)
    sql, params = compiler.as_sql()
    select, klass_info = compiler.select, compiler.klass_info
    if params != ("",) or klass_info is None or compiler.get_converters(
            [column for column, _sql, _alias in select]):
        return None
    (user_info,) = klass_info["related_klass_infos"]

    def names(info: dict[str, Any]) -> list[str]:
        return [select[index][0].target.attname for index in info["select_fields"]]

    if klass_info["select_fields"] + user_info["select_fields"] != list(range(len(select))):
        return None
    return _CandidateQuery(sql=sql, token_fields=names(klass_info),
                           user_fields=names(user_info))


def tokens_with_key(token_key: str) -> list[ApiToken]:
    """The tokens whose `token_key` is this (almost always one), each with its user: what
    knox reads with `filter(token_key=...).select_related("user")`, without compiling that
    query on every request (the ORM's compiling cost more than the rest of authenticating)."""
    plan = _candidate_query()
    if plan is None:
        return list(ApiToken.objects.filter(token_key=token_key).select_related("user"))
    user_model = ApiToken._meta.get_field("user")
    split = len(plan.token_fields)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(plan.sql, [token_key])
        rows = cursor.fetchall()
    tokens = []
    for row in rows:
        token = ApiToken.from_db(DEFAULT_DB_ALIAS, plan.token_fields, row[:split])
        user = user_model.related_model.from_db(DEFAULT_DB_ALIAS, plan.user_fields, row[split:])
        user_model.set_cached_value(token, user)
        tokens.append(token)
    return tokens


class ApiTokenAuthentication(TokenAuthentication):
    """knox's token authentication without its sweep of the user's other tokens on every
    request (one query more per API call, reading every token the user has): an expired
    token is still refused and deleted when presented, and the user's other expired tokens
    are deleted when they create a token (`token_create`) and never listed (`tokens_of`).
    The candidates for a token are read by `tokens_with_key`."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, ApiToken]:
        """knox's, over the candidates `tokens_with_key` reads."""
        text = token.decode("utf-8")
        for auth_token in tokens_with_key(text[:CONSTANTS.TOKEN_KEY_LENGTH]):
            if self._cleanup_token(auth_token):
                continue
            try:
                digest = hash_token(text)
            except (TypeError, binascii.Error):
                raise exceptions.AuthenticationFailed(_INVALID) from None
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                user_and_token: tuple[Any, ApiToken] = self.validate_user(auth_token)
                return user_and_token
        raise exceptions.AuthenticationFailed(_INVALID)

    def _cleanup_token(self, auth_token: Any) -> bool:
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False


class ApiTokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of `ApiTokenAuthentication`: knox's, unchanged."""

    target_class = "rlark_site.foundation.tenancy.authentication.ApiTokenAuthentication"
