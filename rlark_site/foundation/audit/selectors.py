"""Audit lookup by object, actor, team, model and time, paged on the event tables first
(audit.lookup)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rlark_site.foundation.audit.lookup import AuditEvent, AuditLookup

__all__ = ["REDACTED", "AuditEvent", "AuditLookup", "audit_events", "event_as_dict"]


def audit_events(
    *,
    team_id: int | None = None,
    team_slug: str | None = None,
    actor_id: int | None = None,
    actor_username: str | None = None,
    model: str | None = None,
    objects: Iterable[tuple[str, Any]] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    team_ids: Iterable[int] | None = None,
    team_slugs: Iterable[str] | None = None,
) -> AuditLookup:
    """A lookup of events (`.page(limit, after=..., oldest_first=...)`; iterating it reads
    every match newest first).

    `objects` are (model label, primary key) pairs such as ("jobs.Job", 3); `model` is a model
    label ("jobs.Job") or its lower-cased name ("job"). A team filter keeps events of rows that
    belong to the team, or that were made while the user worked in that team; `team_ids` /
    `team_slugs` do the same for several teams at once (any of them).
    """
    scoped = any(value is not None for value in (team_id, team_slug, team_ids, team_slugs))
    return AuditLookup(
        objects=list(objects) if objects is not None else None,
        team_ids=[*([team_id] if team_id is not None else []), *(team_ids or [])],
        team_slugs=[*([team_slug] if team_slug is not None else []), *(team_slugs or [])],
        scoped=scoped, actor_id=actor_id, actor_username=actor_username, model=model or None,
        since=since, until=until,
    )


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


def event_as_dict(event: AuditEvent) -> dict[str, Any]:
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
