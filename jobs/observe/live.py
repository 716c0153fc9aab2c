"""What a submitted job's pods, events and logs look like now, read from its cluster.

Reads are shared: a job's pods and events are fetched at most once per refresh interval
(`conf.refresh_interval()`), whatever the number of people, pages and API clients watching,
and kept in the shared cache (Redis), so every web process serves the same snapshot. The
first reader after expiry takes a short lock in the cache and fetches; readers meanwhile get
the previous snapshot (or wait for the new one when there is none). A log read is shared the
same way per (pod, options).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from django.core.cache import cache
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.credentials import CredentialError, credentials_for
from clusters.k8s import (
    BadRequest,
    Credentials,
    EventInfo,
    KubeError,
    NotFound,
    PodInfo,
    PodLog,
    list_events,
    list_pods,
    read_pod_log,
)
from clusters.models import Cluster
from jobs.models import RunRecord
from jobs.observe import conf
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError

__all__ = [
    "LABEL_JOB",
    "LiveSnapshot",
    "job_snapshot",
    "pod_log",
    "record_credentials",
]

LABEL_JOB = "rlinf.io/job"
_STALE_FACTOR = 12
T = TypeVar("T")


@dataclass(frozen=True)
class LiveSnapshot:
    """A job's pods and the events of the Job and its pods (newest first), as read at
    `fetched_at`; `error` says why the cluster could not be read ("" when it was)."""

    pods: tuple[PodInfo, ...]
    events: tuple[EventInfo, ...]
    fetched_at: datetime
    error: str = ""

    def pod(self, name: str) -> PodInfo | None:
        return next((pod for pod in self.pods if pod.name == name), None)


def record_credentials(record: RunRecord) -> Credentials:
    """The gateway credentials of the record's cluster; `ApplicationError` when unusable."""
    cluster = Cluster.objects.filter(name=record.cluster).first()
    if cluster is None:
        raise ApplicationError(_("The cluster %(name)s is not registered any more.")
                               % {"name": record.cluster}, status_code=503)
    try:
        return credentials_for(cluster)
    except CredentialError as exc:
        raise ApplicationError(_("The cluster's stored credentials cannot be read."),
                               status_code=503) from exc


def _belongs(event: EventInfo, job_name: str) -> bool:
    if event.kind == "Pod":
        return event.name.startswith(f"{job_name}-")
    return event.name == job_name


def _fetch(record: RunRecord) -> LiveSnapshot:
    now = timezone.now()
    try:
        credentials = record_credentials(record)
        pods = list_pods(credentials=credentials, namespace=record.namespace,
                         label_selector=f"{LABEL_JOB}={record.job_name}",
                         timeout=conf.kube_timeout(), attempts=1)
        events = list_events(credentials=credentials, namespace=record.namespace,
                             timeout=conf.kube_timeout(), attempts=1)
    except (KubeError, ApplicationError) as exc:
        message = exc.message if isinstance(exc, ApplicationError) else str(exc)
        return LiveSnapshot(pods=(), events=(), fetched_at=now, error=message)
    # The API lists oldest first; reversed before a stable sort, ties stay newest first.
    mine = sorted(reversed([e for e in events if _belongs(e, record.job_name)]),
                  key=lambda e: e.last_at, reverse=True)
    ordered = sorted(pods, key=lambda p: (p.labels.get("rlinf.io/task", ""), p.name))
    return LiveSnapshot(pods=tuple(ordered), events=tuple(mine), fetched_at=now)


def _shared(key: str, compute: Callable[[], T]) -> T:
    """The cached value of `key`, computed by one reader per refresh interval."""
    ttl = conf.refresh_interval()
    value: T | None = cache.get(key)
    if value is not None:
        return value
    lock = f"{key}:lock"
    if cache.add(lock, 1, timeout=int(conf.kube_timeout() * 2) + 1):
        try:
            value = compute()
            cache.set(key, value, timeout=ttl)
            cache.set(f"{key}:stale", value, timeout=ttl * _STALE_FACTOR)
        finally:
            cache.delete(lock)
        return value
    stale: T | None = cache.get(f"{key}:stale")
    if stale is not None:
        return stale
    deadline = time.monotonic() + conf.kube_timeout()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        value = cache.get(key)
        if value is not None:
            return value
    return compute()


def job_snapshot(record: RunRecord) -> LiveSnapshot:
    """The job's live pods and events (shared between readers for the refresh interval)."""
    return _shared(f"observe:snapshot:{record.pk}", lambda: _fetch(record))


@dataclass(frozen=True)
class LogResult:
    """A log read: the text, or why there is none (`missing`: not started / no previous)."""

    log: PodLog | None
    missing: str = ""


def _read_log(record: RunRecord, pod: str, *, tail: int, since_seconds: int | None,
              previous: bool) -> LogResult:
    try:
        log = read_pod_log(
            credentials=record_credentials(record), namespace=record.namespace, name=pod,
            tail_lines=tail, since_seconds=since_seconds, previous=previous,
            max_bytes=conf.log_max_bytes(), timeout=conf.kube_timeout(),
        )
    except (BadRequest, NotFound) as exc:
        return LogResult(log=None, missing=exc.message)
    return LogResult(log=log)


def pod_log(record: RunRecord, pod: str, *, tail: int, since_seconds: int | None = None,
            previous: bool = False) -> LogResult:
    """A pod of this job's main-container log (bounded lines, bytes and time; shared between
    readers for the refresh interval). `NotFoundError` when the pod is not one of the job's;
    `ApplicationError` (503) when the cluster cannot be read, also when its pods could not be
    listed (then whose pod it is is unknown: a 404 would look like a lost click on the page)."""
    snapshot = job_snapshot(record)
    if snapshot.error:
        raise ApplicationError(_("The cluster could not be read: %(error)s")
                               % {"error": snapshot.error}, status_code=503)
    if snapshot.pod(pod) is None:
        raise NotFoundError(_("Pod not found."))
    key = f"observe:log:{record.pk}:{pod}:{tail}:{since_seconds}:{int(previous)}"
    try:
        return _shared(key, lambda: _read_log(record, pod, tail=tail,
                                              since_seconds=since_seconds, previous=previous))
    except KubeError as exc:
        raise ApplicationError(_("The cluster could not be read: %(error)s") % {"error": exc},
                               status_code=503) from exc
