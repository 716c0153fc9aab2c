"""Audit context for background work: every change a Celery task makes names the task."""

from __future__ import annotations

from typing import Any

import pghistory
from celery.signals import task_postrun, task_prerun

_open_contexts: dict[str, Any] = {}


@task_prerun.connect
def _enter_task_context(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is None or task is None:
        return
    ctx = pghistory.context(task=task.name, task_id=task_id)
    ctx.__enter__()
    _open_contexts[task_id] = ctx


@task_postrun.connect
def _exit_task_context(task_id: str | None = None, **_: Any) -> None:
    ctx = _open_contexts.pop(task_id or "", None)
    if ctx is not None:
        ctx.__exit__(None, None, None)
