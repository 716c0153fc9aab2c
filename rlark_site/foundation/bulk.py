# ruff: noqa: S608  (SQL from the model's own table and column names; values are parameters)
"""Bulk inserts and upserts in one statement: one array per column, `unnest`ed on the server.

`QuerySet.bulk_create(update_conflicts=True)` writes `INSERT ... VALUES (...), (...)` with one
parameter per field and row: for 5,000 rows of 27 fields that is 135,000 parameters, more than
PostgreSQL takes in one statement (65,535), so it is cut into batches, and every batch costs
Django and psycopg far more than the database (the model instances, a per-value preparation,
and psycopg splitting a statement of thousands of placeholders, which it cannot cache). Here
the rows go as one array per column:

    INSERT INTO t (a, b) SELECT * FROM unnest(%s::integer[], %s::text[])
    ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b

one statement whatever the number of rows, with as many parameters as columns (`insert`
leaves out the `ON CONFLICT`). Values are prepared by each field (`get_db_prep_save`), as
Django would, except plain values that preparation would return unchanged. No model instances
are made and no ids come back. Triggers fire as for any insert or update (the audit trail of
pghistory included).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Field, Model
from django.db.models.fields import AutoFieldMixin
from django.utils import timezone

__all__ = ["insert", "upsert"]


def _columns(model: type[Model], rows: Sequence[Mapping[str, Any]]) -> list[Field[Any, Any]]:
    """Every concrete field but the automatic primary key; rows may only name these."""
    fields = [f for f in model._meta.concrete_fields if not isinstance(f, AutoFieldMixin)]
    known = {f.attname for f in fields}
    for row in rows:
        unknown = set(row) - known
        if unknown:
            raise ValueError(f"{model.__name__} has no columns {sorted(unknown)} (use attnames: "
                             "run_record_id, not run_record)")
    return fields


def _column(model: type[Model], attname: str) -> str:
    for field in model._meta.concrete_fields:
        if field.attname == attname:
            return str(field.column)
    raise ValueError(f"{model.__name__} has no column {attname!r}")


# Values of these exact types go to psycopg as they are for fields of these kinds: the field's
# own preparation (`get_db_prep_save`) would return them unchanged, at a cost that was most of
# the statement's for 5,000 rows. Any other value (a naive datetime, an expression, a string
# for an integer column) is prepared by its field.
_AS_IS: dict[str, tuple[type, ...]] = {
    "CharField": (str,), "TextField": (str,), "SlugField": (str,),
    "IntegerField": (int,), "PositiveIntegerField": (int,), "SmallIntegerField": (int,),
    "PositiveSmallIntegerField": (int,), "BigIntegerField": (int,), "AutoField": (int,),
    "BigAutoField": (int,),
    "BooleanField": (bool,), "BinaryField": (bytes,), "DateTimeField": (datetime,),
}


def _values(field: Field[Any, Any], rows: Sequence[Mapping[str, Any]],
            now: datetime) -> list[Any]:
    """The column's values, prepared for the database as `bulk_create` would (a left-out
    `auto_now`/`auto_now_add` field is the statement's time, the same for every row)."""
    kind = field.get_internal_type()
    if kind == "ForeignKey":  # its value is the target's
        kind = field.target_field.get_internal_type()  # type: ignore[attr-defined]
    name, plain = field.attname, _AS_IS.get(kind, ())
    stamped = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
    values = []
    for row in rows:
        if name in row:
            value = row[name]
        else:
            value = now if stamped else field.get_default()
        if not (value is None or (type(value) in plain and (
                type(value) is not datetime or value.tzinfo is not None))):
            value = field.get_db_prep_save(value, connection)
        values.append(value)
    return values


def _array_type(field: Field[Any, Any]) -> str:
    """The column's type without its modifier, as an array: `varchar(63)` → `varchar[]`.

    An explicit cast to `varchar(63)` would cut a longer value silently; without the length,
    the insert's own assignment to the column refuses it, as a plain INSERT would.
    """
    return re.sub(r"\(.*\)", "", str(field.db_type(connection))).strip() + "[]"


def _insert(model: type[Model], rows: Sequence[Mapping[str, Any]], tail: str) -> int:
    fields = _columns(model, rows)
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    arrays = ", ".join(f"%s::{_array_type(f)}" for f in fields)
    sql = (f"INSERT INTO {quote(model._meta.db_table)} ({columns}) SELECT * FROM "
           f"unnest({arrays}){tail}")
    now = timezone.now()
    params = [_values(field, rows, now) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def insert(model: type[Model], rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert `rows` (attname → value) into `model`'s table in one statement, as
    `bulk_create` would (defaults for left-out fields); how many rows were inserted."""
    return _insert(model, rows, "") if rows else 0


def upsert(model: type[Model], rows: Sequence[Mapping[str, Any]], *, unique: Sequence[str],
           update: Sequence[str]) -> int:
    """Insert `rows` (attname → value) into `model`'s table; a row that conflicts on `unique`
    (the attnames of a unique constraint) updates the existing row's `update` fields instead.

    As with `bulk_create`, a field a row leaves out is inserted with its default; only the
    `update` fields change an existing row. One statement; how many rows were inserted or
    updated.
    """
    if not rows:
        return 0
    quote = connection.ops.quote_name
    conflict = ", ".join(quote(_column(model, name)) for name in unique)
    changes = ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}"
                        for c in (_column(model, name) for name in update))
    action = f"DO UPDATE SET {changes}" if changes else "DO NOTHING"
    return _insert(model, rows, f" ON CONFLICT ({conflict}) {action}")
