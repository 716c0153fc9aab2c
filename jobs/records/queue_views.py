"""The admin queue's second tab: deployment parameters waiting for a platform admin's
confirmation (`/jobs/deployment-parameters/queue/`), beside the selector verifications of
`clusters:queue`. Each record shows what the admin confirms: its roles, notes and referenced
verifications, the job it is asked for, and the findings of that job about these parameters
(mismatches, unreferenced verifications, staleness). Confirm or reject posts and redirects
back.
"""

from __future__ import annotations

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

from jobs.context import evaluate
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


def _findings(record: DeploymentParameters) -> list[dict[str, Any]]:
    """What the job they are asked for is told about these parameters: mismatches and
    unreferenced verifications."""
    job = record.confirmation_job
    if job is None or job.deployment_parameters_id != record.pk:
        return []
    return [f.as_dict() for f in evaluate(job).findings
            if f.code.startswith("deployment_parameters.") and f.code not in _STATE_CODES]


def _item(record: DeploymentParameters) -> dict[str, Any]:
    return {"record": record, "status": confirmation.confirmation_status(record),
            "findings": _findings(record), "verifications": list(record.verifications.all())}


@login_required
@require_GET
def parameters_queue(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request.user)
    state = request.GET.get("state", "pending")
    state = state if state in selectors.QUEUE_STATES else "pending"
    records = selectors.parameters_confirmation_queue(request.user, state=state)
    page = Paginator(records, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "jobs/records/parameters_queue.html", {
        "page": page, "items": [_item(r) for r in page.object_list], "state": state,
        "states": STATE_LABELS.items(), "query": f"state={state}",
    })


@login_required
@require_POST
def parameters_queue_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Confirm or reject one record, then back to the queue at that record."""
    require_platform_admin(request.user)
    record = selectors.parameters_for_decision(request.user, pk)
    decision, note = request.POST.get("decision"), request.POST.get("note", "")
    try:
        if decision == "confirm":
            confirmation.confirmation_confirm(
                parameters_id=record.pk, admin=request.user, note=note,
                expected_fingerprint=request.POST.get("fingerprint", ""),
            )
            messages.success(request, _("Deployment parameters %(title)s confirmed.")
                             % {"title": record.title})
        elif decision == "reject":
            confirmation.confirmation_reject(parameters_id=record.pk, admin=request.user,
                                             note=note)
            messages.success(request, _("Deployment parameters %(title)s rejected.")
                             % {"title": record.title})
        else:
            messages.error(request, _("Choose confirm or reject."))
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect(f"{reverse('jobs:parameters-queue')}#parameters-{record.pk}")
