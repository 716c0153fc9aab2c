"""`{% page_state job %}`: a job's state badge that follows the job while it can change."""

from __future__ import annotations

from typing import Any

from django import template

from jobs.models import Job
from jobs.observe.states import poller_context

register = template.Library()


@register.inclusion_tag("jobs/observe/_page_state_live.html")
def page_state(job: Job) -> dict[str, Any]:
    return {"job": job, **poller_context([job], style="page")}
