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


def cancel_capture_seconds() -> float:
    """The time a cancel may spend capturing the run's pods before deleting its Job."""
    return max(1.0, float(settings.RLARK_CANCEL_CAPTURE_SECONDS))


def capture_page_size() -> int:
    """Pods per list request of the status sync's capture (one listing per namespace)."""
    return max(1, int(settings.RLARK_STATUS_PAGE_SIZE))


def capture_max_pods() -> int:
    """The most pods one namespace listing of the capture reads (further pages are not)."""
    return max(1, int(settings.RLARK_CAPTURE_MAX_PODS))
