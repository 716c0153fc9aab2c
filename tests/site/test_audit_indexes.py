"""Every event table can be searched by object through `Events` (its text object id): the
indexes exist after `migrate` for every event table, including ones added later."""

from __future__ import annotations

import pytest
from django.db import connection

from rlark_site.foundation.audit.indexes import event_tables

pytestmark = pytest.mark.django_db


def test_every_event_table_has_the_object_text_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_indexes WHERE indexdef LIKE '%%((pgh_obj_id)::text)%%'"
        )
        indexed = {row[0] for row in cursor.fetchall()}
    assert event_tables()
    assert set(event_tables()) - indexed == set()


def test_an_object_lookup_uses_the_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT 1 FROM jobs_jobevent WHERE pgh_obj_id::text = '7'"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_jobevent_obj_text" in plan
