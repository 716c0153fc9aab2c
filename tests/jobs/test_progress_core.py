"""The pure progress core: the step pattern on RLinf's own lines, the launch list's settings,
incremental reading of timestamped log text, hostile input, the series and the stall machine."""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.progress import (
    DEFAULT_PATTERN,
    POINTS_MAX,
    STEP_MAX,
    Cursor,
    StepLine,
    add_points,
    compile_step_pattern,
    parse_stamp,
    pattern_problem,
    progress_settings,
    progress_settings_problems,
    rate_per_hour,
    read_steps,
)
from jobs.core.stalls import Episode, Observed, Verdict, decide

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


def table_line(step: int, total: int) -> str:
    """The first line of RLinf's metric table (rlinf/utils/metric_utils.py,
    print_metrics_table): `f"Global Step: {step + 1:4d}/{total_steps}"`, then the bar."""
    progress = (step + 1) / total * 100
    filled = int(40 * progress / 100)
    bar = "█" * filled + "░" * (40 - filled)
    line = f"│ Global Step: {step + 1:4d}/{total} │ Progress: {bar} │ {progress:5.1f}%"
    return line + " " * (118 - len(line)) + " │"


def tqdm_segment(n: int, total: int) -> str:
    """One redraw of RLinf's runner bar (`tqdm(total=max_steps, desc="Global Step",
    ncols=1650)` with set_postfix): tqdm's `{l_bar}{bar}{r_bar}`, written after a \\r."""
    percent = n / total * 100
    bar = "█" * int(percent / 10) + " " * (10 - int(percent / 10))
    return (f"\rGlobal Step: {percent:3.0f}%|{bar}| {n}/{total} [10:00<1:13:20,  5.00s/it, "
            f"actor/grad_norm=0.412, rollout/rewards=0.515]")


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def log(*lines: tuple[datetime, str]) -> str:
    return "".join(f"{stamp(moment)} {line}\n" for moment, line in lines)


DEFAULT = compile_step_pattern("")


def test_the_default_pattern_reads_rlinfs_metric_table_line() -> None:
    assert DEFAULT.last_step(table_line(0, 1000)) == (1, 1000)
    assert DEFAULT.last_step(table_line(119, 1000)) == (120, 1000)


def test_the_default_pattern_reads_rlinfs_tqdm_bar_and_takes_its_newest_redraw() -> None:
    line = tqdm_segment(0, 1000) + tqdm_segment(1, 1000) + tqdm_segment(120, 1000)
    assert DEFAULT.last_step(line) == (120, 1000)


def test_the_default_pattern_contains_specs_table_pattern() -> None:
    assert r"Global Step:\s*" in DEFAULT_PATTERN
    assert r"(?P<step>\d+)\s*/\s*(?P<total>\d+)" in DEFAULT_PATTERN


def test_a_pattern_for_another_framework_with_and_without_total() -> None:
    steps = compile_step_pattern(r"step=(?P<step>\d+)")
    assert steps.last_step("epoch 2 step=1500 loss=0.1") == (1500, None)
    fraction = compile_step_pattern(r"iter (?P<step>\d+) of (?P<total>\d+)")
    assert fraction.last_step("iter 7 of 20") == (7, 20)


@pytest.mark.parametrize("text, fragment", [
    (r"(?P<step>\d+)(?=x)", "linear time"),
    (r"(a)\1(?P<step>\d)", "linear time"),
    (r"(\d+)", "named group step"),
    ("(?P<step>", "linear time"),
    ("x" * 501, "at most 500"),
])
def test_patterns_that_cannot_be_read_in_linear_time_are_refused(text: str,
                                                                 fragment: str) -> None:
    problem = pattern_problem(text)
    assert problem is not None and fragment in problem


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    pattern = compile_step_pattern(r"(a|aa)+$(?P<step>\d*)")
    started = time.process_time()
    pattern.last_step("a" * 4000 + "!")
    assert time.process_time() - started < 1.0  # the regex module without timeout: minutes


