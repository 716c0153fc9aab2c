"""Pages: launch lists, deployment parameters, the job status page, run records.

Views check the form's shape, call one service or selector and render. Another team's
record answers 404 like a missing one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from jobs.drafts.selectors import job_get_for_user, job_list_for_user
from jobs.models import Job, JobState, RunRecord
from jobs.observe.signals import first_run_initial, signal_rows
from jobs.records import confirmation, selectors, services
from jobs.records.audit_view import audit_by_object
from jobs.records.checklist import ANSWERS, CHECKLIST
from jobs.records.forms import (
    CloneForm,
    DeploymentParametersForm,
    FillFromJobForm,
    FirstRunCheckForm,
    LaunchListForm,
)
from jobs.records.lifecycle import CANCELLABLE_STATES
from jobs.usage.selectors import run_gpu_hours
from jobs.usage.views import gpu_hours_rows
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import current_team
from rlark_site.foundation.tenancy.models import Team


def _team(request: HttpRequest) -> Team:
    team = current_team(request)
    if team is None:
        raise Http404(_("You are not in any team."))
    return team


def _refusal(form: Any, exc: ApplicationError) -> None:
    field = exc.extra.get("field")
    form.add_error(field if field in form.fields else None, exc.message)


def _saved(request: HttpRequest, form: Any, save: Callable[[Any], Any], *, message: str,
           edit: str) -> HttpResponse | None:
    """The POST half of a record's create and edit pages: a valid form's fields go to the
    service `save`; on success `message` (with the record's title) and a redirect to the
    record's `edit` page, else None (the page shows the form with the refusal)."""
    if request.method != "POST" or not form.is_valid():
        return None
    try:
        record = save(form.fields_for_service())
    except ApplicationError as exc:
        _refusal(form, exc)
        return None
    messages.success(request, message % {"title": record.title})
    return redirect(edit, pk=record.pk)


# --- launch lists -----------------------------------------------------------------------------


def _parameters_choices(team: Team) -> QuerySet[Any]:
    return selectors.deployment_parameters_for_team(team)


@login_required
@require_GET
def launch_lists(request: HttpRequest) -> HttpResponse:
    team = _team(request)
    records = selectors.launch_lists_for_user(request.user, team=team)
    return render(request, "jobs/records/launch_lists.html", {"team": team, "records": records})


@login_required
@require_http_methods(["GET", "POST"])
def launch_list_create(request: HttpRequest) -> HttpResponse:
    team = _team(request)
    form = LaunchListForm(request.POST or None, parameters=_parameters_choices(team))
    saved = _saved(
        request, form,
        lambda fields: services.launch_list_create(team=team, user=request.user, fields=fields),
        message=_("Launch list %(title)s saved."), edit="jobs:launch-list-edit",
    )
    if saved is not None:
        return saved
    context = {"team": team, "form": form, "record": None}
    return render(request, "jobs/records/launch_list_form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def launch_list_edit(request: HttpRequest, pk: int) -> HttpResponse:
    record = selectors.launch_list_get_for_user(request.user, pk)
    form = LaunchListForm(
        request.POST or None, initial=LaunchListForm.initial_for(record),
        parameters=_parameters_choices(record.team),
    )
    saved = _saved(
        request, form,
        lambda fields: services.launch_list_update(
            launch_list=record, user=request.user, fields=fields
        ),
        message=_("Launch list %(title)s saved."), edit="jobs:launch-list-edit",
    )
    if saved is not None:
        return saved
    context = {"team": record.team, "form": form, "record": record,
               "jobs": record.jobs.order_by("name")}
    return render(request, "jobs/records/launch_list_form.html", context)


# --- deployment parameters --------------------------------------------------------------------


def _parameters_form(request: HttpRequest, team: Team, **kwargs: Any) -> DeploymentParametersForm:
    return DeploymentParametersForm(
        request.POST or None,
        launch_lists=selectors.launch_lists_for_user(request.user, team=team),
        verifications=selectors.verifications_for_team(team),
        **kwargs,
    )


@login_required
@require_GET
def deployment_parameters(request: HttpRequest) -> HttpResponse:
    team = _team(request)
    records = list(selectors.deployment_parameters_for_user(request.user, team=team))
    statuses = confirmation.confirmation_statuses(records)
    rows = [(record, statuses[record.pk]) for record in records]
    return render(request, "jobs/records/deployment_parameters.html",
                  {"team": team, "records": records, "rows": rows})


@login_required
@require_http_methods(["GET", "POST"])
def deployment_parameters_create(request: HttpRequest) -> HttpResponse:
    team = _team(request)
    form = _parameters_form(request, team)
    saved = _saved(
        request, form,
        lambda fields: services.deployment_parameters_create(
            team=team, user=request.user, fields=fields
        ),
        message=_("Deployment parameters %(title)s saved."),
        edit="jobs:deployment-parameters-edit",
    )
    if saved is not None:
        return saved
    context = {"team": team, "form": form, "record": None}
    return render(request, "jobs/records/deployment_parameters_form.html", context)


def _job_drafts(request: HttpRequest, team: Team) -> QuerySet[Job]:
    return job_list_for_user(request.user, team=team)


@login_required
@require_http_methods(["GET", "POST"])
def deployment_parameters_edit(request: HttpRequest, pk: int) -> HttpResponse:
    record = selectors.deployment_parameters_get_for_user(request.user, pk)
    form = _parameters_form(request, record.team,
                            initial=DeploymentParametersForm.initial_for(record))
    saved = _saved(
        request, form,
        lambda fields: services.deployment_parameters_update(
            parameters=record, user=request.user, fields=fields
        ),
        message=_("Deployment parameters %(title)s saved."),
        edit="jobs:deployment-parameters-edit",
    )
    if saved is not None:
        return saved
    context = {
        "team": record.team, "form": form, "record": record,
        "fill_form": FillFromJobForm(jobs=_job_drafts(request, record.team)),
        "jobs": record.jobs.order_by("name"),
        "status": confirmation.confirmation_status(record),
    }
    return render(request, "jobs/records/deployment_parameters_form.html", context)


@login_required
@require_POST
def deployment_parameters_fill(request: HttpRequest, pk: int) -> HttpResponse:
    record = selectors.deployment_parameters_get_for_user(request.user, pk)
    form = FillFromJobForm(request.POST, jobs=_job_drafts(request, record.team))
    if form.is_valid():
        job = form.cleaned_data["job"]
        services.deployment_parameters_fill_from_job(parameters=record, job=job, user=request.user)
        messages.success(request, _("Filled from job %(name)s.") % {"name": job.name})
    else:
        messages.error(request, _("Choose one of your team's jobs."))
    return redirect("jobs:deployment-parameters-edit", pk=record.pk)


@login_required
@require_POST
def deployment_parameters_request_confirmation(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask a platform admin to confirm the record for the chosen job (default: newest)."""
    record = selectors.deployment_parameters_get_for_user(request.user, pk)
    name = request.POST.get("job", "")
    try:
        job = job_get_for_user(request.user, name) if name else None
        confirmation.confirmation_request(parameters=record, user=request.user, job=job,
                                          note=request.POST.get("note", "")[:2000])
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Confirmation requested. A platform admin will review "
                                    "these deployment parameters."))
    return redirect("jobs:deployment-parameters-edit", pk=record.pk)


# --- the job page -----------------------------------------------------------------------------


def _seen_running(record: RunRecord | None) -> bool:
    return record is not None and any(c.phase == "Running" for c in record.status_changes.all())


@login_required
@require_GET
def job_detail(request: HttpRequest, name: str) -> HttpResponse:
    job = job_get_for_user(request.user, name)
    if job.state == JobState.DRAFT:  # a draft has no status or record yet: its page is the wizard
        return redirect("jobs:wizard", name=job.name)
    record = RunRecord.objects.filter(job=job).prefetch_related(
        "status_changes", "first_run_checks__checked_by"
    ).first()
    checks = list(record.first_run_checks.order_by("checked_at", "id")) if record else []
    hours = run_gpu_hours(record)
    context = {
        "job": job, "record": record,
        "history": record.status_changes.order_by("observed_at", "id") if record else [],
        "cancellable": record is not None and record.state in CANCELLABLE_STATES,
        "seen_running": _seen_running(record),
        "signals": record.launch_list_snapshot.get("expected_signals", []) if record else [],
        "checks": checks, "last_check": checks[-1] if checks else None,
        "form": FirstRunCheckForm(initial=first_run_initial(record)),
        "watches": signal_rows(record), "checklist": CHECKLIST, "answers": ANSWERS,
        "run_gpu_hours": hours, "gpu_hours": gpu_hours_rows(hours),
    }
    return render(request, "jobs/records/job_detail.html", context)


@login_required
@require_POST
def job_cancel(request: HttpRequest, name: str) -> HttpResponse:
    job = job_get_for_user(request.user, name)
    try:
        services.job_cancel(job=job, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Job %(name)s cancelled; its record is kept.")
                         % {"name": job.name})
    return redirect("jobs:job-detail", name=job.name)


@login_required
@require_POST
def first_run_check(request: HttpRequest, name: str) -> HttpResponse:
    job = job_get_for_user(request.user, name)
    form = FirstRunCheckForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Say whether the expected signal was observed."))
        return redirect("jobs:job-detail", name=job.name)
    try:
        services.first_run_check_record(
            job=job, user=request.user, observed=form.cleaned_data["observed"],
            evidence=form.cleaned_data["evidence"], notes=form.cleaned_data["notes"],
            troubleshooting=form.troubleshooting(),
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("First-run check recorded."))
    return redirect("jobs:job-detail", name=job.name)


# --- run records ------------------------------------------------------------------------------


@login_required
@require_GET
def run_record_lookup(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("name", "").strip()
    records = selectors.run_records_for_user(request.user, name_contains=query)
    if query and records.filter(job_name=query).exists():
        return redirect("jobs:run-record", name=query)
    return render(request, "jobs/records/run_record_lookup.html",
                  {"query": query, "records": records[:200]})


def _record_context(request: HttpRequest, record: RunRecord) -> dict[str, Any]:
    chain = selectors.run_record_chain(record)
    others = selectors.run_records_for_user(request.user).filter(team=record.team).exclude(
        pk=record.pk
    )
    return {
        "record": record, "chain": chain, "audit": audit_by_object(chain["audit_events"]),
        "clone_form": CloneForm(), "others": others[:200], "answers": ANSWERS,
        "checklist": {item.code: item.question for item in CHECKLIST},
        "gpu_hours": gpu_hours_rows(chain["gpu_hours"]),
    }


@login_required
@require_GET
def run_record(request: HttpRequest, name: str) -> HttpResponse:
    record = selectors.run_record_get_for_user(request.user, name)
    return render(request, "jobs/records/run_record.html", _record_context(request, record))


@login_required
@require_POST
def run_record_clone(request: HttpRequest, name: str) -> HttpResponse:
    record = selectors.run_record_get_for_user(request.user, name)
    job_get_for_user(request.user, record.job_name)  # admins read records; teams clone
    form = CloneForm(request.POST)
    if form.is_valid():
        try:
            job = services.run_record_clone(
                run_record=record, user=request.user, name=form.cleaned_data["name"]
            )
        except ApplicationError as exc:
            _refusal(form, exc)
        else:
            messages.success(request, _("New draft %(name)s created from %(source)s.")
                             % {"name": job.name, "source": record.job_name})
            return redirect("jobs:wizard-step", name=job.name, step=1)
    context = {**_record_context(request, record), "clone_form": form}
    return render(request, "jobs/records/run_record.html", context, status=400)


@login_required
@require_GET
def run_record_diff(request: HttpRequest, name: str) -> HttpResponse:
    record = selectors.run_record_get_for_user(request.user, name)
    against = request.GET.get("against", "")
    if not against:
        return redirect("jobs:run-record", name=record.job_name)
    other = selectors.other_run_record_for_diff(request.user, record, against)
    diff = selectors.manifest_diff(record, other)
    return render(request, "jobs/records/run_record_diff.html", {
        "record": record, "other": other, "lines": diff.splitlines(),
        "changes": selectors.run_diff(record, other), "raw": request.GET.get("raw") == "1",
    })
