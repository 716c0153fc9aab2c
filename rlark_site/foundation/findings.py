"""A finding: one rule's verdict on user input, in the shape of SPEC section 4, for every app.

`{code, severity, role, field, message, detail}`: `code` is the stable contract, `severity`
is ``error`` (blocks submission) or ``warning``, `role` and `field` say where the input is,
`message` is translated, `detail` is JSON data for the UI. `new_finding` is the one builder:
the job's findings engine, the placement rules shared with the admin verification queue
(`clusters.placement`), selector syntax problems and the domain errors that carry findings all
build them here. Pure: no database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Literal

from django.apps import apps
from django.conf import settings
from django.utils.translation import gettext

__all__ = ["Finding", "Severity", "has_errors", "new_finding", "translate"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    message: str
    role: str | None = None
    field: str | None = None
    detail: dict[str, Any] = dc_field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "role": self.role,
            "field": self.field,
            "message": str(self.message),
            "detail": self.detail,
        }


def new_finding(
    code: str,
    message: str,
    *,
    role: str | None = None,
    field: str | None = None,
    severity: Severity = "error",
    **detail: Any,
) -> Finding:
    """A finding; every keyword beyond `role`, `field` and `severity` goes into `detail`."""
    return Finding(
        code=code, severity=severity, message=message, role=role, field=field, detail=detail
    )


def has_errors(findings: Iterable[Finding]) -> bool:
    """Whether any finding blocks submission."""
    return any(finding.severity == "error" for finding in findings)


def translate(message: str) -> str:
    """`gettext` at call time when Django is ready; the text itself otherwise (pure use, scripts).

    Rule modules import it as ``_`` so that `makemessages` finds their strings."""
    if settings.configured and apps.ready:
        return gettext(message)
    return message
