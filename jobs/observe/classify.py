"""A small failure classifier over a pod attempt's container reasons and log lines.

Pure: the first rule that matches decides, in this order (specific evidence before generic):
1. a container ended `OOMKilled` -> `oom`;
2. a container waits on `ImagePullBackOff`, `ErrImagePull` or `InvalidImageName` -> `image_pull`;
3. log lines, newest first: "CUDA out of memory" / `torch.cuda.OutOfMemoryError` ->
   `cuda_oom`; NCCL timeouts (an NCCL line saying timeout / timed out, or the NCCL watchdog's
   "collective operation timeout") -> `nccl_timeout`; a Ray actor's death (`ActorDiedError`,
   `RayActorError`, "The actor died") -> `ray_actor_died`; the kernel's or kubelet's OOM kill
   ("Out of memory: Killed process", `OOMKilled`) -> `oom`;
4. a container in `CrashLoopBackOff` -> `crash_loop`;
5. any other failed attempt (phase Failed, a non-zero exit, a restart) -> `unknown`;
   anything else is no failure ("").
Lines are matched after cutting them to 4096 characters, with patterns that have no nested
quantifiers, so a hostile log line cannot make matching slow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.observe.models import FailureTag

_LINE_MAX = 4096
_IMAGE_PULL = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
_LOG_RULES: tuple[tuple[FailureTag, re.Pattern[str]], ...] = (
    (FailureTag.CUDA_OOM, re.compile(r"CUDA out of memory|torch\.cuda\.OutOfMemoryError")),
    (FailureTag.NCCL_TIMEOUT, re.compile(
        r"NCCL[^\n]{0,400}?\b(?:timeout|timed out)|collective operation timeout", re.IGNORECASE)),
    (FailureTag.RAY_ACTOR_DIED, re.compile(r"ActorDiedError|RayActorError|The actor died")),
    (FailureTag.OOM, re.compile(r"Out of memory: Kill(?:ed)? process|\bOOMKilled\b")),
)


@dataclass(frozen=True)
class AttemptFacts:
    """What the classifier looks at."""

    phase: str
    reasons: Sequence[str]  # current and previous container reasons
    exit_codes: Sequence[int | None]
    restarts: int
    lines: Sequence[str]  # log lines, oldest first (current container last)


@dataclass(frozen=True)
class Classification:
    tag: FailureTag
    evidence: str  # the reason or the log line that decided


def _failed(facts: AttemptFacts) -> bool:
    nonzero = any(code not in (None, 0) for code in facts.exit_codes)
    return facts.phase == "Failed" or nonzero or facts.restarts > 0


def _from_logs(lines: Sequence[str]) -> Classification | None:
    for line in reversed(lines):
        text = line[:_LINE_MAX]
        for tag, pattern in _LOG_RULES:
            if pattern.search(text):
                return Classification(tag, text.strip()[:500])
    return None


def classify(facts: AttemptFacts) -> Classification:
    """The attempt's failure tag and the evidence for it."""
    if "OOMKilled" in facts.reasons:
        return Classification(FailureTag.OOM, "OOMKilled")
    pulled = next((r for r in facts.reasons if r in _IMAGE_PULL), None)
    if pulled is not None:
        return Classification(FailureTag.IMAGE_PULL, pulled)
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
