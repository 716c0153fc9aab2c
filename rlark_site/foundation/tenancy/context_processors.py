from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from rlark_site.foundation.tenancy.access import current_team, is_platform_admin, teams_for_user


def tenancy(request: HttpRequest) -> dict[str, Any]:
    if not request.user.is_authenticated:
        return {}
    return {
        "current_team": current_team(request),
        "my_teams": list(teams_for_user(request.user).order_by("slug")),
        "is_platform_admin": is_platform_admin(request.user),
    }
