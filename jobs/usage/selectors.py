"""GPU-hours per team, user, job, day or week (SPEC 16): the query behind `GET usage/`, the team
usage page and its CSV export.

A report reads a fixed number of statements whatever the number of runs (the runs of the
window, then their pods, status history, stall episodes, roles' GPUs and, when it exists, GPU
idleness, each in one statement) and adds everything up in one pass through
`jobs.core.usage`. The window is at most `MAX_DAYS` long and a report covers at most
`MAX_RUNS` runs: more is a clear 400 asking for a narrower window or one team.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.db.models import F, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _

from jobs.core.usage import Attempt, Run, add_up, day_of, hours, spans, week_of
from jobs.gpu import conf as gpu_conf
from jobs.models import (
    GpuIdleEpisode,
    JobState,
    PodAttempt,
    Role,
    RunRecord,
    StallEpisode,
    StatusChange,
)
from jobs.records.lifecycle import ACTIVE_STATES
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import access_team, visible_teams
from rlark_site.foundation.tenancy.models import Team

__all__ = ["GROUPS", "MAX_DAYS", "MAX_RUNS", "UsageQuery", "UsageReport", "parse_query",
           "run_gpu_hours", "usage_report"]

GROUPS = ("day", "week", "user", "job")
MAX_DAYS = 366
MAX_RUNS = 20_000
DEFAULT_DAYS = 30
_FAILED_STATES = (JobState.FAILED,)
_ENDED_POD = frozenset({"Succeeded", "Failed"})
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class UsageQuery:
    """A validated query: the teams it covers, the window [start, end), the grouping."""

    teams: tuple[Team, ...]
    start: datetime
    end: datetime
    group_by: str
    team: str  # the slug asked for ("" for all the user's teams)


def _bad(message: str, name: str) -> ApplicationError:
    return ApplicationError(message, extra={"field": name})


def _moment(text: str, name: str, *, end: bool) -> datetime:
    """A date (its midnight UTC; for `to`, the next midnight: the day is included) or an ISO
    8601 date-time (UTC without an offset)."""
    text = text.strip()
    moment: datetime | None = None
    day = None
    try:
        if _DATE_ONLY.fullmatch(text):
            day = parse_date(text)
        else:
            moment = parse_datetime(text)
    except ValueError:
        moment = day = None
    if moment is None and day is None:
        raise _bad(_("%(name)s must be a date (YYYY-MM-DD) or an ISO 8601 date-time.")
                   % {"name": name}, name)
    if day is not None:
        moment = datetime.combine(day + timedelta(days=1) if end else day, time(), tzinfo=UTC)
    assert moment is not None
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


def parse_query(user: Any, params: Any, *, now: datetime | None = None) -> UsageQuery:
    """`team`, `from`, `to` and `group_by` checked: a clear 400 naming the field for a bad one,
    404 for a team that is not the user's (platform admins see every team)."""
    now = now or timezone.now()
    slug = str(params.get("team") or "").strip()
    group_by = str(params.get("group_by") or "day").strip()
    if group_by not in GROUPS:
        raise _bad(_("Unknown group_by %(value)s; use one of: %(groups)s.")
                   % {"value": group_by[:20], "groups": ", ".join(GROUPS)}, "group_by")
    raw_to, raw_from = params.get("to"), params.get("from")
    end = _moment(str(raw_to), "to", end=True) if raw_to else now
    start = _moment(str(raw_from), "from", end=False) if raw_from else \
        day_of(end - timedelta(days=DEFAULT_DAYS))
    if start >= end:
        raise _bad(_("from must be before to."), "from")
    if end - start > timedelta(days=MAX_DAYS):
        raise _bad(_("The window is longer than %(days)s days; ask for a shorter one.")
                   % {"days": MAX_DAYS}, "from")
    teams = (access_team(user, slug),) if slug else tuple(visible_teams(user).order_by("slug"))
    return UsageQuery(teams=teams, start=start, end=end, group_by=group_by, team=slug)


