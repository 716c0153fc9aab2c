from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.utils import InternalError, ProgrammingError
from pghistory.models import Events

from rlark_site.foundation.audit.selectors import audit_events
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db


def _team_events(team: Team) -> list[Events]:
    return list(audit_events(objects=[("tenancy.Team", team.pk)]))


def test_insert_update_and_delete_are_recorded(team: Team) -> None:
    team.name = "Vision RL (renamed)"
    team.save(update_fields=["name"])
    pk = team.pk
    team.delete()
    labels = [e.pgh_label for e in audit_events(objects=[("tenancy.Team", pk)])]
    assert sorted(labels) == ["delete", "insert", "update"]


def test_bulk_queryset_update_is_recorded(team: Team) -> None:
    Team.objects.filter(pk=team.pk).update(name="bulk renamed")
    update = [e for e in _team_events(team) if e.pgh_label == "update"]
    assert len(update) == 1
    assert update[0].pgh_diff == {"name": ["Vision RL", "bulk renamed"]}


@pytest.mark.parametrize("statement", ["UPDATE {t} SET name = 'forged'", "DELETE FROM {t}"])
def test_the_database_refuses_to_change_event_rows(team: Team, statement: str) -> None:
    table = Team.pgh_event_models["insert"]._meta.db_table  # type: ignore[attr-defined]
    with (
        pytest.raises((ProgrammingError, InternalError)),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement.format(t=table))
    assert [e.pgh_label for e in _team_events(team)] == ["insert"]


def test_request_context_records_actor_url_and_request_id(client, admin_user) -> None:
    client.force_login(admin_user)
    response = client.post(
        "/api/v1/teams/",
        {"slug": "robotics", "name": "Robotics"},
        content_type="application/json",
        HTTP_X_REQUEST_ID="req-123",
    )
    assert response.status_code == 201
    team = Team.objects.get(slug="robotics")
    (event,) = _team_events(team)
    assert event.pgh_context["user"] == admin_user.pk
    assert event.pgh_context["url"] == "/api/v1/teams/"
    assert event.pgh_context["request_id"] == "req-123"


def test_audit_lookup_by_actor_and_team(client, admin_user, team: Team) -> None:
    client.force_login(admin_user)
    client.post(
        "/api/v1/teams/", {"slug": "robotics", "name": "R"}, content_type="application/json"
    )
    by_actor = audit_events(actor_id=admin_user.pk)
    assert {e.pgh_obj_model for e in by_actor} == {"tenancy.Team"}
    by_team = audit_events(team_id=team.pk, model="membership")
    assert list(by_team) == []
