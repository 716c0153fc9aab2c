"""Settings of submission and status sync, read through small functions (one place to look).

The values and their defaults live in `rlark_site/settings/tasks.py` only, which reads them
from the environment.
"""

from __future__ import annotations

from django.conf import settings


def kube_timeout() -> float:
    """Seconds one call to a cluster may take."""
    return float(settings.RLARK_KUBE_TIMEOUT)


def status_poll_interval() -> float:
    """Seconds between status sync passes (beat); a cluster's pass expires after one."""
    return float(settings.RLARK_STATUS_POLL_INTERVAL)


def status_page_size() -> int:
    """Jobs per list request of the status sync."""
    return max(1, int(settings.RLARK_STATUS_PAGE_SIZE))


def pending_deadline() -> float:
    """Seconds a job may stay Pending before it is flagged."""
    return float(settings.RLARK_PENDING_DEADLINE)


def submit_max_attempts() -> int:
    """How many tries a submission gets before a transient failure becomes final."""
    return max(1, int(settings.RLARK_SUBMIT_MAX_ATTEMPTS))


def submit_retry_base() -> float:
    """The first retry pause in seconds; it doubles per try (with jitter) up to the cap."""
    return max(0.0, float(settings.RLARK_SUBMIT_RETRY_BASE))


def submit_retry_cap() -> float:
    return max(0.0, float(settings.RLARK_SUBMIT_RETRY_CAP))


def submit_lease() -> float:
    """Seconds a worker owns a submission it claimed.

    Longer than one try can take (two calls of `kube_timeout()` plus the bookkeeping), so a
    live worker never loses its claim; after it, a crashed worker's claim can be taken over.
    """
    return max(float(settings.RLARK_SUBMIT_LEASE), 2 * kube_timeout() + 1.0)


def resume_grace() -> float:
    """How long a queued record may wait for its message before it is sent again."""
    return float(settings.RLARK_SUBMIT_RESUME_GRACE)
