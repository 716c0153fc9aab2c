"""Keep each pod attempt of a run in its record, so it outlives the pods.

The status sync calls `capture_cluster` once per cluster and pass, after it has observed the
Jobs. A pass costs one pods list per namespace (label `rlinf.io/job`, paged) for every
active run there, one query for the attempts already kept, bulk writes of the attempts whose
pod changed, and log and event reads only for the pods that need them: a pod that has ended
or restarted or is stuck (`CrashLoopBackOff`, image pull errors) when that is new since the
last capture, and every pod not yet read once its run has ended. Those reads (the last
`LOG_TAIL_BYTES` of the current and previous container's logs, bounded, kept compressed, and
the pod's events) feed the failure classifier (`jobs.observe.classify`).

Cancelling a run captures it in full before its Job is deleted (`capture_before_cancel`),
within a time budget. A capture that ends a run's record (cancel, or the run's last pass)
and cannot read everything says so in `RunRecord.capture_incomplete`.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from clusters.k8s import (
    BadRequest,
    Credentials,
    EventInfo,
    KubeError,
    NotFound,
    PodInfo,
    list_events,
    list_pods,
    read_pod_log,
)
from jobs.core.progress import split_stamp
from jobs.models import RunRecord
from jobs.observe import conf
from jobs.observe.causes import cause_dict, earliest, offer_causes
from jobs.observe.classify import (
    EVICTION_REASONS,
    PREEMPTION_REASON,
    AttemptFacts,
    StateFact,
    classify,
    earliest_evidence,
)
from jobs.observe.live import record_credentials as live_credentials
from jobs.observe.models import CaptureReason, FailureTag, PodAttempt
from rlark_site.foundation.bulk import upsert
from rlark_site.foundation.exceptions import ApplicationError

__all__ = [
    "LOG_TAIL_BYTES",
    "CaptureResult",
    "attempt_log",
    "capture_attempts",
    "capture_before_cancel",
    "capture_cluster",
    "run_flags",
]

logger = logging.getLogger(__name__)

LOG_TAIL_BYTES = 256 * 1024
_LOG_TRIES = ((4000, 2 * 1024 * 1024), (500, 1024 * 1024))  # (tail lines, max bytes)
_ENDED_PHASES = frozenset({"Succeeded", "Failed"})
_STUCK = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
_COMPARED = ("phase", "node", "restarts", "container_state", "reason", "exit_code",
             "previous_reason", "previous_exit_code")
LABEL_JOB = "rlinf.io/job"
_BATCH = 2000  # attempts per statement (their pod fields)
_EVIDENCE_BATCH = 50  # attempts per statement with log tails (each up to 2 x 256 KiB)
_NOTE_MAX = 2000
LABEL_TASK = "rlinf.io/task"
LABEL_INDEX = "rlinf.io/task-index"


def _time(text: str) -> datetime | None:
    return parse_datetime(text) if text else None


def _replica(pod: PodInfo) -> int:
    index = pod.labels.get(LABEL_INDEX, "")
    if index.isdecimal():
        return int(index)
    tail = pod.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdecimal() else 0


def _fields(pod: PodInfo) -> dict[str, Any]:
    """The attempt's fields that come from the pod object itself."""
    current, previous = pod.current, pod.previous
    return {
        "task": pod.labels.get(LABEL_TASK, ""),
        "replica": _replica(pod),
        "pod_name": pod.name,
        "node": pod.node,
        "phase": pod.phase,
        "pod_created_at": _time(pod.created_at),
        "started_at": _time(pod.started_at),
        "finished_at": _time(current.finished_at),
        "restarts": pod.restarts,
        "container_state": current.state,
        "reason": current.reason[:255],
        "message": current.message,
        "exit_code": current.exit_code,
        "previous_reason": previous.reason[:255],
        "previous_exit_code": previous.exit_code,
    }


def _ended(pod: PodInfo) -> bool:
    return (pod.phase in _ENDED_PHASES or pod.current.state == "terminated"
            or pod.restarts > 0 or pod.current.reason in _STUCK)


