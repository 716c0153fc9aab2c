"""The portal's navigation, shown in the base layout."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext_lazy as _

from rlark_site.tenancy.access import is_platform_admin

# (url name, label, admins only)
NAV = [
    ("jobs:list", _("Jobs"), False),
    ("jobs:launch-lists", _("Launch lists"), False),
    ("jobs:deployment-parameters", _("Deployment parameters"), False),
    ("jobs:ssh-keys", _("SSH keys"), False),
    ("jobs:run-record-lookup", _("Run records"), False),
    ("clusters:verifications", _("Verifications"), False),
    ("clusters:nodes", _("Nodes"), False),
    ("clusters:list", _("Clusters"), False),
    ("clusters:queue", _("Verification queue"), True),
    ("swagger-ui", _("API"), False),
]


def nav_links(request: HttpRequest) -> dict[str, Any]:
    if not request.user.is_authenticated:
        return {}
    admin = is_platform_admin(request.user)
    links = []
    for name, label, admins_only in NAV:
        if admins_only and not admin:
            continue
        try:
            links.append({"url": reverse(name), "label": label})
        except NoReverseMatch:
            continue
    return {"nav_links": links}
