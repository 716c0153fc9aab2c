"""Training progress read from the Head Task's log: the launch list's `progress` settings, the
step pattern, reading timestamped log text incrementally, and the bounded series. Pure: no
database, no cluster (SPEC 16; docs/progress.md).

**The pattern.** A regular expression with a named group `step` (and optionally `total`),
compiled and matched by RE2 (google-re2): matching is linear in the text whatever the pattern,
so no pattern and no line can make a pass slow; what RE2 cannot do in linear time
(backreferences, lookarounds) is refused when the launch list is saved. Blank means RLinf's own
step lines, both of them: the metric table's `Global Step:  120/1000` (the embodied and offline
runners, `rlinf/utils/metric_utils.py`) and the tqdm bar `Global Step:  12%|██▍  | 120/1000
[...]` (the reasoning, agent, coding and SFT runners).

**Reading.** The reader asks the cluster for the log since the last line it consumed, with
timestamps (`sinceTime`, `timestamps=true`, `limitBytes`): `read_steps` takes that text and a
`Cursor` (the last line's time and how many lines of that very time were consumed) and returns
the step lines it found and the new cursor. Lines already consumed are skipped (the API server
passes `sinceTime` to the kubelet to the second, so a read starts with lines seen before). A
line cut by the byte limit is left for the next read, unless it is the only line (a line
longer than the limit): then it is skipped with the rest of its second. Lines are split at
`\\n` and at `\\r` (tqdm redraws its bar with `\\r` on one line); each piece is cut to
`SEGMENT_MAX` characters before matching; of one line only the last step is taken.

**Clamps.** A step or total of more than `STEP_MAX` (or more than 18 digits), a step above
its line's total, or a total of 0 is not a step: the line is counted as rejected.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import re2
from django.utils.translation import gettext as _

__all__ = [
    "DEFAULT_PATTERN",
    "PATTERN_MAX",
    "POINTS_MAX",
    "STALL_AFTER_DEFAULT",
    "STALL_AFTER_MAX",
    "STALL_AFTER_MIN",
    "STEP_MAX",
    "Cursor",
    "ProgressSettings",
    "Reading",
    "StepLine",
    "StepPattern",
    "add_points",
    "compile_step_pattern",
    "pattern_problem",
    "progress_settings",
    "progress_settings_problems",
    "rate_per_hour",
    "read_steps",
    "split_stamp",
]

DEFAULT_PATTERN = r"Global Step:\s*(?:\d{1,3}%\|[^|]*\|\s*)?(?P<step>\d+)\s*/\s*(?P<total>\d+)"
"""RLinf's step lines: the metric table's and the tqdm bar's (SPEC 16's pattern, which reads
the table, plus the bar's optional `NN%|...|` before the count)."""
PATTERN_MAX = 500
STALL_AFTER_DEFAULT = 1800
STALL_AFTER_MIN = 60
STALL_AFTER_MAX = 30 * 24 * 3600
STEP_MAX = 10**15
"""The largest step or total taken (exact in a JSON number; 10^15 steps is beyond any run)."""
SEGMENT_MAX = 4096
"""Characters of one line piece (between `\\n` or `\\r`) that are matched."""
POINTS_MAX = 200

_DIGITS_MAX = 18
_RE2_MEMORY = 8 << 20


def _options(*, capture: bool = True) -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the user's, not a log line of ours
    options.max_mem = _RE2_MEMORY
    options.never_capture = not capture
    return options


_GATE_UNSAFE = ("^", "$", "\\A", "\\z", "\\b", "\\B", "\\[")
"""What keeps a pattern from gating a read whole (`StepPattern.candidate_lines`): anchors and
word boundaries mean one thing at a line piece's edges and another inside the whole text
(`[^` is a negated class, not an anchor, and is allowed; an escaped `[` is refused so that
`\\[^` cannot hide one). Conservative: any occurrence, escaped or in a class, refuses."""


