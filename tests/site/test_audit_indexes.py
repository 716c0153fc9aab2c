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
        # On an empty table every index costs the same to the planner, and a full scan of
        # another index of the table (filtering each entry) can win the tie; the other
        # secondary indexes are dropped inside the test's transaction (rolled back after),
        # so the plan shows whether the lookup's expression is the one the index is on.
        cursor.execute(
            "SELECT i.indexname FROM pg_indexes i WHERE i.tablename = 'jobs_jobevent' "
            "AND i.indexname <> 'jobs_jobevent_obj_text' AND NOT EXISTS (SELECT 1 FROM "
            "pg_constraint c WHERE c.conname = i.indexname)"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT 1 FROM jobs_jobevent WHERE pgh_obj_id::text = '7'"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_jobevent_obj_text" in plan
