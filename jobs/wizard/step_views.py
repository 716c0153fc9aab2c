"""Steps 1, 3 and 4 of the wizard, and submission (step 2 lives in `role_views`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _

from jobs.context import evaluate
from jobs.core.render import Manifest, build_manifest
from jobs.core.spec import TASK_TYPES
from jobs.drafts.services import job_create, job_preview, job_update
from jobs.models import Job, TaskType
from jobs.records.submission import job_submit
from jobs.wizard.bodies import any_configured, initial_role_names, role_bodies
from jobs.wizard.common import (
    error_view,
    form_error_views,
    job_page_url,
    refusal_findings,
    step_url,
)
from jobs.wizard.evaluation import BasicsInput, evaluate_basics
from jobs.wizard.fields import (
    STEP_COMMON,
    STEP_REVIEW,
    STEP_ROLES,
    STEP_WORKERS,
    FieldMap,
    FindingView,
    at_header_choice,
    finding_views,
)
from jobs.wizard.forms import BasicsForm, CommonForm, Goto, ReviewForm, RoleRow, parse_goto
from jobs.wizard.presenters import step_links
from jobs.wizard.review import build_review, highlight_yaml
from jobs.wizard.selectors import TeamKey, network_domain_names, team_keys, team_records
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "basics", "basics_findings", "common", "common_findings", "manifest_of", "review", "submit",
    "target_step",
]


def target_step(goto: Goto, *, current: int) -> int:
    """The step a submit button leads to once the current step is saved."""
    if goto.kind == "next":
        return min(current + 1, STEP_REVIEW)
    if goto.kind == "back":
        return max(current - 1, STEP_ROLES)
    if goto.kind == "step":
        return min(max(goto.number, STEP_ROLES), STEP_REVIEW)
    if goto.kind == "role":
        return STEP_WORKERS
    return current


def _saved(job: Job, target: int, goto: Goto) -> HttpResponse:
    role = goto.number if goto.kind == "role" else None
    return redirect(step_url(job.name, target, role))


# -- step 1 ----------------------------------------------------------------------------------


@dataclass
class BasicsState:
    """Step 1 as shown: stored values, or what was just posted."""

    name: str
    task_type: str
    rows: list[RoleRow]
    header: int | None
    new_role: str = ""
    kept_roles: bool = False  # the type changed but configured roles were kept


def _stored_basics(job: Job) -> BasicsState:
    names = [role.name for role in job.roles.all()]
    return BasicsState(
        name=job.name, task_type=job.task_type,
        rows=[RoleRow(name=n, origin=i) for i, n in enumerate(names)],
        header=names.index(job.header_role) if job.header_role in names else None,
    )


def _new_basics() -> BasicsState:
    task_type = TaskType.RL.value
    return BasicsState(name="", task_type=task_type, header=None, rows=[
        RoleRow(name=n, origin=None) for n in initial_role_names(task_type)
    ])


def _apply_action(state: BasicsState, action: str) -> list[FindingView]:
    """Add or remove a role row; returns the refusals to show (nothing is saved here)."""
    if action.startswith("remove-role-") and action[12:].isdecimal():
        index = int(action[12:])
        if index < len(state.rows):
            del state.rows[index]
            if state.header == index:
                state.header = None
            elif state.header is not None and state.header > index:
                state.header -= 1
    elif action == "add-role":
        name = state.new_role.strip()
        if not name:
            return [error_view(code="form.new_role", field="new_role",
                               message=_("Type the new role's name, then add it."))]
        state.rows.append(RoleRow(name=name, origin=None))
        state.new_role = ""
    return []


def _posted_basics(form: BasicsForm, job: Job | None) -> tuple[BasicsState, str]:
    data = form.cleaned_data
    rows = form.rows()
    state = BasicsState(name=data.get("name", "").strip(), task_type=data.get("task_type", ""),
                        rows=rows, header=form.header_row(rows), new_role=data.get("new_role", ""))
    action = data.get("action", "")
    if form.type_changed():
        stored = role_bodies(job) if job is not None else []
        origins = [row.origin for row in rows if row.origin is not None]
        if any_configured(stored[i] for i in origins if i < len(stored)):
            state.kept_roles = True
        else:
            state.rows = [RoleRow(name=n, origin=None) for n in initial_role_names(
                state.task_type)]
            state.header = None
            action = action or "change-type"
    return state, action


def _basics_body(state: BasicsState, job: Job | None, target: int) -> dict[str, Any]:
    stored = role_bodies(job) if job is not None else []
    roles = []
    for row in state.rows:
        base = stored[row.origin] if row.origin is not None and row.origin < len(stored) else {}
        roles.append({**base, "name": row.name})
    header = state.rows[state.header].name if state.header is not None else ""
    return {"name": state.name, "task_type": state.task_type, "header_role": header,
            "roles": roles, "wizard_step": target}


def basics(request: HttpRequest, *, team: Team, job: Job | None) -> HttpResponse:
    if request.method != "POST":
        if job is not None:
            state = _stored_basics(job)
            findings = finding_views(evaluate(job).findings)
        else:
            state = _new_basics()
            findings = _basics_views(team=team, job=None, state=state)
        return _render_basics(request, job=job, state=state, findings=findings,
                              all_findings=findings)
    form = BasicsForm(request.POST)
    if not form.is_valid():
        state = _posted_state(request, form)
        errors = form_error_views(form.errors, _BASICS_FORM_PATHS, step=STEP_ROLES)
        return _render_basics(request, job=job, state=state, findings=errors, status=400)
    state, action = _posted_basics(form, job)
    refusals = _apply_action(state, action)
    if refusals or (job is None and action):
        # The form as it now stands, judged whole ("Apply type" keeps the name's findings).
        judged = _basics_views(team=team, job=job, state=state)
        return _render_basics(request, job=job, state=state, findings=[*refusals, *judged],
                              all_findings=judged, status=400 if refusals else 200)
    goto = parse_goto(form.cleaned_data.get("goto", ""))
    target = STEP_ROLES if action or state.kept_roles else target_step(goto, current=STEP_ROLES)
    body = _basics_body(state, job, target)
    try:
        if job is None:
            job = job_create(team=team, user=request.user, data=body)
        else:
            job = job_update(job=job, user=request.user, data=body, partial=True)
    except ApplicationError as exc:
        return _render_basics(request, job=job, state=state, status=400,
                              findings=refusal_findings(exc, default_field=None,
                                                        step=STEP_ROLES))
    if state.kept_roles:
        messages.info(request, _("The job type changed; the roles were kept because they are "
                                 "already configured."))
    return _saved(job, target, goto)


def _basics_views(*, team: Team, job: Job | None, state: BasicsState) -> list[FindingView]:
    """The engine's findings on step 1 as the form holds it, saved or not. A blank name on a
    draft not saved yet is left to the hint (nothing was typed yet; saving refuses it)."""
    header = state.rows[state.header].name if state.header is not None else ""
    evaluation = evaluate_basics(team=team, job=job, basics=BasicsInput(
        name=state.name, task_type=state.task_type, header_role=header,
        rows=tuple((row.name, row.origin) for row in state.rows)))
    views = finding_views(evaluation.findings)
    if job is None and not state.name:
        views = [f for f in views if f.field != "name"]
    return views


def _posted_state(request: HttpRequest, form: BasicsForm) -> BasicsState:
    """Step 1 exactly as posted (valid or not), without applying any action."""
    rows = form.rows()
    return BasicsState(name=request.POST.get("name", "").strip(),
                       task_type=request.POST.get("task_type", ""), rows=rows,
                       header=form.header_row(rows), new_role=request.POST.get("new_role", ""))


def basics_findings(request: HttpRequest, *, team: Team, job: Job | None) -> HttpResponse:
    """Step 1's findings, the name's availability and the error counts for the form as it is
    now (htmx, out of band; nothing is saved)."""
    form = BasicsForm(request.POST)
    state = _posted_state(request, form)
    findings = _basics_views(team=team, job=job, state=state)
    if not form.is_valid():
        findings = form_error_views(form.errors, _BASICS_FORM_PATHS, step=STEP_ROLES) + findings
    fields = _basics_fields(findings, state)
    name_ok = bool(state.name) and not fields["name"].findings
    return render(request, "jobs/wizard/_basics_live.html", {
        "f": fields, "name": state.name, "available": name_ok,
        "fields": [s for s in fields.states() if s.path != "name"],
        "steps": step_links(current=STEP_ROLES, findings=findings, enabled=job is not None),
    })


_BASICS_FORM_PATHS = {"name": "name", "new_role": "new_role", "task_type": "task_type",
                      "__all__": "roles"}


def _basics_fields(findings: Sequence[FindingView], state: BasicsState) -> FieldMap:
    """Step 1's fields, the Header role's replicas beside its choice (`at_header_choice`)."""
    paths = ["name", "task_type", "roles", "header_role", "new_role"]
    paths += [f"roles[{i}].name" for i in range(len(state.rows))]
    return FieldMap(at_header_choice(findings), paths, hints=["name", "task_type"],
                    include=lambda f: f.place.step == STEP_ROLES or f.field == "header_role")


def _render_basics(request: HttpRequest, *, job: Job | None, state: BasicsState,
                   findings: Sequence[FindingView], all_findings: Sequence[FindingView] = (),
                   status: int = 200) -> HttpResponse:
    fields = _basics_fields(findings, state)
    known = dict(TaskType.choices)
    types = [(value, str(label), ", ".join(TASK_TYPES.get(value, ())))
             for value, label in known.items()]
    if state.task_type and state.task_type not in known:
        types.append((state.task_type, state.task_type, ""))
    rows = [{"index": i, "row": row, "f": fields[f"roles[{i}].name"],
             "header": state.header == i} for i, row in enumerate(state.rows)]
    return render(request, "jobs/wizard/step1.html", {
        "job": job, "state": state, "rows": rows, "types": types, "f": fields,
        "step": STEP_ROLES,
        "steps": step_links(current=STEP_ROLES, findings=all_findings, enabled=job is not None),
        "action_url": step_url(job.name, STEP_ROLES) if job else reverse("jobs:wizard-new"),
    }, status=status)


# -- step 3 ----------------------------------------------------------------------------------


@dataclass
class CommonValues:
    header_role: str
    network_domain: str
    ssh_keys: list[str]
    run_script: str
    tensorboard_log_dir: str
    launch_list: str
    deployment_parameters: str
    extra: dict[str, Any] = field(default_factory=dict)


def _stored_common(job: Job) -> CommonValues:
    keys = job.ssh_key_names if isinstance(job.ssh_key_names, list) else []
    return CommonValues(
        header_role=job.header_role, network_domain=job.network_domain,
        ssh_keys=[str(k) for k in keys], run_script=job.run_script,
        tensorboard_log_dir=job.tensorboard_log_dir,
        launch_list=str(job.launch_list_id or ""),
        deployment_parameters=str(job.deployment_parameters_id or ""),
    )


def _posted_common(request: HttpRequest) -> CommonValues:
    post = request.POST
    return CommonValues(
        header_role=post.get("header_role", ""), network_domain=post.get("network_domain", ""),
        ssh_keys=post.getlist("ssh_keys"), run_script=post.get("run_script", ""),
        tensorboard_log_dir=post.get("tensorboard_log_dir", ""),
        launch_list=post.get("launch_list", ""),
        deployment_parameters=post.get("deployment_parameters", ""),
    )


_COMMON_PATHS = ["header_role", "network_domain", "ssh_keys", "run_script",
                 "tensorboard_log_dir", "launch_list", "deployment_parameters"]


def common(request: HttpRequest, *, job: Job) -> HttpResponse:
    keys = team_keys(job.team)  # read once for the engine and the list of keys
    findings = finding_views(evaluate(job, team_keys={k.name: k.public_key for k in keys}
                                      ).findings)
    if request.method != "POST":
        return _render_common(request, job=job, values=_stored_common(job), findings=findings,
                              all_findings=findings, keys=keys)
    form = CommonForm(request.POST)
    if not form.is_valid():
        errors = form_error_views(form.errors, {p: p for p in _COMMON_PATHS}, step=STEP_COMMON)
        return _render_common(request, job=job, values=_posted_common(request), findings=errors,
                              all_findings=findings, status=400, keys=keys)
    goto = parse_goto(form.cleaned_data.get("goto", ""))
    target = target_step(goto, current=STEP_COMMON)
    try:
        job_update(job=job, user=request.user, data={**form.body(), "wizard_step": target},
                   partial=True)
    except ApplicationError as exc:
        return _render_common(request, job=job, values=_posted_common(request),
                              findings=refusal_findings(exc, default_field=None,
                                                        step=STEP_COMMON),
                              all_findings=findings, status=400, keys=keys)
    return _saved(job, target, goto)


def common_findings(request: HttpRequest, *, job: Job) -> HttpResponse:
    """The findings beside each step 3 field for the form as it is now (htmx, out of band;
    nothing is saved): the same form checks, refusals and engine as saving the step."""
    form = CommonForm(request.POST)
    if not form.is_valid():
        findings = form_error_views(form.errors, {p: p for p in _COMMON_PATHS},
                                    step=STEP_COMMON) + [
            f for f in finding_views(evaluate(job).findings) if f.place.step != STEP_COMMON]
    else:
        try:
            preview = job_preview(job=job, data=form.body())
        except ApplicationError as exc:
            findings = refusal_findings(exc, default_field=None, step=STEP_COMMON)
        else:
            findings = finding_views(evaluate(preview).findings)
    fields = _common_fields(findings)
    return render(request, "jobs/wizard/_common_live.html", {
        "fields": [fields[path] for path in _COMMON_PATHS], "general": fields.general,
        "steps": step_links(current=STEP_COMMON, findings=findings),
    })


def _common_fields(findings: Sequence[FindingView]) -> FieldMap:
    """Step 3's fields, the Header role's replicas beside its choice (`at_header_choice`)."""
    return FieldMap(at_header_choice(findings), _COMMON_PATHS,
                    hints=["run_script", "network_domain"],
                    include=lambda f: f.place.step == STEP_COMMON or f.field == "header_role")


def _render_common(request: HttpRequest, *, job: Job, values: CommonValues,
                   findings: Sequence[FindingView], all_findings: Sequence[FindingView],
                   keys: tuple[TeamKey, ...], status: int = 200) -> HttpResponse:
    fields = _common_fields(findings)
    records = team_records(job.team, keys=keys)
    known_keys = {name for name, _fp in records.ssh_keys}
    return render(request, "jobs/wizard/step3.html", {
        "job": job, "values": values, "f": fields, "step": STEP_COMMON,
        "steps": step_links(current=STEP_COMMON, findings=all_findings),
        "role_names": [role.name for role in job.roles.all()],
        "domains": network_domain_names(), "records": records,
        "unknown_keys": [k for k in values.ssh_keys if k not in known_keys],
        "launch_lists_url": reverse("jobs:launch-lists"),
        "deployment_parameters_url": reverse("jobs:deployment-parameters"),
        "action_url": step_url(job.name, STEP_COMMON),
    }, status=status)


# -- step 4 ----------------------------------------------------------------------------------


def manifest_of(job: Job) -> Manifest:
    evaluation = evaluate(job)
    return build_manifest(evaluation.spec, evaluation.ctx)


def review(request: HttpRequest, *, job: Job) -> HttpResponse:
    if request.method == "POST":
        form = ReviewForm(request.POST)
        form.is_valid()
        goto = parse_goto(form.cleaned_data.get("goto", ""))
        target = target_step(goto, current=STEP_REVIEW)
        data: dict[str, Any] = {"wizard_step": target}
        if request.POST.get("compatibility_shown"):
            data["image_compatibility_confirmed"] = bool(
                form.cleaned_data.get("image_compatibility_confirmed"))
        try:
            job_update(job=job, user=request.user, data=data, partial=True)
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return redirect("jobs:list")
        return _saved(job, target, goto)
    evaluation = evaluate(job)
    manifest = build_manifest(evaluation.spec, evaluation.ctx)
    findings = finding_views(evaluation.findings)
    keys = job.ssh_key_names if isinstance(job.ssh_key_names, list) else []
    summary = build_review(
        spec=evaluation.spec, ctx=evaluation.ctx, manifest=manifest.data, findings=findings,
        ssh_key_names=[str(k) for k in keys],
        step_url=lambda step, role: step_url(job.name, step, role),
    )
    return render(request, "jobs/wizard/step4.html", {
        "job": job, "review": summary, "manifest": manifest, "step": STEP_REVIEW,
        "yaml_html": highlight_yaml(manifest.yaml),
        "steps": step_links(current=STEP_REVIEW, findings=findings),
        "action_url": step_url(job.name, STEP_REVIEW),
    })


def submit(request: HttpRequest, *, job: Job) -> HttpResponse:
    """Submit through the records service (which checks again); then the job list shows it."""
    try:
        job_submit(job=job, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        if job.state != "draft":
            return redirect(job_page_url(job.name))
        return redirect(step_url(job.name, STEP_REVIEW))
    messages.success(request, _("Job %(name)s was submitted.") % {"name": job.name})
    return redirect("jobs:list")
