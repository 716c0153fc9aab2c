"""Settings of live observation, read through small functions (values: settings/tasks.py)."""

from __future__ import annotations

from django.conf import settings


def refresh_interval() -> float:
    """Seconds between refreshes of a job's live view; one cluster read serves them all."""
    return max(1.0, float(getattr(settings, "RLARK_OBSERVE_REFRESH", 5.0)))


def log_tail_default() -> int:
    return int(getattr(settings, "RLARK_LOG_TAIL_DEFAULT", 200))


def log_tail_max() -> int:
    return int(getattr(settings, "RLARK_LOG_TAIL_MAX", 5000))


def log_max_bytes() -> int:
    return int(getattr(settings, "RLARK_LOG_MAX_BYTES", 1024 * 1024))


def kube_timeout() -> float:
    return float(getattr(settings, "RLARK_KUBE_TIMEOUT", 10.0))
