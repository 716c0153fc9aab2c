"""Every event table can be searched by object through `Events` (its text object id)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection

pytestmark = pytest.mark.django_db


def event_tables() -> set[str]:
    return {
        model._meta.db_table for model in apps.get_models()
        if model.__name__.endswith("Event")
        and {"pgh_obj", "pgh_id"} <= {field.name for field in model._meta.fields}
    }


def test_every_event_table_has_the_object_text_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_indexes WHERE indexdef LIKE '%%((pgh_obj_id)::text)%%'"
        )
        indexed = {row[0] for row in cursor.fetchall()}
    assert event_tables()
    assert event_tables() - indexed == set()


def test_an_object_lookup_uses_the_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT 1 FROM jobs_jobevent WHERE pgh_obj_id::text = '7'"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_jobevent_obj_text" in plan
