"""Template context for every page: the count of requests waiting for a platform admin, the
debounce of live form answers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from jobs.records.selectors import pending_admin_counts
from rlark_site.foundation.tenancy.access import is_platform_admin


def pending_requests(request: HttpRequest) -> dict[str, Any]:
    """`pending_requests`: pending verifications and deployment-parameter confirmations, for
    platform admins only (shown beside the queue in the navigation); each count apart for the
    queue's tabs."""
    if not request.user.is_authenticated or not is_platform_admin(request.user):
        return {}
    verifications, confirmations = pending_admin_counts()
    return {"pending_requests": verifications + confirmations,
            "pending_verifications": verifications, "pending_confirmations": confirmations}


def live_debounce(request: HttpRequest) -> dict[str, Any]:
    """`live_debounce_ms`: the pause in typing (ms) after which a live answer is asked for
    (`RLARK_LIVE_DEBOUNCE_MS`; htmx's `delay:` of the wizard's and the log search's triggers)."""
    return {"live_debounce_ms": max(0, int(settings.RLARK_LIVE_DEBOUNCE_MS))}
