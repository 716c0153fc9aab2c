"""First-signal detection: look for a launch list's expected signal in the Head Task's log.

A signal may carry a `pattern`: plain text (found as a substring), or a regular expression
written between slashes (`/reward=\\d+/`). Regular expressions are compiled and matched with
the `regex` package, whose matching functions take a `timeout`: a pathological pattern (or
a line built against it) stops after `MATCH_TIMEOUT` seconds instead of holding a worker,
and the watch is marked `unmatchable`. Lines are also cut to `LINE_MAX` characters and one
scan reads at most `SCAN_BYTES` of log, so every scan is bounded in input and time.

After the run is Running, `scan_first_signals` (a Celery task every status interval) reads
the Head Task's first pod's log incrementally (`sinceTime` = the last line scanned, with
timestamps) and records "seen at T in pod P: line", or "not seen" once the launch list's
minutes have passed since Running. The person still confirms in the first-run check.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from clusters.k8s import BadRequest, KubeError, NotFound, read_pod_log
from jobs.models import EventKind, JobState, RunRecord
from jobs.notify.services import emit
from jobs.observe import conf
from jobs.observe.access import access_values
from jobs.observe.capture import run_state
from jobs.observe.live import record_credentials
from jobs.observe.models import SignalState, SignalWatch
from jobs.observe.patterns import LINE_MAX, find_line, parse_pattern, pattern_problem
from rlark_site.foundation.exceptions import ApplicationError

__all__ = [
    "SCAN_BYTES",
    "describe",
    "first_run_initial",
    "head_pod_name",
    "scan_first_signals",
]

SCAN_BYTES = 1024 * 1024

logger = logging.getLogger(__name__)

def head_pod_name(record: RunRecord) -> str:
    """The first pod of the manifest's Head Task (`<job>-<task>-0`), "" when none."""
    values = access_values(record)
    return values.pod if values is not None else ""


def _running_since(record: RunRecord, now: datetime) -> datetime:
    change = record.status_changes.filter(phase="Running").order_by("observed_at").first()
    return change.observed_at if change is not None else now


def _ensure_watches(record: RunRecord, now: datetime) -> None:
    signals = record.launch_list_snapshot.get("expected_signals") or []
    since = _running_since(record, now)
    for index, signal in enumerate(signals):
        raw = str(signal.get("pattern") or "")
        if not raw or pattern_problem(raw) is not None:
            continue
        minutes = signal.get("within_minutes")
        SignalWatch.objects.get_or_create(
            run_record=record, index=index,
            defaults={"signal": str(signal.get("signal", ""))[:500], "pattern": raw,
                      "pod": head_pod_name(record), "running_since": since,
                      "deadline": since + timedelta(minutes=minutes) if minutes else None},
        )


def _timed_lines(text: str) -> list[tuple[datetime, str]]:
    lines = []
    for raw in text.splitlines():
        stamp, _sep, line = raw.partition(" ")
        moment = parse_datetime(stamp)
        if moment is not None:
            lines.append((moment, line))
    return lines


def _scan(watch: SignalWatch, record: RunRecord, now: datetime) -> None:
    """One incremental read of the head pod's log and one match over the new lines."""
    try:
        log = read_pod_log(
            credentials=record_credentials(record), namespace=record.namespace,
            name=watch.pod, since_time=watch.scanned_until, timestamps=True,
            max_bytes=SCAN_BYTES, timeout=conf.kube_timeout(),
        )
        lines = _timed_lines(log.text)
    except (BadRequest, NotFound):
        lines = []  # not started yet, or gone: the deadline still applies
    fresh = [(t, line) for t, line in lines if watch.scanned_until is None
             or t > watch.scanned_until]
    try:
        found = find_line(parse_pattern(watch.pattern), [line for _t, line in fresh])
    except TimeoutError:
        _finish(watch, state=SignalState.UNMATCHABLE, now=now)
        return
    if found is not None:
        moment, line = fresh[found]
        _finish(watch, state=SignalState.SEEN, now=now, seen_at=moment, line=line[:LINE_MAX])
        return
    if fresh:
        watch.scanned_until = fresh[-1][0]
    if watch.deadline is not None and now >= watch.deadline:
        _finish(watch, state=SignalState.MISSED, now=now)
        return
    watch.checked_at = now
    watch.save(update_fields=["scanned_until", "checked_at"])


