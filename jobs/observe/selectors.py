"""Reads for live observation, scoped to the user's teams."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from jobs.drafts.selectors import job_get_for_user
from jobs.models import RunRecord
from rlark_site.exceptions import NotFoundError


def run_record_for_job(user: Any, name: str) -> RunRecord:
    """The run record of one of the user's teams' jobs; 404 when the job is missing, another
    team's, or not submitted."""
    job = job_get_for_user(user, name)
    record = RunRecord.objects.filter(job=job).select_related("job").first()
    if record is None:
        raise NotFoundError(_("The job has not been submitted."))
    return record
