"""API token authentication (django-rest-knox), lean on every request."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication


class ApiTokenAuthentication(TokenAuthentication):
    """knox's token authentication without its sweep of the user's other tokens on every
    request (one query more per API call, reading every token the user has): an expired
    token is still refused and deleted when presented, and the user's other expired tokens
    are deleted when they create a token (`token_create`) and never listed (`tokens_of`)."""

    def _cleanup_token(self, auth_token: Any) -> bool:
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False


class ApiTokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of `ApiTokenAuthentication`: knox's, unchanged."""

    target_class = "rlark_site.foundation.tenancy.authentication.ApiTokenAuthentication"
