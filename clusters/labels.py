"""Kubernetes label syntax and the selector rules RLark enforces (pure, no database).

A selector is a list of single-value ``key=value`` conditions combined with AND.
`selector_problems` is the one place the syntax rule lives, as findings: the job's findings
engine reports them, and the verification API and the node filter refuse input with them.

Syntax (as the Kubernetes API server checks it):

- key: an optional prefix (a lower-case DNS subdomain of at most 253 characters)
  followed by ``/``, then a name of 1-63 characters ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``;
- value: at most 63 characters of the same shape, or empty (RLark requires a value).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

__all__ = [
    "DNS_LABEL_PATTERN",
    "SELECTOR_DUPLICATE_KEY",
    "SELECTOR_EMPTY",
    "SELECTOR_SYNTAX",
    "is_dns_label",
    "is_dns_subdomain",
    "is_valid_label_key",
    "is_valid_label_value",
    "parse_selector_text",
    "selector_problems",
    "unparseable_problem",
]

SELECTOR_EMPTY = "selector.empty"
SELECTOR_SYNTAX = "selector.syntax"
SELECTOR_DUPLICATE_KEY = "selector.duplicate_key"

_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
# A DNS label (RFC 1123): Kubernetes names of clusters, namespaces, jobs. The one copy of the
# rule: model validators take the pattern, code calls `is_dns_label`.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_DNS_LABEL = DNS_LABEL_PATTERN[1:-1]
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_NAME_MAX = 63
_PREFIX_MAX = 253
_SHOWN_MAX = 100



def _is_name(text: str) -> bool:
    return len(text) <= _NAME_MAX and _NAME.fullmatch(text) is not None


def is_dns_label(value: object) -> bool:
    """Whether `value` is a DNS label: 1-63 of ``a-z 0-9 -``, starting and ending alphanumeric."""
    return isinstance(value, str) and _DNS_LABEL_RE.fullmatch(value) is not None


def is_dns_subdomain(value: object) -> bool:
    """Whether `value` is a DNS subdomain: dot-separated DNS labels, 253 characters at most."""
    return (
        isinstance(value, str)
        and len(value) <= _PREFIX_MAX
        and _DNS_SUBDOMAIN.fullmatch(value) is not None
    )


def is_valid_label_key(key: object) -> bool:
    """Whether `key` is a Kubernetes label key (``[prefix/]name``)."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return False
    return _is_name(name)


def is_valid_label_value(value: object) -> bool:
    """Whether `value` is a non-empty Kubernetes label value (RLark never selects on '')."""
    return isinstance(value, str) and _is_name(value)


def parse_selector_text(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Split manual input into ``(key, value)`` pairs and the parts that are not ``key=value``.

    Conditions are separated by newlines or commas; blanks around keys and values are
    dropped. Pairs are returned as typed, duplicates included: `selector_problems`
    reports them.
    """
    pairs: list[tuple[str, str]] = []
    unparseable: list[str] = []
    for line in str(text).splitlines():
        for part in line.split(","):
            stripped = part.strip()
            if not stripped:
                continue
            key, equals, value = stripped.partition("=")
            if not equals or not key.strip():
                unparseable.append(stripped)
                continue
            pairs.append((key.strip(), value.strip()))
    return pairs, unparseable


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else type(value).__name__
    return text[:_SHOWN_MAX]


def _pair_problem(index: int, pair: object, field: str, role: str | None) -> Finding | None:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        return new_finding(
            SELECTOR_SYNTAX,
            _("A condition must be a key and a value."),
            field=field,
            role=role,
            index=index,
            part="condition",
        )
    key, value = pair
    if not is_valid_label_key(key):
        return new_finding(
            SELECTOR_SYNTAX,
            _(
                "Label key %(key)s is not valid: an optional DNS prefix and '/', then 1-63 "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit."
            )
            % {"key": repr(_shown(key))},
            field=field,
            role=role,
            index=index,
            part="key",
            key=_shown(key),
        )
    if not is_valid_label_value(value):
        return new_finding(
            SELECTOR_SYNTAX,
            _(
                "Label value %(value)s for %(key)s is not valid: 1-63 letters, digits, '-', '_' "
                "or '.', starting and ending with a letter or digit."
            )
            % {"value": repr(_shown(value)), "key": key},
            field=field,
            role=role,
            index=index,
            part="value",
            key=key,
            value=_shown(value),
        )
    return None


def _duplicate_problems(
    pairs: Sequence[object], field: str, role: str | None
) -> list[Finding]:
    positions: dict[str, list[int]] = {}
    for index, pair in enumerate(pairs):
        if isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], str):
            positions.setdefault(pair[0], []).append(index)
    problems = []
    for key, indexes in positions.items():
        if len(indexes) > 1:
            values = [_shown(pairs[i][1]) for i in indexes]  # type: ignore[index]
            problems.append(
                new_finding(
                    SELECTOR_DUPLICATE_KEY,
                    _("Label key %(key)s appears %(count)d times; use one value per key.")
                    % {"key": key, "count": len(indexes)},
                    field=field,
                    role=role,
                    key=key,
                    indexes=indexes,
                    values=values,
                )
            )
    return problems


def selector_problems(
    pairs: Sequence[tuple[str, str]], *, field: str = "selector", role: str | None = None
) -> list[Finding]:
    """Every reason the conditions `pairs` do not form a usable selector, in a stable order, as
    error findings at `field` (of `role`).

    Tolerates any input (wrong types are syntax problems), so callers can pass user data.
    """
    if isinstance(pairs, dict):
        pairs = list(pairs.items())
    if not isinstance(pairs, (list, tuple)):
        return [
            new_finding(
                SELECTOR_SYNTAX,
                _("The selector must be a list of key=value conditions."),
                field=field,
                role=role,
                part="selector",
            )
        ]
    if not pairs:
        return [
            new_finding(
                SELECTOR_EMPTY, _("Add at least one key=value condition."), field=field, role=role
            )
        ]
    problems = [
        p for i, pair in enumerate(pairs) if (p := _pair_problem(i, pair, field, role)) is not None
    ]
    return problems + _duplicate_problems(pairs, field, role)


def unparseable_problem(part: str, *, field: str = "selector") -> Finding:
    """A part of typed selector text that is not a ``key=value`` condition at all."""
    return new_finding(
        SELECTOR_SYNTAX,
        _("%(part)s is not a key=value condition.") % {"part": repr(part[:_SHOWN_MAX])},
        field=field,
        part="condition",
        text=part[:_SHOWN_MAX],
    )
