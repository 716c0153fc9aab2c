"""Deployment parameters as the rules see them, and what an admin's confirmation covers.

Pure (no database): `jobs.context` builds a `ParametersView` of the job's record; the
confirmation service stores `confirmed_content(...)` when an admin confirms; the findings
engine compares the record with the job (`jobs.core.findings.parameters`) and the stored
confirmation with today's content (`content_changes`). The same functions write the content
at confirmation and read it at every check, so "stale" means exactly "something an admin
confirmed is no longer what it was".

What a confirmation covers:
- the record: its roles (as stored), network domain, storage and network notes, and the
  verifications it references with their states (title and launch-list link are not
  confirmed: they describe nothing about placement);
- the job it was confirmed for: per role its name, cluster, selector, GPUs, devices, CPU,
  memory and mounts, the Header role and the network domain (the job's name, scripts, image
  and environment are not part of the deployment parameters).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobs.core.spec import JobSpec, ParametersView, as_items, field_of, is_count, spec_roles

__all__ = [
    "MOUNT_KEYS",
    "ParametersView",
    "content_changes",
    "job_content",
    "record_content",
    "record_roles_from_spec",
]

MOUNT_KEYS = ("kind", "source", "target", "storage_class", "size")
ROLE_FIELDS = ("cluster", "selector", "gpus", "devices", "cpu", "memory", "mounts")


def _jsonable(value: Any) -> Any:
    """`value` as JSON would store it (tuples become lists; unknown objects their text)."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))


# --- what is confirmed ------------------------------------------------------------------------


def record_content(*, roles: Any, network_domain: str, storage_notes: str, network_notes: str,
                   verifications: Iterable[tuple[int, str]]) -> dict[str, Any]:
    """The record's confirmable content; `verifications` are (id, state) pairs."""
    return _jsonable({
        "roles": roles if isinstance(roles, list) else [],
        "network_domain": network_domain,
        # A browser sends a textarea's line breaks as CRLF: a save that changes nothing else
        # must not look like a change.
        "storage_notes": str(storage_notes).replace("\r\n", "\n"),
        "network_notes": str(network_notes).replace("\r\n", "\n"),
        "verifications": sorted([int(pk), str(state)] for pk, state in verifications),
    })


def _resource(value: object) -> dict[str, str]:
    return {"request": field_of(value, "request"), "limit": field_of(value, "limit")}


def _mount(mount: object) -> dict[str, Any]:
    return {key: field_of(mount, key) for key in MOUNT_KEYS}


def _pairs(value: object) -> list[list[Any]]:
    """A selector's or devices' items as lists; an item that is no list or tuple (a malformed
    draft's) is kept as a one-item list, so it still counts as content and never raises."""
    return [list(p) if isinstance(p, (list, tuple)) else [p] for p in as_items(value)]


def _role_content(role: object) -> dict[str, Any]:
    return {
        "name": field_of(role, "name"),
        "cluster": field_of(role, "cluster"),
        "selector": _pairs(field_of(role, "selector", ())),
        "gpus": field_of(role, "gpus", 0),
        "devices": _pairs(field_of(role, "devices", ())),
        "cpu": _resource(field_of(role, "cpu", None)),
        "memory": _resource(field_of(role, "memory", None)),
        "mounts": [_mount(m) for m in as_items(field_of(role, "mounts", ()))],
    }


def job_content(spec: JobSpec) -> dict[str, Any]:
    """The job's fields a confirmation covers (see the module docstring)."""
    return _jsonable({
        "header_role": field_of(spec, "header_role"),
        "network_domain": field_of(spec, "network_domain"),
        "roles": [_role_content(role) for role in spec_roles(spec)],
    })


def record_roles_from_spec(spec: JobSpec) -> list[dict[str, Any]]:
    """The record's `roles` describing `spec` exactly ("Fill from job")."""
    roles = []
    for role in spec_roles(spec):
        content = _role_content(role)
        selector = {str(p[0]): str(p[1]) for p in content["selector"] if len(p) == 2}
        devices = {str(p[0]): p[1] for p in content["devices"] if len(p) == 2}
        mounts = [{k: v for k, v in m.items() if v != ""} for m in content["mounts"]]
        roles.append({
            "role": content["name"], "cluster": content["cluster"], "selector": selector,
            "gpus": content["gpus"], "devices": devices, "cpu": content["cpu"],
            "memory": content["memory"], "mounts": mounts,
        })
    return _jsonable(roles)