def test_settings_defaults_and_refusals() -> None:
    assert progress_settings({}).as_dict() == {
        "pattern": "", "stall_after_seconds": 1800, "cancel_after_stalled_seconds": None}
    problems = progress_settings_problems({"stall_after_seconds": 59,
                                           "cancel_after_stalled_seconds": True, "x": 1})
    assert set(problems) == {"stall_after_seconds", "cancel_after_stalled_seconds", "progress"}


def test_the_kubelets_timestamps_with_and_without_trailing_zeros() -> None:
    assert parse_stamp("2026-12-01T10:00:00.500000000Z") == T0 + timedelta(microseconds=500000)
    assert parse_stamp("2026-12-01T10:00:00.5Z") == T0 + timedelta(microseconds=500000)
    assert parse_stamp("2026-12-01T10:00:00Z") == T0
    assert parse_stamp("garbage") is None


def test_a_read_takes_each_step_line_once_and_skips_what_was_consumed() -> None:
    text = log((T0, table_line(0, 10)), (T0 + timedelta(seconds=5), "noise"),
               (T0 + timedelta(seconds=5), table_line(1, 10)))
    first = read_steps(text, pattern=DEFAULT, cursor=Cursor(), truncated=False)
    assert [(s.at, s.step) for s in first.steps] == [(T0, 1), (T0 + timedelta(seconds=5), 2)]
    assert first.cursor == Cursor(T0 + timedelta(seconds=5), 2)
    again = read_steps(text + log((T0 + timedelta(seconds=10), table_line(2, 10))),
                       pattern=DEFAULT, cursor=first.cursor, truncated=False)
    assert [s.step for s in again.steps] == [3]


def test_a_line_cut_by_the_byte_bound_is_left_for_the_next_read() -> None:
    text = log((T0, table_line(0, 10)), (T0 + timedelta(seconds=5), table_line(1, 10)))
    cut = text[: len(text) - 30]
    reading = read_steps(cut, pattern=DEFAULT, cursor=Cursor(), truncated=True)
    assert [s.step for s in reading.steps] == [1]
    assert reading.cursor == Cursor(T0, 1)


def test_a_line_of_megabytes_is_skipped_with_its_second_and_reading_goes_on() -> None:
    huge = stamp(T0) + " " + "x" * 3_000_000  # cut by the bound: no newline
    reading = read_steps(huge[:65536], pattern=DEFAULT, cursor=Cursor(), truncated=True)
    assert reading.skipped_long == 1 and reading.steps == []
    assert reading.cursor == Cursor(T0 + timedelta(seconds=1), 0)


def test_binary_garbage_is_no_step_and_does_not_stop_the_read() -> None:
    garbage = "\x00\xff\ufffd\x1b[31m" * 500 + "Global Step: \x00/\x00"
    text = log((T0, garbage), (T0 + timedelta(seconds=1), table_line(4, 10)))
    reading = read_steps(text, pattern=DEFAULT, cursor=Cursor(), truncated=False)
    assert [s.step for s in reading.steps] == [5]
    assert reading.lines == 2


@pytest.mark.parametrize("line", [
    "Global Step: 1000000000000000000/1000000000000000000",  # 10^18
    "Global Step: 99999999999999999999999/1000",
    "Global Step: 20/10",  # above its total
    "Global Step: 0/0",
])
def test_insane_steps_are_rejected_not_taken(line: str) -> None:
    reading = read_steps(log((T0, line)), pattern=DEFAULT, cursor=Cursor(), truncated=False)
    assert reading.steps == [] and reading.rejected == 1


def test_a_step_below_the_limit_is_taken() -> None:
    reading = read_steps(log((T0, f"Global Step: {STEP_MAX}/{STEP_MAX}")), pattern=DEFAULT,
                         cursor=Cursor(), truncated=False)
    assert reading.steps[0].step == STEP_MAX


