"""The run record's audit section: events grouped by the object they changed, each update
shown as field-level changes (old → new) instead of the whole row."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AuditChange", "AuditEntry", "AuditObject", "audit_by_object"]

SHOWN_AT_MOST = 200  # characters of one value; the API has the whole event


@dataclass(frozen=True)
class AuditChange:
    field: str
    old: str
    new: str


@dataclass
class AuditEntry:
    at: Any
    label: str
    actor: str | None
    source: str
    changes: list[AuditChange]


@dataclass
class AuditObject:
    model: str
    object_id: str
    name: str
    entries: list[AuditEntry] = field(default_factory=list)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_AT_MOST else text[:SHOWN_AT_MOST] + "…"


def _changes(diff: Any) -> list[AuditChange]:
    if not isinstance(diff, Mapping):
        return []
    return [AuditChange(str(name), _shown(pair[0]), _shown(pair[1]))
            for name, pair in diff.items() if isinstance(pair, list | tuple) and len(pair) == 2]


def _name(event: Mapping[str, Any]) -> str:
    data = event.get("data")
    if not isinstance(data, Mapping):
        return ""
    return str(data.get("name") or data.get("title") or data.get("job_name") or "")


def audit_by_object(events: Iterable[Mapping[str, Any]]) -> list[AuditObject]:
    """Events (as `events_as_dicts` gives them, oldest first) grouped by object, the objects in
    the order of their first event."""
    objects: dict[tuple[str, str], AuditObject] = {}
    for event in events:
        key = (str(event["model"]), str(event["object_id"]))
        group = objects.setdefault(key, AuditObject(key[0], key[1], _name(event)))
        group.name = _name(event) or group.name
        group.entries.append(AuditEntry(
            at=event["at"], label=str(event["label"]), actor=event.get("actor_username"),
            source=str(event.get("url") or event.get("task") or ""),
            changes=_changes(event.get("diff")),
        ))
    return list(objects.values())
