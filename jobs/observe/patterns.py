"""Signal patterns: plain text, or a regular expression between slashes, matched in bounded
time (the `regex` package's `timeout`; lines cut to `LINE_MAX`). Pure: no database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import regex
from django.utils.translation import gettext as _

PATTERN_MAX = 500
LINE_MAX = 4096
MATCH_TIMEOUT = 1.0


@dataclass(frozen=True)
class Pattern:
    text: str
    is_regex: bool


def parse_pattern(raw: str) -> Pattern:
    """`/.../` is a regular expression; anything else is plain text."""
    if len(raw) >= 2 and raw.startswith("/") and raw.endswith("/"):
        return Pattern(raw[1:-1], True)
    return Pattern(raw, False)


def pattern_problem(raw: str) -> str | None:
    """Why `raw` cannot be a signal pattern, or None."""
    if len(raw) > PATTERN_MAX:
        return _("A pattern has at most %(n)d characters.") % {"n": PATTERN_MAX}
    pattern = parse_pattern(raw)
    if not pattern.text.strip():
        return _("The pattern is empty.")
    if pattern.is_regex:
        try:
            regex.compile(pattern.text)
        except regex.error as exc:
            return _("Not a valid regular expression: %(error)s") % {"error": exc}
    return None


def find_line(pattern: Pattern, lines: Sequence[str]) -> int | None:
    """The index of the first line the pattern matches; `TimeoutError` when a regular
    expression takes longer than `MATCH_TIMEOUT`."""
    cut = [line[:LINE_MAX] for line in lines]
    if not pattern.is_regex:
        return next((i for i, line in enumerate(cut) if pattern.text in line), None)
    text = "\n".join(cut)
    match = regex.compile(pattern.text, regex.MULTILINE).search(text, timeout=MATCH_TIMEOUT)
    return None if match is None else text.count("\n", 0, match.start())
