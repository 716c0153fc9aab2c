"""Inventory polling settings, read in one place (values and defaults: settings/tasks.py)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings


def poll_interval() -> timedelta:
    """How long after a successful poll a cluster is due again."""
    return timedelta(seconds=float(settings.RLARK_INVENTORY_POLL_INTERVAL))


def page_size() -> int:
    """Nodes per list request (and per database batch)."""
    return int(settings.RLARK_INVENTORY_PAGE_SIZE)


def occupancy_max_pods() -> int:
    """The most pods one cluster-wide pod listing reads."""
    return int(settings.RLARK_OCCUPANCY_MAX_PODS)


def occupancy_max_pages() -> int:
    """The most pages one cluster-wide pod listing reads."""
    return int(settings.RLARK_OCCUPANCY_MAX_PAGES)


def kube_timeout() -> float:
    """Read timeout of one request to a cluster, in seconds."""
    return float(settings.RLARK_KUBE_TIMEOUT)


def read_attempts() -> int:
    """Tries per list request before a transient error fails the poll (the gateway retries)."""
    return int(settings.RLARK_INVENTORY_READ_ATTEMPTS)


def retry_base() -> timedelta:
    """The first pause after a failed poll; it doubles with each further failure."""
    return timedelta(seconds=float(settings.RLARK_INVENTORY_RETRY_BASE))


def retry_cap() -> timedelta:
    """The longest pause between polls of a failing cluster."""
    return timedelta(seconds=float(settings.RLARK_INVENTORY_RETRY_CAP))


def task_soft_time_limit() -> int:
    """Seconds before a poll task is asked to stop (`SoftTimeLimitExceeded`)."""
    return int(settings.RLARK_INVENTORY_TASK_SOFT_TIME_LIMIT)


def task_time_limit() -> int:
    """Seconds before a poll task's worker process is killed."""
    return int(settings.RLARK_INVENTORY_TASK_TIME_LIMIT)


def lease_duration() -> timedelta:
    """How long a claimed poll keeps other pollers away.

    Longer than the task's hard time limit, so a lease only expires once the poller
    holding it is certainly dead: a crashed poll delays the next one, never doubles it.
    """
    return timedelta(seconds=task_time_limit() + 30)
