"""The portal's navigation, shown in the base layout."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.translation import gettext_lazy as _

from rlark_site.foundation.tenancy.access import is_platform_admin

ALL, MEMBERS, ADMINS = "all", "members", "admins"
QUEUE = "clusters:queue"

# (url name, label, who sees it): one verification entry each, the team's list for members
# and the queue (with the pending-requests count) for platform admins.
NAV = [
    ("jobs:list", _("Jobs"), ALL),
    ("jobs:launch-lists", _("Launch lists"), ALL),
    ("jobs:deployment-parameters", _("Deployment parameters"), ALL),
    ("jobs:ssh-keys", _("SSH keys"), ALL),
    ("jobs:run-record-lookup", _("Run records"), ALL),
    ("clusters:verifications", _("Verifications"), MEMBERS),
    (QUEUE, _("Verification queue"), ADMINS),
    ("clusters:nodes", _("Nodes"), ALL),
    ("clusters:list", _("Clusters"), ALL),
    ("jobs:help-glossary", _("Glossary"), ALL),
    ("swagger-ui", _("API"), ALL),
    ("tokens", _("API tokens"), ALL),
    ("notification-preferences", _("Notifications"), ALL),
    ("teams:list", _("Teams"), ALL),
]


@cache
def _urls(prefix: str, urlconf: str | None, root: str) -> dict[str, str]:
    """Every entry's URL under this script prefix and URLconf (the arguments are the cache key:
    `reverse` reads them, and nothing else that changes, for these argument-less names)."""
    return {name: reverse(name) for name, _label, _audience in NAV}


def nav_links(request: HttpRequest) -> dict[str, Any]:
    if not request.user.is_authenticated:
        return {}
    admin = is_platform_admin(request.user)
    urls = _urls(get_script_prefix(), get_urlconf(), settings.ROOT_URLCONF)
    links = []
    for name, label, audience in NAV:
        if audience == (MEMBERS if admin else ADMINS):
            continue
        links.append({"url": urls[name], "label": label, "queue": name == QUEUE})
    return {"nav_links": links}
