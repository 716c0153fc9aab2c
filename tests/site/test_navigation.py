"""The navigation's links: who sees which, and URLs that follow the script prefix."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import RequestFactory
from django.urls import get_script_prefix, reverse, set_script_prefix

from rlark_site.navigation import NAV, nav_links

pytestmark = pytest.mark.django_db


@pytest.fixture
def prefix() -> Iterator[None]:
    saved = get_script_prefix()
    yield
    set_script_prefix(saved)


def links_for(user: Any) -> list[tuple[str, str, bool]]:
    request = RequestFactory().get("/")
    request.user = user
    return [(link["url"], str(link["label"]), link["queue"])
            for link in nav_links(request)["nav_links"]]


def expected(hidden: str) -> list[tuple[str, str, bool]]:
    return [(reverse(name), str(label), name == "clusters:queue")
            for name, label, _audience in NAV if name != hidden]


def test_members_and_admins_get_their_links(member: Any, admin_user: Any) -> None:
    assert links_for(member) == expected(hidden="clusters:queue")
    assert links_for(admin_user) == expected(hidden="clusters:verifications")
    assert links_for(member) == expected(hidden="clusters:queue")  # asked again: the same


def test_the_links_follow_the_script_prefix(member: Any, prefix: None) -> None:
    plain = links_for(member)
    set_script_prefix("/rlark/")
    prefixed = links_for(member)
    assert [url for url, _label, _queue in prefixed] == [
        "/rlark/" + url.lstrip("/") for url, _label, _queue in plain]
    set_script_prefix("/")
    assert links_for(member) == plain
