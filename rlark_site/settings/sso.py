"""Single sign-on through OpenID Connect (mozilla-django-oidc), off unless RLARK_OIDC_ENABLED.

Endpoints come from the issuer's discovery document (`rlark_site/foundation/sso.py`); users are
created at their first sign-in; platform-admin status and team memberships can follow the groups the
provider sends. The local password login stays for the break-glass admin (docs/deploy.md).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from rlark_site.foundation.conf import env_bool, env_int, env_list, env_str

RLARK_OIDC_ENABLED = env_bool("RLARK_OIDC_ENABLED", False)
RLARK_OIDC_ISSUER = env_str("RLARK_OIDC_ISSUER").rstrip("/")
RLARK_OIDC_USERNAME_CLAIM = env_str("RLARK_OIDC_USERNAME_CLAIM", "preferred_username")
RLARK_OIDC_GROUPS_CLAIM = env_str("RLARK_OIDC_GROUPS_CLAIM", "groups")
# Members of these groups are platform admins (empty: admin status is not managed by SSO).
RLARK_OIDC_ADMIN_GROUPS = env_list("RLARK_OIDC_ADMIN_GROUPS", [])
# "group=team-slug:role,...": team memberships that follow groups (empty: not managed).
RLARK_OIDC_TEAM_GROUPS = env_list("RLARK_OIDC_TEAM_GROUPS", [])

OIDC_RP_CLIENT_ID = env_str("RLARK_OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("RLARK_OIDC_CLIENT_SECRET")
OIDC_RP_SCOPES = env_str("RLARK_OIDC_SCOPES", "openid email profile")
OIDC_RP_SIGN_ALGO = env_str("RLARK_OIDC_SIGN_ALGO", "RS256")
OIDC_VERIFY_SSL = True
OIDC_TIMEOUT = env_int("RLARK_OIDC_TIMEOUT", 10)
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
# Kept in the session for RP-initiated logout (`id_token_hint`; foundation.sso.LogoutView).
OIDC_STORE_ID_TOKEN = True
OIDC_AUTHENTICATE_CLASS = "rlark_site.foundation.sso.AuthenticateView"
OIDC_CALLBACK_CLASS = "rlark_site.foundation.sso.CallbackView"
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"

if RLARK_OIDC_ENABLED and not (RLARK_OIDC_ISSUER and OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "RLARK_OIDC_ENABLED needs RLARK_OIDC_ISSUER, RLARK_OIDC_CLIENT_ID and "
        "RLARK_OIDC_CLIENT_SECRET.")