def _changed(attempt: Any, fields: dict[str, Any]) -> bool:
    """Whether the pod differs from its kept attempt (a `PodAttempt` or a row of `_kept`)."""
    return attempt is None or any(getattr(attempt, key) != fields[key] for key in _COMPARED)


def _tail(text: str) -> str:
    """The last `LOG_TAIL_BYTES` of `text`, starting at a line when it was cut."""
    data = text.encode()
    if len(data) <= LOG_TAIL_BYTES:
        return text
    cut = data[-LOG_TAIL_BYTES:]
    newline = cut.find(b"\n")
    return cut[newline + 1:].decode(errors="replace") if newline >= 0 else \
        cut.decode(errors="replace")


class _Budget:
    """Time left for a capture's cluster calls (None: each call has the gateway timeout)."""

    def __init__(self, seconds: float | None) -> None:
        self.until = None if seconds is None else time.monotonic() + seconds

    def timeout(self) -> float:
        """The timeout of the next call; `_OutOfTime` when the budget is spent."""
        if self.until is None:
            return conf.kube_timeout()
        left = self.until - time.monotonic()
        if left <= 0.05:
            raise _OutOfTime
        return min(conf.kube_timeout(), left)


class _OutOfTime(Exception):
    pass


@dataclass(frozen=True)
class _Log:
    """A container log's kept tail (without the kubelet's timestamps) and each of its lines'
    time (split at `\\n`, as the kubelet stamps them)."""

    text: str = ""
    times: tuple[datetime | None, ...] = ()

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")[:len(self.times)]


def _unstamped(text: str) -> _Log:
    """A log read with `timestamps=true` as its tail without the stamps, and the times."""
    pieces = text.split("\n")
    ended = pieces[-1] == ""
    if ended:
        pieces.pop()
    pairs = [split_stamp(piece) for piece in pieces]
    plain = "\n".join(line for _at, line in pairs) + ("\n" if ended and pairs else "")
    kept = _tail(plain)
    count = kept.count("\n") + (0 if kept.endswith("\n") or not kept else 1)
    return _Log(kept, tuple(at for at, _line in pairs[len(pairs) - count:]))


def _read_log(credentials: Credentials, namespace: str, pod: str, *, previous: bool,
              budget: _Budget) -> _Log:
    """The end of a container's log (empty when it has none), bounded in lines and bytes,
    read with timestamps (so each line's time is known) and kept without them."""
    for tail_lines, max_bytes in _LOG_TRIES:
        try:
            log = read_pod_log(credentials=credentials, namespace=namespace, name=pod,
                               tail_lines=tail_lines, previous=previous, max_bytes=max_bytes,
                               timestamps=True, timeout=budget.timeout())
        except (BadRequest, NotFound):
            return _Log()
        if not log.truncated:
            return _unstamped(log.text)
    return _unstamped(log.text)


def _evidence(credentials: Credentials, namespace: str, pod: PodInfo,
              budget: _Budget) -> dict[str, Any]:
    """Events and log tails of one pod, classified."""
    current = _read_log(credentials, namespace, pod.name, previous=False, budget=budget)
    previous = _read_log(credentials, namespace, pod.name, previous=True,
                         budget=budget) if pod.restarts else _Log()
    events = list_events(credentials=credentials, namespace=namespace, involved_name=pod.name,
                         involved_kind="Pod", timeout=budget.timeout(), attempts=1)
    return {
        "pod_events": [asdict(event) for event in reversed(events)],
        "log_tail": zlib.compress(current.text.encode()),
        "previous_log_tail": zlib.compress(previous.text.encode()),
        "logs_captured": True,
        **_classification(pod, previous, current, events),
    }


def _at(text: str) -> datetime | None:
    try:
        return _time(text)
    except ValueError:
        return None


