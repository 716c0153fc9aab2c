"""Template context for every page: the count of requests waiting for a platform admin."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from jobs.records.selectors import pending_admin_requests
from rlark_site.foundation.tenancy.access import is_platform_admin


def pending_requests(request: HttpRequest) -> dict[str, Any]:
    """`pending_requests`: pending verifications and deployment-parameter confirmations, for
    platform admins only (shown beside the queue in the navigation)."""
    if not request.user.is_authenticated or not is_platform_admin(request.user):
        return {}
    return {"pending_requests": pending_admin_requests()}
