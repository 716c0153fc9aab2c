"""The "New job from file" page: upload or paste a job file, see its problems with line and
column, or land on the wizard for the new draft."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.core.jobfile import MAX_FILE_BYTES, JobFileError, Problem, parse_job_file
from jobs.jobfiles.schema import job_file_schema
from jobs.jobfiles.services import job_file_create
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import current_team


class JobFileForm(forms.Form):
    file = forms.FileField(label=gettext_lazy("Job file"), required=False)
    content = forms.CharField(label=gettext_lazy("or paste it here"), required=False,
                              strip=False, widget=forms.Textarea(attrs={
                                  "rows": 18, "spellcheck": "false", "class": "mono"}))

    def data_bytes(self) -> bytes | None:
        upload = self.cleaned_data.get("file")
        if upload is not None:
            return bytes(upload.read(MAX_FILE_BYTES + 1))
        text = self.cleaned_data.get("content") or ""
        return text.encode("utf-8", "surrogatepass") if text.strip() else None


def _problems(exc: JobFileError) -> list[Problem]:
    return list(exc.problems)


@login_required
def new_from_file(request: HttpRequest) -> HttpResponse:
    team = current_team(request)
    if team is None:
        raise Http404(_("You are not in any team."))
    form = JobFileForm(request.POST or None, request.FILES or None)
    problems: list[Problem] = []
    error = ""
    if request.method == "POST" and form.is_valid():
        data = form.data_bytes()
        if data is None:
            error = _("Choose a file or paste one.")
        else:
            try:
                job_file = parse_job_file(data, job_file_schema())
                job = job_file_create(user=request.user, job_file=job_file, team=team)
            except JobFileError as exc:
                problems = _problems(exc)
            except ApplicationError as exc:
                error = _error_text(exc)
            else:
                messages.success(request, _("Draft %(name)s created from the file.")
                                 % {"name": job.name})
                return redirect("jobs:wizard", name=job.name)
    context: dict[str, Any] = {"form": form, "problems": problems, "error": error,
                               "team": team, "limit_kib": MAX_FILE_BYTES // 1024}
    status = 400 if problems or error else 200
    return render(request, "jobs/jobfiles/new_from_file.html", context, status=status)


def _error_text(exc: ApplicationError) -> str:
    findings = exc.extra.get("findings") or []
    if findings:
        return "; ".join(str(f.get("message")) for f in findings)
    return exc.message
