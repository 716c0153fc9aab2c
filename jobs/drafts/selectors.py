"""Reads of job drafts and SSH keys, always scoped to the user's teams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce
from django.utils.translation import gettext as _

from jobs.models import Job, JobState, Role, SSHKey
from jobs.progress.selectors import stalled_jobs
from rlark_site.foundation.exceptions import NotFoundError
from rlark_site.foundation.tenancy.access import (
    access_team_object,
    scope_to_member_teams,
    teams_for_user,
)
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "JOB_SORTS",
    "JOB_SUMMARY_COLUMNS",
    "JobListQuery",
    "JobSummaries",
    "job_creators",
    "job_get_for_evaluation",
    "job_get_for_user",
    "job_list_for_user",
    "job_search",
    "job_summaries",
    "jobs_in_state",
    "ssh_key_get_for_team",
    "ssh_keys_for_team",
    "team_for_user",
]


def _jobs() -> QuerySet[Job]:
    return Job.objects.select_related("team", "created_by", "run_record")


def job_list_for_user(user: Any, *, team: Team | None = None) -> QuerySet[Job]:
    """The jobs of the user's teams (of one of them when `team` is given), newest first."""
    jobs = scope_to_member_teams(_jobs(), user)
    if team is not None:
        jobs = jobs.filter(team=team)
    return jobs.order_by("-updated_at", "-id")


# sort name → ordering; every ordering ends on a unique column so pages never overlap
JOB_SORTS: dict[str, tuple[str | OrderBy, ...]] = {
    "-updated": ("-updated_at", "-id"),
    "updated": ("updated_at", "id"),
    "-created": ("-created_at", "-id"),
    "created": ("created_at", "id"),
    "name": ("name",),
    "-name": ("-name",),
    "state": (Coalesce(F("run_record__state"), Value(JobState.DRAFT)).asc(), "-updated_at",
              "-id"),
}


@dataclass(frozen=True)
class JobListQuery:
    """What the job list is asked for (page and API alike); empty means "any"."""

    search: str = ""
    state: str = ""
    cluster: str = ""
    creator: str = ""
    pending_flagged: bool = False
    stalled: bool = False
    sort: str = "-updated"


def jobs_in_state(jobs: QuerySet[Job], state: str) -> QuerySet[Job]:
    """The one place the list filters by a job's state (derived: `Job.in_state`)."""
    return jobs.filter(Job.in_state(state))


def _on_cluster(jobs: QuerySet[Job], cluster: str) -> QuerySet[Job]:
    """Submitted jobs by the cluster they run on; drafts by their roles' clusters."""
    placed = Role.objects.filter(job=OuterRef("pk"), cluster=cluster)
    return jobs.filter(
        Q(run_record__cluster=cluster) | (Q(run_record__isnull=True) & Exists(placed))
    )


def job_search(user: Any, query: JobListQuery, *, team: Team | None = None) -> QuerySet[Job]:
    """The user's jobs (one team's when given) matching `query`, in its order."""
    jobs = job_list_for_user(user, team=team)
    if query.search:
        jobs = jobs.filter(name__icontains=query.search)
    if query.state:
        jobs = jobs_in_state(jobs, query.state)
    if query.cluster:
        jobs = _on_cluster(jobs, query.cluster)
    if query.creator:
        jobs = jobs.filter(created_by__username=query.creator)
    if query.pending_flagged:
        jobs = jobs.filter(run_record__pending_flagged=True)
    if query.stalled:
        jobs = jobs.filter(stalled_jobs())
    return jobs.order_by(*JOB_SORTS.get(query.sort, JOB_SORTS["-updated"]))


# What a row of the job list shows (JobSummarySerializer's fields), by column.
JOB_SUMMARY_COLUMNS = ("name", "team__slug", "task_type", "wizard_step", "created_by__username",
                       "created_at", "updated_at", "run_record__state", "run_record__submitted_at",
                       "run_record__pending", "run_record__pending_flagged",
                       "run_record__progress__step", "run_record__progress__total")


@dataclass(frozen=True)
class JobSummaries:
    """`jobs` as the list's rows, for a paginator: a slice reads only the columns a row shows
    (a run's manifest and snapshots never), as dicts rather than a job, team, user and run
    record instance each; the count is the jobs' own (joining nothing a row needs to show)."""

    jobs: QuerySet[Job]

    def count(self) -> int:
        return self.jobs.count()

    def __getitem__(self, window: slice) -> QuerySet[Job, dict[str, Any]]:
        return self.jobs[window].values(*JOB_SUMMARY_COLUMNS, stalled=stalled_jobs())


def job_summaries(jobs: QuerySet[Job]) -> JobSummaries:
    return JobSummaries(jobs)


def job_creators(team: Team) -> list[str]:
    """Who created the team's jobs (the list's creator filter offers them)."""
    return list(Job.objects.filter(team=team).order_by("created_by__username")
                .values_list("created_by__username", flat=True).distinct())


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


def job_get_for_evaluation(user: Any, name: str) -> Job:
    """`job_get_for_user` with only what `jobs.context.evaluate` reads: the job and its team
    (its roles are then read once by `spec_from_job`; for one job a prefetch is the same
    query with more work around it)."""
    return access_team_object(Job.objects.select_related("team"), user, name=name)
