"""The migration that gives deployment parameters a confirmation: every existing record becomes
pending, asked for by its author when it was last changed (so the admin queue orders it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.migrating import migrate, migrated_to

BEFORE = [("jobs", "0010_launch_list_image")]
AFTER = [("jobs", "0011_deployment_parameters_confirmation")]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def old_apps() -> Iterator[Any]:
    with migrated_to(BEFORE) as apps:
        yield apps


def test_existing_records_become_pending_asked_by_their_author(old_apps: Any) -> None:
    team = old_apps.get_model("tenancy", "Team").objects.create(slug="t", name="T")
    user = old_apps.get_model("auth", "User").objects.create(username="author")
    old = old_apps.get_model("jobs", "DeploymentParameters").objects.create(
        team=team, title="placement", created_by=user,
        roles=[{"role": "Actor", "cluster": "gpu-a", "selector": {"a": "b"}, "gpus": 8}],
    )
    new_apps = migrate(AFTER)
    row = new_apps.get_model("jobs", "DeploymentParameters").objects.get(pk=old.pk)
    assert row.confirmation_state == "pending"
    assert row.confirmation_requested_by_id == user.pk
    assert row.confirmation_requested_at == old.updated_at
    assert row.confirmed_content == {} and row.confirmation_decided_by_id is None
    assert row.roles == old.roles