def test_a_bar_still_being_redrawn_counts_its_newest_state_without_consuming_it() -> None:
    text = log((T0, "starting")) + stamp(T0 + timedelta(seconds=2)) + " " + \
        tqdm_segment(3, 10) + tqdm_segment(4, 10)
    reading = read_steps(text, pattern=DEFAULT, cursor=Cursor(), truncated=False)
    assert reading.partial and [s.step for s in reading.steps] == [4]
    assert reading.cursor == Cursor(T0, 1)


def test_one_scan_of_the_read_points_to_the_step_lines_only() -> None:
    text = log((T0, "starting"), (T0, table_line(0, 10)), (T0, "├──── Rollout ────┤"),
               (T0 + timedelta(seconds=5), "noise"), (T0 + timedelta(seconds=5), table_line(1, 10)))
    assert DEFAULT.candidate_lines(text) == {1, 4}
    reading = read_steps(text, pattern=DEFAULT, cursor=Cursor(), truncated=False)
    assert [s.step for s in reading.steps] == [1, 2] and reading.lines == 5


@pytest.mark.parametrize(("text", "steps"), [
    (r"^step (?P<step>\d+)", [4]), (r"step (?P<step>\d+)$", [3, 4, 5]),
    (r"\Astep (?P<step>\d+)", [4]), (r"\bstep (?P<step>\d+)", [3, 4, 5]),
    (r"\[^step (?P<step>\d+)", []),
])
def test_anchored_patterns_are_matched_line_by_line(text: str, steps: list[int]) -> None:
    pattern = compile_step_pattern(text)
    assert pattern.gate is None and pattern.candidate_lines("step 1\n") is None
    lines = log((T0, "x step 3"), (T0, "step 4"), (T0, "[step 5"))
    reading = read_steps(lines, pattern=pattern, cursor=Cursor(), truncated=False)
    assert [s.step for s in reading.steps] == steps


def test_a_match_across_lines_does_not_hide_the_next_lines_own_step() -> None:
    pattern = compile_step_pattern(r"(?s)A.*(?P<step>\d+)")  # greedy: one match, both lines
    assert pattern.gate is not None
    text = log((T0, "A first"), (T0 + timedelta(seconds=1), "A 5"))
    assert pattern.gate.search(text).start() < text.index("A 5") < pattern.gate.search(text).end()
    reading = read_steps(text, pattern=pattern, cursor=Cursor(), truncated=False)
    assert [(s.at, s.step) for s in reading.steps] == [(T0 + timedelta(seconds=1), 5)]


@pytest.mark.parametrize("source", ["", r"step=(?P<step>\d+)",
                                    r"(?P<step>\d+)\s*/\s*(?P<total>\d+)",
                                    r"(?s)A.*?(?P<step>\d+)", r"x\s+(?P<step>\d*)"])
def test_a_gated_read_finds_what_a_read_of_every_line_finds(source: str) -> None:
    gated = compile_step_pattern(source)
    every_line = dataclasses.replace(gated, gate=None)
    assert gated.gate is not None
    pieces = ["Global Step: 12/100", "Global Step:  3%|██ | 7/1000 [", "step=5", "x", "A", "\r",
              "│ Global Step:  120/1000 │", "99999999999999999999/3", "0/0", "12 / 30", "é",
              "x\n 5", "step=", " "]
    chooser = random.Random(16)
    for _ in range(3000):
        moment, lines = T0, []
        for _ in range(chooser.randint(0, 10)):
            moment += timedelta(microseconds=chooser.choice([0, 1, 500_000, 1_000_000]))
            body = "".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 4)))
            lines.append(f"{stamp(moment)} {body}" if chooser.random() < 0.9 else body)
        text = "\n".join(lines) + ("\n" if chooser.random() < 0.7 else "")
        cursor = chooser.choice([Cursor(), Cursor(T0, 1), Cursor(T0 + timedelta(seconds=1), 2)])
        truncated = chooser.random() < 0.2
        one, other = (read_steps(text, pattern=p, cursor=cursor, truncated=truncated)
                      for p in (gated, every_line))
        assert one == other, text


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_series_keeps_changes_only_and_stays_bounded_over_a_long_run() -> None:
    points: list[list[int]] = []
    for n in range(0, 5000, 10):
        points = add_points(points, [StepLine(at((n + k) * 5), n + k, None) for k in range(10)])
    assert len(points) <= POINTS_MAX
    assert points[0] == [int(at(0).timestamp() * 1000), 0]
    assert points[-1] == [int(at(4999 * 5).timestamp() * 1000), 4999]
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(points))


