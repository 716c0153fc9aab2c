"""CPU and memory requests and limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusters.quantities import QuantityError, parse_quantity
from jobs.core.findings.base import (
    CheckedRole,
    optional_text,
    shown,
)
from jobs.core.spec import (
    field_of,
)
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.findings import translate as _


def resource_findings(r: CheckedRole) -> Iterator[Finding]:
    for kind in ("cpu", "memory"):
        pair = field_of(r.role, kind, None)
        parsed: dict[str, Any] = {}
        for part in ("request", "limit"):
            value = optional_text(field_of(pair, part))
            if value == "":
                continue
            try:
                parsed[part] = parse_quantity(value)  # type: ignore[arg-type]
            except QuantityError:
                yield r.finding(
                    "resources.invalid",
                    _("%(value)s is not a Kubernetes quantity (for example 500m, 2, 64Gi).")
                    % {"value": repr(shown(value))},
                    f"{kind}.{part}",
                    value=shown(value),
                )
        if "request" in parsed and "limit" in parsed and parsed["request"] > parsed["limit"]:
            yield r.finding(
                "resources.invalid",
                _("The %(kind)s request is above its limit.") % {"kind": kind},
                f"{kind}.request",
                request=shown(field_of(pair, "request")),
                limit=shown(field_of(pair, "limit")),
            )
