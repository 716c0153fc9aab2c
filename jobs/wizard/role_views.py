"""Step 2, one tab per role, and its live parts (matched nodes, verification requests).

The live count is read-only and global: the role as the form holds it right now is judged
by the engine against every cluster's inventory (nothing is saved). Requesting a
verification saves the role first, so the request is for exactly what the draft holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from clusters.verifications.services import verification_request
from jobs.context import Evaluation
from jobs.core.findings.capacity import role_preflights
from jobs.core.images import IMAGE_PLACEHOLDER
from jobs.core.spec import header_index, role_match
from jobs.core.startscript import RESERVED_ENV_NAMES
from jobs.drafts.services import job_update
from jobs.jobfiles.services import usable_selector, verification_asks
from jobs.models import Job
from jobs.wizard.bodies import role_bodies
from jobs.wizard.common import (
    form_error_views,
    is_draft,
    load_job,
    not_a_draft_message,
    refusal_findings,
    step_url,
)
from jobs.wizard.evaluation import evaluate_draft
from jobs.wizard.fields import (
    STEP_COMMON,
    STEP_ROLES,
    STEP_WORKERS,
    FieldMap,
    FindingView,
    at_row_places,
)
from jobs.wizard.fields import finding_views as to_views
from jobs.wizard.forms import Goto, RoleForm, parse_goto
from jobs.wizard.presenters import (
    RolePanel,
    RowCounts,
    VerificationPanel,
    match_view,
    role_panel,
    role_paths,
    shown_rows,
    step_links,
    tab_links,
    verification_panel,
)
from jobs.wizard.selectors import cluster_by_name, cluster_choices, cluster_offer
from rlark_site.foundation.exceptions import ApplicationError

__all__ = ["request_verification", "role_matches", "workers"]

_FORM_PATHS = {
    "cluster": "cluster", "selector_text": "selector", "gpus": "gpus", "image": "image",
    "image_digest": "image_digest", "prepare_script": "prepare_script",
    "cpu_request": "cpu.request", "cpu_limit": "cpu.limit",
    "memory_request": "memory.request", "memory_limit": "memory.limit",
}


_UNUSABLE_SELECTOR = frozenset({"selector.syntax", "selector.duplicate_key", "selector.empty"})


def _role_index(raw: str | None, count: int) -> int:
    index = int(raw) if raw and raw.isdecimal() else 0
    return min(index, max(count - 1, 0))


def _include_role(index: int) -> Callable[[FindingView], bool]:
    """Findings edited on role `index`'s tab of step 2, and step 2's findings of no one role
    (a refusal of the save, the job's total against its quota), shown on every tab."""
    return lambda f: f.place.step == STEP_WORKERS and f.place.role in (index, None)


def _panel(*, index: int, body: Mapping[str, Any], evaluation: Evaluation,
           findings: Sequence[FindingView], selector_text: str | None = None,
           rows: RowCounts | None = None) -> RolePanel:
    """The panel of role `index` as `body` holds it, judged in `evaluation`. `rows`: the rows
    the page shows, when they are not the ones `body` would show (a live answer)."""
    role = evaluation.spec.roles[index]
    match = role_match(role, evaluation.ctx)
    choices = cluster_choices(role.cluster if isinstance(role.cluster, str) else "")
    clusters = choices.names
    chosen = role.cluster if role.cluster in clusters else ""
    offer = cluster_offer(chosen, inventory=evaluation.inventory.get(chosen),
                          labels=choices.labels)
    fields = FieldMap(
        findings, role_paths(index, rows or shown_rows(body, offer)),
        include=_include_role(index),
        hints=[f"roles[{index}].{p}" for p in ("gpus", "image", "selector", "env")],
    )
    is_header = header_index(evaluation.spec) == index
    selector = usable_selector(role)
    view = evaluation.ctx.verification_for(role.cluster, selector) if role.cluster else None
    placeable = role.cluster in clusters and bool(selector) and not any(
        f.code in _UNUSABLE_SELECTOR for f in fields[f"roles[{index}].selector"].findings
    )
    return role_panel(
        index=index, body=body, is_header=is_header, clusters=clusters, offer=offer,
        fields=fields, selector_text=selector_text,
        match=match_view(index=index, cluster=role.cluster, selector=selector,
                         match=match, is_header=is_header, fields=fields,
                         capacity=role_preflights(evaluation.spec, evaluation.ctx)[index]
                         .as_dict()),
        verification=verification_panel(index=index, view=view, match=match,
                                        placeable=placeable),
    )


def workers(request: HttpRequest, *, job: Job) -> HttpResponse:
    bodies = role_bodies(job)
    if not bodies:
        return _render_workers(request, job=job, panel=None, evaluation=None, findings=[])
    raw_index = request.POST.get("role") if request.method == "POST" else request.GET.get("role")
    index = _role_index(raw_index, len(bodies))
    if request.method != "POST":
        evaluation = evaluate_draft(job)
        findings = to_views(evaluation.findings)
        panel = _panel(index=index, body=bodies[index], evaluation=evaluation, findings=findings)
        return _render_workers(request, job=job, panel=panel, evaluation=evaluation,
                               findings=findings)
    form = RoleForm(request.POST)
    body = form.body(name=bodies[index]["name"])
    if not form.is_valid():
        return _show_again(request, job=job, index=index, body=body, form=form)
    goto = parse_goto(form.cleaned_data.get("goto", ""))
    bodies[index] = body
    target, role = _target(goto, index=index, count=len(bodies))
    try:
        job_update(job=job, user=request.user,
                   data={"roles": bodies, "wizard_step": target}, partial=True)
    except ApplicationError as exc:
        # The tab again with what was typed and the refusal at the top (or at its field).
        refusals = refusal_findings(exc, default_field=None, step=STEP_WORKERS)
        return _show_again(request, job=job, index=index, body=body, form=form,
                           refusals=refusals)
    return redirect(step_url(job.name, target, role))


def _target(goto: Goto, *, index: int, count: int) -> tuple[int, int | None]:
    """(step, role tab) after saving role `index`: next/back walk through the role tabs."""
    if goto.kind == "next":
        return (STEP_WORKERS, index + 1) if index + 1 < count else (STEP_COMMON, None)
    if goto.kind == "back":
        return (STEP_WORKERS, index - 1) if index > 0 else (STEP_ROLES, None)
    if goto.kind == "role":
        return STEP_WORKERS, _role_index(str(goto.number), count)
    if goto.kind == "step":
        return goto.number, None
    return STEP_WORKERS, index


def _show_again(request: HttpRequest, *, job: Job, index: int, body: dict[str, Any],
                form: RoleForm, refusals: Sequence[FindingView] = ()) -> HttpResponse:
    """The tab again with what was typed, the form's (or the save's) refusals and the
    engine's findings."""
    evaluation = evaluate_draft(job, role_index=index, role_body=body)
    base = f"roles[{index}]"
    errors = form_error_views(form.errors, {k: f"{base}.{v}" for k, v in _FORM_PATHS.items()},
                              step=STEP_WORKERS)
    findings = [*refusals, *errors, *to_views(evaluation.findings)]
    panel = _panel(index=index, body=body, evaluation=evaluation, findings=findings,
                   selector_text=request.POST.get("selector_text", ""))
    return _render_workers(request, job=job, panel=panel, evaluation=evaluation,
                           findings=findings, status=400)


def _render_workers(request: HttpRequest, *, job: Job, panel: RolePanel | None,
                    evaluation: Evaluation | None, findings: Sequence[FindingView],
                    status: int = 200) -> HttpResponse:
    names = [role.name for role in job.roles.all()]
    header = header_index(evaluation.spec) if evaluation is not None else None
    return render(request, "jobs/wizard/step2.html", {
        "job": job, "panel": panel, "step": STEP_WORKERS,
        "steps": step_links(current=STEP_WORKERS, findings=findings),
        "tabs": tab_links(names=names, current=panel.index if panel else 0, header=header,
                          findings=findings),
        "action_url": step_url(job.name, STEP_WORKERS),
        "reserved_env": sorted(RESERVED_ENV_NAMES), "image_placeholder": IMAGE_PLACEHOLDER,
    }, status=status)


def _draft_role(request: HttpRequest, name: str, index: int) -> tuple[Job, list[dict[str, Any]]]:
    job = load_job(request, name)
    if not is_draft(job):
        raise Http404(not_a_draft_message())
    bodies = role_bodies(job)
    if not 0 <= index < len(bodies):
        raise Http404(_("The job has no such role."))
    return job, bodies


@login_required
@require_POST
def role_matches(request: HttpRequest, name: str, index: int) -> HttpResponse:
    """The live panel for the role as the form holds it now (htmx, read-only): matched nodes,
    every field's findings (unsaved rows included), the error counts of the steps and tabs."""
    job, bodies = _draft_role(request, name, index)
    form = RoleForm(request.POST)
    body = form.body(name=bodies[index]["name"])
    evaluation = evaluate_draft(job, role_index=index, role_body=body)
    findings = at_row_places(to_views(evaluation.findings), form.row_places(), role=index)
    if not form.is_valid():
        base = f"roles[{index}]"
        findings = form_error_views(
            form.errors, {k: f"{base}.{v}" for k, v in _FORM_PATHS.items()},
            step=STEP_WORKERS) + findings
    panel = _panel(index=index, body=body, evaluation=evaluation, findings=findings,
                   rows=RowCounts(**form.posted_rows()))
    return render(request, "jobs/wizard/_live.html", {
        "job": job, "panel": panel, "oob": True,
        "steps": step_links(current=STEP_WORKERS, findings=findings),
        "tabs": tab_links(names=[b["name"] for b in bodies], current=index,
                          header=header_index(evaluation.spec), findings=findings),
    })


@login_required
@require_POST
def request_verification(request: HttpRequest, name: str, index: int) -> HttpResponse:
    """Save the role as the form holds it, then ask the admins to verify its selector."""
    job, bodies = _draft_role(request, name, index)
    form = RoleForm(request.POST)
    if not form.is_valid():
        error = _("Fix the form first: %(errors)s") % {
            "errors": "; ".join(str(m) for ms in form.errors.values() for m in ms)}
        return _verification_response(request, job=job, index=index, error=error)
    bodies[index] = form.body(name=bodies[index]["name"])
    try:
        job = job_update(job=job, user=request.user, data={"roles": bodies}, partial=True)
        evaluation = evaluate_draft(job)
        role = evaluation.spec.roles[index]
        cluster = cluster_by_name(role.cluster)
        if cluster is None:
            raise ApplicationError(_("Choose the role's cluster first."))
        verification = verification_request(
            team=job.team, user=cast(AbstractBaseUser, request.user), cluster=cluster,
            selector=usable_selector(role),
            for_header_role=header_index(evaluation.spec) == index, **verification_asks(role),
            job_name=job.name, role_name=str(role.name),
        )
    except ApplicationError as exc:
        error = refusal_findings(exc, default_field=None)[0].message
        return _verification_response(request, job=job, index=index, error=error)
    panel = VerificationPanel(
        index=index, state=verification.state, verification_id=verification.id, current=True,
        can_request=verification.state not in {"pending", "approved"},
    )
    return render(request, "jobs/wizard/_verification.html", {
        "job": job, "v": panel, "error": "", "requested": True,
    })


def _verification_response(request: HttpRequest, *, job: Job, index: int, error: str,
                           ) -> HttpResponse:
    evaluation = evaluate_draft(job)
    panel = _panel(index=index, body=role_bodies(job)[index], evaluation=evaluation,
                   findings=to_views(evaluation.findings))
    return render(request, "jobs/wizard/_verification.html", {
        "job": job, "v": panel.verification, "error": error, "requested": False,
    })

