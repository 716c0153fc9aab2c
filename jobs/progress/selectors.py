"""Reads of a run's progress: SPEC 16's `progress` body, from the database only (the reader
fills it once per pass; a page or an API call never reads a cluster for it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef

from jobs.core.progress import POINTS_MAX, progress_settings, rate_per_hour
from jobs.models import JobState, RunProgress, RunRecord, StallEpisode

__all__ = ["episodes_body", "iso", "progress_body", "progress_view", "stalled_jobs"]


def iso(moment: datetime | None) -> str | None:
    """An aware time as ISO 8601 in UTC with a `Z` (None stays None)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _from_unix(milliseconds: int) -> str:
    moment = datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _series(progress: RunProgress) -> list[list[int]]:
    """The stored points and the newest step (a point only when the series lacks it), at most
    POINTS_MAX (SPEC 16): with a full series the newest step takes the place of the last stored
    point rather than making one more."""
    points = [[int(t), int(s)] for t, s in progress.points or []][-POINTS_MAX:]
    if progress.step is not None and progress.last_step_at is not None and (
            not points or points[-1][1] != progress.step):
        if len(points) >= POINTS_MAX:
            points.pop()
        points.append([int(progress.last_step_at.timestamp() * 1000), int(progress.step)])
    return points


def stalled_jobs() -> Exists:
    """The filter of jobs whose run has an open stall episode (the job list's `stalled`)."""
    return Exists(StallEpisode.objects.filter(run_record__job=OuterRef("pk"), ended_at=None,
                                              run_record__state=JobState.RUNNING))


def episodes_body(record: RunRecord) -> list[dict[str, Any]]:
    """Every stall episode of the run, oldest first (the GPU-hours split reads these)."""
    return [{
        "number": e.number, "started_at": iso(e.started_at),
        "last_progress_at": iso(e.last_progress_at), "detected_at": iso(e.detected_at),
        "ended_at": iso(e.ended_at), "end": e.end or None, "step": e.step,
        "recovered_step": e.recovered_step, "stall_after_seconds": e.stall_after_seconds,
        "cancel_requested_at": iso(e.cancel_requested_at), "cause": e.cause or None,
    } for e in record.stall_episodes.order_by("number")]


def _kept_progress(record: RunRecord) -> RunProgress | None:
    """The run's `RunProgress` (from `select_related("progress")` when the caller read it so,
    else one query)."""
    try:
        return record.progress
    except RunProgress.DoesNotExist:
        return None


def progress_body(record: RunRecord | None) -> dict[str, Any]:
    """SPEC 16's `progress` of a run: step, total, percent, times, rate, ETA, stall, series."""
    return progress_view(record)[0]


def progress_view(record: RunRecord | None) -> tuple[dict[str, Any], list[list[int]]]:
    """`progress_body` and the series as [[unix ms, step], ...] (what the chart draws)."""
    settings = progress_settings(record.launch_list_snapshot.get("progress")
                                 if record is not None else None)
    body: dict[str, Any] = {
        "step": None, "total": None, "percent": None, "first_step_at": None,
        "last_step_at": None, "steps_per_hour": None, "eta": None, "stalled": False,
        "stalled_since": None, "points": [], "restarts": 0,
        "pattern": settings.pattern, "stall_after_seconds": settings.stall_after_seconds,
        "cancel_after_stalled_seconds": settings.cancel_after_stalled_seconds,
        "episodes": [],
    }
    if record is None:
        return body, []
    progress = _kept_progress(record)
    episodes = episodes_body(record) if progress is not None else []  # none before a read
    open_episode = next((e for e in episodes if e["ended_at"] is None), None)
    stalled = open_episode is not None and record.state == JobState.RUNNING
    body.update(episodes=episodes, stalled=stalled,
                stalled_since=open_episode["started_at"] if stalled and open_episode else None)
    if progress is None:
        return body, []
    points = _series(progress)
    rate = rate_per_hour(points)
    step, total = progress.step, progress.total
    eta = None
    if rate and total is not None and step is not None and not stalled and \
            record.state == JobState.RUNNING and progress.last_step_at is not None:
        eta = iso(progress.last_step_at + timedelta(hours=(total - step) / rate))
    body.update(
        step=step, total=total,
        percent=round(min(100.0, step / total * 100), 1) if step is not None and total else None,
        first_step_at=iso(progress.first_step_at), last_step_at=iso(progress.last_step_at),
        steps_per_hour=rate, eta=eta, restarts=progress.restarts,
        points=[[_from_unix(t), s] for t, s in points])
    return body, points
