"""Draft bodies (SPEC 12) from stored rows, so one step can change one part of a draft.

`job_update` replaces the roles as a whole list; a step that edits one role (or only
the role names) sends every other role back exactly as stored, raw values included.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jobs.core.spec import TASK_TYPES
from jobs.models import Job, Role

__all__ = ["initial_role_names", "role_bodies", "role_body", "role_is_configured"]

_CONFIG_FIELDS = (
    "cluster", "selector", "devices", "cpu", "memory", "image", "image_digest",
    "prepare_script", "env", "mounts",
)  # fmt: skip


def role_body(role: Role) -> dict[str, Any]:
    """One stored role as a draft-body role, values as stored."""
    return {
        "name": role.name,
        "cluster": role.cluster,
        "selector": [list(pair) for pair in role.selector] if isinstance(role.selector, list)
        else role.selector,
        "gpus": role.gpus,
        "devices": [list(pair) for pair in role.devices] if isinstance(role.devices, list)
        else role.devices,
        "cpu": dict(role.cpu) if isinstance(role.cpu, dict) else {},
        "memory": dict(role.memory) if isinstance(role.memory, dict) else {},
        "image": role.image,
        "image_digest": role.image_digest,
        "prepare_script": role.prepare_script,
        "env": [dict(item) for item in role.env if isinstance(item, dict)]
        if isinstance(role.env, list) else [],
        "mounts": [dict(item) for item in role.mounts if isinstance(item, dict)]
        if isinstance(role.mounts, list) else [],
    }


def role_bodies(job: Job) -> list[dict[str, Any]]:
    """Every role of `job` in order (uses the prefetched roles when there are)."""
    return [role_body(role) for role in job.roles.all()]


def role_is_configured(body: dict[str, Any]) -> bool:
    """Whether a role holds anything beyond its name (a GPU count above 0 counts)."""
    if body.get("gpus") not in (0, None, ""):
        return True
    return any(body.get(name) not in (None, "", [], {}) for name in _CONFIG_FIELDS)


def initial_role_names(task_type: str) -> list[str]:
    return list(TASK_TYPES.get(task_type, ()))


def any_configured(bodies: Iterable[dict[str, Any]]) -> bool:
    return any(role_is_configured(body) for body in bodies)
