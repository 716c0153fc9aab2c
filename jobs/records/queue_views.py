"""The admin queue's second tab: deployment parameters waiting for a platform admin's
confirmation (`/jobs/deployment-parameters/queue/`), beside the selector verifications of
`clusters:queue`. Each record shows what the admin confirms: its roles, notes and referenced
verifications, the job it is asked for, and the findings of that job about these parameters
(mismatches, unreferenced verifications, staleness). Confirm or reject decides without
leaving the page, as the selector verifications' panels do: with htmx the post answers that
record's panel re-rendered; without JavaScript it posts and redirects back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from jobs.context import parameters_findings_of
from jobs.models import DeploymentParameters
from jobs.records import confirmation, selectors
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import require_platform_admin

PAGE_SIZE = 25
STATE_LABELS = {
    "pending": gettext_lazy("pending"), "confirmed": gettext_lazy("confirmed"),
    "rejected": gettext_lazy("rejected"), "stale": gettext_lazy("stale"),
    "all": gettext_lazy("all"),
}


# The confirmation's own state is shown on the panel; these findings are what it decides on.
_STATE_CODES = {"deployment_parameters.unconfirmed", "deployment_parameters.confirmation_stale"}
PANEL_TEMPLATE = "jobs/records/_parameters_panel.html"


def _items(records: Iterable[DeploymentParameters]) -> list[dict[str, Any]]:
    """What each record's panel shows, in a number of queries that does not grow with the
    records: the confirmation's status (`confirmation_statuses`), and what the job it is asked
    for is told about these parameters, mismatches and unreferenced verifications
    (`parameters_findings_of`: the findings engine's rules, for every record at once)."""
    records = list(records)
    jobs = confirmation.confirmation_jobs(records)
    statuses = confirmation.confirmation_statuses(records, jobs=jobs)
    by_pk, keys = jobs
    linked = [(r, by_pk[r.confirmation_job_id]) for r in records
              if r.confirmation_job_id in by_pk
              and by_pk[r.confirmation_job_id].deployment_parameters_id == r.pk]
    findings = parameters_findings_of(linked, team_keys=keys)
    return [{
        "record": r, "status": statuses[r.pk],
        "findings": [f.as_dict() for f in findings.get(r.pk, []) if f.code not in _STATE_CODES],
        "verifications": list(r.verifications.all()),
    } for r in records]


@login_required
@require_GET
def parameters_queue(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request.user)
    state = request.GET.get("state", "pending")
    state = state if state in selectors.QUEUE_STATES else "pending"
    records = selectors.parameters_confirmation_queue(request.user, state=state)
    page = Paginator(records, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "jobs/records/parameters_queue.html", {
        "page": page, "items": _items(page.object_list), "state": state,
        "states": STATE_LABELS.items(), "query": f"state={state}",
    })


def _decide(request: HttpRequest, record: DeploymentParameters) -> tuple[str | None, str]:
    """Run the decision: (the error to show, if any; what to say when it worked)."""
    decision, note = request.POST.get("decision"), request.POST.get("note", "")
    try:
        if decision == "confirm":
            confirmation.confirmation_confirm(
                parameters_id=record.pk, admin=request.user, note=note,
                expected_fingerprint=request.POST.get("fingerprint", ""),
            )
            return None, _("Deployment parameters %(title)s confirmed.") % {"title": record.title}
        if decision == "reject":
            confirmation.confirmation_reject(parameters_id=record.pk, admin=request.user,
                                             note=note)
            return None, _("Deployment parameters %(title)s rejected.") % {"title": record.title}
    except ApplicationError as exc:
        return exc.message, ""
    return _("Choose confirm or reject."), ""


@login_required
@require_POST
def parameters_queue_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Confirm or reject one record. To htmx: that record's panel, re-rendered in its decided
    state (or with the error, the note kept); without JavaScript: back to the queue at it."""
    require_platform_admin(request.user)
    record = selectors.parameters_for_decision(request.user, pk)
    error, done = _decide(request, record)
    if not getattr(request, "htmx", False):
        if error:
            messages.error(request, error)
        else:
            messages.success(request, done)
        return redirect(f"{reverse('jobs:parameters-queue')}#parameters-{record.pk}")
    record = selectors.parameters_for_decision(request.user, pk)
    return render(request, PANEL_TEMPLATE, {
        "item": _items([record])[0], "error": error,
        "note": request.POST.get("note", "") if error else "",
    })
