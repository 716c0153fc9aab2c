from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from rlark_site.foundation.tenancy.access import (
    current_team_among,
    is_platform_admin,
    teams_for_user,
)


def tenancy(request: HttpRequest) -> dict[str, Any]:
    """The user's teams (for the switcher) and the current one among them: one query."""
    if not request.user.is_authenticated:
        return {}
    teams = list(teams_for_user(request.user).order_by("slug"))
    return {
        "current_team": current_team_among(request, teams),
        "my_teams": teams,
        "is_platform_admin": is_platform_admin(request.user),
    }
