from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from rlark_site.foundation.conf import database_from_url, env_str

_DATABASE_URL = env_str("DATABASE_URL")
if not _DATABASE_URL:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set. Start RLark through `make run` / `make test` (or "
        "`.venv/bin/python manage.py ...`, which starts embedded PostgreSQL and Redis for you), "
        "or set DATABASE_URL and REDIS_URL yourself."
    )
DATABASES = {"default": database_from_url(_DATABASE_URL)}
