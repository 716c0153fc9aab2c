"""The run state machine (jobs.records.lifecycle): allowed moves, refused moves, side effects."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobState, RunRecord
from jobs.records.lifecycle import (
    CANCELLABLE_STATES,
    FINAL_STATES,
    TRANSITIONS,
    IllegalTransition,
    can_move,
    move,
    sources,
)

RUN_STATES = [state for state in JobState.values if state != JobState.DRAFT]


def test_every_run_state_is_in_the_table_and_draft_is_not() -> None:
    assert sorted(TRANSITIONS) == sorted(RUN_STATES)
    assert all(JobState.DRAFT not in targets for targets in TRANSITIONS.values())


def test_final_and_cancellable_states() -> None:
    assert set(FINAL_STATES) == {
        JobState.SUBMIT_FAILED, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED,
    }
    assert set(CANCELLABLE_STATES) == {
        JobState.QUEUED, JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING,
    }
    assert set(sources(JobState.SUBMITTING)) == {JobState.QUEUED, JobState.SUBMITTING}


@pytest.mark.parametrize("current", RUN_STATES)
@pytest.mark.parametrize("target", RUN_STATES)
def test_move_takes_exactly_the_allowed_steps(current: str, target: str) -> None:
    record = RunRecord(state=current)
    if current == target:
        assert move(record, target, now=timezone.now()) == []
    elif can_move(current, target):
        assert "state" in move(record, target, now=timezone.now())
        assert record.state == target
    else:
        with pytest.raises(IllegalTransition) as refused:
            move(record, target, now=timezone.now())
        assert refused.value.status_code == 409 and record.state == current


def test_entering_pending_starts_the_clock_and_leaving_it_clears_the_flag() -> None:
    now = timezone.now()
    record = RunRecord(state=JobState.SUBMITTING)
    assert move(record, JobState.PENDING, now=now) == ["state", "pending_since"]
    assert record.pending_since == now
    record.pending_flagged = True
    later = now + timedelta(minutes=20)
    assert move(record, JobState.RUNNING, now=later) == ["state", "pending_flagged"]
    assert (record.pending_flagged, record.pending_since) == (False, now)


def test_a_draft_has_no_moves() -> None:
    assert not can_move(JobState.DRAFT, JobState.QUEUED)
