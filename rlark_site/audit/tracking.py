"""How RLark models are put under audit: one decorator, used on every tenant-visible model."""

from __future__ import annotations

from typing import TypeVar

import pghistory
from django.db import models

M = TypeVar("M", bound=type[models.Model])


def audited(**kwargs: object) -> object:
    """Track inserts, updates and deletes of a model in an append-only event table.

    Triggers do the recording, so bulk `QuerySet.update()` and raw SQL are recorded too.
    """
    return pghistory.track(
        pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent(), **kwargs
    )
