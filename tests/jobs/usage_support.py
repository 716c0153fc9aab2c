"""Runs with stored timelines (pod attempts, status history, stall episodes) at set times, for
the usage tests: the rows the status and progress passes would have written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.models import (
    Job,
    JobState,
    PodAttempt,
    Role,
    RunRecord,
    StallEpisode,
    StatusChange,
)
from rlark_site.foundation.tenancy.models import Team

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)  # a Monday


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def stored_run(*, team: Team, user: Any, name: str, roles: dict[str, int],
               pods: list[tuple[str, int, float | None, float | None, str]],
               phases: list[tuple[float, str]], state: str = JobState.SUCCEEDED,
               stalls: list[tuple[float, float | None]] = (),  # type: ignore[assignment]
               cancelled: float | None = None) -> RunRecord:
    """A run of `team` with `roles` {name: GPUs per pod} and `pods` (task, replica, bound
    minute, finished minute, phase), its status history `phases` (minute, phase)."""
    job = Job.objects.create(team=team, name=name, created_by=user)
    for position, (role_name, gpus) in enumerate(roles.items()):
        Role.objects.create(job=job, position=position, name=role_name, gpus=gpus)
    record = RunRecord.objects.create(
        team=team, job=job, job_name=name, cluster="gpu-a", namespace="rl", manifest_yaml="{}",
        manifest_sha256="0" * 64, frozen_by=user, state=state, submitted_at=at(-10),
        cancelled_at=at(cancelled) if cancelled is not None else None)
    for index, (task, replica, bound, finished, phase) in enumerate(pods):
        PodAttempt.objects.create(
            run_record=record, task=task, replica=replica, pod_name=f"{name}-{task}-{replica}",
            pod_uid=f"{name}-{index}", phase=phase, pod_created_at=at(-5),
            started_at=at(bound) if bound is not None else None,
            finished_at=at(finished) if finished is not None else None, captured_at=at(0))
    for minute, phase in phases:
        change = StatusChange.objects.create(run_record=record, phase=phase)
        StatusChange.objects.filter(pk=change.pk).update(observed_at=at(minute))
    for number, (start, end) in enumerate(stalls, start=1):
        StallEpisode.objects.create(
            run_record=record, number=number, started_at=at(start), last_progress_at=at(start - 1),
            detected_at=at(start), stall_after_seconds=60,
            ended_at=at(end) if end is not None else None, end="recovered" if end else "")
    return record
