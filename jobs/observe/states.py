"""Live state everywhere: the state badges of jobs, re-sent out of band while they can change.

One request per page and refresh interval answers for every job the page shows (at most
`MAX_NAMES`), from the database only: the status sync is what reads the clusters.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from jobs.drafts.selectors import job_list_for_user
from jobs.models import Job, JobState
from jobs.observe import conf

MAX_NAMES = 100
LIVE_STATES = frozenset({JobState.QUEUED, JobState.SUBMITTING, JobState.PENDING,
                         JobState.RUNNING})


def poller_context(jobs: list[Job], *, style: str) -> dict[str, Any]:
    """What `_state_poller.html` needs: the names of the jobs that may still change."""
    return {"live_names": [job.name for job in jobs if job.state in LIVE_STATES][:MAX_NAMES],
            "style": style, "refresh": max(1, round(conf.refresh_interval()))}


@login_required
@require_GET
def job_states(request: HttpRequest) -> HttpResponse:
    """The state badges of the named jobs of the user's teams, as out-of-band swaps."""
    names = request.GET.getlist("name")[:MAX_NAMES]
    style = "page" if request.GET.get("style") == "page" else "list"
    jobs = job_list_for_user(request.user).filter(name__in=names)
    return render(request, "jobs/observe/_states.html", {"jobs": jobs, "style": style})