# --- what changed since -----------------------------------------------------------------------


def _by_name(roles: object, key: str) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for role in roles if isinstance(roles, list) else []:
        if isinstance(role, Mapping):
            found.setdefault(str(role.get(key, "")), role)
    return found


def _role_changes(part: str, before: object, now: object, key: str) -> list[dict[str, Any]]:
    old, new = _by_name(before, key), _by_name(now, key)
    changes: list[dict[str, Any]] = []
    for name in sorted(old.keys() - new.keys()):
        changes.append({"part": part, "role": name, "field": "removed"})
    for name in sorted(new.keys() - old.keys()):
        changes.append({"part": part, "role": name, "field": "added"})
    for name in sorted(old.keys() & new.keys()):
        fields = sorted(set(old[name]) | set(new[name]))
        changes += [{"part": part, "role": name, "field": f} for f in fields
                    if f != key and old[name].get(f) != new[name].get(f)]
    if not changes and before != now:
        changes.append({"part": part, "role": None, "field": "roles"})
    return changes


def _part_changes(part: str, before: Mapping[str, Any], now: Mapping[str, Any],
                  role_key: str) -> list[dict[str, Any]]:
    changes = _role_changes(part, before.get("roles"), now.get("roles"), role_key)
    for name in sorted((set(before) | set(now)) - {"roles"}):
        if before.get(name) != now.get(name):
            changes.append({"part": part, "role": None, "field": name})
    return changes


def content_changes(confirmed: Mapping[str, Any], *, record: Mapping[str, Any],
                    job: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What differs between a confirmation and today: `[{part, role, field}]`, in order.

    `part` is `record` or `job`; `role` names the role (None for record- or job-wide fields);
    `field` is the changed field, or `added` / `removed` for a whole role. The job is compared
    only when the confirmation covered one and a job is given.
    """
    changes = _part_changes("record", confirmed.get("record") or {}, record, "role")
    confirmed_job = confirmed.get("job")
    if isinstance(confirmed_job, Mapping) and job is not None:
        changes += _part_changes("job", confirmed_job, job, "name")
    return changes


def effective_confirmation(stored: str, confirmed: Mapping[str, Any], *,
                           record: Mapping[str, Any], job: Mapping[str, Any] | None,
                           stale_reasons: Iterable[Mapping[str, Any]] = ()
                           ) -> tuple[str, list[dict[str, Any]]]:
    """The one rule for a confirmation's state today: `(state, changes)`.

    A confirmed (or stored-stale) record is compared with today's content; a confirmed one whose
    content changed is `stale` with those changes, and a stored-stale one with no difference left
    keeps its stored reasons. Pending and rejected records have no changes.
    """
    if stored not in ("confirmed", "stale"):
        return stored, []
    changes = content_changes(confirmed, record=record, job=job)
    if stored == "stale" and not changes:
        changes = [dict(reason) for reason in stale_reasons]
    return ("stale" if changes else stored), changes


def same_value(a: object, b: object) -> bool:
    """Equal as counts (8 == "8" is not: values are compared as typed), else as JSON."""
    if is_count(a) and is_count(b):
        return a == b
    return _jsonable(a) == _jsonable(b)


def normal_mounts(mounts: object) -> list[tuple[str, ...]]:
    """Mounts as sorted (kind, source, target, storage_class, size) tuples; order is not meant."""
    rows = []
    for mount in as_items(mounts):
        if isinstance(mount, Mapping):
            rows.append(tuple(str(mount.get(k) or "") for k in MOUNT_KEYS))
        else:
            rows.append(tuple(str(field_of(mount, k) or "") for k in MOUNT_KEYS))
    return sorted(rows)


def pairs_as_dict(value: object) -> dict[str, Any] | None:
    """A selector or device list as a mapping; None when it is not pairs."""
    items = as_items(value)
    pairs: dict[str, Any] = {}
    for item in items:
        if not (isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2):
            return None
        pairs[str(item[0])] = item[1]
    return pairs
