"""`-o table|json|yaml`: data goes to stdout, messages and progress to stderr.

`json` and `yaml` print the API's answer as it came (so scripts get every field); `table` is
for people: aligned columns for lists, `key: value` lines for one object. YAML (PyYAML) is
imported only when asked for.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

FORMATS = ("table", "json", "yaml")


def emit(data: Any, fmt: str, table: Callable[[Any], str]) -> None:
    if fmt == "json":
        text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)
    elif fmt == "yaml":
        import yaml

        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                              default_flow_style=False).rstrip("\n")
    else:
        text = table(data)
    if text:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
    text = " ".join(str(value).split())
    return text or "-"


def columns(rows: Sequence[dict[str, Any]], spec: Sequence[tuple[str, str]],
            empty: str = "") -> str:
    """Aligned columns: `spec` is (header, key) pairs."""
    if not rows:
        return empty
    grid = [[header for header, _ in spec]]
    grid += [[cell(row.get(key)) for _, key in spec] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(spec))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in grid)


def pairs(items: Sequence[tuple[str, Any]]) -> str:
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{(k + ':').ljust(width + 1)} {cell(v)}" for k, v in items)
