"""A small failure classifier over a pod attempt's container reasons, pod state and log lines.

Pure: the first rule that matches decides the attempt's tag, in this order (specific evidence
before generic):
1. a container ended `OOMKilled` -> `oom`;
2. a container waits on `ImagePullBackOff`, `ErrImagePull` or `InvalidImageName` -> `image_pull`;
3. the pod was preempted by the scheduler (its `DisruptionTarget` condition's reason
   `PreemptionByScheduler`, or the scheduler's `Preempted` event) -> `preempted`; the kubelet
   evicted it (pod `status.reason` `Evicted`, an `Evicted` event, or another `DisruptionTarget`
   reason: the eviction API, the taint manager, the kubelet's termination) -> `evicted`;
4. log lines, **oldest first** (the first error is the cause: RLinf tears its workers down with
   `ray.kill` after the first one, and every later line is a consequence), each line by the
   first of `LOG_RULES` that matches it;
5. a container in `CrashLoopBackOff` -> `crash_loop`;
6. any other failed attempt (phase Failed, a non-zero exit, a restart) -> `unknown`;
   anything else is no failure ("").

`LOG_RULES` are taken from the messages the projects print (SPEC 16): PyTorch's
ProcessGroupNCCL watchdog (`Watchdog caught collective operation timeout`, `ProcessGroupNCCL's
watchdog got stuck`, `Heartbeat monitor timed out`), CUDA's allocator, Ray's memory monitor
(`... killed due to the node running low on memory`), Ray's node death (`marked dead`, `The
actor died because its node has died`), vLLM's `EngineDeadError` ("EngineCore encountered an
issue") and SGLang's `Scheduler hit an exception`, Ray's actor errors, the kernel's OOM kill.

Linear time: the patterns are RE2 (google-re2) with bounded repetitions, and lines are cut to
`LINE_MAX` characters before matching, so no log line can make matching slow.

`earliest_evidence` is what the run's `cause` is built from: of one attempt, its earliest
timed evidence (log line or pod state); `jobs.observe.causes` takes the earliest of a run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import re2

from jobs.observe.models import FailureTag

LINE_MAX = 4096
EVIDENCE_MAX = 500
_IMAGE_PULL = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
PREEMPTION_REASON = "PreemptionByScheduler"
"""`DisruptionTarget`'s reason when kube-scheduler preempts the pod
(`v1.PodReasonPreemptionByScheduler`)."""
EVICTION_REASONS = frozenset({"EvictionByEvictionAPI", "DeletionByTaintManager",
                              "TerminationByKubelet"})
"""The other `DisruptionTarget` reasons that take a running pod away (`DeletionByPodGC` is
the clean-up of a pod whose node is gone: not the cause)."""
KUEUE_PREEMPTION_REASON = "Preempted"
"""The Kueue Workload's `Evicted` reason when Kueue preempted it
(`kueue.WorkloadEvictedByPreemption`)."""


def _rule(text: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(text, options=options)


LOG_RULES: tuple[tuple[FailureTag, Any], ...] = (
    (FailureTag.NCCL_WATCHDOG, _rule(
        r"ProcessGroupNCCL's watchdog got stuck|Heartbeat monitor timed out")),
    (FailureTag.NCCL_TIMEOUT, _rule(
        r"Watchdog caught collective operation timeout|"
        r"(?i:NCCL[^\n]{0,400}?\b(?:timeout|timed out))")),
    (FailureTag.CUDA_OOM, _rule(
        r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory")),
    (FailureTag.HOST_OOM, _rule(r"due to the node running low on memory")),
    (FailureTag.NODE_DEAD, _rule(
        r"\bmarked dead\b|The actor died because its node has died")),
    (FailureTag.ROLLOUT_ENGINE, _rule(
        r"EngineDeadError|EngineCore encountered an issue|Scheduler hit an exception")),
    (FailureTag.RAY_ACTOR_DIED, _rule(
        r"ActorDiedError|RayActorError|The actor died|The actor is dead")),
    (FailureTag.OOM, _rule(r"Out of memory: Kill(?:ed)? process|\bOOMKilled\b")),
)
_ANY = _rule("|".join(f"(?:{rule.pattern})" for _tag, rule in LOG_RULES))


@dataclass(frozen=True)
class StateFact:
    """Evidence from the pod's state or its events (not its log), with when it happened."""

    tag: FailureTag
    evidence: str
    at: datetime | None


