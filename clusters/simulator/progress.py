"""Training progress in a simulated Head Task's log: RLinf's step lines at a set pace.

RLinf's embodied runners print a metric table after every global step
(`rlinf/utils/metric_utils.py`, `print_metrics_table`): a box 120 characters wide whose first
row reads `│ Global Step:  120/1000 │ Progress: ███░░░ │  12.0%`, then elapsed time, ETA and
step time, then the step's metrics by category. The simulator prints a table of that shape
(one Rollout section of metrics) every `seconds` of a Running Head Task pod, without storing
the lines: a `StepClock` knows when each step happened, and the lines of the steps inside a
read's window are rendered when the log is read. Pure: the cluster state keeps one clock per
Job and calls these.

Freezing stops the clock (no new step lines; the log goes quiet, as a run hung in a collective
does); resuming starts a new segment from the frozen step. A container restart starts the
current container's log anew and resumes from the last checkpoint (every `CHECKPOINT_EVERY`
steps, as RLinf's `runner.save_interval` does), so the step goes down.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

DEFAULT_STEP_SECONDS = 5.0
DEFAULT_TOTAL = 1000
CHECKPOINT_EVERY = 10
TABLE_WIDTH = 120
_BAR = 40
_LINE_GAP = timedelta(microseconds=1)


@dataclass
class Segment:
    """Steps `base + 1, base + 2, ...` every `seconds` from `start`, until `until` (None:
    still advancing)."""

    start: datetime
    base: int
    seconds: float
    until: datetime | None = None

    def step_at(self, moment: datetime, total: int) -> int:
        end = moment if self.until is None else min(moment, self.until)
        if end <= self.start:
            return self.base
        done = math.floor((end - self.start).total_seconds() / self.seconds + 1e-9)
        return min(total, self.base + done)

    def time_of(self, step: int) -> datetime:
        return self.start + timedelta(seconds=(step - self.base) * self.seconds)


@dataclass
class StepClock:
    """When each step of one run happened; `frozen` and `seconds` as last set."""

    seconds: float = DEFAULT_STEP_SECONDS
    total: int = DEFAULT_TOTAL
    frozen: bool = False
    segments: list[Segment] = field(default_factory=list)
    container_since: datetime | None = None  # the current container's first moment

    def start(self, origin: datetime) -> None:
        """Begin at `origin` (the run script's start) unless already begun."""
        if not self.segments:
            self.segments.append(Segment(origin, 0, self.seconds,
                                         until=origin if self.frozen else None))
            self.container_since = origin

    def step_at(self, moment: datetime) -> int:
        if not self.segments:
            return 0
        return self.segments[-1].step_at(moment, self.total)

    def set(self, now: datetime, *, frozen: bool | None = None, seconds: float | None = None,
            total: int | None = None) -> None:
        """Freeze, resume, change the pace or the total from `now` on."""
        if total is not None:
            self.total = total
        changed = (frozen is not None and frozen != self.frozen) or (
            seconds is not None and seconds != self.seconds)
        self.frozen = self.frozen if frozen is None else frozen
        self.seconds = self.seconds if seconds is None else seconds
        if changed and self.segments:
            self._cut(now, base=self.step_at(now))

    def restart(self, now: datetime) -> None:
        """The container restarted: its log starts now, from the last checkpoint."""
        if self.segments:
            checkpoint = self.step_at(now) // CHECKPOINT_EVERY * CHECKPOINT_EVERY
            self._cut(now, base=checkpoint)
            self.container_since = now

    def _cut(self, now: datetime, *, base: int) -> None:
        current = self.segments[-1]
        current.until = now if current.until is None else min(current.until, now)
        self.segments.append(Segment(now, base, self.seconds,
                                     until=now if self.frozen else None))

    def steps(self, *, since: datetime | None, until: datetime,
              last: int | None = None) -> list[tuple[datetime, int]]:
        """(time, step) of the current container's steps in [since, until], oldest first;
        only the `last` newest of them when given."""
        found: list[tuple[datetime, int]] = []
        floor = self.container_since
        for index, segment in enumerate(self.segments):
            end = self.segments[index + 1].start if index + 1 < len(self.segments) else until
            newest = segment.step_at(min(end, until), self.total)
            first = segment.base + 1
            if since is not None and since > segment.start:
                first = max(first, segment.base + math.ceil(
                    (since - segment.start).total_seconds() / segment.seconds - 1e-9))
            if last is not None:
                first = max(first, newest - last + 1)
            for step in range(first, newest + 1):
                moment = segment.time_of(step)
                if (floor is None or moment > floor) and (since is None or moment >= since):
                    found.append((moment, step))
        return found[-last:] if last is not None else found


def _fit(text: str, width: int) -> str:
    return text + " " * (width - len(text)) if len(text) <= width else text[: width - 1] + "…"


def _clock(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _title(title: str) -> str:
    padding = TABLE_WIDTH - 2 - len(title) - 2
    left = padding // 2
    return f"├{'─' * left} {title} {'─' * (padding - left)}┤"


@functools.lru_cache(maxsize=8192)
def table_lines(step: int, total: int, *, seconds: float, elapsed: float) -> tuple[str, ...]:
    """The lines RLinf's runner prints after global step `step` (1-based) of `total` (made
    once: every read of a log since a step renders that step's table again)."""
    progress = step / total * 100
    filled = int(_BAR * progress / 100)
    bar = "█" * filled + "░" * (_BAR - filled)
    eta = seconds * (total - step)
    inner = TABLE_WIDTH - 2
    reward = 0.2 + 0.6 * step / total
    metrics = [f"rewards={reward:.3f}", f"response_length={280 + step % 64:.1f}",
               f"advantages_max={1.5 + (step % 7) / 10:.3f}"]
    width = (TABLE_WIDTH - 4) // 3
    return (
        "",
        f"╭{'─' * inner}╮",
        _title("Metric Table"),
        _fit(f"│ Global Step: {step:4d}/{total} │ Progress: {bar} │ {progress:5.1f}%", inner)
        + " │",
        _fit(f"│ Elapsed: {_clock(elapsed)} │ ETA: {_clock(eta)} │ Step Time: {seconds:.3f}s",
             inner) + " │",
        _title("Rollout"),
        f"│{' ' * inner}│",
        "│" + "│".join(_fit(m, width + (1 if i < 2 else 0)) for i, m in enumerate(metrics))
        + "│",
        f"│{' ' * inner}│",
        f"╰{'─' * inner}╯",
    )


LINES_PER_STEP = len(table_lines(1, 1, seconds=1.0, elapsed=0.0))


def timed_step_lines(clock: StepClock, *, since: datetime | None, until: datetime,
                     tail_lines: int | None = None) -> list[tuple[datetime, str]]:
    """The step tables of the steps in [since, until] (enough for `tail_lines` when given),
    each line a microsecond after the one before."""
    last = None if tail_lines is None else tail_lines // LINES_PER_STEP + 1
    origin = clock.segments[0].start if clock.segments else until
    lines: list[tuple[datetime, str]] = []
    for moment, step in clock.steps(since=since, until=until, last=last):
        elapsed = (moment - origin).total_seconds()
        table = table_lines(step, clock.total, seconds=clock.seconds, elapsed=elapsed)
        lines.extend((moment + _LINE_GAP * offset, text) for offset, text in enumerate(table))
    return lines
