"""OpenID Connect sign-in on top of mozilla-django-oidc.

The provider's endpoints are read from `RLARK_OIDC_ISSUER/.well-known/openid-configuration`
(once per process); a user is found or created by the username claim; SSO never signs anyone
into a local account (one with a usable password, such as the break-glass admin). With
`RLARK_OIDC_ADMIN_GROUPS` / `RLARK_OIDC_TEAM_GROUPS` set, each sign-in brings platform-admin
status and the mapped team memberships in line with the groups claim. Logging out of a
session that SSO signed in also ends the provider's session (RP-initiated logout) when the
discovery document names an `end_session_endpoint`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

logger = logging.getLogger(__name__)

# mozilla-django-oidc setting -> discovery document field.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_ROLE_RANK: dict[str, int] = {MemberRole.MEMBER.value: 1, MemberRole.MAINTAINER.value: 2}


@cache
def discovery(issuer: str) -> dict[str, Any]:
    """The issuer's discovery document (fetched once per process and issuer)."""
    response = requests.get(f"{issuer}/.well-known/openid-configuration",
                            timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL)
    response.raise_for_status()
    document: dict[str, Any] = response.json()
    if document.get("issuer", "").rstrip("/") != issuer:
        raise SuspiciousOperation("the discovery document names another issuer")
    return document


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, endpoints from discovery."""
    if attr in _DISCOVERED:
        return discovery(settings.RLARK_OIDC_ISSUER)[_DISCOVERED[attr]]
    return import_from_settings(attr, *default)


def _require_enabled() -> None:
    if not settings.RLARK_OIDC_ENABLED:
        raise Http404


class AuthenticateView(OIDCAuthenticationRequestView):
    """Redirects to the provider (404 while SSO is off)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _require_enabled()
        super().__init__(*args, **kwargs)

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc_setting(attr, *args)


class CallbackView(OIDCAuthenticationCallbackView):
    """Receives the provider's answer (404 while SSO is off)."""

    def get(self, request: HttpRequest) -> Any:
        _require_enabled()
        return super().get(request)


ID_TOKEN_SESSION_KEY = "oidc_id_token"  # where mozilla-django-oidc keeps it (OIDC_STORE_ID_TOKEN)


def provider_logout_url(request: HttpRequest, id_token: str) -> str | None:
    """The provider's end-session URL for a session SSO signed in (None: the provider has
    none, or its discovery document cannot be read; the local logout still happens)."""
    if not (settings.RLARK_OIDC_ENABLED and id_token):
        return None
    try:
        endpoint = discovery(settings.RLARK_OIDC_ISSUER).get("end_session_endpoint")
    except (requests.RequestException, SuspiciousOperation, ValueError) as exc:
        logger.warning("SSO logout: the provider's discovery document cannot be read: %s", exc)
        return None
    if not endpoint:
        return None
    back = request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL))
    return f"{endpoint}?" + urlencode({
        "id_token_hint": id_token, "client_id": settings.OIDC_RP_CLIENT_ID,
        "post_logout_redirect_uri": back,
    })


class LogoutView(auth_views.LogoutView):
    """Django's logout (POST); a session SSO signed in then goes on to the provider's
    end-session endpoint, which signs the user out there too and sends them back to the
    login page."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = str(request.session.get(ID_TOKEN_SESSION_KEY) or "")
        response = super().post(request, *args, **kwargs)
        provider = provider_logout_url(request, id_token)
        return HttpResponseRedirect(provider) if provider else response


@dataclass(frozen=True)
class TeamGrant:
    group: str
    team: str
    role: str


def team_grants(entries: list[str]) -> list[TeamGrant]:
    """Parse `RLARK_OIDC_TEAM_GROUPS` entries: `group=team-slug:role` (role defaults to member)."""
    grants = []
    for entry in entries:
        group, _, target = entry.partition("=")
        team, _, role = target.partition(":")
        role = role or MemberRole.MEMBER
        if not (group and team) or role not in MemberRole.values:
            raise ValueError(f"RLARK_OIDC_TEAM_GROUPS entry {entry!r}: use group=team-slug:role")
        grants.append(TeamGrant(group=group, team=team, role=role))
    return grants


class OIDCBackend(OIDCAuthenticationBackend):
    """Finds or creates the user named by the username claim and applies the group mapping."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()
        if settings.RLARK_OIDC_ENABLED:  # password logins instantiate every backend too
            super().__init__(*args, **kwargs)

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc_setting(attr, *args)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if not settings.RLARK_OIDC_ENABLED:
            return None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token: str, **kwargs: Any) -> Any:
        """The library checks the signature and nonce; the issuer and audience are checked here
        too, so a token the provider issued to another client signs nobody in."""
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if (str(payload.get("iss", "")).rstrip("/") != settings.RLARK_OIDC_ISSUER
                or settings.OIDC_RP_CLIENT_ID not in audiences):
            logger.warning("SSO: an ID token of another issuer or client was refused")
            return None
        return payload

    def _username(self, claims: dict[str, Any]) -> str:
        return str(claims.get(settings.RLARK_OIDC_USERNAME_CLAIM) or "")

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(self._username(claims))

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=self._username(claims))

    def create_user(self, claims: dict[str, Any]) -> Any:
        user = self.UserModel(username=self._username(claims))
        user.set_unusable_password()
        return self._apply_claims(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        if user.has_usable_password():
            raise SuspiciousOperation(f"{user.username} is a local account; SSO does not sign "
                                      "into it")
        return self._apply_claims(user, claims)

    @transaction.atomic
    def _apply_claims(self, user: Any, claims: dict[str, Any]) -> Any:
        user.email = str(claims.get("email") or user.email or "")
        user.first_name = str(claims.get("given_name") or user.first_name or "")[:150]
        user.last_name = str(claims.get("family_name") or user.last_name or "")[:150]
        groups = _groups(claims)
        if settings.RLARK_OIDC_ADMIN_GROUPS:
            user.is_staff = bool(groups & set(settings.RLARK_OIDC_ADMIN_GROUPS))
        user.save()
        _sync_teams(user, groups)
        return user


def _groups(claims: dict[str, Any]) -> set[str]:
    value = claims.get(settings.RLARK_OIDC_GROUPS_CLAIM) or []
    return {str(group) for group in (value if isinstance(value, list) else [value])}


def _sync_teams(user: Any, groups: set[str]) -> None:
    """Memberships of the mapped teams follow the groups; unmapped teams are left alone."""
    grants = team_grants(settings.RLARK_OIDC_TEAM_GROUPS)
    wanted: dict[str, str] = {}
    for grant in grants:
        if grant.group in groups and _ROLE_RANK[grant.role] > _ROLE_RANK.get(
                wanted.get(grant.team, ""), 0):
            wanted[grant.team] = grant.role
    teams = {t.slug: t for t in Team.objects.filter(slug__in={g.team for g in grants})}
    for slug in {g.team for g in grants} - set(teams):
        logger.warning("RLARK_OIDC_TEAM_GROUPS names team %s, which does not exist", slug)
    for slug, team in teams.items():
        if slug not in wanted:
            Membership.objects.filter(team=team, user=user).delete()
            continue
        membership, created = Membership.objects.get_or_create(
            team=team, user=user, defaults={"role": wanted[slug]})
        if not created and membership.role != wanted[slug]:
            membership.role = wanted[slug]
            membership.save(update_fields=["role"])


def sso_context(request: HttpRequest) -> dict[str, Any]:
    """`sso_enabled` for the login page's "Sign in with single sign-on" button."""
    return {"sso_enabled": settings.RLARK_OIDC_ENABLED}
