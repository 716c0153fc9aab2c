"""The tenancy context processor: the user's teams and the current one, read in one query."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.sessions.backends.base import SessionBase
from django.test import RequestFactory

from rlark_site.foundation.tenancy.context_processors import tenancy
from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(member: Any, team: Team, other_team: Team) -> list[Team]:
    """The member's two teams, by slug (nlp-rl before vision-rl); a third team is not theirs."""
    Membership.objects.create(team=other_team, user=member, role=MemberRole.MEMBER)
    Team.objects.create(slug="aaa-not-mine", name="Not mine")
    return [other_team, team]


def request_for(user: Any, chosen: str | None = None) -> Any:
    request = RequestFactory().get("/")
    request.user = user
    request.session = SessionBase()
    if chosen is not None:
        request.session["current_team"] = chosen
    return request


def test_the_teams_and_the_session_s_team_take_one_query(
    member: Any, teams: list[Team], django_assert_num_queries: Any
) -> None:
    request = request_for(member, chosen="vision-rl")
    with django_assert_num_queries(1):
        context = tenancy(request)
    assert context["my_teams"] == teams
    assert context["current_team"] == teams[1]
    assert context["is_platform_admin"] is False


@pytest.mark.parametrize("chosen", [None, "aaa-not-mine", "gone"])
def test_without_a_valid_choice_the_first_team_is_current_and_remembered(
    member: Any, teams: list[Team], chosen: str | None
) -> None:
    request = request_for(member, chosen=chosen)
    assert tenancy(request)["current_team"] == teams[0]
    assert request.session["current_team"] == "nlp-rl"


def test_a_user_without_teams_has_no_current_team(admin_user: Any) -> None:
    request = request_for(admin_user)
    context = tenancy(request)
    assert context["my_teams"] == [] and context["current_team"] is None
    assert "current_team" not in request.session
