"""Kubernetes quantities of countable resources, for the simulator's scheduler.

The simulator stays free of the gateway (and of `kubernetes`), so it carries
its own small parser; both follow the Kubernetes quantity grammar.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_DECIMAL_SUFFIXES = "num kMGTPE"
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _factor(suffix: str) -> Decimal:
    if suffix in _BINARY_SUFFIXES:
        return Decimal(2) ** (10 * (_BINARY_SUFFIXES.index(suffix) + 1))
    if suffix[:1] in ("e", "E"):
        return Decimal(10) ** int(suffix[1:])
    if suffix:
        return Decimal(10) ** (3 * (_DECIMAL_SUFFIXES.index(suffix) - 3))
    return Decimal(1)


def is_quantity(text: str) -> bool:
    """Whether `text` follows the Kubernetes quantity grammar."""
    return _QUANTITY.match(text.strip()) is not None


def parse_count(value: str | int) -> int | None:
    """The whole, non-negative number a quantity stands for, or None."""
    if isinstance(value, int):
        return value if value >= 0 else None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    try:
        amount = Decimal(match.group(1)) * _factor(match.group(2) or "")
    except (InvalidOperation, ValueError):
        return None
    if amount < 0 or amount != amount.to_integral_value():
        return None
    return int(amount)