@dataclass(frozen=True)
class StepPattern:
    """A compiled step pattern; `text` as typed ("" for the default)."""

    text: str
    regex: Any
    has_total: bool
    gate: Any = None  # the same pattern without captures, when it can gate a read whole

    def candidate_lines(self, text: str) -> frozenset[int] | None:
        """The indices (`text.split("\\n")`) of the lines that can hold a step line, from one
        RE2 scan of the whole text; None when the pattern cannot gate (then every line can).

        Sound for a pattern without anchors or word boundaries: a match of a line's piece is a
        match in the whole text, and the scan's leftmost non-overlapping matches then overlap
        that line (a match starting before it ends at or after its start, or the scan would
        have found one starting at or before the piece's). Each match marks the lines it
        touches; `last_step` still decides each of them, so a match across lines costs a look
        and nothing more."""
        if self.gate is None:
            return None
        data = text.encode(errors="replace")  # a newline is one byte: the same line numbers
        found: set[int] = set()
        position = line = 0
        for match in self.gate.finditer(data):
            start, end = match.span()
            line += data.count(b"\n", position, start)
            position = start
            found.update(range(line, line + data.count(b"\n", start, max(start, end - 1)) + 1))
        return frozenset(found)

    def last_step(self, line: str) -> tuple[int, int | None] | bool | None:
        """The last (step, total) of a line, None when no piece matches, False when the
        last matching piece is not a sane step (see the module's clamps)."""
        for piece in reversed(line.split("\r")):
            match = self.regex.search(piece[:SEGMENT_MAX])
            if match is not None:
                return _sane(match.group("step"),
                             match.group("total") if self.has_total else None)
        return None


def _number(text: str | None) -> int | None:
    if text is None or not text.isdigit() or len(text) > _DIGITS_MAX:
        return None
    value = int(text)
    return value if value <= STEP_MAX else None


def _sane(step_text: str | None, total_text: str | None) -> tuple[int, int | None] | bool:
    step = _number(step_text)
    if step is None:
        return False
    if total_text is None:
        return step, None
    total = _number(total_text)
    if total is None or total == 0 or step > total:
        return False
    return step, total


def _compile(text: str) -> Any:
    return re2.compile(text, options=_options())


def pattern_problem(text: str) -> str | None:
    """Why `text` cannot be a step pattern, or None ("" is the default and fine)."""
    if not text:
        return None
    if len(text) > PATTERN_MAX:
        return _("A step pattern has at most %(n)d characters.") % {"n": PATTERN_MAX}
    try:
        regex = _compile(text)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else ""
        reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        return _("Not a regular expression RLark can match in linear time (RE2 syntax: no "
                 "backreferences or lookarounds): %(error)s") % {"error": reason}
    if "step" not in regex.groupindex:
        return _("The pattern needs a named group step, e.g. (?P<step>\\d+).")
    return None


@functools.lru_cache(maxsize=256)
def compile_step_pattern(text: str) -> StepPattern:
    """The pattern of a run (blank: RLinf's step lines); `ValueError` when it is refused."""
    source = text or DEFAULT_PATTERN
    problem = pattern_problem(source)
    if problem is not None:
        raise ValueError(problem)
    regex = _compile(source)
    cleaned = source.replace("[^", "[")
    gate = None if any(token in cleaned for token in _GATE_UNSAFE) else re2.compile(
        source, options=_options(capture=False))
    return StepPattern(text, regex, "total" in regex.groupindex, gate)


# --- the launch list's settings ---------------------------------------------------------------


@dataclass(frozen=True)
class ProgressSettings:
    """A launch list's `progress`, as a run uses it (defaults filled in)."""

    pattern: str = ""
    stall_after_seconds: int = STALL_AFTER_DEFAULT
    cancel_after_stalled_seconds: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "stall_after_seconds": self.stall_after_seconds,
                "cancel_after_stalled_seconds": self.cancel_after_stalled_seconds}


