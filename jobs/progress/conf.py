"""Settings of the progress reader, read through small functions (values: settings/tasks.py)."""

from __future__ import annotations

from django.conf import settings


def poll_interval() -> float:
    """Seconds between progress passes of a cluster (beat); a pass expires after one."""
    return max(1.0, float(settings.RLARK_PROGRESS_POLL_INTERVAL))


def read_bytes() -> int:
    """The most log bytes one run's read takes in one pass."""
    return max(4096, int(settings.RLARK_PROGRESS_READ_BYTES))


def readers() -> int:
    """How many log reads of one cluster's pass run at once."""
    return max(1, int(settings.RLARK_PROGRESS_READERS))


def kube_timeout() -> float:
    return float(settings.RLARK_KUBE_TIMEOUT)
