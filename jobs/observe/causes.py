"""A run's `cause` (SPEC 16): `{tag, evidence, pod, at}`, the earliest evidence of what went
wrong across every role's captured log tail and pod state, and the Head Task's log as the
progress pass reads it.

Earliest, not newest nor most specific: when one worker of an RLinf run fails, RLinf tears the
others down (`ray.kill`), so every role prints its own error after the first one (an
`ActorDiedError` "killed by ray.kill" on the Actor minutes after the Rollout's NCCL timeout).

Two writers find evidence (the attempt capture of the status pass, the progress pass), in
different tasks: each offers what it found with `offer_causes`, and a run's stored cause only
changes to an earlier one (a conditional update per run that found something, so concurrent
writers cannot replace an earlier cause by a later one). A pass that found nothing writes
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from django.db.models import DateTimeField, Q
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from jobs.models import RunRecord
from jobs.observe.classify import (
    Evidence,
    evidence_text,
    first_tagged_line,
    may_name_a_cause,
)
from jobs.observe.models import FailureTag

__all__ = ["cause_dict", "earliest", "found_in_stamped_log", "offer_causes"]


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def cause_dict(evidence: Evidence, *, pod: str, found_at: datetime) -> dict[str, Any]:
    """The stored shape; evidence without a time of its own is dated when it was found."""
    return {"tag": str(evidence.tag), "evidence": evidence.evidence, "pod": pod,
            "at": _stamp(evidence.at or found_at)}


def earliest(causes: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The earliest of these causes (ties: the first given)."""
    best: dict[str, Any] | None = None
    for cause in causes:
        if cause and (best is None or cause["at"] < best["at"]):
            best = cause
    return best


def found_in_stamped_log(text: str, *, pod: str, found_at: datetime) -> dict[str, Any] | None:
    """The first tagged line of a log read with `timestamps=true`, as a cause."""
    from jobs.core.progress import split_stamp

    if not may_name_a_cause(text):
        return None
    pairs = [split_stamp(raw) for raw in text.split("\n")]
    found = first_tagged_line([line for _at, line in pairs])
    if found is None:
        return None
    index, tag = found
    moment, line = pairs[index]
    return cause_dict(Evidence(FailureTag(tag), evidence_text(line), moment), pod=pod,
                      found_at=found_at)


def offer_causes(found: Mapping[int, dict[str, Any]]) -> int:
    """Store each run's cause where it is earlier than the stored one (or none is stored);
    how many runs changed."""
    changed = 0
    for pk, cause in found.items():
        at = datetime.fromisoformat(cause["at"].replace("Z", "+00:00"))
        changed += RunRecord.objects.filter(pk=pk).annotate(
            cause_at=Cast(KT("cause__at"), DateTimeField())).filter(
            Q(cause={}) | Q(cause_at__gt=at)).update(cause=cause)
    return changed


def cause_label(cause: Mapping[str, Any] | None) -> str:
    """The tag's name in the active language ("" without a cause)."""
    if not cause:
        return ""
    tag = str(cause.get("tag") or "")
    return str(FailureTag(tag).label) if tag in FailureTag.values else tag