def _finish(watch: SignalWatch, *, state: SignalState, now: datetime, **fields: Any) -> None:
    with transaction.atomic():
        claimed = SignalWatch.objects.filter(pk=watch.pk, state=SignalState.WATCHING).update(
            state=state, checked_at=now, scanned_until=watch.scanned_until, **fields)
    if claimed:
        logger.info("first signal %s of %s: %s", watch.index, watch.run_record_id, state)
        watch.refresh_from_db()
        kind = EventKind.SIGNAL_SEEN if state == SignalState.SEEN else EventKind.SIGNAL_MISSED
        emit(kind=kind, record=watch.run_record, key=f"{kind}:{watch.run_record_id}:{watch.index}",
             details={"signal": watch.signal, "evidence": describe(watch)})


def scan_first_signals(*, now: datetime | None = None) -> int:
    """One scan for every Running run with a signal pattern; returns how many were scanned."""
    now = now or timezone.now()
    scanned = 0
    for record in RunRecord.objects.filter(state=JobState.RUNNING):
        if run_state(record) != JobState.RUNNING:
            continue
        _ensure_watches(record, now)
        for watch in record.signal_watches.filter(state=SignalState.WATCHING):
            try:
                _scan(watch, record, now)
            except (KubeError, ApplicationError) as exc:
                logger.info("first signal scan of %s: %s", record.job_name, exc)
                break
            scanned += 1
    return scanned


def first_run_initial(record: RunRecord | None) -> dict[str, Any]:
    """The first-run check form's prefill from what the scans found (the person confirms)."""
    if record is None:
        return {}
    watches = list(record.signal_watches.exclude(state=SignalState.WATCHING))
    if not watches:
        return {}
    seen = [w for w in watches if w.state == SignalState.SEEN]
    lines = [describe(w) for w in watches]
    return {"observed": "yes" if len(seen) == len(watches) else "no",
            "evidence": "\n".join(lines)}


def signal_rows(record: RunRecord | None) -> list[dict[str, Any]]:
    """Each watch with its evidence sentence and a link to the line in the pod's log."""
    if record is None:
        return []
    rows = []
    for watch in record.signal_watches.all():
        link = ""
        if watch.state == SignalState.SEEN:
            query = urlencode({"tail": conf.log_tail_max(), "q": watch.line[:200]})
            link = reverse("jobs:job-pod-log", args=[record.job_name, watch.pod]) + "?" + query
        text = "" if watch.state == SignalState.WATCHING else describe(watch)
        rows.append({"watch": watch, "text": text, "link": link})
    return rows


def describe(watch: SignalWatch) -> str:
    """One sentence of evidence for a finished watch."""
    if watch.state == SignalState.SEEN and watch.seen_at is not None:
        return _("“%(signal)s” seen at %(time)s in pod %(pod)s, line: %(line)s") % {
            "signal": watch.signal, "time": watch.seen_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
            "pod": watch.pod, "line": watch.line}
    if watch.state == SignalState.MISSED:
        minutes = int((watch.deadline - watch.running_since).total_seconds() // 60) \
            if watch.deadline else 0
        return _("“%(signal)s” not seen in pod %(pod)s within the launch list's %(minutes)d "
                 "minutes") % {"signal": watch.signal, "pod": watch.pod, "minutes": minutes}
    return _("“%(signal)s”: the pattern could not be matched in time") % {
        "signal": watch.signal}
