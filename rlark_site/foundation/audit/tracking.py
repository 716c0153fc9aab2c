"""How RLark models are put under audit: one decorator, used on every tenant-visible model."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import pghistory
import pgtrigger
from django.db import models

M = TypeVar("M", bound=type[models.Model])


# Event tables are append-only: PGHISTORY_APPEND_ONLY refuses UPDATE and DELETE row by row, and
# this statement-level trigger refuses TRUNCATE (which row triggers never see).
NO_TRUNCATE = pgtrigger.Trigger(
    name="no_truncate", operation=pgtrigger.Truncate, level=pgtrigger.Statement,
    when=pgtrigger.Before,
    func="RAISE EXCEPTION 'pgtrigger: Cannot truncate % table', TG_TABLE_NAME;",
)


def audited(*, exclude: list[str] | None = None, model_name: str | None = None,
            app_label: str | None = None, per_statement: bool = False) -> Callable[[M], M]:
    """Track inserts, updates and deletes of a model in an append-only event table.

    Triggers do the recording, so bulk `QuerySet.update()` and raw SQL are recorded too.
    `model_name`/`app_label` place the event model of another app's model (auth.User) here.

    `per_statement` records with statement-level triggers (one `INSERT ... SELECT` from the
    statement's transition table) instead of a trigger call per row: the same events, for
    models written thousands of rows at a time, where the row triggers were most of each
    statement's time.
    """
    level = pgtrigger.Statement if per_statement else pgtrigger.Row
    tracker = pghistory.track(
        pghistory.InsertEvent(level=level), pghistory.UpdateEvent(level=level),
        pghistory.DeleteEvent(level=level),
        exclude=exclude, model_name=model_name, app_label=app_label,
        meta={"triggers": [NO_TRUNCATE]},
    )
    return cast(Callable[[M], M], tracker)
