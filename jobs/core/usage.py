"""GPU-hours of a run, split by what the GPUs were doing (SPEC 16). Pure: no database.

A pod **holds** its GPUs from when it was bound (its `status.startTime`, set by the kubelet
once the pod is on a node) until it ended (`Succeeded` / `Failed`: its container's
`finishedAt`), or until it was replaced (the next pod of the same replica was created), or
until the run ended (cancelled: its Job deleted; ended: the status pass saw it end), else up to
`now` (still running). A pod never bound holds nothing. Container restarts inside one pod do
not release its GPUs.

Every moment a run holds GPUs falls in exactly one category, the first that applies:

1. `failed`: the run ended failed and the moment is at or after its failure, the earliest of
   the status pass seeing the Job fail and the end of a failed pod that was its replica's
   last; from there to each pod's cleanup;
2. `pending_partial`: the gang was incomplete: the Job was not Running (before its first
   Running, or back in Pending), or some replica of some role had no pod holding a node;
3. `stalled`: inside one of the run's stall episodes (`jobs.core.stalls`);
4. `productive`: the rest.

`idle` is not a fifth category but an overlay: the held GPU time inside the run's GPU idle
episodes (read from Prometheus, when it is configured), whatever its category.

`reserved` is their sum. `spans` cuts a run's time into pieces of constant GPU count and
category; `add_up` clips the pieces to a window and adds them per bucket (a UTC day, an ISO
week, or one bucket for the whole window), in GPU-seconds. `hours` converts.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = [
    "CATEGORIES",
    "IDLE",
    "Attempt",
    "Piece",
    "Run",
    "add_up",
    "day_of",
    "empty",
    "hours",
    "spans",
    "week_of",
]

PRODUCTIVE, STALLED, FAILED, PENDING_PARTIAL = "productive", "stalled", "failed", "pending_partial"
CATEGORIES = (PRODUCTIVE, STALLED, FAILED, PENDING_PARTIAL)
IDLE = "idle"  # not a category: the held time Prometheus saw idle, whatever its category
RUNNING = "Running"
_ENDED_FAILED = frozenset({"Failed", "Gone"})


@dataclass(frozen=True)
class Attempt:
    """One pod of a run, as its attempt record keeps it."""

    task: str
    replica: int
    gpus: int
    created_at: datetime | None  # the pod object's creation
    bound_at: datetime | None  # status.startTime (None: never on a node)
    ended_at: datetime | None = None  # when it stopped holding its node (None: not seen ending)
    failed: bool = False  # ended Failed (or its container with a non-zero exit code)


@dataclass(frozen=True)
class Run:
    """What is known of one run's timeline."""

    attempts: Sequence[Attempt]
    phases: Sequence[tuple[datetime, str]] = ()  # the status history, oldest first
    stalls: Sequence[tuple[datetime, datetime | None]] = ()  # (started, ended or None: open)
    ended_at: datetime | None = None  # the run's end (None while Pending or Running)
    failed: bool = False  # it ended failed (or gone)
    idle: Sequence[tuple[datetime, datetime | None]] = ()  # GPU idle episodes (Prometheus)


@dataclass(frozen=True)
class Piece:
    start: datetime
    end: datetime
    gpus: int
    category: str
    idle: bool = False  # inside a GPU idle episode (an overlay: also in its category)


def empty() -> dict[str, float]:
    return dict.fromkeys(CATEGORIES, 0.0)


def _holds(run: Run, now: datetime) -> list[tuple[Attempt, datetime, datetime]]:
    """Each attempt's (attempt, held from, held until), the hold clipped to the run's end."""
    by_slot: dict[tuple[str, int], list[Attempt]] = defaultdict(list)
    for attempt in run.attempts:
        by_slot[(attempt.task, attempt.replica)].append(attempt)
    limit = min(run.ended_at, now) if run.ended_at is not None else now
    holds = []
    for attempts in by_slot.values():
        attempts.sort(key=lambda a: (a.created_at or a.bound_at or limit))
        for index, attempt in enumerate(attempts):
            if attempt.bound_at is None:
                continue
            until = attempt.ended_at
            if until is None:
                later = [a.created_at for a in attempts[index + 1:]
                         if a.created_at is not None and a.created_at > attempt.bound_at]
                until = min(later) if later else limit
            until = min(until, limit)
            if until > attempt.bound_at:
                holds.append((attempt, attempt.bound_at, until))
    return holds


def _failed_at(run: Run) -> datetime | None:
    """When a failed run failed: the first failed phase seen, or the end of a failed pod that
    was the last of its replica, whichever came first."""
    if not run.failed:
        return None
    moments = [at for at, phase in run.phases if phase in _ENDED_FAILED]
    last: dict[tuple[str, int], Attempt] = {}
    for attempt in sorted(run.attempts, key=lambda a: (a.created_at or a.bound_at
                                                       or datetime.min.replace(tzinfo=UTC))):
        last[(attempt.task, attempt.replica)] = attempt
    moments += [a.ended_at for a in last.values() if a.failed and a.ended_at is not None]
    if run.ended_at is not None:
        moments.append(run.ended_at)
    return min(moments) if moments else None


