from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from rlark_site.conf import STATE_DIR, env_bool, env_list, env_str
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
