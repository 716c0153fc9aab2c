"""Notifications: mail (Django's; SMTP from the environment, the console under `make run`),
the site's address in messages, the webhook retry pause, and the networks webhooks may reach
despite being internal (rlark_site/foundation/egress.py; none by default)."""

from __future__ import annotations

from rlark_site.foundation.conf import env_float, env_int, env_networks, env_str

EMAIL_BACKEND = env_str("RLARK_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("RLARK_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("RLARK_EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("RLARK_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = env_str("RLARK_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = env_str("RLARK_EMAIL_TLS", "") in ("1", "true", "yes")
DEFAULT_FROM_EMAIL = env_str("RLARK_EMAIL_FROM", "rlark@localhost")
RLARK_BASE_URL = env_str("RLARK_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
# First pause (seconds) before a failed webhook delivery is tried again; it doubles per try.
RLARK_WEBHOOK_RETRY_BASE = env_float("RLARK_WEBHOOK_RETRY_BASE", 10.0)
# Internal networks (CIDRs) webhook deliveries may reach all the same; empty: none. `make run`
# opens loopback for local receivers.
RLARK_WEBHOOK_ALLOWED_NETWORKS = env_networks("RLARK_WEBHOOK_ALLOWED_NETWORKS")
