"""The job list and the four-step create-job wizard (server-rendered, htmx where it helps).

Every step saves the draft through `jobs.drafts.services.job_update` (creation through
`job_create`), then redirects (POST/redirect/GET), so back, forward, reload and resuming
later all show what is stored. Findings come from one place, `jobs.context.evaluate`.
Moving between steps is never blocked by findings: they travel with the draft, are shown
next to their fields on every visit and block only the final submit.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from clusters.models import Cluster
from jobs.drafts import services
from jobs.drafts.forms import JobListForm
from jobs.drafts.selectors import JobListQuery, job_creators, job_search
from jobs.models import Job, Role, TaskType
from jobs.observe.states import poller_context
from jobs.progress.selectors import stalled_jobs
from jobs.wizard import role_views, step_views
from jobs.wizard.common import (
    is_draft,
    job_page_url,
    load_job,
    not_a_draft_message,
    run_record_url,
    step_url,
)
from jobs.wizard.fields import STEP_COMMON, STEP_REVIEW, STEP_ROLES, STEP_WORKERS
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import current_team, teams_for_user
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "basics_findings",
    "job_delete",
    "job_list",
    "manifest_download",
    "submit",
    "wizard_new",
    "wizard_resume",
    "wizard_step",
]

JOBS_PER_PAGE = 50


def _list_team(request: HttpRequest, form: JobListForm) -> Team | None:
    """The team the list shows: the one asked for (members of several), else the current one."""
    slug = form.cleaned_data.get("team") if form.is_valid() else ""
    chosen = teams_for_user(request.user).filter(slug=slug).first() if slug else None
    return chosen or current_team(request)


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    """The team's jobs, searched, filtered and sorted by the query string; drafts continue in
    the wizard (and can be deleted), others open their job page."""
    form = JobListForm(request.GET)
    query = form.query() if form.is_valid() else JobListQuery()
    team = _list_team(request, form)
    jobs = job_search(request.user, query, team=team) if team is not None else Job.objects.none()
    jobs = jobs.prefetch_related(Prefetch("roles", queryset=Role.objects.only(
        "id", "job_id", "position", "cluster"))).annotate(stalled=stalled_jobs())
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "jobs/list.html", {
        "team": team, "page": page, "rows": [_job_row(job) for job in page.object_list],
        "form": form, "filtered": query != JobListQuery(),
        "clusters": Cluster.objects.order_by("name").values_list("name", flat=True),
        "creators": _creators(team, query),
        "state_poll": poller_context(list(page.object_list), style="list"),
    })


def _creators(team: Team | None, query: JobListQuery) -> list[str]:
    """The team's creators to filter by, and the one asked for even when none of their jobs is
    left (the select keeps showing the filter in use)."""
    creators = job_creators(team) if team is not None else []
    return sorted({*creators, query.creator} - {""})


@login_required
@require_POST
def job_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Delete a draft (audited; its name is free again). A submitted job keeps its record."""
    job = load_job(request, name)
    try:
        services.job_delete(job=job)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Draft %(name)s deleted; the name is free again.")
                         % {"name": name})
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return redirect("jobs:list")


def _job_row(job: Job) -> dict[str, Any]:
    draft = is_draft(job)
    run = job.run
    clusters = [run.cluster] if run is not None else sorted(
        {role.cluster for role in job.roles.all() if role.cluster}
    )
    return {
        "job": job,
        "draft": draft,
        "clusters": clusters,
        "type_label": dict(TaskType.choices).get(job.task_type, job.task_type),
        "url": step_url(job.name, job.wizard_step) if draft else job_page_url(job.name),
        "record_url": "" if draft else run_record_url(job.name),
    }


@login_required
@require_http_methods(["GET", "POST"])
def wizard_new(request: HttpRequest) -> HttpResponse:
    """Step 1 of a job that does not exist yet; the draft is created when it is saved."""
    team = current_team(request)
    if team is None:
        raise Http404(_("You are not in any team."))
    return step_views.basics(request, team=team, job=None)


@login_required
@require_GET
def wizard_resume(request: HttpRequest, name: str) -> HttpResponse:
    job = load_job(request, name)
    if not is_draft(job):
        return redirect(job_page_url(job.name))
    return redirect(step_url(job.name, job.wizard_step))


@login_required
@require_http_methods(["GET", "POST"])
def wizard_step(request: HttpRequest, name: str, step: int) -> HttpResponse:
    job = load_job(request, name)
    if not is_draft(job):
        messages.info(request, not_a_draft_message())
        return redirect(job_page_url(job.name))
    if step == STEP_ROLES:
        return step_views.basics(request, team=job.team, job=job)
    if step == STEP_WORKERS:
        return role_views.workers(request, job=job)
    if step == STEP_COMMON:
        return step_views.common(request, job=job)
    if step == STEP_REVIEW:
        return step_views.review(request, job=job)
    return HttpResponseRedirect(step_url(job.name, job.wizard_step))


@login_required
@require_POST
def common_findings(request: HttpRequest, name: str) -> HttpResponse:
    """Live findings of step 3 for the form as it is now (htmx; nothing is saved)."""
    job = load_job(request, name)
    if not is_draft(job):
        raise Http404(not_a_draft_message())
    return step_views.common_findings(request, job=job)


@login_required
@require_POST
def basics_findings(request: HttpRequest) -> HttpResponse:
    """Live findings of step 1 for the form as it is now, saved draft or new (htmx; nothing is
    saved): the draft named by ``current_job``, else a new one of the current team."""
    current = request.POST.get("current_job", "")
    if current:
        job = load_job(request, current)
        if not is_draft(job):
            raise Http404(not_a_draft_message())
        return step_views.basics_findings(request, team=job.team, job=job)
    team = current_team(request)
    if team is None:
        raise Http404(_("You are not in any team."))
    return step_views.basics_findings(request, team=team, job=None)


@login_required
@require_GET
def manifest_download(request: HttpRequest, name: str) -> HttpResponse:
    """The exact YAML the review step shows, as ``<name>.yaml``."""
    job = load_job(request, name)
    manifest = step_views.manifest_of(job)
    response = HttpResponse(manifest.yaml, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=f"{job.name}.yaml"
    ) or "attachment"
    return response


@login_required
@require_POST
def submit(request: HttpRequest, name: str) -> HttpResponse:
    return step_views.submit(request, job=load_job(request, name))
