"""Audit lookup by object, actor, team, model and time: one query over every event table."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from pghistory.models import Events


def audit_events(
    *,
    team_id: int | None = None,
    team_slug: str | None = None,
    actor_id: int | None = None,
    model: str | None = None,
    objects: Iterable[tuple[str, Any]] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    team_ids: Iterable[int] | None = None,
    team_slugs: Iterable[str] | None = None,
) -> QuerySet[Events]:
    """Events newest first.

    `objects` are (model label, primary key) pairs such as ("jobs.Job", 3); `model` is a model
    label ("jobs.Job") or its lower-cased name ("job"). A team filter keeps events of rows that
    belong to the team, or that were made while the user worked in that team; `team_ids` /
    `team_slugs` do the same for several teams at once (any of them).
    """
    events = Events.objects.all()
    if objects is not None:
        refs = Q(pk__in=[])
        for label, pk in objects:
            refs |= Q(pgh_obj_model=label, pgh_obj_id=str(pk))
        events = events.filter(refs)
    ids = [*([team_id] if team_id is not None else []), *(team_ids or [])]
    slugs = [*([team_slug] if team_slug is not None else []), *(team_slugs or [])]
    scoped = (team_id, team_slug, team_ids, team_slugs)
    if any(value is not None for value in scoped):
        scope = Q(pk__in=[])
        for one_id in ids:
            scope |= Q(pgh_data__team_id=one_id) | Q(pgh_data__team=one_id)
        for slug in slugs:
            scope |= Q(pgh_context__team=slug)
        events = events.filter(scope)
    if actor_id is not None:
        events = events.filter(pgh_context__user=actor_id)
    if model:
        events = events.filter(
            Q(pgh_obj_model=model) | Q(pgh_obj_model__iendswith=f".{model}")
        )
    if since is not None:
        events = events.filter(pgh_created_at__gte=since)
    if until is not None:
        events = events.filter(pgh_created_at__lt=until)
    return events.order_by("-pgh_created_at", "-pgh_slug")


REDACTED = "<redacted>"


def _redact(values: Any) -> Any:
    """Secrets are stored encrypted (`*_encrypted` fields) and never shown, not even encrypted:
    the audit says that they changed, not what to."""
    if not isinstance(values, dict):
        return values
    return {
        key: (
            value if not key.endswith("_encrypted") or not value
            else [REDACTED if v else v for v in value] if isinstance(value, list)
            else REDACTED
        )
        for key, value in values.items()
    }


def event_as_dict(event: Events) -> dict[str, Any]:
    context = event.pgh_context or {}
    return {
        "id": event.pgh_slug,
        "at": event.pgh_created_at,
        "model": event.pgh_obj_model,
        "object_id": event.pgh_obj_id,
        "label": event.pgh_label,
        "diff": _redact(event.pgh_diff),
        "data": _redact(event.pgh_data),
        "actor": context.get("user"),
        "team": context.get("team"),
        "url": context.get("url"),
        "request_id": context.get("request_id"),
        "task": context.get("task"),
    }
