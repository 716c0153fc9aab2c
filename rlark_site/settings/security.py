from __future__ import annotations

from datetime import timedelta

from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from rlark_site.foundation.conf import STATE_DIR, env_bool, env_int, env_list, env_str
from rlark_site.settings.base import DEBUG

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and not env_bool("RLARK_DEV_SECRETS", False):
        raise ImproperlyConfigured("SECRET_KEY must be set (or DEBUG / RLARK_DEV_SECRETS for dev).")
    SECRET_KEY = "rlark-development-only-secret-key-not-for-production-use-0123456789"

# Fernet keys (comma-separated, newest first) encrypting cluster credentials at rest.
# Rotation: put the new key first, keep old ones after it, run `manage.py rotate_credentials`.
RLARK_CREDENTIAL_KEYS = env_list("RLARK_CREDENTIAL_KEYS", [])
if not RLARK_CREDENTIAL_KEYS:
    if not DEBUG and not env_bool("RLARK_DEV_SECRETS", False):
        raise ImproperlyConfigured("RLARK_CREDENTIAL_KEYS must be set (Fernet keys, newest first).")
    RLARK_CREDENTIAL_KEYS = ["ZGV2ZWxvcG1lbnQtb25seS1rZXktMzItYnl0ZXMhISE="]

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
RLARK_STATE_DIR = STATE_DIR

# Every path that sets a password (account creation by a platform admin, the Django admin,
# `manage.py create_account`, `changepassword`) applies these.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env_int("RLARK_PASSWORD_MIN_LENGTH", 10)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login protection (django-axes): after RLARK_LOGIN_FAILURE_LIMIT failures an account is locked
# for RLARK_LOGIN_COOLOFF_MINUTES, counted per username and per username + address, never per
# address alone (many people share one company proxy). Unlock: Django admin -> Axes -> Access
# attempts (delete), or `manage.py axes_reset_username NAME`.
AUTHENTICATION_BACKENDS = [
    "rlark_site.foundation.tenancy.backends.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
    # OpenID Connect sign-in (rlark_site/settings/sso.py; answers nothing while SSO is off).
    "rlark_site.foundation.sso.OIDCBackend",
]
AXES_FAILURE_LIMIT = env_int("RLARK_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("RLARK_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", ["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "rlark_site.foundation.tenancy.accounts.lockout_response"
AXES_IPWARE_PROXY_COUNT = env_int("RLARK_TRUSTED_PROXY_COUNT", 0) or None
AXES_VERBOSE = False

# Production behind HTTPS (RLARK_HTTPS=1): secure cookies, a redirect to https, HSTS. Behind a
# TLS-terminating proxy, name the header it sets (RLARK_PROXY_SSL_HEADER=X-Forwarded-Proto);
# only ever behind a proxy that overwrites that header on every request.
RLARK_HTTPS = env_bool("RLARK_HTTPS", False)
SESSION_COOKIE_SECURE = RLARK_HTTPS
CSRF_COOKIE_SECURE = RLARK_HTTPS
SECURE_SSL_REDIRECT = RLARK_HTTPS
SECURE_REDIRECT_EXEMPT = [r"^health/"]
SECURE_HSTS_SECONDS = env_int("RLARK_HSTS_SECONDS", 31_536_000) if RLARK_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("RLARK_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("RLARK_HSTS_PRELOAD", True)
_PROXY_SSL_HEADER = env_str("RLARK_PROXY_SSL_HEADER")
SECURE_PROXY_SSL_HEADER = (
    (f"HTTP_{_PROXY_SSL_HEADER.upper().replace('-', '_')}", "https") if _PROXY_SSL_HEADER
    else None
)

# Content-Security-Policy (django-csp): scripts only from RLark itself, no inline script or
# event handler anywhere (templates use data-* attributes read by rlark/behaviours.js). Inline
# style attributes stay allowed (the templates and htmx's indicator style use them).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
