from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from rlark_site.navigation import QUEUE
from rlark_site.tenancy.access import is_platform_admin, teams_for_user


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