@dataclass
class UsageReport:
    query: UsageQuery
    now: datetime
    runs: int
    with_idle: bool
    total: dict[str, float | None]
    groups: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "team": self.query.team or None,
            "teams": [team.slug for team in self.query.teams],
            "from": _iso(self.query.start), "to": _iso(self.query.end),
            "counted_until": _iso(min(self.query.end, self.now)),
            "group_by": self.query.group_by, "unit": "GPU-hours", "runs": self.runs,
            "idle_measured": self.with_idle, "total": self.total, "groups": self.groups,
        }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _with_end(records: QuerySet[RunRecord]) -> QuerySet[RunRecord]:
    """The runs with `ended`: the later of their last status change and their cancel."""
    last_change = StatusChange.objects.filter(run_record=OuterRef("pk")).order_by().values(
        "run_record").annotate(last=Max("observed_at")).values("last")
    # PostgreSQL's GREATEST skips NULLs: the later of the two that exist.
    return records.annotate(ended=Greatest(Subquery(last_change), F("cancelled_at")))


def _runs_of(query: UsageQuery) -> QuerySet[RunRecord]:
    """The runs of the teams that may have held GPUs in the window: submitted before its end,
    and still active or ended after its start."""
    return (_with_end(RunRecord.objects.filter(team__in=[t.pk for t in query.teams],
                                               submitted_at__isnull=False,
                                               submitted_at__lt=query.end))
            .filter(Q(state__in=ACTIVE_STATES) | Q(ended__gte=query.start)
                    | Q(ended__isnull=True)))


_ROW_FIELDS = ("pk", "job_id", "job_name", "state", "ended", "status_checked_at", "submitted_at",
               "team__slug", "frozen_by__username")


