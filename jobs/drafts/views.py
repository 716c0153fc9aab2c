"""The team's SSH key page: list, add, delete with confirmation."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from jobs.drafts.forms import SSHKeyForm
from jobs.drafts.selectors import ssh_key_get_for_team, ssh_keys_for_team
from jobs.drafts.services import ssh_key_create, ssh_key_delete
from jobs.models import SSHKey
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import current_team
from rlark_site.foundation.tenancy.models import Team


def _team(request: HttpRequest) -> Team:
    team = current_team(request)
    if team is None:
        raise Http404(_("You are not in any team."))
    return team


def _add(request: HttpRequest, team: Team, form: SSHKeyForm) -> SSHKey | None:
    if not form.is_valid():
        return None
    try:
        return ssh_key_create(team=team, user=request.user, **form.cleaned_data)
    except ApplicationError as exc:
        field = exc.extra.get("field")
        form.add_error(field if field in form.fields else None, exc.message)
        return None


@login_required
@require_http_methods(["GET", "POST"])
def ssh_keys(request: HttpRequest) -> HttpResponse:
    team = _team(request)
    form = SSHKeyForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        key = _add(request, team, form)
        if key is not None:
            messages.success(request, _("SSH key %(name)s added.") % {"name": key.name})
            return redirect("jobs:ssh-keys")
    context = {"team": team, "keys": ssh_keys_for_team(team), "form": form}
    return render(request, "jobs/drafts/ssh_keys.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def ssh_key_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    team = _team(request)
    key = ssh_key_get_for_team(team, pk=pk)
    if request.method == "POST":
        ssh_key_delete(key=key)
        messages.success(request, _("SSH key %(name)s deleted.") % {"name": key.name})
        return redirect("jobs:ssh-keys")
    return render(request, "jobs/drafts/ssh_key_delete.html", {"team": team, "key": key})
