"""Template filters that show stored values (phases, outcomes, checklist answers) to people.

Stored values stay what they are (Kubernetes phases, outcome codes, English messages written by
a worker); these filters translate them at display time, in the page's language.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template
from django.utils.translation import gettext

from clusters.models import VerificationState
from jobs.models import AttemptOutcome, JobState, SubmissionState
from jobs.records.checklist import ChecklistAnswer, checklist_answers
from jobs.records.lifecycle import PHASE_STATES
from jobs.records.pending import pending_view
from jobs.records.status import GONE_PHASE

register = template.Library()


@register.filter
def phase_label(phase: str) -> str:
    """A Kubernetes phase (Pending, Running, ...) in the page's language."""
    if phase in PHASE_STATES:
        return _label(JobState, PHASE_STATES[phase])
    return gettext("gone") if phase == GONE_PHASE else phase


def _label(choices: Any, value: str) -> str:
    return str(choices(value).label) if value in choices.values else value


@register.filter
def outcome_label(outcome: str) -> str:
    return _label(AttemptOutcome, outcome)


@register.filter
def submission_label(state: str) -> str:
    return _label(SubmissionState, state)


@register.filter
def verification_label(state: str) -> str:
    return _label(VerificationState, state)


@register.filter
def stored_message(message: str) -> str:
    """A message a worker stored in English, translated when the catalog has it; other text
    (a cluster's own words) as it is."""
    return gettext(message) if message else message


@register.filter
def answers_in_order(troubleshooting: Mapping[str, Any] | None) -> list[ChecklistAnswer]:
    return checklist_answers(troubleshooting or {})


@register.filter
def cause_label(cause: Mapping[str, Any] | None) -> str:
    """A run's cause tag (SPEC 16) by its name in the page's language."""
    from jobs.observe.causes import cause_label as label

    return label(cause)


@register.filter
def pending_explained(run: Any) -> dict[str, Any] | None:
    """A Pending run's `pending` (`jobs.records.pending.pending_view`: the facts and the
    sentence in the page's language); None when the run is not Pending or has no facts."""
    if run is None or getattr(run, "state", None) != JobState.PENDING:
        return None
    facts = getattr(run, "pending", None)
    return pending_view(facts if isinstance(facts, dict) else {})