def _gpus(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


_Rows = dict[int, list[Any]]


def _grouped(rows: Sequence[tuple[Any, ...]]) -> _Rows:
    grouped: _Rows = defaultdict(list)
    for row in rows:
        grouped[row[0]].append(row[1:])
    return grouped


def _idle_periods(ids: Sequence[int]) -> tuple[bool, _Rows]:
    """Whether GPU idleness is measured (Prometheus configured: `jobs.gpu`), and then the
    runs' idle episodes as intervals `[started_at, last_idle_at]` (jobs/gpu/models.py)."""
    if not gpu_conf.prometheus_url():
        return False, {}
    return True, _grouped(list(GpuIdleEpisode.objects.filter(run_record_id__in=ids).order_by()
                               .values_list("run_record_id", "started_at", "last_idle_at")))


def _timelines(query: UsageQuery, now: datetime) -> tuple[list[dict[str, Any]], list[Run], bool]:
    """The runs (their row) and their timelines: six statements at most, whatever their number."""
    runs = list(_runs_of(query).order_by("pk").values(*_ROW_FIELDS)[:MAX_RUNS + 1])
    if len(runs) > MAX_RUNS:
        raise _bad(_("More than %(count)s runs in this window; ask for a shorter window or "
                     "one team.") % {"count": MAX_RUNS}, "from")
    if not runs:
        return [], [], False
    timelines, with_idle = _timelines_of(runs)
    return runs, timelines, with_idle


def _timelines_of(runs: Sequence[dict[str, Any]]) -> tuple[list[Run], bool]:
    """The timelines of these runs (rows of `_ROW_FIELDS`): pods, status history, stall
    episodes, roles' GPUs and (when measured) GPU idleness, one statement each."""
    ids = [row["pk"] for row in runs]
    pods = _grouped(list(PodAttempt.objects.filter(run_record_id__in=ids).order_by().values_list(
        "run_record_id", "task", "replica", "pod_created_at", "started_at", "finished_at",
        "phase", "exit_code")))
    phases = _grouped(list(StatusChange.objects.filter(run_record_id__in=ids).order_by(
        "observed_at", "id").values_list("run_record_id", "observed_at", "phase")))
    stalls = _grouped(list(StallEpisode.objects.filter(run_record_id__in=ids).order_by()
                           .values_list("run_record_id", "started_at", "ended_at")))
    gpus: dict[int, dict[str, int]] = defaultdict(dict)
    for job_id, name, value in Role.objects.filter(
            job_id__in=[row["job_id"] for row in runs]).values_list("job_id", "name", "gpus"):
        gpus[job_id][str(name).lower()] = _gpus(value)
    with_idle, idle = _idle_periods(ids)
    timelines = []
    for row in runs:
        per_task = gpus.get(row["job_id"], {})
        attempts = [Attempt(
            task=task, replica=replica, gpus=per_task.get(task, 0), created_at=created,
            bound_at=bound, ended_at=finished if phase in _ENDED_POD else None,
            failed=phase == "Failed" or bool(exit_code))
            for task, replica, created, bound, finished, phase, exit_code in pods[row["pk"]]]
        active = row["state"] in ACTIVE_STATES
        timelines.append(Run(
            attempts=attempts, phases=[(at, phase) for at, phase in phases[row["pk"]]],
            stalls=[(start, end) for start, end in stalls[row["pk"]]],
            idle=[(start, end) for start, end in idle.get(row["pk"], [])],
            ended_at=None if active else (row["ended"] or row["status_checked_at"]
                                          or row["submitted_at"]),
            failed=row["state"] in _FAILED_STATES))
    return timelines, with_idle


def run_gpu_hours(record: RunRecord | None, *, now: datetime | None = None
                  ) -> dict[str, Any] | None:
    """One run's GPU-hours over its whole life (SPEC 16), by the same rule and timeline as
    `usage_report` (`jobs.core.usage`): reserved, productive, stalled, failed,
    pending_partial and idle (null unless Prometheus is configured), with `idle_measured`;
    a run still holding GPUs is counted up to now. Six statements at most (the run's row,
    then `_timelines_of`'s); None for no run or a run never submitted."""
    if record is None or record.submitted_at is None:
        return None
    now = now or timezone.now()
    runs = list(_with_end(RunRecord.objects.filter(pk=record.pk)).values(*_ROW_FIELDS))
    if not runs:
        return None
    (run,), with_idle = _timelines_of(runs)
    pieces = spans(run, now=now)
    sums = add_up(pieces, start=min((p.start for p in pieces), default=now),
                  end=max((p.end for p in pieces), default=now), key="all").get("all", {})
    return {**hours(sums, with_idle=with_idle), "idle_measured": with_idle}


def _key(group_by: str, row: dict[str, Any]) -> Hashable:
    if group_by == "user":
        return row["frozen_by__username"]
    return row["job_name"]


def usage_report(query: UsageQuery, *, now: datetime | None = None) -> UsageReport:
    """GPU-hours of the query's teams in its window, in total and per group, oldest day or
    week first (user and job groups: most reserved first)."""
    now = now or timezone.now()
    runs, timelines, with_idle = _timelines(query, now)
    table: dict[Hashable, dict[str, float]] = {}
    total: dict[Hashable, dict[str, float]] = {}
    bucket = {"day": day_of, "week": week_of}.get(query.group_by)
    counted = 0
    for row, run in zip(runs, timelines, strict=True):
        pieces = [p for p in spans(run, now=now) if p.start < query.end and p.end > query.start]
        if not pieces:
            continue
        counted += 1
        add_up(pieces, start=query.start, end=query.end, key="all", into=total)
        if bucket is not None:
            add_up(pieces, start=query.start, end=query.end, bucket=bucket, into=table)
        else:
            add_up(pieces, start=query.start, end=query.end, key=_key(query.group_by, row),
                   into=table)
    details = {row["job_name"]: row for row in runs}
    groups = []
    for key, sums in table.items():
        group: dict[str, Any] = {"key": key.date().isoformat() if isinstance(key, datetime)
                                 else key, **hours(sums, with_idle=with_idle)}
        if query.group_by == "job":
            row = details[str(key)]
            group.update(team=row["team__slug"], user=row["frozen_by__username"],
                         state=row["state"])
        groups.append(group)
    if bucket is not None:
        groups.sort(key=lambda g: g["key"])
    else:
        groups.sort(key=lambda g: (-g["reserved"], g["key"]))
    return UsageReport(query=query, now=now, runs=counted, with_idle=with_idle,
                       total=hours(total.get("all", {}), with_idle=with_idle), groups=groups)