def pod_state_facts(pod: PodInfo, events: Sequence[EventInfo] = ()) -> list[StateFact]:
    """What the pod's state and events say happened to it, each with its time: an OOM kill
    (the container's end), an image that cannot be pulled (the first pull failure event, else
    the pod's start), an eviction or a preemption (the `DisruptionTarget` condition, the
    pod's `Evicted` status, the kubelet's `Evicted` or the scheduler's `Preempted` event)."""
    facts: list[StateFact] = []
    for container in (pod.previous, pod.current):
        if container.reason == "OOMKilled":
            facts.append(StateFact(FailureTag.OOM, "OOMKilled", _at(container.finished_at)))
    waiting = pod.current.reason
    if waiting in {"ImagePullBackOff", "ErrImagePull", "InvalidImageName"}:
        failed = [e for e in events if e.reason in ("Failed", "InspectFailed")]
        at = min((t for t in (_at(e.first_at) for e in failed) if t), default=None)
        text = f"{waiting}: {pod.current.message}" if pod.current.message else waiting
        facts.append(StateFact(FailureTag.IMAGE_PULL, text[:500],
                               at or _at(pod.started_at) or _at(pod.created_at)))
    disruption = pod.disruption
    if disruption is not None and (disruption.reason == PREEMPTION_REASON
                                   or disruption.reason in EVICTION_REASONS):
        tag = FailureTag.PREEMPTED if disruption.reason == PREEMPTION_REASON else \
            FailureTag.EVICTED
        facts.append(StateFact(tag, (disruption.message or disruption.reason)[:500],
                               _at(disruption.at)))
    if pod.reason == "Evicted":
        facts.append(StateFact(FailureTag.EVICTED, (pod.message or pod.reason)[:500],
                               (_at(disruption.at) if disruption else None)
                               or _at(pod.current.finished_at)))
    for event in events:
        if event.reason in ("Preempted", "Evicted"):
            tag = FailureTag.PREEMPTED if event.reason == "Preempted" else FailureTag.EVICTED
            facts.append(StateFact(tag, (event.message or event.reason)[:500],
                                   _at(event.first_at)))
    return facts


def _classification(pod: PodInfo, previous: _Log, current: _Log,
                    events: Sequence[EventInfo] = ()) -> dict[str, Any]:
    """The attempt's tag and evidence (columns), and its earliest evidence (`_cause`, not a
    column: the capture offers it as the run's cause)."""
    facts = AttemptFacts(
        phase=pod.phase, reasons=(pod.current.reason, pod.previous.reason),
        exit_codes=(pod.current.exit_code, pod.previous.exit_code), restarts=pod.restarts,
        lines=[*previous.lines, *current.lines], line_times=(*previous.times, *current.times),
        states=pod_state_facts(pod, events),
    )
    result = classify(facts)
    found = earliest_evidence(facts)
    return {"failure_tag": result.tag, "failure_evidence": result.evidence,
            "_cause": None if found is None else cause_dict(found, pod=pod.name,
                                                            found_at=timezone.now())}


@dataclass
class _Pod:
    """One listed pod of a run and what the capture does with it."""

    record: RunRecord
    pod: PodInfo
    attempt: Any  # the kept attempt's compared columns (a row of `_kept`), None when new
    fields: dict[str, Any]
    final: bool


@dataclass
class CaptureResult:
    """Attempts written, and what could not be read (empty when nothing was missed)."""

    written: int = 0
    missed: list[str] = field(default_factory=list)


_KEPT_ONLY = ("run_record_id", "pod_uid", "logs_captured", *_COMPARED)
_POD_FIELDS = ("task", "replica", "pod_name", "node", "phase", "pod_created_at", "started_at",
               "finished_at", "restarts", "container_state", "reason", "message", "exit_code",
               "previous_reason", "previous_exit_code", "captured_at")
_CLASSIFIED = ("failure_tag", "failure_evidence")
_EVIDENCE = ("pod_events", "log_tail", "previous_log_tail", "logs_captured", *_CLASSIFIED,
             "capture_reason")


def _kept(records: Sequence[RunRecord]) -> dict[tuple[int, str], Any]:
    """The attempts already kept for these runs, in one query: the compared columns only, as
    named rows (not model instances: a pass reads one per pod)."""
    rows = PodAttempt.objects.filter(run_record__in=[r.pk for r in records]).values_list(
        *_KEPT_ONLY, named=True).order_by()  # unordered: the model's order joins the runs
    return {(row.run_record_id, row.pod_uid): row for row in rows}


