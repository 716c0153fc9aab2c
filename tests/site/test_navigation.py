"""The navigation: its groups and account menu, who sees which entry (the Admin group only for
platform admins), the current page marked, URLs that follow the script prefix, and the bar's
markup (disclosures that work without JavaScript)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, RequestFactory
from django.urls import get_script_prefix, reverse, set_script_prefix

from rlark_site.foundation.tenancy.models import Membership, Team
from rlark_site.navigation import ACCOUNT, ADMINS, MEMBERS, NAV, nav_links

pytestmark = pytest.mark.django_db


@pytest.fixture
def prefix() -> Iterator[None]:
    saved = get_script_prefix()
    yield
    set_script_prefix(saved)


def nav_for(user: Any, path: str = "/") -> dict[str, Any]:
    request = RequestFactory().get(path)
    request.user = user
    return nav_links(request)


def groups_for(user: Any) -> dict[str, list[tuple[str, str]]]:
    return {group["key"]: [(link["url"], str(link["label"])) for link in group["links"]]
            for group in nav_for(user)["nav_groups"]}


def expected(hidden: str) -> dict[str, list[tuple[str, str]]]:
    groups = {group.key: [(reverse(e.name), str(e.label)) for e in group.entries
                          if e.audience != hidden] for group in NAV}
    return {key: links for key, links in groups.items() if links}


def current(user: Any, path: str) -> list[tuple[str, str]]:
    """(URL name, aria-current) of the marked entry, and its group marked by its key."""
    nav = nav_for(user, path)
    name = nav["nav_current"]
    if not name:
        return []
    groups = [(group["key"], "group") for group in nav["nav_groups"] if name in group["names"]]
    return [(name, "page" if nav["nav_current_page"] else "true"), *groups]


def test_every_page_of_the_old_bar_is_in_a_group_or_the_account_menu() -> None:
    names = {e.name for group in NAV for e in group.entries} | {e.name for e in ACCOUNT}
    assert names >= {
        "jobs:list", "jobs:launch-lists", "jobs:deployment-parameters", "jobs:ssh-keys",
        "jobs:run-record-lookup", "clusters:verifications", "clusters:queue", "clusters:nodes",
        "clusters:list", "jobs:help-glossary", "swagger-ui", "tokens",
        "notification-preferences", "teams:list"}
    assert [group.key for group in NAV] == ["jobs", "records", "fleet", "help", "admin"]


def test_members_get_no_admin_group_and_admins_no_members_entries(member: Any,
                                                                  admin_user: Any) -> None:
    mine = groups_for(member)
    assert mine == expected(hidden=ADMINS)
    assert "admin" not in mine
    assert (reverse("clusters:verifications"), "Verifications") in mine["fleet"]
    theirs = groups_for(admin_user)
    assert theirs == expected(hidden=MEMBERS)
    assert [url for url, _label in theirs["admin"]] == [
        reverse("clusters:queue"), reverse("jobs:parameters-queue"), reverse("clusters:add")]
    assert reverse("clusters:verifications") not in [url for url, _ in theirs["fleet"]]
    assert groups_for(member) == mine  # asked again (the URLs are cached): the same
    assert [str(link["label"]) for link in nav_for(member)["account_links"]] == [
        "Teams", "API tokens", "Notifications"]


def test_anonymous_visitors_get_no_navigation() -> None:
    from django.contrib.auth.models import AnonymousUser

    assert nav_for(AnonymousUser()) == {}


@pytest.mark.parametrize(("path", "marked"), [
    ("/jobs/", [("jobs:list", "page"), ("jobs", "group")]),
    ("/jobs/job/ppo-run/", [("jobs:list", "true"), ("jobs", "group")]),
    ("/jobs/wizard/new/", [("jobs:wizard-new", "page"), ("jobs", "group")]),
    ("/jobs/launch-lists/3/", [("jobs:launch-lists", "true"), ("records", "group")]),
    ("/jobs/records/ppo-run/", [("jobs:run-record-lookup", "true"), ("records", "group")]),
    ("/clusters/nodes/", [("clusters:nodes", "page"), ("fleet", "group")]),
    ("/clusters/cluster/gpu-a/", [("clusters:list", "true"), ("fleet", "group")]),
    ("/account/tokens/", [("tokens", "page")]),
    ("/teams/vision-rl/", [("teams:list", "true")]),
    ("/health/live", []),
])
def test_the_current_page_and_its_group_are_marked(member: Any, path: str,
                                                   marked: list[tuple[str, str]]) -> None:
    assert current(member, path) == marked


def test_an_admin_in_the_queue_has_the_queue_marked_not_the_team_verifications(
    admin_user: Any, member: Any
) -> None:
    assert current(admin_user, "/clusters/verifications/queue/") == [
        ("clusters:queue", "page"), ("admin", "group")]
    assert current(admin_user, "/jobs/deployment-parameters/queue/") == [
        ("jobs:parameters-queue", "page"), ("admin", "group")]
    # a member there (a 403 page) is under the team's verifications, not the hidden queue
    assert current(member, "/clusters/verifications/queue/") == [
        ("clusters:verifications", "true"), ("fleet", "group")]


def test_the_links_follow_the_script_prefix(member: Any, prefix: None) -> None:
    plain = groups_for(member)
    set_script_prefix("/rlark/")
    prefixed = groups_for(member)
    assert prefixed == {key: [("/rlark/" + url.lstrip("/"), label) for url, label in links]
                        for key, links in plain.items()}
    set_script_prefix("/")
    assert groups_for(member) == plain


def _header(client: Client, path: str = "/jobs/") -> str:
    html = client.get(path).content.decode()
    return html[html.index('<header class="top">'):html.index("</header>")]


def test_the_bar_is_disclosures_with_the_admin_group_for_admins_only(
    client: Client, member: Any, admin_user: Any
) -> None:
    client.force_login(member)
    header = _header(client)
    groups = re.findall(r'<details class="nav-group[^"]*" id="nav-(\w+)" name="nav-group" '
                        r'data-nav-group>\s*<summary id="nav-\1-button"', header)
    assert groups == ["jobs", "records", "fleet", "help", "account"]
    assert 'id="nav-admin' not in header and reverse("clusters:queue") not in header
    assert '<a href="/jobs/" aria-current="page">Jobs</a>' in header
    assert 'id="nav-jobs-button" class="current" aria-current="true"' in header
    bar = header[header.index("<nav"):header.index("</nav>")]
    assert bar.count("aria-current=") == 2  # the page and its group, nothing else
    assert f'action="{reverse("logout")}"' in header.split('id="nav-account-menu"')[1]
    client.force_login(admin_user)
    header = _header(client)
    assert 'id="nav-admin-button"' in header
    assert f'<a href="{reverse("clusters:queue")}" id="nav-queue">' in header


def test_the_language_is_a_button_per_language_the_current_one_marked(
    client: Client, member: Any
) -> None:
    client.force_login(member)
    menu = _header(client).split('id="nav-account-menu"')[1]
    assert '<button type="submit" name="language" value="en" lang="en" class="secondary" ' \
           'aria-current="true">English</button>' in menu
    assert 'value="zh-hans" lang="zh-hans" class="secondary">简体中文</button>' in menu
    client.logout()
    login = client.get("/login/").content.decode()
    assert 'name="language" value="zh-hans"' in login  # also before signing in


def test_a_user_of_two_teams_switches_with_a_button(client: Client, member: Any,
                                                    other_team: Team) -> None:
    other = other_team
    Membership.objects.create(team=other, user=member, role="member")
    client.force_login(member)
    menu = _header(client).split('id="nav-account-menu"')[1]
    assert '<label for="team-switch">Team</label>' in menu
    assert f'{other.name}</option>' in menu and '<button type="submit" class="secondary">Switch' \
        in menu
    answer = client.post(reverse("switch-team"), {"team": other.slug})
    assert answer.status_code == 302
    assert f"· {other.name}" in _header(client)
