"""Tenant access: every tenant-owned read goes through these functions.

Zulip's rule: "missing" and "not yours" give the same answer (404), so nothing leaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.utils.translation import gettext as _
from rest_framework.permissions import BasePermission

from rlark_site.foundation.exceptions import AdminOnlyError, NotFoundError
from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

M = TypeVar("M", bound=Model)
AnyUser = Any  # a User or AnonymousUser (django-stubs types request.user loosely)


def is_platform_admin(user: AnyUser) -> bool:
    return bool(user.is_authenticated and getattr(user, "is_staff", False))


def require_platform_admin(user: AnyUser) -> None:
    """The one check for admin-only work: 403 (AdminOnlyError) in pages and API alike.

    403, not 404: which routes are admin-only is public (docs/api.md), and refusing them tells
    nothing about any team's data; tenant-owned objects keep answering 404.
    """
    if not is_platform_admin(user):
        raise AdminOnlyError(_("Only platform admins may do this."))


class IsPlatformAdmin(BasePermission):
    """DRF's face of `require_platform_admin`: admin-only endpoints answer 403 before anything
    else (even before the body is validated)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        require_platform_admin(request.user)
        return True


def teams_for_user(user: AnyUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).distinct()


def visible_teams(user: AnyUser) -> QuerySet[Team]:
    """Teams a user may look at: their own, or every team for platform admins."""
    if is_platform_admin(user):
        return Team.objects.all()
    return teams_for_user(user)


def access_team(user: AnyUser, slug: str) -> Team:
    team = visible_teams(user).filter(slug=slug).first()
    if team is None:
        raise NotFoundError(_("Team not found."))
    return team


def membership_of(user: AnyUser, team: Team) -> Membership | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(team=team, user=user).first()


def can_manage_members(user: AnyUser, team: Team) -> bool:
    if is_platform_admin(user):
        return True
    membership = membership_of(user, team)
    return membership is not None and membership.role == MemberRole.MAINTAINER


def scope_to_member_teams(queryset: QuerySet[M], user: AnyUser, *,
                          team_field: str = "team", admins_see_all: bool = False) -> QuerySet[M]:
    """Restrict a queryset of tenant-owned rows to the user's teams."""
    if admins_see_all and is_platform_admin(user):
        return queryset
    if not user.is_authenticated:
        return queryset.none()
    return queryset.filter(**{f"{team_field}__memberships__user": user})


def access_team_object(queryset: QuerySet[M], user: AnyUser, *, team_field: str = "team",
                       admins_see_all: bool = False, **lookup: object) -> M:
    """One tenant-owned object, or NotFoundError whether it is missing or another team's."""
    obj = scope_to_member_teams(
        queryset, user, team_field=team_field, admins_see_all=admins_see_all
    ).filter(**lookup).first()
    if obj is None:
        raise NotFoundError(
            _("%(what)s not found.")
            % {"what": str(queryset.model._meta.verbose_name).capitalize()}
        )
    return obj


def current_team(request: object) -> Team | None:
    """The team the user is working in (session choice, else their first team)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return current_team_among(request, list(teams_for_user(user).order_by("slug")))


def current_team_among(request: object, teams: Sequence[Team]) -> Team | None:
    """`current_team` chosen from `teams`, the user's teams ordered by slug (read once by a
    caller that shows them too): the session's choice, else the first one (remembered)."""
    session = getattr(request, "session", {})
    chosen = session.get("current_team")
    team = next((t for t in teams if t.slug == chosen), None) if chosen else None
    if team is None and teams:
        team = teams[0]
        if hasattr(session, "__setitem__"):
            session["current_team"] = team.slug
    return team
