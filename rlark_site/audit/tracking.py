"""How RLark models are put under audit: one decorator, used on every tenant-visible model."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import pghistory
from django.db import models

M = TypeVar("M", bound=type[models.Model])


def audited(*, exclude: list[str] | None = None) -> Callable[[M], M]:
    """Track inserts, updates and deletes of a model in an append-only event table.

    Triggers do the recording, so bulk `QuerySet.update()` and raw SQL are recorded too.
    """
    tracker = pghistory.track(
        pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent(), exclude=exclude
    )
    return cast(Callable[[M], M], tracker)
