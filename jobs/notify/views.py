"""The team page: its members, the team's webhook (maintainers and platform admins set it,
members read it) and the webhook's delivery log, a page at a time. Outsiders get 404."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods

from jobs.models import EventKind, NotificationPreference, TeamWebhook
from jobs.notify import services
from jobs.notify.selectors import team_deliveries, team_memberships
from rlark_site.foundation.tenancy.access import (
    access_team,
    can_manage_members,
    is_platform_admin,
    visible_teams,
)
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.validators import validate_webhook_url

DELIVERIES_PER_PAGE = 25


class PreferencesForm(forms.Form):
    """The signed-in user's choice of events that email them (the API's choices: every
    `EventKind`), and the language of the mail."""

    email_events = forms.MultipleChoiceField(
        label=gettext_lazy("Email me when"), required=False, choices=EventKind.choices,
        widget=forms.CheckboxSelectMultiple)
    language = forms.ChoiceField(label=gettext_lazy("Language of the mail"),
                                 choices=settings.LANGUAGES)


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    """The user's own notification preferences, saved by `services.preferences_set` (the
    service the API's `PUT notifications/preferences/` uses)."""
    current = NotificationPreference.objects.filter(user__pk=request.user.pk or 0).first()
    initial = ({"email_events": current.email_events, "language": current.language}
               if current is not None else
               {"email_events": [], "language": request.LANGUAGE_CODE})
    form = PreferencesForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        services.preferences_set(user=request.user, **form.cleaned_data)
        messages.success(request, _("Notification preferences saved."))
        return redirect("notification-preferences")
    return render(request, "account/notifications.html", {"form": form})


class WebhookURLField(forms.URLField):
    """A URL field whose only check is the webhook rule (`validate_webhook_url`), so a bad URL
    gets one message; typed without a scheme, https is assumed."""

    default_validators: list[Any] = []


class WebhookForm(forms.Form):
    """The team's webhook; the secret is write-only (blank keeps the stored one; with none
    stored yet, blank makes RLark generate one and show it once)."""

    url = WebhookURLField(
        label=gettext_lazy("URL"), max_length=500, assume_scheme="https",
        validators=[validate_webhook_url],
        help_text=gettext_lazy("RLark POSTs each event here as signed JSON."),
    )
    secret = forms.CharField(
        label=gettext_lazy("Secret"), required=False, min_length=services.SECRET_MIN,
        max_length=services.SECRET_MAX, strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    enabled = forms.BooleanField(label=gettext_lazy("Send events"), required=False)

    def __init__(self, *args: Any, webhook: TeamWebhook | None = None, **kwargs: Any) -> None:
        if webhook is not None:
            kwargs.setdefault("initial", {"url": webhook.url, "enabled": webhook.enabled})
        else:
            kwargs.setdefault("initial", {"enabled": True})
        super().__init__(*args, **kwargs)
        self.fields["secret"].help_text = (
            _("A secret is stored (never shown); leave blank to keep it, or type a new one.")
            if webhook is not None else
            _("The key of the HMAC-SHA256 signature, %(min)d to %(max)d characters; leave "
              "blank to have RLark generate one (shown once).")
            % {"min": services.SECRET_MIN, "max": services.SECRET_MAX})


def _page_context(request: HttpRequest, team: Team) -> dict[str, Any]:
    webhook = TeamWebhook.objects.filter(team=team).first()
    page = Paginator(team_deliveries(team=team), DELIVERIES_PER_PAGE).get_page(
        request.GET.get("page"))
    return {"team": team, "webhook": webhook, "page": page,
            "memberships": team_memberships(team=team),
            "can_edit": can_manage_members(request.user, team)}


@login_required
@require_GET
def team_list(request: HttpRequest) -> HttpResponse:
    """The teams the user belongs to (every team for platform admins)."""
    return render(request, "jobs/notify/team_list.html", {
        "teams": visible_teams(request.user).order_by("slug"),
        "is_admin": is_platform_admin(request.user),
    })


@login_required
@require_http_methods(["GET", "POST"])
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """Members, webhook settings and the delivery log; only maintainers (and platform admins)
    may post the webhook form."""
    team = access_team(request.user, slug)
    context = _page_context(request, team)
    form = WebhookForm(webhook=context["webhook"]) if context["can_edit"] else None
    if request.method == "POST":
        if not context["can_edit"]:
            raise PermissionDenied(_("Only team maintainers and platform admins manage the "
                                     "team's webhook."))
        form = WebhookForm(request.POST, webhook=context["webhook"])
        if form.is_valid():
            webhook, generated = services.webhook_save(
                team=team, url=form.cleaned_data["url"],
                secret=form.cleaned_data["secret"] or None,
                enabled=form.cleaned_data["enabled"])
            if not generated:
                messages.success(request, _("Webhook saved."))
                return redirect("teams:detail", slug=team.slug)
            context = _page_context(request, team)
            form = WebhookForm(webhook=webhook)
            context["new_secret"] = generated
    context["form"] = form
    return render(request, "jobs/notify/team.html", context)
