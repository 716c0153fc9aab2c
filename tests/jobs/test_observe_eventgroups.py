"""The job page's and the events API's grouping (jobs/observe/eventgroups.py, pure): Warnings
first as they are, Normal events grouped by involved kind and reason like kubectl describe counts
repeats (count, first and last seen), newest first."""

from __future__ import annotations

import pytest

from clusters.k8s import EventInfo
from jobs.observe.eventgroups import EventGroup, summarize_events


def event(kind: str, name: str, reason: str, at: str, *, type: str = "Normal", count: int = 1,
          first: str = "", message: str = "") -> EventInfo:
    return EventInfo(kind=kind, name=name, uid=f"uid-{name}", type=type, reason=reason,
                     message=message or f"{reason} {name}", count=count,
                     first_at=first or at, last_at=at)


T = "2026-03-01T10:00:{:02d}Z"


def at(second: int) -> str:
    return T.format(second)


def seven_pods() -> list[EventInfo]:
    """A 7-pod job as the simulator and a kubelet report it: the Job creates each pod, then
    each pod is Scheduled, Pulled, Created and Started (35 Normal events), oldest first."""
    events = [event("Job", "run", "SuccessfulCreate", at(0), message=f"Created pod: run-{i}")
              for i in range(7)]
    for second, reason in enumerate(("Scheduled", "Pulled", "Created", "Started"), start=1):
        events += [event("Pod", f"run-{i}", reason, at(second + i)) for i in range(7)]
    return events


def shape(group: EventGroup) -> tuple[str, str, int, int, str, str]:
    return (group.kind, group.reason, group.event_count, group.count, group.first_at,
            group.last_at)


def test_thirty_five_normal_events_of_seven_pods_are_five_groups_newest_first() -> None:
    summary = summarize_events(seven_pods())
    assert summary.warnings == ()
    assert summary.normal_count == 35
    assert [shape(group) for group in summary.normal_groups] == [
        ("Pod", "Started", 7, 7, at(4), at(10)),
        ("Pod", "Created", 7, 7, at(3), at(9)),
        ("Pod", "Pulled", 7, 7, at(2), at(8)),
        ("Pod", "Scheduled", 7, 7, at(1), at(7)),
        ("Job", "SuccessfulCreate", 7, 7, at(0), at(0)),
    ]
    started = summary.normal_groups[0]
    assert started.objects == tuple(f"run-{i}" for i in range(7))  # in the order first seen
    assert (started.message, started.message_count) == ("Started run-6", 7)
    create = summary.normal_groups[-1]
    assert create.objects == ("run",)
    assert create.message_count == 7  # one Job, seven messages ("Created pod: run-<i>")


def test_warnings_come_first_ungrouped_newest_first_and_are_not_counted_as_normal() -> None:
    failed = [event("Pod", f"run-{i}", "FailedScheduling", at(20 + i), type="Warning",
                    message="0/3 nodes are available") for i in range(3)]
    odd = event("Pod", "run-9", "Custom", at(21), type="")  # a type that is not Normal: shown
    summary = summarize_events([*seven_pods(), *failed, odd])
    assert [(e.name, e.reason) for e in summary.warnings] == [
        ("run-2", "FailedScheduling"), ("run-1", "FailedScheduling"), ("run-9", "Custom"),
        ("run-0", "FailedScheduling")]
    assert summary.normal_count == 35
    assert len(summary.normal_groups) == 5


def test_counts_add_up_and_first_and_last_seen_span_every_member() -> None:
    """An Event object the recorder bumped (count 4, seen from second 2 to 30) beside two more
    of the same kind and reason: occurrences are the sum, the span is the widest."""
    summary = summarize_events([
        event("Pod", "run-0", "Pulling", at(30), count=4, first=at(2)),
        event("Pod", "run-1", "Pulling", at(12), message="Pulling run-0"),
        event("Pod", "run-2", "Pulling", at(5), count=2, first=at(3), message="Pulling run-0"),
    ])
    (group,) = summary.normal_groups
    assert (group.event_count, group.count, group.first_at, group.last_at) == (3, 7, at(2),
                                                                                at(30))
    assert group.objects == ("run-0", "run-2", "run-1")  # first seen at 2, 3 and 12
    assert (group.message, group.message_count) == ("Pulling run-0", 1)


def test_the_same_reason_of_two_kinds_is_two_groups() -> None:
    summary = summarize_events([event("Job", "run", "Completed", at(9)),
                                event("Pod", "run-0", "Completed", at(8))])
    assert [(g.kind, g.reason) for g in summary.normal_groups] == [("Job", "Completed"),
                                                                 ("Pod", "Completed")]


@pytest.mark.parametrize("order", [1, -1])
def test_the_order_of_the_input_does_not_matter_but_ties_keep_it(order: int) -> None:
    events = seven_pods()[::order]
    summary = summarize_events(events)
    assert [g.reason for g in summary.normal_groups] == [
        "Started", "Created", "Pulled", "Scheduled", "SuccessfulCreate"]
    tied = [event("Pod", "a", "One", at(1)), event("Pod", "b", "Two", at(1))][::order]
    assert [g.reason for g in summarize_events(tied).normal_groups] == [
        e.reason for e in tied]


def test_times_are_compared_as_instants_and_unreadable_ones_sort_last() -> None:
    """eventTime carries microseconds, firstTimestamp seconds: as strings "10:00:05.5Z" sorts
    before "10:00:05Z"; as instants it is later. A time that cannot be read comes last."""
    summary = summarize_events([
        event("Pod", "a", "Seconds", "2026-03-01T10:00:05Z"),
        event("Pod", "b", "Micro", "2026-03-01T10:00:05.500000Z"),
        event("Pod", "c", "Broken", "yesterday"),
        event("Pod", "d", "Micro", "2026-03-01T10:00:01.000001Z", first="not a time"),
    ])
    assert [g.reason for g in summary.normal_groups] == ["Micro", "Seconds", "Broken"]
    micro = summary.normal_groups[0]
    assert micro.first_at == "2026-03-01T10:00:05.500000Z"  # the unreadable first is skipped
    assert micro.objects == ("b", "d")  # d's first seen cannot be read: last
    broken = summary.normal_groups[-1]
    assert (broken.first_at, broken.last_at) == ("", "yesterday")


def test_no_events_no_groups() -> None:
    summary = summarize_events([])
    assert (summary.warnings, summary.normal_groups, summary.normal_count) == ((), (), 0)


def test_many_objects_stay_one_group_each_named_once() -> None:
    events = [event("Pod", f"run-{i % 500}", "Started", at(i % 60)) for i in range(2000)]
    (group,) = summarize_events(events).normal_groups
    assert (group.event_count, group.count, len(group.objects)) == (2000, 2000, 500)
    assert len(set(group.objects)) == 500
