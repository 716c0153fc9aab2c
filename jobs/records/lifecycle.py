"""The run state machine: the one place that says how a run's state may move.

A job is a draft until it is submitted; submission creates its `RunRecord`, and from then on
`RunRecord.state` is the run's state (the job's state is derived from it). Every write of
that state goes through `move` (one record in memory) or filters on `sources` (a
conditional UPDATE of many rows), so no code path can take a transition this table does not
allow::

    queued ──claim──▶ submitting ──created──▶ pending ◀──▶ running
      ▲                 │  │                     │            │
      └──transient error┘  └──permanent──▶ submit_failed      ├──▶ succeeded
                                                  │           └──▶ failed (or gone)
    queued, submitting, pending, running ──cancel──▶ cancelled

`submitting → submitting` is a worker taking over the claim of a crashed one (its lease
expired). `submit_failed`, `succeeded`, `failed` and `cancelled` are final.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from django.utils.translation import gettext as _

from jobs.models import JobState, RunRecord
from rlark_site.foundation.exceptions import ApplicationError

__all__ = [
    "ACTIVE_STATES",
    "CANCELLABLE_STATES",
    "FINAL_STATES",
    "PHASE_STATES",
    "TRANSITIONS",
    "IllegalTransition",
    "can_move",
    "move",
    "sources",
]

TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    JobState.QUEUED: frozenset({JobState.SUBMITTING, JobState.CANCELLED}),
    JobState.SUBMITTING: frozenset({
        JobState.SUBMITTING, JobState.QUEUED, JobState.PENDING, JobState.SUBMIT_FAILED,
        JobState.CANCELLED,
    }),
    JobState.PENDING: frozenset({
        JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED,
    }),
    JobState.RUNNING: frozenset({
        JobState.PENDING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED,
    }),
    JobState.SUBMIT_FAILED: frozenset(),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

# The Job's `status.phase` on the cluster, as a run state.
PHASE_STATES: Final[Mapping[str, str]] = {
    "Pending": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Succeeded": JobState.SUCCEEDED,
    "Failed": JobState.FAILED,
}


def sources(target: str) -> tuple[str, ...]:
    """The states from which a run may move to `target` (sorted, for conditional UPDATEs)."""
    return tuple(sorted(state for state, targets in TRANSITIONS.items() if target in targets))


# A run the cluster has (status sync follows it); a run a user may cancel; runs that are over.
ACTIVE_STATES: Final = (JobState.PENDING, JobState.RUNNING)
CANCELLABLE_STATES: Final = sources(JobState.CANCELLED)
FINAL_STATES: Final = tuple(sorted(state for state, targets in TRANSITIONS.items() if not targets))


class IllegalTransition(ApplicationError):
    """A step the state machine does not allow (answered 409 where it reaches a user)."""

    def __init__(self, current: str, target: str) -> None:
        super().__init__(
            _("A run cannot go from %(current)s to %(target)s.")
            % {"current": current, "target": target},
            extra={"state": current}, status_code=409,
        )


def can_move(current: str, target: str) -> bool:
    return target in TRANSITIONS.get(current, frozenset())


def move(record: RunRecord, target: str, *, now: datetime) -> list[str]:
    """Set `record.state` to `target` with what a state implies; the changed field names.

    Staying in the same state is no transition (nothing changes). Entering `pending` starts
    its deadline clock; leaving it clears the "Pending too long" flag. The caller holds the
    row (lock or conditional UPDATE) and saves the returned fields.
    """
    if record.state == target:
        return []
    if not can_move(record.state, target):
        raise IllegalTransition(record.state, target)
    record.state = target
    changed = ["state"]
    if target == JobState.PENDING:
        record.pending_since = now
        changed.append("pending_since")
    if record.pending_flagged:
        record.pending_flagged = False
        changed.append("pending_flagged")
    return changed
