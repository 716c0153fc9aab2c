"""Settings of live observation, read through small functions (values: settings/tasks.py)."""

from __future__ import annotations

from django.conf import settings


def refresh_interval() -> float:
    """Seconds between refreshes of a job's live view; one cluster read serves them all."""
    return max(1.0, float(settings.RLARK_OBSERVE_REFRESH))


def log_tail_default() -> int:
    return int(settings.RLARK_LOG_TAIL_DEFAULT)


def log_tail_max() -> int:
    return int(settings.RLARK_LOG_TAIL_MAX)


def log_max_bytes() -> int:
    return int(settings.RLARK_LOG_MAX_BYTES)


def kube_timeout() -> float:
    return float(settings.RLARK_KUBE_TIMEOUT)
