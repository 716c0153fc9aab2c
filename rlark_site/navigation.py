"""The portal's navigation, shown in the base layout: a few groups and an account menu.

`NAV` lists the groups in the order of the bar, each with its entries; `ACCOUNT` the account
menu's pages (the menu adds the team switch, the language and log-out). To add a page, add one
`Entry` to the group it belongs to. An entry or group seen by `MEMBERS` only is hidden from
platform admins and one for `ADMINS` from everyone else; a group with no entry left for a user
is not shown (the Admin group, for a team member).

The current page: the entry whose URL is the longest prefix of the request's path (`/jobs/job/x/`
is under Jobs, `/jobs/launch-lists/3/` under Launch lists) is marked `aria-current` ("page"
when it is that very page, else "true"), and so is its group's button.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from rlark_site.foundation.tenancy.access import is_platform_admin

ALL, MEMBERS, ADMINS = "all", "members", "admins"
QUEUE = "clusters:queue"
PARAMETERS_QUEUE = "jobs:parameters-queue"


@dataclass(frozen=True)
class Entry:
    name: str  # URL name, reversed without arguments
    label: Promise
    audience: str = ALL


@dataclass(frozen=True)
class Group:
    key: str  # the id's part: nav-<key>
    label: Promise
    entries: tuple[Entry, ...]


NAV: tuple[Group, ...] = (
    Group("jobs", _("Jobs"), (
        Entry("jobs:list", _("Jobs")),
        Entry("jobs:wizard-new", _("Create job")),
        Entry("jobs:new-from-file", _("New job from file")),
        Entry("jobs:ssh-keys", _("SSH keys")),
    )),
    Group("records", _("Records"), (
        Entry("jobs:run-record-lookup", _("Run records")),
        Entry("jobs:launch-lists", _("Launch lists")),
        Entry("jobs:deployment-parameters", _("Deployment parameters")),
        Entry("jobs:usage", _("GPU-hours")),
    )),
    Group("fleet", _("Fleet"), (
        Entry("clusters:list", _("Clusters")),
        Entry("clusters:nodes", _("Nodes")),
        Entry("clusters:verifications", _("Verifications"), MEMBERS),
    )),
    Group("help", _("Help"), (
        Entry("jobs:help-glossary", _("Glossary")),
        Entry("swagger-ui", _("API")),
    )),
    Group("admin", _("Admin"), (
        Entry(QUEUE, _("Verification queue"), ADMINS),
        Entry(PARAMETERS_QUEUE, _("Deployment-parameters queue"), ADMINS),
        Entry("clusters:add", _("Add a cluster"), ADMINS),
    )),
)
ACCOUNT: tuple[Entry, ...] = (
    Entry("teams:list", _("Teams")),
    Entry("tokens", _("API tokens")),
    Entry("notification-preferences", _("Notifications")),
)


def _entries() -> list[Entry]:
    return [entry for group in NAV for entry in group.entries] + list(ACCOUNT)


def _link(entry: Entry, url: str) -> dict[str, Any]:
    return {"url": url, "label": entry.label, "name": entry.name, "queue": entry.name == QUEUE,
            "parameters_queue": entry.name == PARAMETERS_QUEUE}


@cache
def _layout(prefix: str, urlconf: str | None, root: str, admin: bool) -> dict[str, Any]:
    """The bar for one script prefix and URLconf (what `reverse` reads, and nothing else that
    changes, for these argument-less names) and one audience: reversed and built once. Shared
    between requests: read only."""
    hidden = MEMBERS if admin else ADMINS
    urls = {entry.name: reverse(entry.name) for entry in _entries() if entry.audience != hidden}
    groups = []
    for group in NAV:
        links = [_link(entry, urls[entry.name]) for entry in group.entries
                 if entry.name in urls]
        if links:
            groups.append({"key": group.key, "label": group.label, "links": links,
                           "names": frozenset(link["name"] for link in links),
                           "admin": group.key == "admin"})
    account = [_link(entry, urls[entry.name]) for entry in ACCOUNT if entry.name in urls]
    return {"nav_groups": groups, "account_links": account,
            "account_names": frozenset(link["name"] for link in account),
            "longest_first": sorted(urls.items(), key=lambda item: -len(item[1]))}


def nav_links(request: HttpRequest) -> dict[str, Any]:
    """`nav_groups` (each with its `links` and the `names` of their URLs) and `account_links`
    for the signed-in user, and the current entry: `nav_current` (its URL name, "" for none)
    and `nav_current_page` (the request is that very page, not one below it)."""
    if not request.user.is_authenticated:
        return {}
    layout = _layout(get_script_prefix(), get_urlconf(), settings.ROOT_URLCONF,
                     is_platform_admin(request.user))
    path = request.path
    current = next(((name, url) for name, url in layout["longest_first"]
                    if path.startswith(url)), ("", ""))
    return {"nav_groups": layout["nav_groups"], "account_links": layout["account_links"],
            "account_names": layout["account_names"], "nav_current": current[0],
            "nav_current_page": current[1] == path}
