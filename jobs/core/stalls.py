"""A run's stall episodes: advancing -> stalled -> recovered (SPEC 16). Pure: no database.

A Running run is **stalled** when no new step arrived for its launch list's
`stall_after_seconds`, counted from its last new step; before its first step, counted from
when it was seen Running, with the launch list's first-signal deadline (its shortest
`within_minutes`) instead when that is shorter. A run that went back to Pending and is Running
again counts from its return. The stall begins at that moment (`reference + limit`), not when
a pass noticed it: `started_at` is the same whichever pass sees it first.

`decide` is the whole machine: given the open episode (None while advancing) and what the
reader knows now, it says what happens: nothing, a new episode, a recovery (a new step came),
or a cancel (the episode has lasted `cancel_after_stalled_seconds`, asked once). An episode is
only opened from a read that reached the end of the log (`caught_up`): a log the reader could
not read, or is behind on, says nothing about whether steps stopped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["Decision", "Episode", "Observed", "Verdict", "decide", "stall_moment"]


@dataclass(frozen=True)
class Observed:
    """What is known of a Running run at `now`."""

    now: datetime
    running_since: datetime  # the last time it (re)entered Running
    last_step_at: datetime | None  # when the step last changed (None: no step yet)
    stall_after_seconds: int
    first_signal_seconds: int | None = None  # the launch list's shortest first-signal deadline
    cancel_after_stalled_seconds: int | None = None
    caught_up: bool = True


@dataclass(frozen=True)
class Episode:
    """An open stall episode."""

    started_at: datetime
    last_progress_at: datetime  # the last new step (or Running) before it
    cancel_requested: bool = False


class Verdict(enum.StrEnum):
    NONE = "none"
    STALLED = "stalled"
    RECOVERED = "recovered"
    CANCEL = "cancel"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    started_at: datetime | None = None  # STALLED: when the stall began
    last_progress_at: datetime | None = None  # STALLED: the progress before it
    ended_at: datetime | None = None  # RECOVERED: when the new step came


def stall_moment(seen: Observed) -> tuple[datetime, datetime]:
    """(the last progress, the moment the run is stalled when nothing comes until then)."""
    if seen.last_step_at is None:
        limit = seen.stall_after_seconds
        if seen.first_signal_seconds is not None:
            limit = min(limit, seen.first_signal_seconds)
        return seen.running_since, seen.running_since + timedelta(seconds=limit)
    reference = max(seen.last_step_at, seen.running_since)
    return reference, reference + timedelta(seconds=seen.stall_after_seconds)


def decide(open_episode: Episode | None, seen: Observed) -> Decision:
    """The next step of the machine for one run."""
    if open_episode is not None:
        if seen.last_step_at is not None and seen.last_step_at > open_episode.last_progress_at:
            return Decision(Verdict.RECOVERED,
                            ended_at=max(seen.last_step_at, open_episode.started_at))
        cancel_after = seen.cancel_after_stalled_seconds
        if (cancel_after is not None and not open_episode.cancel_requested
                and seen.now >= open_episode.started_at + timedelta(seconds=cancel_after)):
            return Decision(Verdict.CANCEL)
        return Decision(Verdict.NONE)
    last_progress, stalled_at = stall_moment(seen)
    if seen.caught_up and seen.now >= stalled_at:
        return Decision(Verdict.STALLED, started_at=stalled_at, last_progress_at=last_progress)
    return Decision(Verdict.NONE)