def _wants_evidence(item: _Pod) -> bool:
    attempt = item.attempt
    return (item.final or _ended(item.pod)) and (
        attempt is None or not attempt.logs_captured or _changed(attempt, item.fields))


def _write(rows: list[dict[str, Any]], fields: Sequence[str], *, batch: int) -> None:
    """Insert or update these attempts by (run, pod UID), `fields` on conflict: one statement
    per `batch` rows (`rlark_site.foundation.bulk.upsert`, the columns as arrays)."""
    for start in range(0, len(rows), batch):
        upsert(PodAttempt, rows[start:start + batch], unique=("run_record_id", "pod_uid"),
               update=fields)


def _row(item: _Pod, now: datetime) -> dict[str, Any]:
    return {"run_record_id": item.record.pk, "pod_uid": item.pod.uid, **item.fields,
            "captured_at": now}


def _capture(credentials: Credentials, namespace: str, items: Sequence[_Pod], *,
             budget: _Budget, reasons: Mapping[int, str], result: CaptureResult) -> None:
    """Read the evidence of the pods that need it, then write every changed attempt in bulk.

    A pod whose reads fail (cluster error, or the budget spent) is written with what its
    listing says; the failure is noted in `result` and the reads stop for this namespace
    (the cluster is in trouble; a later pass reads again while the run is active).
    """
    now = timezone.now()
    with_evidence: list[dict[str, Any]] = []
    classified: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []
    reading = True
    for item in items:
        if reading and _wants_evidence(item):
            try:
                with_evidence.append({**_row(item, now), **_evidence(
                    credentials, namespace, item.pod, budget),
                    "capture_reason": reasons[item.record.pk]})
                continue
            except (KubeError, _OutOfTime) as exc:
                reading = False
                what = _("time ran out") if isinstance(exc, _OutOfTime) else str(exc)
                result.missed.append(
                    _("logs and events of pod %(pod)s and later ones not read: %(why)s")
                    % {"pod": item.pod.name, "why": what})
        if not _changed(item.attempt, item.fields):
            continue
        row = _row(item, now)
        if item.attempt is None or not item.attempt.logs_captured:
            row.update(_classification(item.pod, _Log(), _Log()))
            classified.append(row)
        else:
            plain.append(row)
    causes = _causes([*with_evidence, *classified])
    if with_evidence or classified or plain:
        with transaction.atomic():
            _write(with_evidence, (*_POD_FIELDS, *_EVIDENCE), batch=_EVIDENCE_BATCH)
            _write(classified, (*_POD_FIELDS, *_CLASSIFIED), batch=_BATCH)
            _write(plain, _POD_FIELDS, batch=_BATCH)
            offer_causes(causes)
    result.written += len(with_evidence) + len(classified) + len(plain)