def _seconds_problem(value: Any, *, name: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return _("%(name)s must be a whole number of seconds.") % {"name": name}
    if not STALL_AFTER_MIN <= value <= STALL_AFTER_MAX:
        return _("%(name)s must be between %(low)d and %(high)d seconds.") % {
            "name": name, "low": STALL_AFTER_MIN, "high": STALL_AFTER_MAX}
    return None


def progress_settings_problems(raw: Mapping[str, Any]) -> dict[str, str]:
    """Field name -> why it is refused, for a launch list's `progress` as given (`None` or
    absent fields take their defaults)."""
    problems: dict[str, str] = {}
    unknown = sorted(set(raw) - {"pattern", "stall_after_seconds",
                                 "cancel_after_stalled_seconds"})
    if unknown:
        problems["progress"] = _("Unknown progress setting: %(names)s.") % {
            "names": ", ".join(map(str, unknown))[:200]}
    pattern = raw.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        problems["pattern"] = _("The step pattern must be text.")
    elif pattern and pattern_problem(pattern) is not None:
        problems["pattern"] = str(pattern_problem(pattern))
    for name in ("stall_after_seconds", "cancel_after_stalled_seconds"):
        if raw.get(name) is not None:
            problem = _seconds_problem(raw[name], name=name)
            if problem is not None:
                problems[name] = problem
    return problems


def progress_settings(raw: Any) -> ProgressSettings:
    """The settings a launch list (or its snapshot) holds, defaults for what is missing or
    not valid (a snapshot is trusted to have been validated, but never crashes a pass)."""
    raw = raw if isinstance(raw, Mapping) else {}
    problems = progress_settings_problems(raw)
    pattern = raw.get("pattern") if "pattern" not in problems else ""
    stall = raw.get("stall_after_seconds")
    cancel = raw.get("cancel_after_stalled_seconds")
    return ProgressSettings(
        pattern=pattern if isinstance(pattern, str) else "",
        stall_after_seconds=stall if stall is not None and "stall_after_seconds" not in problems
        else STALL_AFTER_DEFAULT,
        cancel_after_stalled_seconds=cancel if "cancel_after_stalled_seconds" not in problems
        else None,
    )


# --- reading timestamped log text -------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """Where a run's log was read up to: the time of the last line consumed and how many
    lines of exactly that time were consumed (None: nothing read yet)."""

    at: datetime | None = None
    lines: int = 0


@dataclass(frozen=True)
class StepLine:
    at: datetime
    step: int
    total: int | None


@dataclass
class Reading:
    """What one read found: step lines in log order, the new cursor, and counts."""

    cursor: Cursor
    steps: list[StepLine] = field(default_factory=list)
    lines: int = 0  # lines consumed
    rejected: int = 0  # lines the pattern matched with an insane step
    skipped_long: int = 0  # lines longer than the read's limit, skipped
    partial: bool = False  # the text ended inside a line still being written


@functools.lru_cache(maxsize=4096)
def _second(prefix: str) -> datetime | None:
    """`YYYY-MM-DDTHH:MM:SS` as a UTC time (cached: a log's lines share their seconds)."""
    if prefix[4] != "-" or prefix[7] != "-" or prefix[10] != "T" or prefix[13] != ":" or \
            prefix[16] != ":":
        return None
    fields = (prefix[0:4], prefix[5:7], prefix[8:10], prefix[11:13], prefix[14:16],
              prefix[17:19])
    if not all(part.isascii() and part.isdigit() for part in fields):
        return None
    year, month, day, hour, minute, second = (int(part) for part in fields)
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@functools.lru_cache(maxsize=4096)
def _second_micros(prefix: str) -> int | None:
    base = _second(prefix)
    return None if base is None else (base - _EPOCH) // _MICROSECOND


def _stamp_micros(text: str) -> int | None:
    """`parse_stamp` in microseconds since 1970 (the reading loop compares integers and makes
    a `datetime` only of the lines it keeps)."""
    if len(text) < 20 or text[-1] != "Z":
        return None
    base = _second_micros(text[:19])
    if base is None:
        return None
    if len(text) == 20:
        return base
    digits = text[20:-1]
    if text[19] != "." or not digits or len(digits) > 9 or not (
            digits.isascii() and digits.isdigit()):
        return None
    return base + int((digits + "00000")[:6])


def _moment(micros: int) -> datetime:
    return _EPOCH + micros * _MICROSECOND


def parse_stamp(text: str) -> datetime | None:
    """An RFC 3339 timestamp as the kubelet writes it (`2026-12-01T10:00:00.123456789Z`,
    trailing zeros of the fraction dropped or not); None when `text` is not one."""
    micros = _stamp_micros(text)
    return None if micros is None else _moment(micros)


def split_stamp(raw: str) -> tuple[datetime | None, str]:
    """A log line read with `timestamps=true` as (its time, the line); (None, raw) when it
    does not start with a kubelet timestamp."""
    stamp, sep, rest = raw.partition(" ")
    moment = parse_stamp(stamp) if sep else None
    return (moment, rest) if moment is not None else (None, raw)


def _next_second(moment: datetime) -> datetime:
    return moment.replace(microsecond=0) + timedelta(seconds=1)


def read_steps(text: str, *, pattern: StepPattern, cursor: Cursor,
               truncated: bool) -> Reading:
    """The step lines of a timestamped log answer not consumed before, and the new cursor.

    `truncated`: the answer was cut by the byte limit (its last line is incomplete). Times are
    compared as microseconds; the pattern looks only at the lines its one scan of the whole
    answer points to (`StepPattern.candidate_lines`).
    """
    pieces = text.split("\n")
    tail = pieces.pop()  # "" after a final newline; else an incomplete line
    reading = Reading(cursor=cursor)
    candidates = pattern.candidate_lines(text) if pieces else frozenset()
    at = None if cursor.at is None else (cursor.at - _EPOCH) // _MICROSECOND
    consumed, lines_at, moved = cursor.lines, cursor.lines, False
    last_time = at
    for index, raw in enumerate(pieces):
        stamp, sep, line = raw.partition(" ")
        moment = _stamp_micros(stamp) if sep else None
        if moment is None:  # a line without a stamp continues the one before
            moment, line = last_time, raw
            if moment is None:
                continue
        last_time = moment
        if at is not None and moment < at:
            continue
        if at is not None and moment == at:
            if consumed > 0:
                consumed -= 1
                continue
            lines_at += 1
        else:
            lines_at = 1
        at, consumed, moved = moment, 0, True
        reading.lines += 1
        if candidates is None or index in candidates:
            _take(reading, pattern, _moment(moment), line)
    if moved:
        assert at is not None
        reading.cursor = Cursor(_moment(at), lines_at)
    if tail:
        _incomplete(reading, pattern, tail, truncated=truncated,
                    last_time=None if last_time is None else _moment(last_time))
    return reading


def _take(reading: Reading, pattern: StepPattern, moment: datetime, line: str) -> None:
    found = pattern.last_step(line)
    if found is False:
        reading.rejected += 1
    elif isinstance(found, tuple):
        reading.steps.append(StepLine(moment, found[0], found[1]))


def _incomplete(reading: Reading, pattern: StepPattern, tail: str, *, truncated: bool,
                last_time: datetime | None) -> None:
    """The answer's last line has no newline: cut by the byte limit, or still being written."""
    moment, line = split_stamp(tail)
    moment = moment or last_time
    if moment is None:
        return
    if truncated:
        if reading.lines == 0:  # one line longer than the limit: skip it and its second
            reading.skipped_long += 1
            reading.cursor = Cursor(_next_second(moment), 0)
        return  # otherwise the next read starts with it
    reading.partial = True  # e.g. a tqdm bar redrawn with \r: its newest state counts
    if reading.cursor.at is None or moment >= reading.cursor.at:
        _take(reading, pattern, moment, line)


# --- the series -------------------------------------------------------------------------------


def _thin(points: list[list[int]]) -> list[list[int]]:
    """Every other point, keeping the first and the newest and each point where the step went
    down (a restart) with the one before it, so drops stay visible."""
    keep = {0, len(points) - 1}
    for index in range(1, len(points)):
        if points[index][1] < points[index - 1][1]:
            keep.update({index - 1, index})
    return [point for index, point in enumerate(points) if index % 2 == 0 or index in keep]


def add_points(points: Sequence[Sequence[int]], steps: Sequence[StepLine], *,
               limit: int = POINTS_MAX) -> list[list[int]]:
    """The series `[[unix milliseconds, step], ...]` with the new step lines added: a point when
    the step changed, at most `limit` points (thinned evenly when it would pass them)."""
    series = [[int(t), int(s)] for t, s in points]
    for line in steps:
        moment = int(line.at.timestamp() * 1000)
        if series and series[-1][1] == line.step:
            continue
        if series and moment < series[-1][0]:
            moment = series[-1][0]
        series.append([moment, line.step])
        while len(series) > limit:
            thinned = _thin(series)
            if len(thinned) >= len(series):  # all kept for their drops: drop the oldest
                thinned = series[len(series) - limit:]
            series = thinned
    return series


def rate_per_hour(points: Sequence[Sequence[int]], *,
                  window: int = 3_600_000) -> float | None:
    """Steps per hour over the last `window` milliseconds of the series, measured from its last
    restart on (a point lower than the one before); None without two points to measure."""
    if len(points) < 2:
        return None
    last = len(points) - 1
    restart = max((i for i in range(1, len(points)) if points[i][1] < points[i - 1][1]),
                  default=0)
    end_time, end_step = points[last]
    start = next(i for i in range(restart, len(points))
                 if points[i][0] >= end_time - window or i == last)
    start = min(start, max(restart, last - 1))
    begin_time, begin_step = points[start]
    if start == last or end_time <= begin_time or end_step < begin_step:
        return None
    return round((end_step - begin_step) / (end_time - begin_time) * 3_600_000, 1)
