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
            app_label: str | None = None) -> Callable[[M], M]:
    """Track inserts, updates and deletes of a model in an append-only event table.

    Triggers do the recording, so bulk `QuerySet.update()` and raw SQL are recorded too.
    `model_name`/`app_label` place the event model of another app's model (auth.User) here.
    """
    tracker = pghistory.track(
        pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent(),
        exclude=exclude, model_name=model_name, app_label=app_label,
        meta={"triggers": [NO_TRUNCATE]},
    )
    return cast(Callable[[M], M], tracker)
