"""Kubernetes resource quantities (``500m``, ``2``, ``64Gi``, ``1e3``, ``1.5``) as Decimals.

Grammar (k8s.io/apimachinery ``resource.Quantity``)::

    quantity  ::= sign? number suffix?
    number    ::= digits | digits "." digits? | "." digits
    suffix    ::= Ki | Mi | Gi | Ti | Pi | Ei            (binary)
                | n | u | m | k | M | G | T | P | E      (decimal)
                | (e | E) sign? digits                   (decimal exponent)

``1E`` is one exa; ``1E3`` is one thousand. Surrounding blanks are not part of the
grammar. RLark also rejects negative amounts and amounts above 2^63 (no resource
request can use them).

The one parser: the findings engine checks requests and sizes with `parse_quantity`, the
inventory and the fleet simulator read allocatable counts with `parse_count`, and the pod
request rule (`clusters.podrequests`) adds quantities exactly as whole nano units
(`nano_units`: Kubernetes keeps nothing finer than 1n and rounds finer amounts up). The
`format_*` functions write amounts back as quantity strings. Pure.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, localcontext

__all__ = [
    "NANO",
    "QuantityError",
    "format_bytes",
    "format_count",
    "format_milli",
    "is_quantity",
    "nano_units",
    "parse_count",
    "parse_quantity",
]

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>[eE][+-]?\d{1,4}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?"
)
_BINARY_POWERS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_MAX_TEXT = 64
_MAX_AMOUNT = Decimal(2) ** 63


class QuantityError(ValueError):
    """The text is not a usable Kubernetes quantity."""


def _scaled(number: str, suffix: str) -> Decimal:
    with localcontext() as context:
        context.prec = 60
        amount = Decimal(number)
        if suffix in _BINARY_POWERS:
            return amount * (2 ** _BINARY_POWERS[suffix])
        if suffix in _DECIMAL_EXPONENTS:
            return amount.scaleb(_DECIMAL_EXPONENTS[suffix])
        if suffix:
            return amount.scaleb(int(suffix[1:]))
        return amount


def parse_quantity(text: str) -> Decimal:
    """The amount `text` stands for (in base units: cores, bytes, devices).

    Raises `QuantityError` for anything else, including non-strings.
    """
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        raise QuantityError("not a quantity")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity")
    try:
        amount = _scaled(match.group("number"), match.group("suffix") or "")
    except (InvalidOperation, ValueError, OverflowError) as exc:
        raise QuantityError(f"{text!r} is out of range") from exc
    if amount < 0:
        raise QuantityError(f"{text!r} is negative")
    if amount > _MAX_AMOUNT:
        raise QuantityError(f"{text!r} is too large")
    return amount


def is_quantity(text: object) -> bool:
    """Whether `text` is a string `parse_quantity` accepts."""
    try:
        parse_quantity(text)  # type: ignore[arg-type]
    except QuantityError:
        return False
    return True


def parse_count(value: str | int) -> int | None:
    """The whole number a quantity of a countable resource stands for ("8", "2k", "4000m"), or
    None when it is not a quantity, or is negative or fractional. Surrounding blanks are
    ignored (nodes report what their device plugins wrote)."""
    if isinstance(value, int):
        return value if value >= 0 else None
    try:
        amount = parse_quantity(value.strip())
    except QuantityError:
        return None
    return int(amount) if amount == amount.to_integral_value() else None


NANO = 10**9
"""Nano units per base unit: Kubernetes quantities carry at most nine decimal places."""


def nano_units(text: str) -> int:
    """The amount `text` stands for in whole nano units, rounded up (as Kubernetes rounds an
    amount finer than 1n up to 1n). Raises `QuantityError` like `parse_quantity`."""
    with localcontext() as context:
        context.prec = 90  # exact: at most 64 characters of digits, scaled by 10^(9+18)
        amount = parse_quantity(text) * NANO
    whole = int(amount)
    return whole + (amount != whole)


def format_milli(milli: int) -> str:
    """Thousandths (millicores) as a quantity: `2` for 2000, `1500m` for 1500."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def format_bytes(amount: int) -> str:
    """A byte count as a quantity, with the largest binary suffix that keeps it whole
    (`64Gi`, `1536Mi`, `1000`)."""
    for suffix, power in _BINARY_SUFFIXES:
        if amount and amount % (1 << power) == 0:
            return f"{amount >> power}{suffix}"
    return str(amount)


def format_count(amount: int) -> str:
    """A whole count (GPUs, devices, pods) as a quantity."""
    return str(amount)
