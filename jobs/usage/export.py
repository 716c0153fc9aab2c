"""The CSV of a usage report: the same rows as the page and `GET usage/`.

A cell that a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, a tab or
a carriage return: OWASP's list for CSV injection) is written with a leading `'`, so a job or
user name such as `=HYPERLINK(...)` stays text. Numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from jobs.core.usage import CATEGORIES, IDLE

__all__ = ["csv_cell", "usage_csv"]

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """`value` safe to open in a spreadsheet (text that starts like a formula is quoted)."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value


def usage_csv(body: dict[str, Any]) -> str:
    """The report (`UsageReport.as_dict()`) as CSV text: one row per group, then the total."""
    group_by = body["group_by"]
    extra = ["team", "user", "state"] if group_by == "job" else []
    measures = ["reserved", *CATEGORIES, *([IDLE] if body["idle_measured"] else [])]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([group_by, *extra, *(f"{name}_gpu_hours" for name in measures)])
    rows: Iterable[dict[str, Any]] = body["groups"]
    for group in rows:
        writer.writerow([csv_cell(group["key"]), *(csv_cell(group.get(k)) for k in extra),
                         *(group[name] for name in measures)])
    writer.writerow(["total", *("" for _ in extra), *(body["total"][name] for name in measures)])
    return out.getvalue()
