"""A job's events as a person reads them: Warnings first, Normal events grouped.

Pure (no database, no cluster): the job page and `GET jobs/{name}/events/` (its `summary`)
both call `summarize_events`, so the page, the API and the CLI group alike.

How it groups, after Kubernetes itself. The event recorder of client-go
(`tools/record/events_cache.go`) already folds repeats of one event into one Event object
(`count` bumped, `firstTimestamp` kept, `lastTimestamp` moved) and, past ten similar events of
one object that differ only in their message, into one "(combined from similar events)"
event: "similar" is the same involved object, type and reason. `kubectl describe` then lists
an object's events by last seen, showing a repeated one as "<last> (x<count> over <first>)".
A job page shows many objects (the Job and each pod), so a Normal group here is the same type,
involved kind and reason across objects: it keeps which objects (in the order first seen), how
many Event objects and how many occurrences (the sum of their counts), the first and last seen
of all of them, and the newest message with the number of distinct messages. Warnings (every
type but Normal) are never grouped: each is shown as the cluster reports it.

Order: newest first by last seen, like the events of the snapshot (kubectl sorts by last seen
too, oldest first); ties keep the order of the input. Times are compared as instants, so
`firstTimestamp`s (seconds) and `eventTime`s (microseconds) order correctly; a time that cannot
be read sorts last.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from clusters.k8s import EventInfo

__all__ = ["NORMAL", "EventGroup", "EventSummary", "summarize_events"]

NORMAL = "Normal"
_UNREADABLE = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class EventGroup:
    """Normal events of one involved kind and reason, across the job's objects."""

    kind: str
    reason: str
    objects: tuple[str, ...]
    event_count: int
    count: int
    first_at: str
    last_at: str
    message: str
    message_count: int


@dataclass(frozen=True)
class EventSummary:
    """`warnings`: every event that is not Normal, newest first; `normal_groups`: the Normal
    events grouped, newest first; `normal_count`: how many Normal Event objects they hold."""

    warnings: tuple[EventInfo, ...]
    normal_groups: tuple[EventGroup, ...]
    normal_count: int


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return _UNREADABLE
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _newest_first(events: Iterable[EventInfo]) -> list[EventInfo]:
    return sorted(events, key=lambda event: _instant(event.last_at), reverse=True)


def _first_seen(members: list[EventInfo]) -> str:
    """The earliest readable first seen of `members` ("" when none can be read)."""
    readable = [event.first_at for event in members if _instant(event.first_at) > _UNREADABLE]
    return min(readable, key=_instant) if readable else ""


def _objects(members: list[EventInfo]) -> tuple[str, ...]:
    """The involved objects' names, each once, in the order they were first seen (an object
    whose times cannot be read last; ties in the order of the input, read oldest first)."""
    seen: dict[str, list[datetime]] = {}
    for event in reversed(members):
        seen.setdefault(event.name, []).append(_instant(event.first_at))

    def first_seen(name: str) -> tuple[bool, datetime]:
        readable = [moment for moment in seen[name] if moment > _UNREADABLE]
        return (not readable, min(readable, default=_UNREADABLE))

    return tuple(sorted(seen, key=first_seen))


def _group(members: list[EventInfo]) -> EventGroup:
    """One group of `members` (newest first, at least one)."""
    newest = members[0]
    return EventGroup(
        kind=newest.kind, reason=newest.reason, objects=_objects(members),
        event_count=len(members), count=sum(event.count for event in members),
        first_at=_first_seen(members), last_at=newest.last_at, message=newest.message,
        message_count=len({event.message for event in members}),
    )


def summarize_events(events: Iterable[EventInfo]) -> EventSummary:
    """Warnings first as they are, Normal events grouped by involved kind and reason."""
    ordered = _newest_first(events)
    groups: dict[tuple[str, str], list[EventInfo]] = {}
    for event in ordered:
        if event.type == NORMAL:
            groups.setdefault((event.kind, event.reason), []).append(event)
    return EventSummary(
        warnings=tuple(event for event in ordered if event.type != NORMAL),
        normal_groups=tuple(_group(members) for members in groups.values()),
        normal_count=sum(len(members) for members in groups.values()),
    )
