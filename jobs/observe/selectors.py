"""Reads for live observation, scoped to the user's teams."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from jobs.drafts.selectors import job_get_for_user
from jobs.models import PodAttempt, RunRecord
from jobs.observe.capture import attempt_log
from rlark_site.foundation.exceptions import NotFoundError


def run_record_for_job(user: Any, name: str) -> RunRecord:
    """The run record of one of the user's teams' jobs; 404 when the job is missing, another
    team's, or not submitted."""
    job = job_get_for_user(user, name)
    record = RunRecord.objects.filter(job=job).select_related("job").first()
    if record is None:
        raise NotFoundError(_("The job has not been submitted."))
    return record


def pod_attempts_of(record: RunRecord) -> list[PodAttempt]:
    """The run's pod attempts by task, replica, then age."""
    return list(PodAttempt.objects.filter(run_record=record))


def attempt_rows(record: RunRecord) -> list[dict[str, Any]]:
    """Each attempt with its log tails decompressed, for pages and the API."""
    return [
        {"attempt": attempt, "log_tail": attempt_log(attempt.log_tail),
         "previous_log_tail": attempt_log(attempt.previous_log_tail)}
        for attempt in pod_attempts_of(record)
    ]