def _within(moment: datetime, periods: Iterable[tuple[datetime, datetime | None]]) -> bool:
    return any(start <= moment and (end is None or moment < end) for start, end in periods)


def _running_periods(run: Run) -> list[tuple[datetime, datetime | None]]:
    """When the Job's phase was Running, by the status history."""
    periods: list[tuple[datetime, datetime | None]] = []
    phases = sorted(run.phases, key=lambda item: item[0])
    for index, (at, phase) in enumerate(phases):
        if phase == RUNNING:
            periods.append((at, phases[index + 1][0] if index + 1 < len(phases) else None))
    return periods


def spans(run: Run, *, now: datetime) -> list[Piece]:
    """The run's held GPU time as pieces of constant GPU count and category, oldest first."""
    holds = _holds(run, now)
    if not holds:
        return []
    slots = {(a.task, a.replica) for a in run.attempts}
    failed_at = _failed_at(run)
    running = _running_periods(run)
    stalls = [(start, end) for start, end in run.stalls]
    idle = [(start, end) for start, end in run.idle]
    edges = {moment for _a, start, end in holds for moment in (start, end)}
    edges.update(at for at, _phase in run.phases)
    edges.update(moment for start, end in (*stalls, *idle) for moment in (start, end) if moment)
    if failed_at is not None:
        edges.add(failed_at)
    # A sweep over the edges: the pods holding at each moment change only at their own edges.
    starts: dict[datetime, list[Attempt]] = defaultdict(list)
    ends: dict[datetime, list[Attempt]] = defaultdict(list)
    for attempt, since, until in holds:
        starts[since].append(attempt)
        ends[until].append(attempt)
    holding: dict[tuple[str, int], int] = defaultdict(int)
    gpus = 0
    pieces: list[Piece] = []
    for start, end in itertools.pairwise(sorted(edges)):
        for attempt in ends.pop(start, ()):
            gpus -= attempt.gpus
            holding[(attempt.task, attempt.replica)] -= 1
        for attempt in starts.pop(start, ()):
            gpus += attempt.gpus
            holding[(attempt.task, attempt.replica)] += 1
        if gpus <= 0:
            continue
        if failed_at is not None and start >= failed_at:
            category = FAILED
        elif not _within(start, running) or any(holding[slot] <= 0 for slot in slots):
            category = PENDING_PARTIAL
        elif _within(start, stalls):
            category = STALLED
        else:
            category = PRODUCTIVE
        is_idle = _within(start, idle)
        last = pieces[-1] if pieces else None
        if last is not None and last.end == start and (last.gpus, last.category, last.idle) == (
                gpus, category, is_idle):
            pieces[-1] = Piece(last.start, end, gpus, category, is_idle)
        else:
            pieces.append(Piece(start, end, gpus, category, is_idle))
    return pieces


def day_of(moment: datetime) -> datetime:
    """The start of the moment's UTC day."""
    moment = moment.astimezone(UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def week_of(moment: datetime) -> datetime:
    """The start of the moment's ISO week (Monday 00:00 UTC)."""
    day = day_of(moment)
    return day - timedelta(days=day.weekday())


_STEPS: dict[Callable[[datetime], datetime], timedelta] = {
    day_of: timedelta(days=1), week_of: timedelta(days=7)}


@dataclass
class _Sums:
    by_key: dict[Hashable, dict[str, float]] = field(default_factory=dict)

    def add(self, key: Hashable, piece: Piece, gpu_seconds: float) -> None:
        sums = self.by_key.setdefault(key, empty())
        sums[piece.category] += gpu_seconds
        if piece.idle:
            sums[IDLE] = sums.get(IDLE, 0.0) + gpu_seconds


def add_up(pieces: Iterable[Piece], *, start: datetime, end: datetime,
           bucket: Callable[[datetime], datetime] | None = None,
           key: Hashable = None, into: dict[Hashable, dict[str, float]] | None = None,
           ) -> dict[Hashable, dict[str, float]]:
    """GPU-seconds per category of the pieces inside [start, end), per bucket start (`day_of`,
    `week_of`) or all under `key`; added into `into` when given (one pass over many runs)."""
    sums = _Sums(into if into is not None else {})
    for piece in pieces:
        lo, hi = max(piece.start, start), min(piece.end, end)
        while lo < hi:
            if bucket is None:
                cut, name = hi, key
            else:
                name = bucket(lo)
                cut = min(hi, name + _STEPS[bucket])
            sums.add(name, piece, (cut - lo).total_seconds() * piece.gpus)
            lo = cut
    return sums.by_key


def hours(gpu_seconds: dict[str, float], *, with_idle: bool = False) -> dict[str, float | None]:
    """GPU-seconds per category as GPU-hours (3 decimals), with `reserved`, their sum, and
    `idle` (with `with_idle`; else None: nothing measured it)."""
    result: dict[str, float | None] = {
        name: round(gpu_seconds.get(name, 0.0) / 3600, 3) for name in CATEGORIES}
    result["reserved"] = round(sum(gpu_seconds.get(name, 0.0) for name in CATEGORIES) / 3600, 3)
    result[IDLE] = round(gpu_seconds.get(IDLE, 0.0) / 3600, 3) if with_idle else None
    return result
