from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import is_platform_admin, teams_for_user
from rlark_site.foundation.tenancy.accounts import token_create, token_revoke, tokens_of
from rlark_site.foundation.validators import no_control_characters
from rlark_site.navigation import QUEUE


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Platform admins land on the verification queue, team members on their jobs."""
    return redirect(QUEUE if is_platform_admin(request.user) else "jobs:list")


@login_required
@require_POST
def switch_team(request: HttpRequest) -> HttpResponse:
    slug = request.POST.get("team", "")
    if teams_for_user(request.user).filter(slug=slug).exists():
        request.session["current_team"] = slug
    return redirect(request.POST.get("next") or reverse("home"))


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, validators=[no_control_characters], label=_("Name"))
    expires_in_days = forms.IntegerField(
        min_value=1, max_value=3650, initial=30, label=_("Expires after (days)"),
    )


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """The user's own API tokens; a new token's secret is shown in this answer only."""
    form = TokenForm(request.POST if request.method == "POST" else None)
    context: dict[str, Any] = {"form": form}
    if form.is_valid():
        try:
            token, secret = token_create(user=request.user, name=form.cleaned_data["name"],
                                         expires_in_days=form.cleaned_data["expires_in_days"])
        except ApplicationError as exc:
            form.add_error(exc.extra.get("field") or None, exc.message)
        else:
            context.update(new_token=token, new_secret=secret, form=TokenForm())
    context["tokens"] = tokens_of(request.user)
    return render(request, "account/tokens.html", context)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token_revoke(user=request.user, token_id=token_id)
    messages.success(request, _("Token revoked."))
    return redirect("tokens")