def test_a_restart_stays_visible_in_a_thinned_series() -> None:
    steps = [StepLine(at(i), i, None) for i in range(300)]
    steps += [StepLine(at(300), 250, None)] + [StepLine(at(300 + i), 250 + i, None)
                                                for i in range(1, 300)]
    points = add_points([], steps)
    assert any(b[1] < a[1] for a, b in itertools.pairwise(points))


def test_the_rate_is_measured_from_the_last_restart() -> None:
    points = [[0, 0], [3_600_000, 100], [3_700_000, 50], [7_300_000, 150]]
    assert rate_per_hour(points) == 100.0
    assert rate_per_hour([[0, 5]]) is None


def seen(now: int, last_step: int | None, **kwargs: int | bool | None) -> Observed:
    return Observed(now=at(now), running_since=at(0),
                    last_step_at=None if last_step is None else at(last_step),
                    stall_after_seconds=int(kwargs.pop("stall", 600)),  # type: ignore[arg-type]
                    **kwargs)  # type: ignore[arg-type]


def test_advancing_then_stalled_then_recovered() -> None:
    assert decide(None, seen(500, 100)).verdict is Verdict.NONE
    stalled = decide(None, seen(800, 100))
    assert stalled.verdict is Verdict.STALLED and stalled.started_at == at(700)
    episode = Episode(started_at=at(700), last_progress_at=at(100))
    assert decide(episode, seen(900, 100)).verdict is Verdict.NONE
    recovered = decide(episode, seen(960, 950))
    assert recovered.verdict is Verdict.RECOVERED and recovered.ended_at == at(950)


def test_before_the_first_step_the_first_signal_deadline_counts_when_shorter() -> None:
    assert decide(None, seen(301, None, first_signal_seconds=300)).started_at == at(300)
    assert decide(None, seen(601, None, first_signal_seconds=900)).started_at == at(600)


def test_no_stall_is_opened_from_a_read_that_did_not_reach_the_end_of_the_log() -> None:
    assert decide(None, seen(5000, 100, caught_up=False)).verdict is Verdict.NONE


def test_a_long_stall_asks_for_one_cancel() -> None:
    episode = Episode(started_at=at(700), last_progress_at=at(100))
    assert decide(episode, seen(1000, 100, cancel_after_stalled_seconds=600)).verdict \
        is Verdict.NONE
    assert decide(episode, seen(1300, 100, cancel_after_stalled_seconds=600)).verdict \
        is Verdict.CANCEL
    asked = Episode(started_at=at(700), last_progress_at=at(100), cancel_requested=True)
    assert decide(asked, seen(1400, 100, cancel_after_stalled_seconds=600)).verdict \
        is Verdict.NONE


def test_the_answered_series_never_passes_spec_16s_bound_with_the_newest_step() -> None:
    """SPEC 16: `points` at most 200. A full stored series whose last point is not the newest
    step answers 200 points ending with the newest step (it was 201)."""
    from jobs.models import RunProgress
    from jobs.progress.selectors import _series

    stored = [[int(at(i).timestamp() * 1000), i] for i in range(POINTS_MAX)]
    progress = RunProgress(points=stored, step=POINTS_MAX + 50, last_step_at=at(POINTS_MAX + 50))
    series = _series(progress)
    assert len(series) == POINTS_MAX
    assert series[-1] == [int(at(POINTS_MAX + 50).timestamp() * 1000), POINTS_MAX + 50]
    assert series[0] == stored[0]

    progress = RunProgress(points=stored[:10], step=99, last_step_at=at(99))
    assert len(_series(progress)) == 11
