"""The GPU-hours split (jobs.core.usage) against timelines computed by hand: a plain run, a gang
that never became fully Running, a stall in the middle, a pod restarted (its replica's pods
overlapping), a failed run, still-running pods up to `now`, day and week buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.usage import Attempt, Piece, Run, add_up, day_of, hours, spans, week_of

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)  # a Tuesday
WINDOW = (T0 - timedelta(days=2), T0 + timedelta(days=2))


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def pod(task: str, replica: int, gpus: int, bound: float | None, ended: float | None = None, *,
        created: float | None = None, failed: bool = False) -> Attempt:
    created_at = t(created) if created is not None else (t(bound) if bound is not None else T0)
    return Attempt(task=task, replica=replica, gpus=gpus, created_at=created_at,
                   bound_at=t(bound) if bound is not None else None,
                   ended_at=t(ended) if ended is not None else None, failed=failed)


def gpu_minutes(run: Run, *, now: float = 600, start: datetime = WINDOW[0],
                end: datetime = WINDOW[1]) -> dict[str, float]:
    sums = add_up(spans(run, now=t(now)), start=start, end=end, key="all").get("all", {})
    return {name: round(value / 60, 6) for name, value in sums.items() if value}


# Each case: the run, and its GPU-minutes per category worked out by hand.
CASES = {
    # 8 GPUs bound at 0, Running at 0, Succeeded at 60: 8 x 60 productive.
    "plain": (Run(attempts=[pod("actor", 0, 8, 0, 60)],
                  phases=[(t(-5), "Pending"), (t(0), "Running"), (t(60), "Succeeded")],
                  ended_at=t(60)),
              {"productive": 480}),
    # Two 4-GPU workers; one bound at 0, the other never; cancelled at 30: 4 x 30 partial.
    "never fully running": (Run(attempts=[pod("worker", 0, 4, 0), pod("worker", 1, 4, None)],
                                phases=[(t(0), "Pending")], ended_at=t(30)),
                            {"pending_partial": 120}),
    # Bound at 0, the Job Running at 5, stalled 20-40, ended at 60 (a 0-GPU rollout beside):
    # partial 8 x 5, stalled 8 x 20, productive 8 x (15 + 20).
    "stall in the middle": (
        Run(attempts=[pod("actor", 0, 8, 0, 60), pod("rollout", 0, 0, 0, 60)],
            phases=[(t(0), "Pending"), (t(5), "Running"), (t(60), "Succeeded")],
            stalls=[(t(20), t(40))], ended_at=t(60)),
        {"pending_partial": 40, "stalled": 160, "productive": 280}),
    # An open stall (no end yet) of a run still Running at now=50: stalled from 30 to 50.
    "open stall up to now": (
        Run(attempts=[pod("actor", 0, 2, 0)], phases=[(t(0), "Running")],
            stalls=[(t(30), None)]),
        {"productive": 60, "stalled": 40}),
    # Worker 0 fails at 30, its new pod is created at 32 and bound at 35; the Job stays
    # Running until it succeeds at 60; the actor (4 GPUs) holds 0-60: the gang is incomplete
    # 30-35 (the actor alone, 4 x 5).
    "restart": (
        Run(attempts=[pod("actor", 0, 4, 0), pod("worker", 0, 4, 0, 30, failed=True),
                      pod("worker", 0, 4, 35, created=32)],
            phases=[(t(0), "Running"), (t(60), "Succeeded")], ended_at=t(60)),
        {"productive": 4 * 55 + 4 * 30 + 4 * 25, "pending_partial": 4 * 5}),
    # The old pod is seen ending at 33 while its replacement was bound at 31: both hold 31-33.
    "overlapping attempts": (
        Run(attempts=[pod("worker", 0, 2, 0, 33), pod("worker", 0, 2, 31, created=30)],
            phases=[(t(0), "Running")], ended_at=t(40)),
        {"productive": 2 * 33 + 2 * 9}),
    # A pod that vanished without being seen ending holds until its replacement was created
    # (10); nothing is held 10-12, the new pod 12-20.
    "replaced without an end": (
        Run(attempts=[pod("worker", 0, 1, 0), pod("worker", 0, 1, 12, created=10)],
            phases=[(t(0), "Running")], ended_at=t(20)),
        {"productive": 10 + 8}),
    # Actor 4 GPUs, rollout 2 x 2 GPUs, Running 0; rollout-1 fails at 40, the actor pod ends
    # at 44, the Job is seen Failed at 45 (rollout-0 still Running then: held until 45).
    # Productive 8 x 40; failed 4 x 4 + 2 x 5.
    "failed": (
        Run(attempts=[pod("actor", 0, 4, 0, 44, failed=True), pod("rollout", 0, 2, 0),
                      pod("rollout", 1, 2, 0, 40, failed=True)],
            phases=[(t(0), "Running"), (t(45), "Failed")], ended_at=t(45), failed=True),
        {"productive": 320, "failed": 26}),
    # Gone (deleted outside RLark) counts as a failure from when it was seen gone.
    "gone": (Run(attempts=[pod("actor", 0, 1, 0)],
                 phases=[(t(0), "Running"), (t(30), "Gone")], ended_at=t(30), failed=True),
             {"productive": 30}),
    # Back to Pending 20-25 (a node lost): partial there.
    "back to pending": (
        Run(attempts=[pod("actor", 0, 1, 0, 40)],
            phases=[(t(0), "Running"), (t(20), "Pending"), (t(25), "Running")], ended_at=t(40)),
        {"productive": 35, "pending_partial": 5}),
    # Never bound: nothing held.
    "never bound": (Run(attempts=[pod("actor", 0, 8, None)], phases=[(t(0), "Pending")],
                        ended_at=t(30)), {}),
    # Still running at now=50: held up to now, not beyond.
    "still running": (Run(attempts=[pod("actor", 0, 3, 0)], phases=[(t(0), "Running")]),
                      {"productive": 150}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_hand_computed_timelines(name: str) -> None:
    run, expected = CASES[name]
    now = 50 if name in ("still running", "open stall up to now") else 600
    assert gpu_minutes(run, now=now) == {key: float(value) for key, value in expected.items()}


def test_still_running_pods_count_up_to_the_window_end() -> None:
    run = Run(attempts=[pod("actor", 0, 2, 0)], phases=[(t(0), "Running")])
    assert gpu_minutes(run, now=120, start=t(30), end=t(90)) == {"productive": 120.0}
    assert gpu_minutes(run, now=120, start=t(30), end=t(500)) == {"productive": 180.0}
    assert gpu_minutes(run, now=120, start=t(200), end=t(500)) == {}


def test_pieces_merge_and_never_overlap() -> None:
    run, _ = CASES["stall in the middle"]
    pieces = spans(run, now=t(600))
    assert pieces == [Piece(t(0), t(5), 8, "pending_partial"), Piece(t(5), t(20), 8, "productive"),
                      Piece(t(20), t(40), 8, "stalled"), Piece(t(40), t(60), 8, "productive")]


def test_days_and_weeks_split_at_utc_midnight_and_monday() -> None:
    sunday_late = datetime(2026, 12, 6, 23, 0, tzinfo=UTC)
    run = Run(attempts=[Attempt("actor", 0, 1, sunday_late, sunday_late,
                                sunday_late + timedelta(hours=2))],
              phases=[(sunday_late, "Running")], ended_at=sunday_late + timedelta(hours=2))
    pieces = spans(run, now=sunday_late + timedelta(days=1))
    window = {"start": sunday_late - timedelta(days=8), "end": sunday_late + timedelta(days=8)}
    days = add_up(pieces, bucket=day_of, **window)
    assert {k.date().isoformat(): v["productive"] for k, v in days.items()} == {
        "2026-12-06": 3600.0, "2026-12-07": 3600.0}
    weeks = add_up(pieces, bucket=week_of, **window)
    assert {k.date().isoformat(): v["productive"] for k, v in weeks.items()} == {
        "2026-11-30": 3600.0, "2026-12-07": 3600.0}


def test_many_runs_add_into_one_table_and_hours_sum_to_reserved() -> None:
    table: dict = {}
    for name in ("plain", "stall in the middle", "failed"):
        add_up(spans(CASES[name][0], now=t(600)), start=WINDOW[0], end=WINDOW[1], key="team",
               into=table)
    total = hours(table["team"])
    assert total == {"productive": round((480 + 280 + 320) / 60, 3), "stalled": 2.667,
                     "failed": round(26 / 60, 3), "pending_partial": 0.667,
                     "reserved": round((480 + 480 + 346) / 60, 3), "idle": None}


def test_idle_is_an_overlay_on_the_categories() -> None:
    """Idle 10-30 over a stall 20-40 (8 GPUs, Running 5-60): 8 x 20 idle; the split unchanged."""
    base, expected = CASES["stall in the middle"]
    run = Run(attempts=base.attempts, phases=base.phases, stalls=base.stalls,
              ended_at=base.ended_at, idle=[(t(10), t(30))])
    assert gpu_minutes(run) == {**{k: float(v) for k, v in expected.items()}, "idle": 160.0}
    table = add_up(spans(run, now=t(600)), start=WINDOW[0], end=WINDOW[1], key="run")
    assert hours(table["run"], with_idle=True)["idle"] == 2.667
