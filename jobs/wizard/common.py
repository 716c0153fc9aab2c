"""Helpers every wizard view shares: loading the draft, URLs, turning refusals into findings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.translation import gettext as _

from jobs.drafts.selectors import job_get_for_user
from jobs.models import Job, JobState
from jobs.wizard.fields import STEP_REVIEW, STEP_ROLES, STEP_WORKERS, FindingView, place_of
from rlark_site.foundation.exceptions import ApplicationError

__all__ = [
    "error_view",
    "job_page_url",
    "load_job",
    "refusal_findings",
    "run_record_url",
    "step_url",
]


def load_job(request: HttpRequest, name: str) -> Job:
    """The user's job by name; 404 when it is missing or another team's."""
    return job_get_for_user(request.user, name)


def is_draft(job: Job) -> bool:
    return job.state == JobState.DRAFT


def step_url(name: str, step: int, role: int | None = None) -> str:
    step = min(max(step, STEP_ROLES), STEP_REVIEW)
    url = reverse("jobs:wizard-step", kwargs={"name": name, "step": step})
    if step == STEP_WORKERS and role:
        url += f"?role={role}"
    return url


def job_page_url(name: str) -> str:
    """The page of a submitted job (status, first-run check)."""
    return reverse("jobs:job-detail", kwargs={"name": name})


def run_record_url(name: str) -> str:
    """The run record page of a submitted job."""
    return reverse("jobs:run-record", kwargs={"name": name})


def error_view(*, code: str, message: str, field: str | None,
               step: int | None = None) -> FindingView:
    """A refusal shown like a finding, next to `field` (``form.*`` codes are the form's own);
    without a field, at the top of `step` (the step that refused it)."""
    return FindingView(code=code, severity="error", message=message, role=None, field=field,
                       anchor="", place=place_of(field, code=code, step=step))


def refusal_findings(exc: ApplicationError, *, default_field: str | None,
                     step: int | None = None) -> list[FindingView]:
    """A service refusal as findings: the engine's findings it carries, else its message.
    One without a field (and no `default_field`) is placed at the top of `step`."""
    raw = exc.extra.get("findings")
    views = [
        error_view(code=str(item.get("code", "")), message=str(item.get("message", "")),
                   field=item.get("field") or default_field, step=step)
        for item in (raw if isinstance(raw, list) else [])
        if isinstance(item, Mapping)
    ]
    field = exc.extra.get("field")
    return views or [error_view(code="refused", message=exc.message,
                                field=str(field) if field else default_field, step=step)]


def form_error_views(errors: Mapping[str, Iterable[Any]], paths: Mapping[str, str], *,
                     step: int | None = None) -> list[FindingView]:
    """A Django form's errors as findings placed on the fields they concern; the rest (the
    form's own, ``__all__``, unless `paths` places it) at the top of `step`."""
    views = []
    for name, messages in errors.items():
        for message in messages:
            views.append(error_view(code=f"form.{name}", message=str(message),
                                    field=paths.get(name), step=step))
    return views


def not_a_draft_message() -> str:
    return _("This job was submitted; its draft can no longer be changed.")