def _causes(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The earliest cause each run's rows found (taken out of the rows: not a column)."""
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        cause = row.pop("_cause", None)
        if cause:
            found[row["run_record_id"]].append(cause)
    return {pk: best for pk, causes in found.items() if (best := earliest(causes))}


def _items(records: Sequence[RunRecord], pods: Iterable[PodInfo],
           finals: set[int]) -> list[_Pod]:
    kept = _kept(records)
    by_job = {record.job_name: record for record in records}
    items = []
    for pod in pods:
        record = by_job.get(pod.labels.get(LABEL_JOB, ""))
        if record is not None:
            items.append(_Pod(record, pod, kept.get((record.pk, pod.uid)), _fields(pod),
                              record.pk in finals))
    return items


def _note_incomplete(records: Iterable[RunRecord], missed: Sequence[str]) -> None:
    if missed:
        text = "; ".join(missed)[:_NOTE_MAX]
        RunRecord.objects.filter(pk__in=[r.pk for r in records]).update(capture_incomplete=text)


def capture_attempts(record: RunRecord, *, credentials: Credentials, pods: Iterable[PodInfo],
                     reason: CaptureReason, final: bool = False,
                     budget_seconds: float | None = None) -> CaptureResult:
    """Record every pod of one run; read the evidence of those that ended (of all when
    `final`) unless already read for that state."""
    result = CaptureResult()
    items = _items([record], pods, {record.pk} if final else set())
    _capture(credentials, record.namespace, items, budget=_Budget(budget_seconds),
             reasons={record.pk: reason}, result=result)
    return result


def capture_before_cancel(record: RunRecord) -> CaptureResult:
    """Capture every pod of a run about to be cancelled, before its Job is deleted.

    Bounded: one pods list, then each pod's logs and events, every call within the gateway
    timeout and all within `conf.cancel_capture_seconds()`. Whatever could not be read is
    noted on the record (`capture_incomplete`); the cancel goes on either way.
    """
    budget = _Budget(conf.cancel_capture_seconds())
    result = CaptureResult()
    try:
        credentials = live_credentials(record)
        pods = list_pods(credentials=credentials, namespace=record.namespace,
                         label_selector=f"{LABEL_JOB}={record.job_name}",
                         timeout=budget.timeout(), attempts=1)
    except (KubeError, ApplicationError, _OutOfTime) as exc:
        why = _("time ran out") if isinstance(exc, _OutOfTime) else (
            exc.message if isinstance(exc, ApplicationError) else str(exc))
        result.missed.append(_("the pods could not be listed: %(why)s") % {"why": why})
    else:
        items = _items([record], pods, {record.pk})
        _capture(credentials, record.namespace, items, budget=budget,
                 reasons={record.pk: CaptureReason.CANCELLED}, result=result)
    _note_incomplete([record], result.missed)
    return result


def capture_cluster(credentials: Credentials, records: Sequence[RunRecord], *,
                    final_states: Iterable[str],
                    listed: dict[str, list[PodInfo]] | None = None) -> int:
    """Capture the attempts of these runs of one cluster; how many attempts were written.

    One pods list per namespace (paged), one query for the kept attempts and one for the
    runs' states; a run whose state (read now) is in `final_states` is captured in full.
    A namespace whose pods cannot be listed is skipped until the next pass; runs that ended
    in this pass and could not be read in full say so in their record. `listed`, when given,
    gets each listed namespace's pods (the Pending explanations read them: no second list).
    """
    states = dict(RunRecord.objects.filter(pk__in=[r.pk for r in records])
                  .values_list("pk", "state"))
    finals = {pk for pk, state in states.items() if state in set(final_states)}
    by_namespace: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        by_namespace[record.namespace].append(record)
    written = 0
    for namespace, members in by_namespace.items():
        result = CaptureResult()
        try:
            pods = list_pods(credentials=credentials, namespace=namespace,
                             label_selector=LABEL_JOB, page_size=conf.capture_page_size(),
                             max_items=conf.capture_max_pods(), timeout=conf.kube_timeout(),
                             attempts=1)
        except KubeError as exc:
            logger.info("attempt capture: namespace %s unreadable: %s", namespace, exc)
            result.missed.append(_("the pods could not be listed: %(why)s") % {"why": exc})
        else:
            if listed is not None:
                listed[namespace] = pods
            reasons = {r.pk: CaptureReason.JOB_ENDED if r.pk in finals
                       else CaptureReason.POD_ENDED for r in members}
            _capture(credentials, namespace, _items(members, pods, finals),
                     budget=_Budget(None), reasons=reasons, result=result)
            written += result.written
        _note_incomplete([r for r in members if r.pk in finals], result.missed)
    return written


def run_state(record: RunRecord) -> str:
    """The run's state as stored now."""
    return str(RunRecord.objects.filter(pk=record.pk).values_list("state", flat=True).get())


def run_flags(record: RunRecord) -> tuple[str, bool]:
    """The run's state and Pending flag as stored now."""
    state, flagged = RunRecord.objects.filter(pk=record.pk).values_list(
        "state", "pending_flagged").get()
    return str(state), bool(flagged)


def attempt_log(data: bytes | memoryview) -> str:
    """A kept log tail, decompressed."""
    raw = bytes(data)
    return zlib.decompress(raw).decode(errors="replace") if raw else ""
