"""Keep each pod attempt of a run in its record, so it outlives the pods.

The status sync calls `capture_cluster` once per cluster and pass, after it has observed the
Jobs: one pods list per namespace (label `rlinf.io/job`) covers every active run there. Each
pod becomes (or updates) a `PodAttempt` row: UID, node, phase times, container states. When
a pod has ended or restarted or is stuck (`CrashLoopBackOff`, image pull errors) and that is
new since the last capture, and for every pod once the run has ended or is cancelled, its
events and the last `LOG_TAIL_BYTES` of the current and previous container's logs are read
(bounded) and kept compressed, and the attempt is classified (`jobs.observe.classify`).
"""

from __future__ import annotations

import logging
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.k8s import (
    BadRequest,
    Credentials,
    KubeError,
    NotFound,
    PodInfo,
    list_events,
    list_pods,
    read_pod_log,
)
from jobs.models import RunRecord
from jobs.observe import conf
from jobs.observe.classify import AttemptFacts, classify
from jobs.observe.models import CaptureReason, PodAttempt

__all__ = [
    "LOG_TAIL_BYTES",
    "attempt_log",
    "capture_attempts",
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


def _changed(attempt: PodAttempt | None, fields: dict[str, Any]) -> bool:
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


def _read_log(credentials: Credentials, namespace: str, pod: str, *, previous: bool) -> str:
    """The end of a container's log ("" when it has none), bounded in lines and bytes."""
    for tail_lines, max_bytes in _LOG_TRIES:
        try:
            log = read_pod_log(credentials=credentials, namespace=namespace, name=pod,
                               tail_lines=tail_lines, previous=previous, max_bytes=max_bytes,
                               timeout=conf.kube_timeout())
        except (BadRequest, NotFound):
            return ""
        if not log.truncated:
            return _tail(log.text)
    return _tail(log.text)


def _evidence(credentials: Credentials, namespace: str, pod: PodInfo) -> dict[str, Any]:
    """Events and log tails of one pod, classified."""
    current = _read_log(credentials, namespace, pod.name, previous=False)
    previous = _read_log(credentials, namespace, pod.name, previous=True) if pod.restarts else ""
    events = list_events(credentials=credentials, namespace=namespace, involved_name=pod.name,
                         involved_kind="Pod", timeout=conf.kube_timeout(), attempts=1)
    lines = [*previous.splitlines(), *current.splitlines()]
    return {
        "pod_events": [asdict(event) for event in reversed(events)],
        "log_tail": zlib.compress(current.encode()),
        "previous_log_tail": zlib.compress(previous.encode()),
        "logs_captured": True,
        **_classification(pod, lines),
    }


def _classification(pod: PodInfo, lines: Sequence[str]) -> dict[str, Any]:
    facts = AttemptFacts(
        phase=pod.phase, reasons=(pod.current.reason, pod.previous.reason),
        exit_codes=(pod.current.exit_code, pod.previous.exit_code), restarts=pod.restarts,
        lines=lines,
    )
    result = classify(facts)
    return {"failure_tag": result.tag, "failure_evidence": result.evidence}


def capture_attempts(record: RunRecord, *, credentials: Credentials, pods: Iterable[PodInfo],
                     reason: CaptureReason, final: bool = False) -> int:
    """Record every pod of the run; read the evidence of those that ended (of all when
    `final`) unless already read for that state. Returns how many attempts were written."""
    existing = {a.pod_uid: a for a in PodAttempt.objects.filter(run_record=record)}
    written = 0
    for pod in pods:
        attempt, fields = existing.get(pod.uid), _fields(pod)
        changed = _changed(attempt, fields)
        wants_evidence = (final or _ended(pod)) and (
            changed or attempt is None or not attempt.logs_captured)
        if not changed and not wants_evidence:
            continue
        if wants_evidence:
            fields.update(_evidence(credentials, record.namespace, pod), capture_reason=reason)
        elif attempt is None or not attempt.logs_captured:
            fields.update(_classification(pod, ()))
        with transaction.atomic():
            PodAttempt.objects.update_or_create(
                run_record=record, pod_uid=pod.uid,
                defaults={**fields, "captured_at": timezone.now()},
            )
        written += 1
    return written


def capture_cluster(credentials: Credentials, records: Sequence[RunRecord], *,
                    final_states: Iterable[str]) -> int:
    """Capture the attempts of these runs of one cluster: one pods list per namespace.

    A run whose state (read now) is in `final_states` is captured in full. A namespace whose
    pods cannot be listed is skipped until the next pass.
    """
    finals = set(final_states)
    by_namespace: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        by_namespace[record.namespace].append(record)
    written = 0
    for namespace, members in by_namespace.items():
        try:
            pods = list_pods(credentials=credentials, namespace=namespace,
                             label_selector=LABEL_JOB, timeout=conf.kube_timeout(), attempts=1)
            by_job: dict[str, list[PodInfo]] = defaultdict(list)
            for pod in pods:
                by_job[pod.labels.get(LABEL_JOB, "")].append(pod)
            for record in members:
                final = run_state(record) in finals
                written += capture_attempts(
                    record, credentials=credentials, pods=by_job.get(record.job_name, ()),
                    reason=CaptureReason.JOB_ENDED if final else CaptureReason.POD_ENDED,
                    final=final,
                )
        except KubeError as exc:
            logger.info("attempt capture: namespace %s unreadable: %s", namespace, exc)
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
