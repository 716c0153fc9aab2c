"""Reads of job drafts and SSH keys, always scoped to the user's teams."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from jobs.models import Job, SSHKey
from rlark_site.exceptions import NotFoundError
from rlark_site.tenancy.access import access_team_object, scope_to_member_teams, teams_for_user
from rlark_site.tenancy.models import Team

__all__ = [
    "job_get_for_user",
    "job_list_for_user",
    "ssh_key_get_for_team",
    "ssh_keys_for_team",
    "team_for_user",
]


def _jobs() -> QuerySet[Job]:
    return Job.objects.select_related("team", "created_by")


def job_list_for_user(user: Any, *, team: Team | None = None) -> QuerySet[Job]:
    """The jobs of the user's teams (of one of them when `team` is given), newest first."""
    jobs = scope_to_member_teams(_jobs(), user)
    if team is not None:
        jobs = jobs.filter(team=team)
    return jobs.order_by("-updated_at", "-id")


def job_get_for_user(user: Any, name: str) -> Job:
    """One job of the user's teams by name, with its roles; 404 when missing or another team's."""
    return access_team_object(_jobs().prefetch_related("roles"), user, name=name)


def team_for_user(user: Any, slug: str | None = None) -> Team:
    """The team named by `slug` among the user's teams, else their first team (by slug).

    Missing and "not yours" give the same 404.
    """
    teams = teams_for_user(user).order_by("slug")
    team = teams.filter(slug=slug).first() if slug else teams.first()
    if team is None:
        raise NotFoundError(_("Team not found.") if slug else _("You are not in any team."))
    return team


def ssh_keys_for_team(team: Team) -> QuerySet[SSHKey]:
    return SSHKey.objects.filter(team=team).select_related("created_by").order_by("name")


def ssh_key_get_for_team(team: Team, **lookup: Any) -> SSHKey:
    """One of the team's keys (by name or pk); 404 when missing or another team's."""
    key = ssh_keys_for_team(team).filter(**lookup).first()
    if key is None:
        raise NotFoundError(_("SSH key not found."))
    return key