@dataclass(frozen=True)
class AttemptFacts:
    """What the classifier looks at."""

    phase: str
    reasons: Sequence[str]  # current and previous container reasons
    exit_codes: Sequence[int | None]
    restarts: int
    lines: Sequence[str]  # log lines, oldest first (current container last)
    line_times: Sequence[datetime | None] = ()  # each line's kubelet timestamp, when read
    states: Sequence[StateFact] = ()  # eviction and preemption (see `pod_state_facts`)


@dataclass(frozen=True)
class Classification:
    tag: FailureTag
    evidence: str  # the reason or the log line that decided


@dataclass(frozen=True)
class Evidence:
    tag: FailureTag
    evidence: str
    at: datetime | None


def may_name_a_cause(text: str) -> bool:
    """Whether any rule matches anywhere in `text` (one RE2 scan of a whole read: a read
    without any is not split into lines at all)."""
    return _ANY.search(text) is not None


def line_tag(line: str) -> FailureTag | None:
    """The tag of one log line (cut to `LINE_MAX`), or None."""
    text = line[:LINE_MAX]
    if _ANY.search(text) is None:
        return None
    return next(tag for tag, rule in LOG_RULES if rule.search(text) is not None)


def first_tagged_line(lines: Sequence[str]) -> tuple[int, FailureTag] | None:
    """The index and tag of the oldest line a rule matches."""
    for index, line in enumerate(lines):
        tag = line_tag(line)
        if tag is not None:
            return index, tag
    return None


def evidence_text(line: str) -> str:
    return line[:LINE_MAX].strip()[:EVIDENCE_MAX]


def _failed(facts: AttemptFacts) -> bool:
    nonzero = any(code not in (None, 0) for code in facts.exit_codes)
    return facts.phase == "Failed" or nonzero or facts.restarts > 0


def _from_logs(lines: Sequence[str]) -> Classification | None:
    found = first_tagged_line(lines)
    if found is None:
        return None
    index, tag = found
    return Classification(tag, evidence_text(lines[index]))


def _disruption(facts: AttemptFacts) -> StateFact | None:
    for tag in (FailureTag.PREEMPTED, FailureTag.EVICTED):
        fact = next((s for s in facts.states if s.tag == tag), None)
        if fact is not None:
            return fact
    return None


def classify(facts: AttemptFacts) -> Classification:
    """The attempt's failure tag and the evidence for it."""
    if "OOMKilled" in facts.reasons:
        return Classification(FailureTag.OOM, "OOMKilled")
    pulled = next((r for r in facts.reasons if r in _IMAGE_PULL), None)
    if pulled is not None:
        return Classification(FailureTag.IMAGE_PULL, pulled)
    disrupted = _disruption(facts)
    if disrupted is not None:
        return Classification(disrupted.tag, disrupted.evidence)
    from_logs = _from_logs(facts.lines) if _failed(facts) or "CrashLoopBackOff" in \
        facts.reasons else None
    if from_logs is not None:
        return from_logs
    if "CrashLoopBackOff" in facts.reasons:
        return Classification(FailureTag.CRASH_LOOP, "CrashLoopBackOff")
    if _failed(facts):
        reason = next((r for r in facts.reasons if r), "")
        return Classification(FailureTag.UNKNOWN, reason)
    return Classification(FailureTag.NONE, "")


def workload_eviction_evidence(reason: str, message: str, at: datetime | None) -> Evidence:
    """Kueue evicted the run's Workload (its `Evicted` condition): `preempted` when Kueue
    preempted it for another Workload, `evicted` for every other reason (an administrator's or
    Kueue's deactivation, a PodsReady timeout, an admission check, a stopped queue, node
    failures); the Workload's message is the evidence line, verbatim."""
    tag = FailureTag.PREEMPTED if reason == KUEUE_PREEMPTION_REASON else FailureTag.EVICTED
    return Evidence(tag, evidence_text(message or reason), at)


def earliest_evidence(facts: AttemptFacts) -> Evidence | None:
    """The attempt's earliest timed evidence of a cause: its first tagged log line (any
    attempt: a Running pod's log may name the cause of a stall) and its pod state facts
    (OOM kill, image pull, eviction, preemption, given in `states`); None without any.
    Evidence without a time sorts after every timed one."""
    candidates = list(facts.states)
    found = first_tagged_line(facts.lines)
    if found is not None:
        index, tag = found
        at = facts.line_times[index] if index < len(facts.line_times) else None
        candidates.append(StateFact(tag, evidence_text(facts.lines[index]), at))
    if not candidates:
        return None
    timed = [c for c in candidates if c.at is not None]
    best = min(timed, key=lambda c: c.at or datetime.max) if timed else candidates[0]
    return Evidence(best.tag, best.evidence, best.at)
