"""The status pass's event check (`emit_run_changes`): called with every active run of a
cluster on every pass, it must cost the same whatever the number of runs once their events are
recorded, and still record each event exactly once, for the run's own team."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import EventKind, Job, JobState, NotificationEvent, RunRecord
from jobs.notify.services import emit_run_changes
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db


def runs(team: Team, owner: Any, count: int, *, prefix: str, state: str) -> list[RunRecord]:
    made = []
    for index in range(count):
        job = Job.objects.create(team=team, name=f"{prefix}-{index}", created_by=owner)
        made.append(run_record_for(job, state=state))
    return made


def fresh(records: list[RunRecord]) -> list[RunRecord]:
    """The runs as a status pass reads them (no team loaded)."""
    return list(RunRecord.objects.filter(pk__in=[r.pk for r in records]))


@pytest.mark.parametrize("count", [3, 30])
def test_a_pass_with_nothing_new_costs_two_queries_whatever_the_runs(
        team: Team, owner: Any, count: int, django_assert_num_queries: Any) -> None:
    records = runs(team, owner, count, prefix="run", state=JobState.RUNNING)
    assert emit_run_changes(fresh(records)) == count
    again = fresh(records)
    with django_assert_num_queries(2):  # the runs' states, the events already recorded
        assert emit_run_changes(again) == 0
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_RUNNING).count() == count


def test_each_event_is_recorded_once_with_the_runs_team(
        team: Team, other_team: Team, owner: Any, outsider: Any) -> None:
    ours = runs(team, owner, 2, prefix="ours", state=JobState.RUNNING)
    theirs = runs(other_team, outsider, 1, prefix="theirs", state=JobState.FAILED)
    pending = runs(team, owner, 1, prefix="late", state=JobState.PENDING)
    RunRecord.objects.filter(pk=pending[0].pk).update(pending_flagged=True)
    everything = [*ours, *theirs, *pending]
    assert emit_run_changes(fresh(everything)) == 4
    assert emit_run_changes(fresh(everything)) == 0
    events = {e.key: e for e in NotificationEvent.objects.all()}
    assert set(events) == {f"job_running:{ours[0].pk}", f"job_running:{ours[1].pk}",
                           f"job_failed:{theirs[0].pk}", f"pending_overdue:{pending[0].pk}"}
    assert events[f"job_failed:{theirs[0].pk}"].team == other_team
    assert events[f"job_failed:{theirs[0].pk}"].payload["team"] == other_team.slug
    assert events[f"pending_overdue:{pending[0].pk}"].payload["state"] == JobState.PENDING
    # A run that moves on gets its new event in a later pass.
    RunRecord.objects.filter(pk=ours[0].pk).update(state=JobState.SUCCEEDED)
    assert emit_run_changes(fresh(everything)) == 1
    assert NotificationEvent.objects.filter(key=f"job_succeeded:{ours[0].pk}").exists()


def test_no_runs_cost_nothing(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        assert emit_run_changes([]) == 0
