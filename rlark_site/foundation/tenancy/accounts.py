"""Logins and API tokens: lockout answers (django-axes) and the token services (django-rest-knox).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _
from knox.settings import knox_settings

from rlark_site.foundation.exceptions import (
    ApplicationError,
    NotFoundError,
    api_error_response,
    is_api_request,
)
from rlark_site.foundation.tenancy.models import ApiToken
from rlark_site.foundation.validators import has_control_characters

LOCKED_STATUS = 429


def lockout_message() -> str:
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return _(
        "Too many failed logins for this account. Try again in %(minutes)s minutes, or ask a "
        "platform admin to unlock it."
    ) % {"minutes": minutes}


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """django-axes' answer to a locked account: the error shape under /api/, the login page with
    the reason elsewhere (429 both)."""
    if is_api_request(request):
        return api_error_response(lockout_message(), LOCKED_STATUS)
    return render(request, "registration/login.html",
                  {"locked_out": lockout_message()}, status=LOCKED_STATUS)


def _ttl(days: int | None) -> timedelta:
    if days is None:
        return knox_settings.TOKEN_TTL
    if not 1 <= days <= settings.RLARK_TOKEN_MAX_TTL_DAYS:
        raise ApplicationError(
            _("A token lives 1 to %(max)s days.") % {"max": settings.RLARK_TOKEN_MAX_TTL_DAYS},
            extra={"field": "expires_in_days"},
        )
    return timedelta(days=days)


@transaction.atomic
def token_create(*, user: Any, name: str, expires_in_days: int | None = None
                 ) -> tuple[ApiToken, str]:
    """A new token for `user`; the secret is returned once and only its digest is stored."""
    name = name.strip()
    if not name or len(name) > 100 or has_control_characters(name):
        raise ApplicationError(_("A token name is 1-100 characters without control characters."),
                               extra={"field": "name"})
    ApiToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()
    token, secret = ApiToken.objects.create(user=user, expiry=_ttl(expires_in_days), name=name)
    return token, secret


def tokens_of(user: Any) -> QuerySet[ApiToken]:
    """The user's tokens that still work, newest first."""
    live = Q(expiry__isnull=True) | Q(expiry__gte=timezone.now())
    return ApiToken.objects.filter(live, user=user).order_by("-created")


@transaction.atomic
def token_revoke(*, user: Any, token_id: int) -> None:
    """Delete one of the user's own tokens; another user's answers 404 like a missing one."""
    deleted, _rows = ApiToken.objects.filter(user=user, pk=token_id).delete()
    if not deleted:
        raise NotFoundError(_("Token not found."))
